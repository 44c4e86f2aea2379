"""Rewrites that need no hardware: constant folding of layout ops and no-op reshape removal.

Only data-movement operators are folded: they are exact bit copies, so folding them at compile
time cannot change a result. Arithmetic on constants stays in the program and runs on the NPU.
"""
from __future__ import annotations

import numpy as np

from npu_sim.isa.dtypes import STORAGE

from .ir import Graph
from .lowering import FOLDS


def fold_constants(graph: Graph) -> int:
    """Fold layout ops on constants in place; returns how many were folded."""
    folded, keep = 0, []
    for op in graph.operators:
        data_inputs = op.inputs if op.op == "CONCAT" else op.inputs[:1]
        if op.op in FOLDS and data_inputs and not op.is_variable_access \
                and all(graph.tensors[n].is_const for n in op.inputs):
            out = graph.tensors[op.outputs[0]]
            value = FOLDS[op.op](graph, op) if out.name not in graph.outputs else None
            if value is not None:              # None: the fold declines (a rounding CAST)
                out.data = np.ascontiguousarray(value, dtype=STORAGE[out.dtype])
                folded += 1
                continue
        keep.append(op)
    graph.operators = keep
    return folded


def remove_noop_reshapes(graph: Graph) -> int:
    """Drop RESHAPE/IDENTITY ops whose output equals the input shape by renaming consumers."""
    removed, keep, rename = 0, [], {}
    for op in graph.operators:
        op.inputs = [rename.get(n, n) for n in op.inputs]
        if op.op in ("RESHAPE", "IDENTITY") and not op.is_variable_access \
                and op.outputs[0] not in graph.outputs:
            src, dst = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
            if src.shape == dst.shape and src.dtype == dst.dtype:
                rename[dst.name] = src.name
                removed += 1
                continue
        keep.append(op)
    graph.operators = keep
    return removed


