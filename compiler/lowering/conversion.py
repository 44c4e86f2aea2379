"""Lowering of the type conversions: CAST and RESCALE run as vector-unit chain micro-ops."""
from __future__ import annotations

import numpy as np

from npu_sim.isa.dtypes import DTYPES, STORAGE

from ..ir import Graph, Operator
from .common import FOLDS, MICRO_ATTRS, const_int, operand

MICRO_ATTRS.register("CAST")(lambda graph, op: {})


def widening_copy(graph: Graph, op: Operator) -> bool:
    """A RESCALE that only sign-extends: integers to a wider signed type, scale exactly 1
    (multiplier 1 << shift: the rounding adds less than one unit) and both zero points 0.
    A CAST computes the same, in one lane cycle per element instead of two (BERT's layer
    norms widen int8 values this way before multiplying them)."""
    src, dst = (DTYPES[graph.tensors[n].dtype] for n in (op.inputs[0], op.outputs[0]))
    multiplier, shift = graph.const(op.inputs[1]), graph.const(op.inputs[2])
    return (src.kind == dst.kind == "int" and src.bits < dst.bits <= 32
            and multiplier is not None and shift is not None and multiplier.size == 1
            and int(multiplier.reshape(-1)[0]) == 1 << int(shift.reshape(-1)[0])
            and not op.attrs["input_unsigned"] and not op.attrs["output_unsigned"]
            and const_int(graph, operand(op, "input_zp")) == 0
            and const_int(graph, operand(op, "output_zp")) == 0)


@MICRO_ATTRS.register("RESCALE")
def rescale(graph: Graph, op: Operator) -> dict:
    a = {k: op.attrs[k] for k in ("scale32", "rounding_mode", "per_channel", "input_unsigned",
                                  "output_unsigned")}
    a.update(input_zp=const_int(graph, operand(op, "input_zp")),
             output_zp=const_int(graph, operand(op, "output_zp")))
    return a


@FOLDS.register("CAST")
def fold_cast(graph: Graph, op: Operator) -> np.ndarray:
    x, out = graph.const(op.inputs[0]), graph.tensors[op.outputs[0]]
    if "float" in (DTYPES[out.dtype].kind, DTYPES[graph.tensors[op.inputs[0]].dtype].kind):
        return None        # a float conversion rounds: it is arithmetic, run on the vector unit
    if out.dtype == "bool":
        return x != 0
    return x.astype(np.int64).astype(STORAGE[out.dtype])   # narrowing truncates, as TOSA
