"""Graph IR: tensors by name, operators in file order, constants as numpy arrays."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from npu_sim.isa.dtypes import itemsize
from npu_sim.isa.records import record


@dataclass
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray | None = None      # set for constants (CONST / CONST_SHAPE outputs)
    variable: bool = False
    variable_name: str = ""

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.size * itemsize(self.dtype)

    @property
    def is_const(self) -> bool:
        return self.data is not None and not self.variable   # a variable's data is its initial value


@dataclass
class Operator:
    op: str                              # TOSA operator name, e.g. "CONV2D"
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    location: str = ""                   # frontend location text, if any
    index: int = -1                      # position in the source block, for messages

    @property
    def is_variable_access(self) -> bool:
        return self.op in ("VARIABLE_READ", "VARIABLE_WRITE") or bool(
            self.attrs.get("variable_read") or self.attrs.get("variable_write"))

    def describe(self) -> str:
        where = f"#{self.index} " if self.index >= 0 else ""
        origin = f" (from {self.location})" if self.location else ""
        return f"{where}{self.op} -> {', '.join(self.outputs)}{origin}"


@record
class Graph:
    tensors: dict[str, Tensor]
    operators: list[Operator]
    inputs: list[str]
    outputs: list[str]
    version: tuple[int, int, int] = (1, 0, 0)
    regions: dict[str, "Graph"] = field(default_factory=dict)   # control-flow bodies by name
    source: str = ""
    draft: bool = False                  # it declares the TOSA 1.1 draft (EXT-SHAPE)

    def copy(self) -> "Graph":
        """A copy the compiler may rewrite while this one stays as loaded: new tensor and
        operator records; constant arrays are shared (the loader's are read-only, and the
        passes replace arrays rather than write into them)."""
        return Graph({n: replace(t) for n, t in self.tensors.items()},
                     [replace(o, inputs=list(o.inputs), outputs=list(o.outputs),
                              attrs=dict(o.attrs)) for o in self.operators],
                     list(self.inputs), list(self.outputs), self.version,
                     {name: g.copy() for name, g in self.regions.items()}, self.source, self.draft)

    def producers(self) -> dict[str, Operator]:
        return {t: op for op in self.operators for t in op.outputs}

    def consumers(self) -> dict[str, list[Operator]]:
        users: dict[str, list[Operator]] = {}
        for op in self.operators:
            for t in op.inputs:
                users.setdefault(t, []).append(op)
        return users

    def const(self, name: str) -> np.ndarray | None:
        tensor = self.tensors.get(name)
        return None if tensor is None else tensor.data

    def op_histogram(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        for op in self.operators:
            hist[op.op] = hist.get(op.op, 0) + 1
        return hist
