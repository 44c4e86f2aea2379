"""Validation configuration (profile, extensions, level) and the per-operator check context.

`OpContext` is what every operator check receives: the operator, its operands bound to the
names of the TOSA argument table, the dimension symbols unified from the argument shapes, the
matched type row, and helpers that raise one-line errors in the project's what/where/why form.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

import numpy as np

from npu_sim.isa.errors import NotEnabledError, UnsupportedError, ValidationError
from npu_sim.isa.records import record

from ..ir import Graph, Operator, Tensor


# --------------------------------------------------------------------------------------------
# Levels ([SPEC] tosa.xml <levels>)
# --------------------------------------------------------------------------------------------

@record(frozen=True)
class Level:
    name: str
    MAX_RANK: int
    MAX_KERNEL: int
    MAX_STRIDE: int
    MAX_SCALE: int
    MAX_LOG2_SIZE: int
    MAX_NESTING: int
    MAX_TENSOR_LIST_SIZE: int
    MAX_SHAPE_LEN: int          # TOSA 1.1 draft: the length of a shape_t (EXT-SHAPE)


LEVELS = {
    "8K": Level("8K", 6, 8192, 8192, 256, 31, 6, 64, 16),
    "none": Level("none", 32, (1 << 31) - 1, (1 << 31) - 1, 2048, 63, 256, 256, 64),
}
_LEVEL_ALIASES = {"8K": "8K", "EIGHTK": "8K", "LEVEL8K": "8K", "NONE": "none", "NO": "none"}


# --------------------------------------------------------------------------------------------
# Profiles and extensions ([SPEC] tosa.xml <profiles>, <profile_extensions>)
# --------------------------------------------------------------------------------------------

PRO_INT_EXTENSIONS = ("EXT-INT16", "EXT-INT4", "EXT-DOUBLEROUND", "EXT-INEXACTROUND",
                      "EXT-CONTROLFLOW", "EXT-VARIABLE", "EXT-DYNAMIC")
PRO_FP_EXTENSIONS = ("EXT-BF16", "EXT-FP8E4M3", "EXT-FP8E5M2", "EXT-FFT")
# TOSA 1.1-draft extensions npu-sim implements, experimentally, for graphs that declare the draft.
DRAFT_EXTENSIONS = ("EXT-SHAPE",)
TOSA_1_1_EXTENSIONS = ("EXT-INT64", "EXT-MXFP-CONV", "EXT-MX-COMMON", "EXT-MX-INT8",
                       "EXT-MX-FP4E2M1", "EXT-MX-FP6E2M3", "EXT-MX-FP6E3M2", "EXT-MX-FP8E4M3",
                       "EXT-MX-FP8E5M2")


PROFILES = ("PRO-INT", "PRO-FP")


def normalize_profile(profile: str) -> str:
    name = str(profile).strip().upper()
    if name.startswith("TOSA-"):
        name = name[5:]
    if name in PROFILES:
        return name
    raise UnsupportedError(f"profile '{profile}': unknown TOSA 1.0 profile (profiles: "
                           f"{', '.join(PROFILES)})")


def normalize_extension(ext: str) -> str:
    name = str(ext).strip().upper()
    if name.startswith("TOSA-"):
        name = name[5:]
    if not name.startswith("EXT-"):
        name = "EXT-" + name
    if name in PRO_INT_EXTENSIONS or name in PRO_FP_EXTENSIONS or name in DRAFT_EXTENSIONS:
        return name
    if name in TOSA_1_1_EXTENSIONS:
        raise UnsupportedError(f"extension {name} is not part of TOSA 1.0 (it is a TOSA 1.1 draft "
                               "extension)")
    raise UnsupportedError(f"extension '{ext}': unknown TOSA 1.0 extension (extensions: "
                           f"{', '.join(PRO_INT_EXTENSIONS + PRO_FP_EXTENSIONS)})")


def normalize_level(level) -> Level:
    key = str(level).strip().upper().replace(" ", "").replace("_", "")
    if key in _LEVEL_ALIASES:
        return LEVELS[_LEVEL_ALIASES[key]]
    raise UnsupportedError(f"level '{level}': TOSA 1.0 defines the levels '8K' and 'none'")


@record
class Config:
    profiles: frozenset
    extensions: frozenset
    level: Level
    root: Graph
    draft: bool = False          # the graph declares the TOSA 1.1 draft (shape operators)

    @classmethod
    def make(cls, graph: Graph, profiles, extensions, level) -> "Config":
        if isinstance(profiles, str):
            profiles = (profiles,)
        if isinstance(extensions, str):
            extensions = (extensions,) if extensions else ()
        profiles = frozenset(normalize_profile(p) for p in profiles)
        extensions = frozenset(normalize_extension(e) for e in (extensions or ()))
        for ext in sorted(extensions):
            if ext in PRO_FP_EXTENSIONS and "PRO-FP" not in profiles:
                raise UnsupportedError(f"extension {ext} extends PRO-FP, which is not among the "
                                       f"profiles ({', '.join(sorted(profiles))})")
        return cls(profiles, extensions, normalize_level(level), graph,
                   bool(getattr(graph, "draft", False)))

    def has(self, ext: str) -> bool:
        """An extension, or a profile (type rows of PRO-FP name the profile as their need)."""
        return ext in self.extensions or ext in self.profiles

    def enabled_text(self) -> str:
        return ", ".join(sorted(self.extensions)) or "none"


# --------------------------------------------------------------------------------------------
# Small formatting and arithmetic helpers
# --------------------------------------------------------------------------------------------

ELEMENT_BYTES = {"bool": 1, "int4": 1, "int8": 1, "int16": 2, "int32": 4, "int48": 6, "shape": 8,
                 "fp32": 4, "fp16": 2, "bf16": 2, "fp8e4m3": 1, "fp8e5m2": 1}
TYPE_RANGE = {"int4": (-8, 7), "int8": (-128, 127), "int16": (-32768, 32767),
              "int32": (-(1 << 31), (1 << 31) - 1), "int48": (-(1 << 47), (1 << 47) - 1)}


def fmt_shape(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def c_div(a: int, b: int) -> int:
    """C integer division (truncates toward zero), as the spec pseudocode uses."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    return a - c_div(a, b) * b


# --------------------------------------------------------------------------------------------
# Per-operator context
# --------------------------------------------------------------------------------------------

@dataclass
class OpContext:
    cfg: Config
    graph: Graph
    op: Operator
    producers: dict
    depth: int = 0
    spec: object = None
    args: dict = field(default_factory=dict)      # argument name -> tensor name
    lists: dict = field(default_factory=dict)     # list argument name -> [tensor names]
    dims: dict = field(default_factory=dict)      # shape symbol -> value (int or tuple)
    row: dict = field(default_factory=dict)       # matched type-support row
    run_region: object = None                     # validates a control-flow body: f(graph, depth)

    # ---- errors --------------------------------------------------------------------------
    def fail(self, message: str, condition: str, tensor: str = "") -> NoReturn:
        raise ValidationError(message, op=self.op.describe(), tensor=tensor,
                              rule=f"ERROR_IF: {condition}")

    def fail_require(self, message: str, condition: str, tensor: str = "") -> NoReturn:
        raise ValidationError(message, op=self.op.describe(), tensor=tensor,
                              rule=f"REQUIRE: {condition}")

    def unsupported(self, message: str) -> NoReturn:
        raise UnsupportedError(f"operator {self.op.describe()}: {message}")

    def need_extension(self, ext: str, what: str) -> None:
        if self.cfg.has(ext):
            return
        where = f"operator {self.op.describe()}: {what}"
        if ext in PROFILES or (ext in PRO_FP_EXTENSIONS and "PRO-FP" not in self.cfg.profiles):
            also = "" if ext in PROFILES else f" with extension {ext}"
            raise NotEnabledError(f"{where} needs profile PRO-FP (floating point){also}, which "
                                  f"this config does not implement (profiles: "
                                  f"{', '.join(sorted(self.cfg.profiles))})")
        raise NotEnabledError(f"{where} needs extension {ext}, which is not enabled (enabled: "
                              f"{self.cfg.enabled_text()})")

    def level(self, value: int, limit: str, what: str, tensor: str = "") -> None:
        """LEVEL_CHECK(value <= limit): npu-sim refuses graphs outside the configured level."""
        lv = self.cfg.level
        bound = getattr(lv, limit)
        if value > bound:
            raise ValidationError(f"{what} is {value}, above {limit} = {bound} of level {lv.name}",
                                  op=self.op.describe(), tensor=tensor,
                                  rule=f"LEVEL {lv.name}: {what} <= {limit}")

    def level_size(self, nbytes: int, what: str, tensor: str = "") -> None:
        """The byte size of a tensor must be representable in tensor_size_t (MAX_LOG2_SIZE)."""
        lv = self.cfg.level
        if nbytes > (1 << lv.MAX_LOG2_SIZE) - 1:
            raise ValidationError(f"{what} holds {nbytes} bytes, more than tensor_size_t represents at "
                                  f"level {lv.name} (2^{lv.MAX_LOG2_SIZE} - 1)", op=self.op.describe(),
                                  tensor=tensor, rule=f"LEVEL {lv.name}: tensor size in bytes < 2^MAX_LOG2_SIZE")

    # ---- operands ------------------------------------------------------------------------
    def name(self, arg: str) -> str:
        return self.args[arg]

    def tensor(self, arg: str) -> Tensor:
        return self.graph.tensors[self.args[arg]]

    def shape(self, arg: str) -> tuple:
        return tuple(int(d) for d in self.tensor(arg).shape)

    def dtype(self, arg: str) -> str:
        return self.tensor(arg).dtype

    def value(self, arg: str) -> np.ndarray | None:
        """Constant value of an operand as int64 (None when it is not a constant)."""
        data = self.tensor(arg).data
        if data is None:
            return None
        return np.asarray(data).astype(np.int64).reshape(-1)

    def values(self, arg: str, count: int | None = None) -> list[int] | None:
        """Constant operand as a list of ints; checks the element count when given."""
        v = self.value(arg)
        if v is None:
            return None
        if count is not None and v.size != count:
            self.fail(f"{arg} holds {v.size} values; {count} expected", f"length({arg}) != {count}",
                      self.name(arg))
        return v.tolist()

    def scalar(self, arg: str) -> int | None:
        v = self.value(arg)
        if v is None or v.size == 0:
            return None
        return int(v[0])

    # ---- attributes ----------------------------------------------------------------------
    def attr(self, key: str, default=None):
        return self.op.attrs.get(key, default)

    def attr_ints(self, key: str, count: int, names: str = "") -> tuple[int, ...]:
        value = self.op.attrs.get(key)
        if value is None:
            self.fail(f"attribute {key} is missing", f"{key} is not given")
        value = tuple(int(v) for v in value)
        if len(value) != count:
            what = f" [{names}]" if names else ""
            self.fail(f"attribute {key} has {len(value)} values; {count} expected{what}",
                      f"length({key}) != {count}")
        return value

    def attr_int(self, key: str) -> int:
        value = self.op.attrs.get(key)
        if value is None or isinstance(value, (tuple, list, str)):
            self.fail(f"attribute {key} is missing or not an integer", f"{key} is not given")
        return int(value)

    def output(self) -> str:
        return self.op.outputs[0] if self.op.outputs else ""
