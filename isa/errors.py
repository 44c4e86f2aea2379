"""One error family for the whole tool.

The CLI maps every subclass of NpuSimError to a single line on stderr and exit status 2.
Messages follow "what, where, why" so that the line alone is actionable.
"""


class NpuSimError(Exception):
    """Base class: an error the user can fix (bad input), never an internal bug."""

    kind = "error"

    def one_line(self) -> str:
        text = " ".join(str(self).split())
        return f"npu-sim: {self.kind}: {text}"


class ModelError(NpuSimError):
    """The model file is missing, unreadable or not a TOSA flatbuffer."""

    kind = "model error"


class ConfigError(NpuSimError):
    """A hardware configuration file or override is invalid."""

    kind = "config error"


class ValidationError(NpuSimError):
    """The graph breaks a TOSA ERROR_IF rule or a level limit."""

    kind = "invalid graph"

    def __init__(self, message: str, op: str = "", tensor: str = "", rule: str = ""):
        self.op, self.tensor, self.rule = op, tensor, rule
        where = ", ".join(p for p in (f"operator {op}" if op else "", f"tensor '{tensor}'" if tensor else "") if p)
        prefix = f"{where}: " if where else ""
        suffix = f" [{rule}]" if rule else ""
        super().__init__(f"{prefix}{message}{suffix}")


class UnsupportedError(NpuSimError):
    """The graph uses an operator, dtype or feature this machine does not implement."""

    kind = "unsupported"


class NotEnabledError(UnsupportedError):
    """The graph needs a profile or extension the config does not enable (another config may
    run it)."""


class DoesNotFitError(NpuSimError):
    """An operation cannot be tiled into the on-chip buffer of the configured machine."""

    kind = "does not fit"


class ProgramError(NpuSimError):
    """A compiled program (.npub) is corrupt or of an incompatible version."""

    kind = "program error"


class HazardError(ProgramError):
    """Two commands on different engines touch the same bytes, one of them writing, while both
    are in flight: the program lacks a dependency (the hazard checker found it)."""

    kind = "hazard"


class InputError(NpuSimError):
    """A user-supplied input tensor does not match the graph."""

    kind = "input error"
