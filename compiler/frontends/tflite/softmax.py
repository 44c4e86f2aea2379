"""SOFTMAX and LOG_SOFTMAX on int8, as TFLite's reference kernels compute them in gemmlowp fixed
point (reference_ops::Softmax, reference_integer_ops::LogSoftmax), decomposed exactly into TOSA
integer operators:

- exp of each difference to the row maximum (a function of x - max in [-255, 0]) comes from
  three int16 TABLEs of 11 bits each, indexed without interpolation;
- the Q12.19 sum of exps is a rounding shift and a REDUCE_SUM;
- SOFTMAX scales the exps by the sum's reciprocal (GetReciprocal's Newton-Raphson), LOG_SOFTMAX
  subtracts the sum's logarithm (log_x_for_x_greater_than_or_equal_to_1), both in
  gemmlowp_ops.FixedPoint steps on one value per row."""
from __future__ import annotations

import math

import numpy as np

from .context import Lowering, tosa_scale
from .fixedpoint import exp_on_negative_values, quantize_multiplier, srdhm
from .gemmlowp_ops import FixedPoint

SCALED_DIFF_BITS = 5
MAX_DEPTH = 511          # beyond it SOFTMAX's per-row output shift can exceed 31


def diff_scaling(beta: float, input_scale: float) -> tuple[int, int, int]:
    """PreprocessSoftmaxScaling and CalculateInputRadius: (multiplier, left shift, diff_min)."""
    real = min(beta * input_scale * (1 << (31 - SCALED_DIFF_BITS)), (1 << 31) - 1.0)
    mult, left_shift = quantize_multiplier(real)
    radius = math.floor(((1 << SCALED_DIFF_BITS) - 1) * (1 << (31 - SCALED_DIFF_BITS))
                        / (1 << left_shift))
    return mult, left_shift, -radius


def exp_table(mult: int, left_shift: int, diff_min: int) -> np.ndarray:
    """exp_on_negative_values(rescaled diff) for diff = -255..0 (0 below diff_min)."""
    diff = np.arange(-255, 1, dtype=np.int64)
    exps = exp_on_negative_values(srdhm(diff << left_shift, mult), SCALED_DIFF_BITS)
    return np.where(diff >= diff_min, exps, 0)


def _exps(L: Lowering, fp: FixedPoint, exps: np.ndarray):
    """(row maximum, exp per element in Q0.31, Q12.19 sum of exps per row)."""
    b, x = L.b, L.t(0)
    rank = len(x.shape)
    row = x.shape[:-1] + (1,)
    xv = L.value(0)
    mx = b.op("REDUCE_MAX", [xv], row, "int8", {"axis": rank - 1, "nan_mode": "PROPAGATE"})
    # index v = 128 * (x - max - 1): TABLE int16 reads entry (v + 32768) >> 7 = x - max + 255
    v16 = b.saturate(b.binary("SUB", b.widen(xv, 0, 7), b.widen(mx, -1, 7)), "int16")
    pieces = []
    for part in range(3):                              # 11-bit pieces, each entry << 7 by TABLE
        table = np.zeros(513, np.int64)
        table[:256] = (exps >> (11 * part)) & 0x7FF
        pieces.append(b.table(v16, table))
    e = b.binary("BITWISE_OR", fp.shl(pieces[2], 15),
                 b.binary("BITWISE_OR", fp.shl(pieces[1], 4), fp.sar(pieces[0], 7)))
    terms = fp.sar(e, 12, rounding=True)             # Rescale<12> of a non-negative Q0.31
    return mx, e, b.op("REDUCE_SUM", [terms], row, "int32", {"axis": rank - 1})


def softmax(L: Lowering):
    x, o = L.t(0), L.o()
    L.need_int8(x, o)
    if o.zero_point != -128 or abs(o.scale - 1 / 256) > 0.001 / 256:
        L.fail("int8 output quantization must be scale 1/256, zero point -128")
    if x.shape[-1] > MAX_DEPTH:
        L.fail(f"depth {x.shape[-1]} exceeds {MAX_DEPTH}")
    fp = FixedPoint(L.b, len(x.shape))
    scaling = diff_scaling(float(L.op.options.get("beta", 1.0)), float(x.scale))
    _, e, total = _exps(L, fp, exp_table(*scaling))
    # GetReciprocal(total, 12): 1 / (total scaled into [1, 2)), and num_bits_over_unit
    clz = L.b.op("CLZ", [total], L.b.shape_of(total), "int32")
    scale = fp.one_over_one_plus_x(L.b.binary("BITWISE_XOR", fp.shl(total, clz), fp.k(-(1 << 31))))
    unsat = fp.sar(fp.mul(scale, e), fp.sub(35, clz), rounding=True)   # 12 - clz + 31 - 8
    L.b.saturate(unsat, "int8", -128, L.out())


def log_softmax(L: Lowering):
    x, o = L.t(0), L.o()
    L.need_int8(x, o)
    if o.zero_point != 127 or o.scale != 16 / 256:
        L.fail("int8 output quantization must be scale 16/256, zero point 127")
    b, fp = L.b, FixedPoint(L.b, len(x.shape))
    mult, left_shift, diff_min = diff_scaling(1.0, float(x.scale))
    mx, _, total = _exps(L, fp, exp_table(mult, left_shift, diff_min))
    log_sum = fp.log_x(total, 12, SCALED_DIFF_BITS)
    # PreprocessLogSoftmaxScalingExp's reverse scaling: the smallest diff still representable
    reverse = (1 << (31 - left_shift)) / float(mult)
    lowest = b.rescale(fp.add(log_sum, -(1 << 31)), *tosa_scale(reverse), "int32")
    bound = b.binary("MAXIMUM", fp.k(diff_min - 1), lowest)
    diff = b.binary("SUB", b.widen(L.value(0)), b.widen(mx))
    in_q5 = b.rescale(diff, mult, 31 - left_shift, "int32")       # MultiplyByQuantizedMultiplier
    shifted = fp.add(fp.rdbpot(fp.sub(in_q5, log_sum), 31 - SCALED_DIFF_BITS - 4), 127)
    y = b.saturate(shifted, "int8")
    keep = b.binary("GREATER", diff, bound, "bool")
    b.op("SELECT", [keep, y, b.bcast(-128, "int8", len(x.shape))], o.shape, "int8", {}, L.out())
