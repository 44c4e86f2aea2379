"""TFLite's integer arithmetic as its reference kernels compute it (kernels/internal/common.h,
quantization_util.cc and gemmlowp's fixedpoint.h), vectorized over int64 arrays that hold
int32 values. The frontend derives RESCALE parameters and TABLE contents from it at compile
time; none of it runs when the program is simulated."""
from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def round_away(x: float) -> int:
    """C's round(): halves away from zero (TfLiteRound)."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier: real = q * 2^(shift - 31), q in [2^30, 2^31) (0 for tiny reals)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = round_away(q * (1 << 31))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def _wrap32(x):
    return ((np.asarray(x, np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def srdhm(a, b):
    """SaturatingRoundingDoublingHighMul: the fixed-point product."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    num = ab + nudge
    q = np.where(num >= 0, num >> 31, -((-num) >> 31))      # C division truncates
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, q)


def rdbpot(x, exponent):
    """RoundingDivideByPOT: x / 2^exponent, halves away from zero."""
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << e) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + ((x & mask) > threshold)


def multiply_by_quantized_multiplier(x, multiplier: int, shift: int):
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot(srdhm(_wrap32(np.asarray(x, np.int64) << left), multiplier), right)


def sat_mul_pot(x, exponent: int):
    """SaturatingRoundingMultiplyByPOT."""
    x = np.asarray(x, np.int64)
    if exponent >= 0:
        return np.clip(x << exponent, INT32_MIN, INT32_MAX)
    return rdbpot(x, -exponent)


def _exp_on_interval(a):
    """exp_on_interval_between_negative_one_quarter_and_0_excl (Q0.31)."""
    constant_term, one_third = 1895147668, 715827883
    x = a + (1 << 28)
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = sat_mul_pot(x4, -2)
    poly = sat_mul_pot(srdhm(x4_over_4 + x3, one_third) + x2, -1)
    return constant_term + srdhm(constant_term, x + poly)


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int):
    """gemmlowp exp_on_negative_values: Q(integer_bits) input <= 0, Q0.31 result."""
    a = np.asarray(a, np.int64)
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_on_interval(sat_mul_pot(a_mod, integer_bits))
    remainder = a_mod - a
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = (remainder & (1 << (frac + exponent))) != 0
            result = np.where(bit, srdhm(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


def inv_sqrt_multiplier(value: int) -> tuple[int, int]:
    """GetInvSqrtQuantizedMultiplierExp(value, kReverseShift): (multiplier, left shift) with
    1/sqrt(value) = multiplier * 2^(shift - 31), by gemmlowp's fixed-point Newton iteration
    (five steps from 1, Q3.28); values <= 1 give (INT32_MAX, 0) as the kernel's special case."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    pairs = (31 - value.bit_length()) // 2 - 1      # (leading zeros - 1) / 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    one, half_three = 1 << 28, (1 << 28) + (1 << 27)
    half_input = int(rdbpot(value >> 1, 1))
    x = one
    for _ in range(5):
        x3 = int(sat_mul_pot(srdhm(srdhm(x, x), x), 6))                # Rescale<3> of Q9
        x = int(sat_mul_pot(_wrap32(int(srdhm(half_three, x)) - int(srdhm(half_input, x3))), 3))
    x = int(srdhm(x, 1518500250))                                     # times sqrt(2) / 2
    if shift < 0:
        x, shift = int(_wrap32(x << -shift)), 0
    return x, -shift
