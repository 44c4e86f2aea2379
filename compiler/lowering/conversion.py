"""Lowering of the type conversions: CAST and RESCALE run as vector-unit chain micro-ops."""
from __future__ import annotations

import numpy as np

from npu_sim.isa.dtypes import DTYPES, STORAGE

from ..ir import Graph, Operator
from .common import FOLDS, MICRO_ATTRS, const_int, operand

MICRO_ATTRS.register("CAST")(lambda graph, op: {})


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
