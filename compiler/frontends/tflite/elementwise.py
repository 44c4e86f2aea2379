"""Binary builtins on int8, step for step as TFLite's reference kernels compute them: ADD and SUB
bring both inputs to a common scale (x - zp) << 20 times a multiplier below one, SQUARED_DIFFERENCE
the same with << 7, MUL multiplies the offset inputs; each result is rescaled to the output.
Every MultiplyByQuantizedMultiplier is one RESCALE (DOUBLE_ROUND where it shifts right)."""
from __future__ import annotations

import numpy as np

from .context import Lowering, tosa_scale


def operand_at_rank(L: Lowering, k: int, rank: int) -> str:
    """Input k at the output's rank (TOSA broadcasts only between equal ranks)."""
    name, shape = L.value(k), L.t(k).shape
    if len(shape) < rank:
        name = L.b.reshape(name, (1,) * (rank - len(shape)) + tuple(shape))
    return name


def _finish(L: Lowering, acc: str, real: float):
    """Rescale the int32 result to the output and clamp to the fused activation."""
    o = L.o()
    lo, hi = L.act_range(L.op.options.get("fused_activation_function", 0), o)
    last = (lo, hi) == (-128, 127)
    r = L.b.rescale(acc, *tosa_scale(real), "int8", output_zp=o.zero_point,
                    out=L.out() if last else None)
    if not last:
        L.b.clamp(r, lo, hi, L.out())


def _scaled_inputs(L: Lowering, left_shift: int):
    """Both inputs as MultiplyByQuantizedMultiplierSmallerThanOneExp((x - zp) << left_shift)."""
    a, c, o = L.t(0), L.t(1), L.o()
    L.need_int8(a, c, o)
    twice_max = float(np.float32(2) * max(np.float32(a.scale), np.float32(c.scale)))
    rank = len(o.shape)
    scaled = []
    for k, t in ((0, a), (1, c)):
        wide = L.b.widen(operand_at_rank(L, k, rank), t.zero_point, left_shift)
        scaled.append(L.b.rescale(wide, *tosa_scale(float(t.scale) / twice_max), "int32"))
    return scaled, twice_max


def _add_sub(L: Lowering, op: str):
    (x, y), twice_max = _scaled_inputs(L, 20)
    total = L.b.binary(op, x, y)
    _finish(L, total, twice_max / float(np.float32(1 << 20) * np.float32(L.o().scale)))


def add(L):
    _add_sub(L, "ADD")


def sub(L):
    _add_sub(L, "SUB")


def squared_difference(L: Lowering):
    (x, y), twice_max = _scaled_inputs(L, 7)
    diff = L.b.binary("SUB", x, y)
    square = L.b.mul(diff, diff)
    _finish(L, square, twice_max * twice_max / float(np.float32(1 << 14) * np.float32(L.o().scale)))


def mul(L: Lowering):
    a, c, o = L.t(0), L.t(1), L.o()
    L.need_int8(a, c, o)
    rank = len(o.shape)
    x = L.b.widen(operand_at_rank(L, 0, rank), a.zero_point)
    y = L.b.widen(operand_at_rank(L, 1, rank), c.zero_point)
    _finish(L, L.b.mul(x, y), float(a.scale) * float(c.scale) / float(o.scale))


def _max_min(L: Lowering, op: str):
    """MAXIMUM/MINIMUM compare the stored integers (TFLite requires one quantization)."""
    o = L.o()
    rank = len(o.shape)
    dtype = L.dtype(o)
    x, y = (L.b.widen(operand_at_rank(L, k, rank)) if dtype == "int8"
            else operand_at_rank(L, k, rank) for k in (0, 1))
    r = L.b.binary(op, x, y)
    if dtype == "int8":
        L.b.saturate(r, "int8", out=L.out())
    else:
        L.b.reshape(r, o.shape, L.out())


def maximum(L):
    _max_min(L, "MAXIMUM")


def minimum(L):
    _max_min(L, "MINIMUM")


BUILTINS = {"ADD": add, "SUB": sub, "MUL": mul, "SQUARED_DIFFERENCE": squared_difference,
            "MAXIMUM": maximum, "MINIMUM": minimum}
