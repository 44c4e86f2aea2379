"""The machine's per-operator tables, filled by the family modules beside this one.

Keyed by ISA opcode (isa/opcodes.py), what the engines run per tile command:
  MAC_KERNELS     MAC opcode -> accumulate(x, attrs): the exact sums of a tile (the output
                  stage that follows is common to all of them, npu_sim/execute.py)
  VECTOR_KERNELS  vector opcode -> run(x, attrs, out): writes the tile's result into `out`
  VECTOR_WORK     vector opcode -> work(cmd): the element operations the vector unit performs
  SHAPE_CHECKS    opcode -> check(x, attrs, out, need): whether a loaded command's operands
                  suit its kernel (npu_sim/verify.py),
                  {op class: count}, each operator's class from its row (isa/operators.py)
Keyed by TOSA operator (isa/operators.py):
  MICRO_OPS       elementwise operator -> run(args, tables, micro, dtype), one micro-op of a
                  vector-unit chain
  HOST_OPS        operator -> evaluate(call: HostCall): the whole-tensor result, on the host
                  CPU (its fallback operators and the bodies of COND_IF / WHILE_LOOP)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from npu_sim.isa.dtypes import DTYPES
from npu_sim.isa.errors import UnsupportedError
from npu_sim.isa.opcodes import OPCODES
from npu_sim.isa.operators import ELEMENTWISE, OPERATORS
from npu_sim.isa.registry import Registry


def _opcodes(unit: str) -> list[str]:
    return [name for name, spec in OPCODES.items() if spec.unit == unit]


MAC_KERNELS = Registry("MAC kernel", _opcodes("mac"))
VECTOR_KERNELS = Registry("vector kernel", _opcodes("vector"))
VECTOR_WORK = Registry("vector-unit cost", _opcodes("vector"))
MICRO_OPS = Registry("vector micro-op", ELEMENTWISE)
HOST_OPS = Registry("host evaluation", OPERATORS)
# opcode -> check(x, a, out, need): do a loaded command's operand shapes suit the kernel?
# (npu_sim/verify.py runs it; `need(ok, what)` raises naming the command)
SHAPE_CHECKS = Registry("program check", OPCODES)


def classed(operator: str, count: int, dtype: str = "") -> dict[str, int]:
    """`count` element operations of `operator`'s class: its float passes when it computes on
    a float `dtype` (isa/operators.py FLOAT_CLASSES), else its integer class."""
    row = OPERATORS[operator]
    if dtype and DTYPES[dtype].kind == "float":
        if not row.fp_class:
            raise UnsupportedError(f"{operator} has no floating-point form on the vector unit")
        work: dict[str, int] = {}
        for c in row.fp_class:
            work[c] = work.get(c, 0) + int(count)
        return work
    return {row.op_class: int(count)}


class HostCall(NamedTuple):
    """One operator evaluated whole on the host."""

    op: str                 # the TOSA operator
    inputs: list            # numpy arrays in operand order
    attrs: dict             # the operator's typed attributes
    out_dtypes: list        # numpy storage dtypes of its results
    out_shapes: list
    regions: dict           # sub-graphs by name (control flow), npu_sim.ops.control.HostGraph

    def scalar(self, i: int, default: int = 0) -> int:
        if i >= len(self.inputs):
            return default
        return int(np.asarray(self.inputs[i]).reshape(-1)[0])

    def ints(self, i: int) -> list[int]:
        return [int(v) for v in np.asarray(self.inputs[i]).reshape(-1)]


def check_stage(x: dict, out, need) -> None:
    """A MAC command's output-stage tables are per output channel; partial sums match the
    output, which holds numbers (the stage writes no bool)."""
    out_shape = out.shape
    need(out.dtype != "bool", "a MAC command writes numbers, not bool")
    channels = out_shape[-1]
    for name in ("bias", "multiplier", "shift"):
        if name in x:
            need(len(x[name].shape) == 1 and x[name].shape[0] in (1, channels), f"{name} is not per channel")
    need(("multiplier" in x) == ("shift" in x), "a rescale needs both multiplier and shift")
    if "acc_in" in x:
        need(x["acc_in"].shape == out_shape, "acc_in and output disagree")
