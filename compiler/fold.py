"""Rewrites that need no hardware: constant folding of layout ops and no-op reshape removal.

Only data-movement operators are folded: they are exact bit copies, so folding them at compile
time cannot change a result. Arithmetic on constants stays in the program and runs on the NPU.
"""
from __future__ import annotations

import numpy as np

from .ir import STORAGE, Graph

_FOLDABLE = {"TRANSPOSE", "RESHAPE", "SLICE", "CONCAT", "PAD", "TILE", "REVERSE", "IDENTITY", "CAST"}


def _shape_values(graph: Graph, name: str) -> list[int]:
    return [int(x) for x in np.asarray(graph.const(name)).reshape(-1)]


def evaluate_layout(graph: Graph, op) -> np.ndarray:
    """Evaluate a data-movement op whose data inputs are constants."""
    x = graph.const(op.inputs[0])
    out = graph.tensors[op.outputs[0]]
    if op.op == "TRANSPOSE":
        return np.transpose(x, op.attrs["perms"])
    if op.op == "RESHAPE":
        return x.reshape(out.shape)
    if op.op == "SLICE":
        start, size = _shape_values(graph, op.inputs[1]), _shape_values(graph, op.inputs[2])
        return x[tuple(slice(s, s + n) for s, n in zip(start, size))]
    if op.op == "CONCAT":
        return np.concatenate([graph.const(n) for n in op.inputs], axis=op.attrs["axis"])
    if op.op == "PAD":
        pads = _shape_values(graph, op.inputs[1])
        value = graph.const(op.inputs[2]).reshape(-1)[0]
        return np.pad(x, [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)],
                      constant_values=value)
    if op.op == "TILE":
        return np.tile(x, _shape_values(graph, op.inputs[1]))
    if op.op == "REVERSE":
        return np.flip(x, axis=op.attrs["axis"])
    if op.op == "CAST":
        if out.dtype == "bool":
            return x != 0
        return x.astype(np.int64).astype(STORAGE[out.dtype])   # narrowing truncates, as TOSA
    return x.copy()  # IDENTITY


def fold_constants(graph: Graph) -> int:
    """Fold layout ops on constants in place; returns how many were folded."""
    folded, keep = 0, []
    for op in graph.operators:
        data_inputs = op.inputs if op.op == "CONCAT" else op.inputs[:1]
        if op.op in _FOLDABLE and data_inputs and not op.is_variable_access \
                and all(graph.tensors[n].is_const for n in op.inputs):
            out = graph.tensors[op.outputs[0]]
            if out.name not in graph.outputs:
                out.data = np.ascontiguousarray(evaluate_layout(graph, op), dtype=STORAGE[out.dtype])
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


