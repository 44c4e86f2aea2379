"""Unary builtins. Those whose TFLite int8 result is a function of the input byte alone become a
TABLE of that function, computed here exactly as the reference kernel computes it (LOGISTIC,
TANH and GELU: its float lookup table; LEAKY_RELU, HARD_SWISH, RSQRT: its integer arithmetic);
RELU-like clamps and QUANTIZE are a RESCALE and a CLAMP; PRELU selects between two RESCALEs."""
from __future__ import annotations

import math

import numpy as np

from .context import Lowering, tosa_scale
from .fixedpoint import (inv_sqrt_multiplier, multiply_by_quantized_multiplier,
                         quantize_multiplier, rdbpot, round_away)

BYTES = np.arange(-128, 128, dtype=np.int64)
F32 = np.float32


def _f32_ratio(a: float, b: float) -> float:
    """A float32 division widened to double, as `float / float` in TFLite's C++."""
    return float(F32(a) / F32(b))


def _table_op(L: Lowering, values):
    x, o = L.t(0), L.o()
    L.need_int8(x, o)
    table = np.clip(np.asarray(values, np.int64), -128, 127)
    L.b.table(L.value(0), table, L.out())


def _float_lut(L: Lowering, f):
    """LUTPopulate<int8_t>: float32 dequantize, transform, round, requantize."""
    x, o = L.t(0), L.o()
    dequantized = F32(x.scale) * (BYTES - x.zero_point).astype(F32)
    transformed = f(dequantized)
    rescaled = np.array([round_away(float(v)) for v in transformed * (F32(1) / F32(o.scale))])
    _table_op(L, rescaled + o.zero_point)


def _expf(v):
    """expf correctly rounded (float32 of the double); overflow to inf as expf does."""
    with np.errstate(over="ignore"):
        return np.exp(v.astype(np.float64)).astype(F32)


def logistic(L: Lowering):
    _float_lut(L, lambda v: F32(1) / (F32(1) + _expf(-v)))


def tanh(L: Lowering):
    _float_lut(L, lambda v: np.array([F32(np.tanh(np.float64(t))) for t in v], F32))


def _erfc(v):
    """erfcf: the double erfc of each float32, rounded to float32."""
    return np.array([math.erfc(float(t)) for t in v]).astype(F32)


_MINUS_SQRT1_2 = F32(-math.sqrt(0.5))                  # static_cast<float>(-M_SQRT1_2)
_SQRT_2_OVER_PI = F32(2 / math.sqrt(math.pi) * math.sqrt(0.5))     # kSqrt2dPi, a float


def gelu(L: Lowering):
    """GeluTransform, 0.5 x erfc(-x / sqrt 2), or with `approximate` its tanh form, in float32
    operation by operation as the kernel's LUTPopulate evaluates it."""
    if L.op.options.get("approximate", False):
        def f(v):
            inner = _SQRT_2_OVER_PI * (v + F32(0.044715) * v * v * v)
            t = np.array([np.tanh(np.float64(u)) for u in inner]).astype(F32)
            return F32(0.5) * v * (F32(1) + t)
    else:
        def f(v):
            return F32(0.5) * v * _erfc(v * _MINUS_SQRT1_2)
    _float_lut(L, f)


def rsqrt(L: Lowering):
    """RsqrtEvalQuantizedInt8 for every input byte: 1/sqrt(x - zp) as gemmlowp's fixed-point
    multiplier, applied to 1 << 20, then the multiplier of 1 / (sqrt(in_scale) out_scale) (float
    sqrt and product, as the kernel's floats give them); x == zp gives 127. Bytes below the zero
    point, negative reals for which the kernel stops with an error, take its code's path for 1."""
    x, o = L.t(0), L.o()
    L.need_int8(x, o)
    scale = 1.0 / float(F32(math.sqrt(float(F32(x.scale)))) * F32(o.scale))
    m, shift = quantize_multiplier(scale)
    out = []
    for byte in BYTES.tolist():
        value = byte - x.zero_point
        if value == 0:
            out.append(127)
            continue
        inv, inv_shift = inv_sqrt_multiplier(value)
        data = int(multiply_by_quantized_multiplier(1, inv, inv_shift + 20))
        out.append(int(multiply_by_quantized_multiplier(data, m, shift - 20)) + o.zero_point)
    _table_op(L, out)


def leaky_relu(L: Lowering):
    x, o = L.t(0), L.o()
    alpha = float(L.op.options.get("alpha", 0.2))
    m_a, s_a = quantize_multiplier(float(F32(x.scale) * F32(alpha) / F32(o.scale)))
    m_i, s_i = quantize_multiplier(_f32_ratio(x.scale, o.scale))
    v = BYTES - x.zero_point
    out = np.where(v >= 0, multiply_by_quantized_multiplier(v, m_i, s_i),
                   multiply_by_quantized_multiplier(v, m_a, s_a))
    _table_op(L, out + o.zero_point)


def _srdhm16(a, b):
    ab = a * b
    num = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.where(num >= 0, num >> 15, -((-num) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, q)


def _int16_multiplier(m32: int) -> int:
    """DownScaleInt32ToInt16Multiplier."""
    return 32767 if m32 >= (1 << 31) - 1 - (1 << 15) else (m32 + (1 << 15)) >> 16


def _sat16(v):
    """gemmlowp's int16 ShiftLeft saturates."""
    return np.clip(v, -(1 << 15), (1 << 15) - 1)


def hard_swish(L: Lowering):
    """reference_ops::HardSwish on int8, for every input byte."""
    x, o = L.t(0), L.o()
    hires = F32(1.0 / 128.0) * F32(x.scale)
    m_out, e_out = quantize_multiplier(float(hires / F32(o.scale)))
    m_relu, e_relu = quantize_multiplier(float(hires / (F32(3.0) / F32(32768.0))))
    m_out, m_relu = _int16_multiplier(m_out), _int16_multiplier(m_relu)
    if e_out > 0:
        L.fail("output scale too small for TFLite's int8 HARD_SWISH")
    v = (BYTES - x.zero_point) * 128
    preshift = _srdhm16(v, m_out)
    relu = v
    if e_relu > 0:
        relu = _sat16(relu << (e_relu - 1))
    relu = _srdhm16(relu, m_relu)
    if e_relu > 0:
        relu = _sat16(relu << 1)
    if e_relu < 0:
        relu = rdbpot(relu, -e_relu)
    relu = (relu + (1 << 15)) >> 1
    ab = relu * preshift
    prod = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))               # truncating division
    prod = np.where((relu == -32768) & (preshift == -32768), 32767, prod)
    _table_op(L, rdbpot(prod, -e_out) + o.zero_point)


def _requantize(L: Lowering, lo_f: float | None, hi_f: float | None, real: float):
    """clamp(out_zp + MultiplyByQuantizedMultiplier(x - in_zp, real)) as RESCALE and CLAMP."""
    x, o = L.t(0), L.o()
    L.need_int8(x, o)
    m, s = tosa_scale(real)
    lo, hi = -128, 127
    if lo_f is not None:
        lo = max(lo, o.zero_point + round_away(float(F32(lo_f) / F32(o.scale))))
    if hi_f is not None:
        hi = min(hi, o.zero_point + round_away(float(F32(hi_f) / F32(o.scale))))
    last = (lo, hi) == (-128, 127)
    r = L.b.rescale(L.value(0), m, s, "int8", input_zp=x.zero_point, output_zp=o.zero_point,
                    out=L.out() if last else None)
    if not last:
        L.b.clamp(r, lo, hi, L.out())


def relu(L):
    _requantize(L, 0.0, None, _f32_ratio(L.t(0).scale, L.o().scale))


def relu6(L):
    _requantize(L, 0.0, 6.0, _f32_ratio(L.t(0).scale, L.o().scale))


def relu_n1_to_1(L):
    _requantize(L, -1.0, 1.0, _f32_ratio(L.t(0).scale, L.o().scale))


def relu_0_to_1(L):
    _requantize(L, 0.0, 1.0, _f32_ratio(L.t(0).scale, L.o().scale))


def quantize(L: Lowering):
    """QUANTIZE int8 -> int8: Requantize by input scale / output scale."""
    x, o = L.t(0), L.o()
    L.dtype(x)
    _requantize(L, None, None, float(x.scale) / float(o.scale))


def prelu(L: Lowering):
    x, alpha, o = L.t(0), L.t(1), L.o()
    L.need_int8(x, alpha, o)
    b, rank = L.b, len(x.shape)
    pos = b.rescale(L.value(0), *tosa_scale(_f32_ratio(x.scale, o.scale)), "int8",
                    input_zp=x.zero_point, output_zp=o.zero_point)
    a_shape = (1,) * (rank - len(alpha.shape)) + tuple(alpha.shape)
    if alpha.data is None:                         # alpha computed at run time
        a = b.widen(b.reshape(L.value(1), a_shape), alpha.zero_point)
    else:
        a = b.const((alpha.data.astype(np.int64) - alpha.zero_point).reshape(a_shape), "int32",
                    "alpha")
    prod = b.mul(b.widen(L.value(0), x.zero_point), a)
    real = float(F32(x.scale) * F32(alpha.scale) / F32(o.scale))
    neg = b.rescale(prod, *tosa_scale(real), "int8", output_zp=o.zero_point)
    cond = b.op("GREATER_EQUAL", [b.widen(L.value(0), x.zero_point), b.bcast(0, "int32", rank)],
                x.shape, "bool")
    b.op("SELECT", [cond, pos, neg], o.shape, "int8", {}, L.out())


BUILTINS = {"LOGISTIC": logistic, "TANH": tanh, "GELU": gelu, "RSQRT": rsqrt,
            "LEAKY_RELU": leaky_relu,
            "HARD_SWISH": hard_swish, "RELU": relu, "RELU6": relu6, "RELU_N1_TO_1": relu_n1_to_1,
            "RELU_0_TO_1": relu_0_to_1, "QUANTIZE": quantize, "PRELU": prelu}
