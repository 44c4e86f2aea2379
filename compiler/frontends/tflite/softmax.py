"""SOFTMAX on int8, as TFLite's reference kernel (reference_ops::Softmax) computes it in gemmlowp
fixed point, decomposed exactly into TOSA integer operators:

- exp of each difference to the row maximum (a function of x - max in [-255, 0]) comes from
  three int16 TABLEs of 11 bits each, indexed without interpolation;
- the Q12.19 sum of exps is a rounding shift and a REDUCE_SUM;
- its reciprocal is GetReciprocal's Newton-Raphson in MUL-with-shift-31 (gemmlowp's
  SaturatingRoundingDoublingHighMul) steps;
- the output is the product rounded by a per-row shift, offset by -128."""
from __future__ import annotations

import math

import numpy as np

from .context import Lowering
from .fixedpoint import exp_on_negative_values, quantize_multiplier, srdhm

SCALED_DIFF_BITS = 5
MAX_DEPTH = 511          # beyond it the per-row output shift can exceed 31


def exp_table(beta: float, input_scale: float) -> np.ndarray:
    """exp_on_negative_values(rescaled diff) for diff = -255..0 (0 below diff_min)."""
    real = min(beta * input_scale * (1 << (31 - SCALED_DIFF_BITS)), (1 << 31) - 1.0)
    mult, left_shift = quantize_multiplier(real)
    radius = math.floor(((1 << SCALED_DIFF_BITS) - 1) * (1 << (31 - SCALED_DIFF_BITS))
                        / (1 << left_shift))
    diff = np.arange(-255, 1, dtype=np.int64)
    rescaled = srdhm(diff << left_shift, mult)
    exps = exp_on_negative_values(rescaled, SCALED_DIFF_BITS)
    return np.where(diff >= -radius, exps, 0)


def softmax(L: Lowering):
    x, o = L.t(0), L.o()
    L.need_int8(x, o)
    if o.zero_point != -128 or abs(o.scale - 1 / 256) > 0.001 / 256:
        L.fail("int8 output quantization must be scale 1/256, zero point -128")
    depth, rank = x.shape[-1], len(x.shape)
    if depth > MAX_DEPTH:
        L.fail(f"depth {depth} exceeds {MAX_DEPTH}")
    b, shape = L.b, x.shape
    row = shape[:-1] + (1,)
    k = lambda v: b.bcast(v, "int32", rank)          # noqa: E731
    xv = L.value(0)
    mx = b.op("REDUCE_MAX", [xv], row, "int8", {"axis": rank - 1, "nan_mode": "PROPAGATE"})
    # index v = 128 * (x - max - 1): TABLE int16 reads entry (v + 32768) >> 7 = x - max + 255
    v32 = b.binary("SUB", b.widen(xv, 0, 7), b.widen(mx, -1, 7))
    v16 = b.rescale(v32, 1 << 30, 30, "int16")
    exps = exp_table(float(L.op.options.get("beta", 1.0)), float(x.scale))
    pieces = []
    for part in range(3):                              # 11-bit pieces, each entry << 7 by TABLE
        table = np.zeros(513, np.int64)
        table[:256] = (exps >> (11 * part)) & 0x7FF
        pieces.append(b.table(v16, table))
    e = b.binary("BITWISE_OR", b.binary("LOGICAL_LEFT_SHIFT", pieces[2], k(15)),
                 b.binary("BITWISE_OR", b.binary("LOGICAL_LEFT_SHIFT", pieces[1], k(4)),
                          b.binary("ARITHMETIC_RIGHT_SHIFT", pieces[0], k(7), attrs={"round": False})))
    terms = b.binary("ARITHMETIC_RIGHT_SHIFT", e, k(12), attrs={"round": True})   # Q12.19
    total = b.op("REDUCE_SUM", [terms], row, "int32", {"axis": rank - 1})
    scale, clz = _reciprocal(L, total, rank)
    product = b.mul(scale, e, 31)
    shift = b.binary("SUB", k(35), clz)               # num_bits_over_unit + 31 - 8
    unsat = b.binary("ARITHMETIC_RIGHT_SHIFT", product, shift, attrs={"round": True})
    b.rescale(unsat, 1 << 30, 30, "int8", output_zp=-128, out=L.out())


def _reciprocal(L: Lowering, total: str, rank: int):
    """GetReciprocal(total, 12): Q0.31 of 1 / (total scaled into [1, 2)), and its clz."""
    b = L.b
    k = lambda v: b.bcast(v, "int32", rank)          # noqa: E731
    clz = b.op("CLZ", [total], b.shape_of(total), "int32")
    a = b.binary("BITWISE_XOR", b.binary("LOGICAL_LEFT_SHIFT", total, clz), k(-(1 << 31)))
    half = b.binary("ADD", b.binary("ARITHMETIC_RIGHT_SHIFT", a, k(1), attrs={"round": False}),
                    k(1 << 30))
    x = b.binary("ADD", k(1515870810), b.mul(half, k(-1010580540), 31))
    for _ in range(3):
        err = b.binary("SUB", k(1 << 29), b.mul(half, x, 31))
        x = b.binary("ADD", x, b.binary("LOGICAL_LEFT_SHIFT", b.mul(x, err, 31), k(2)))
    # Rescale<0> of x (Q2 read as Q1): a saturating doubling
    capped = b.binary("MINIMUM", x, k((1 << 30) - 1))
    sat = b.op("CAST", [b.binary("GREATER_EQUAL", x, k(1 << 30), "bool")], b.shape_of(x), "int32")
    scale = b.binary("ADD", b.binary("LOGICAL_LEFT_SHIFT", capped, k(1)), sat)
    return scale, clz
