"""NNAPI comparisons, logical operations, SELECT and CAST, which have no TFLite-frontend
lowering: their records (builtin names `NNAPI_*`) are lowered here into TOSA operators.

AOSP compares quantized operands as float32 (q - zeroPoint) * scale. Each input byte's float32
value is known at compile time, so each input goes through an int16 TABLE giving the rank of
its value among the 512 values either input can take, and the ranks are compared in int32:
AOSP's answer bit for bit, float rounding and ties included."""
from __future__ import annotations

import numpy as np

from ..tflite.context import Lowering
from ..tflite.elementwise import operand_at_rank as _operand
from .model import OperandType as T
from .ops import FLOAT_TENSORS, Q8, broadcast
from .translate import Translator

COMPARE = {"EQUAL": ("EQUAL", False, False), "NOT_EQUAL": ("EQUAL", False, True),
           "GREATER": ("GREATER", False, False), "GREATER_EQUAL": ("GREATER_EQUAL", False, False),
           "LESS": ("GREATER", True, False), "LESS_EQUAL": ("GREATER_EQUAL", True, False)}
BYTES = np.arange(-128, 128)


def value_ranks(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Rank of float32 (q - zp) * scale of each int8 byte q of a and of b among both sets."""
    va, vb = ((BYTES - t.zero_point).astype(np.float32) * np.float32(t.scale) for t in (a, b))
    values = np.unique(np.concatenate([va, vb]))
    return np.searchsorted(values, va), np.searchsorted(values, vb)


def comparison(name: str):
    def lower(t: Translator):
        t.counts((2,))
        a, b = t.operand(0), t.operand(1)
        t.out_shape(broadcast(t, a, b))
        t.need(t.output().type == T.TENSOR_BOOL8, "the output must be TENSOR_BOOL8")
        t.types(Q8 | FLOAT_TENSORS | {T.TENSOR_INT32, T.TENSOR_BOOL8}, 0, 1)
        opts = {"compare": name}
        t.emit("NNAPI_COMPARE", t.op.inputs[:2], t.op.outputs, **opts)
    return lower


def _compare(L: Lowering):
    b, o = L.b, L.o()
    rank = len(o.shape)
    x, y = _operand(L, 0, rank), _operand(L, 1, rank)
    name = L.op.options["compare"]
    op, swap, negate = COMPARE[name]
    if L.t(0).dtype == "BOOL":               # false < true
        if swap:
            x, y = y, x
        if op == "EQUAL":
            r = b.binary("LOGICAL_XOR", x, y, "bool")
            negate = not negate
        else:                                # x > y: x and not y; x >= y: x or not y
            not_y = b.op("LOGICAL_NOT", [y], b.shape_of(y), "bool")
            r = b.binary("LOGICAL_AND" if op == "GREATER" else "LOGICAL_OR", x, not_y, "bool")
    else:
        if L.t(0).dtype == "INT8":
            ranks = value_ranks(L.t(0), L.t(1))
            x, y = (_ranked(b, v, r) for v, r in zip((x, y), ranks))
        if swap:
            x, y = y, x
        r = b.binary(op, x, y, "bool")
    if negate:
        r = b.op("LOGICAL_NOT", [r], b.shape_of(r), "bool")
    b.reshape(r, o.shape, L.out())


def _ranked(b, x: str, ranks: np.ndarray) -> str:
    """128 * ranks[x + 128] (int32): an int16 TABLE read without interpolation at 128 * x,
    i.e. at entry x + 256."""
    table = np.full(513, ranks[-1], np.int64)
    table[:128] = ranks[0]
    table[128:384] = ranks
    return b.table(b.saturate(b.widen(x, 0, 7), "int16"), table)


def logical(name: str):
    def lower(t: Translator):
        t.counts((1,) if name == "LOGICAL_NOT" else (2,))
        if name == "LOGICAL_NOT":
            t.out_shape(t.operand(0).dimensions)
            t.types({T.TENSOR_BOOL8}, 0, "o0")
        else:
            t.out_shape(broadcast(t, t.operand(0), t.operand(1)))
            t.types({T.TENSOR_BOOL8}, 0, 1, "o0")
        t.emit("NNAPI_LOGICAL", t.op.inputs, t.op.outputs, logical=name)
    return lower


def _logical(L: Lowering):
    b, o = L.b, L.o()
    rank = len(o.shape)
    ins = [_operand(L, k, rank) for k in range(len(L.op.inputs))]
    r = b.op(L.op.options["logical"], ins, o.shape, "bool")
    b.reshape(r, o.shape, L.out())


def reduce_bool(name: str):
    def lower(t: Translator):
        t.counts((3,))
        x = t.operand(0)
        rank = len(x.dimensions)
        axes = sorted({int(a) % rank for a in t.tensor_const(1).reshape(-1)
                       if -rank <= int(a) < rank})
        keep = t.scalar(2, T.BOOL)
        dims = [1 if i in axes else d for i, d in enumerate(x.dimensions)] if keep else \
            [d for i, d in enumerate(x.dimensions) if i not in axes]
        t.out_shape(dims)
        t.types({T.TENSOR_BOOL8}, 0, "o0")
        t.emit("NNAPI_REDUCE_BOOL", [t.op.inputs[0]], t.op.outputs, reduce=name, axes=axes)
    return lower


def _reduce_bool(L: Lowering):
    b, y = L.b, L.value(0)
    for axis in L.op.options["axes"]:
        shape = list(b.shape_of(y))
        shape[axis] = 1
        y = b.op(L.op.options["reduce"], [y], shape, "bool", {"axis": axis})
    b.reshape(y, L.o().shape, L.out())


def select(t: Translator):
    """SELECT(cond, a, b); quantized a and b are requantized to the output's quantization."""
    from .ops import requantized
    t.counts((3,))
    c, a, b = t.operand(0), t.operand(1), t.operand(2)
    t.need(c.type == T.TENSOR_BOOL8, "the condition must be TENSOR_BOOL8")
    t.need(c.dimensions == a.dimensions == b.dimensions, "the three inputs must have one shape")
    t.out_shape(a.dimensions)
    kind = t.types(Q8 | FLOAT_TENSORS | {T.TENSOR_INT32}, 1, 2, "o0")
    ins = [t.op.inputs[0]] + [requantized(t, k, t.op.outputs[0]) if kind in Q8 else k
                              for k in t.op.inputs[1:3]]
    t.emit("NNAPI_SELECT", ins, t.op.outputs)


def _select(L: Lowering):
    L.b.op("SELECT", [L.value(0), L.value(1), L.value(2)], L.o().shape, L.dtype(L.o()), {},
           L.out())


BUILTINS = {"NNAPI_COMPARE": _compare, "NNAPI_LOGICAL": _logical,
            "NNAPI_REDUCE_BOOL": _reduce_bool, "NNAPI_SELECT": _select}
