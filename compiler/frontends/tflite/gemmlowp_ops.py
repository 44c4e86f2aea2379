"""gemmlowp's fixed-point arithmetic as TOSA operators on int32 tensors, for the kernels whose
data-dependent steps cannot be a table (SOFTMAX's reciprocal, LOG_SOFTMAX's logarithm).

A fixed-point product (SaturatingRoundingDoublingHighMul) is MUL with shift 31: both are
floor((a * b + 2^30) / 2^31)."""
from __future__ import annotations

import numpy as np

INT32_MAX = (1 << 31) - 1


class FixedPoint:
    """Operators on int32 tensors of one rank (constants broadcast as rank-matched scalars)."""

    def __init__(self, b, rank: int):
        self.b, self.rank = b, rank

    def k(self, value: int) -> str:
        return self.b.bcast(value, "int32", self.rank)

    def _v(self, x):
        return self.k(x) if isinstance(x, int) else x

    def add(self, x, y):
        return self.b.binary("ADD", self._v(x), self._v(y))

    def sub(self, x, y):
        return self.b.binary("SUB", self._v(x), self._v(y))

    def mul(self, x, y):
        """The fixed-point product."""
        return self.b.mul(self._v(x), self._v(y), 31)

    def shl(self, x, n):
        return self.b.binary("LOGICAL_LEFT_SHIFT", self._v(x), self._v(n))

    def sar(self, x, n, rounding: bool = False):
        return self.b.binary("ARITHMETIC_RIGHT_SHIFT", self._v(x), self._v(n),
                             attrs={"round": rounding})

    def flag(self, op: str, x, y):
        """0/1 int32 of a comparison."""
        cmp = self.b.binary(op, self._v(x), self._v(y), "bool")
        return self.b.op("CAST", [cmp], self.b.shape_of(cmp), "int32")

    def select(self, op: str, x, y, then, other):
        cmp = self.b.binary(op, self._v(x), self._v(y), "bool")
        then, other = self._v(then), self._v(other)
        shape = np.broadcast_shapes(*(self.b.shape_of(t) for t in (cmp, then, other)))
        return self.b.op("SELECT", [cmp, then, other], shape, "int32")

    def sat_double(self, x):
        """SaturatingRoundingMultiplyByPOT<1> of a non-negative x."""
        capped = self.b.binary("MINIMUM", x, self.k((1 << 30) - 1))
        return self.add(self.shl(capped, 1), self.flag("GREATER_EQUAL", x, 1 << 30))

    def rdbpot(self, x, exponent: int):
        """RoundingDivideByPOT: floor((x + 2^(e-1) - [x < 0]) / 2^e), halves away from zero."""
        negative = self.flag("GREATER", 0, x)
        return self.sar(self.sub(self.add(x, 1 << (exponent - 1)), negative), exponent)

    def one_over_one_plus_x(self, a):
        """one_over_one_plus_x_for_x_in_0_1 of a Q0.31 a >= 0: Newton-Raphson in Q2.29."""
        half = self.add(self.sar(a, 1), 1 << 30)          # RoundingHalfSum(a, 1)
        x = self.add(1515870810, self.mul(half, -1010580540))
        for _ in range(3):
            err = self.sub(1 << 29, self.mul(half, x))
            x = self.add(x, self.shl(self.mul(x, err), 2))
        return self.sat_double(x)                          # Q2 read as Q1, then to Q0

    def log_x(self, z, input_integer_bits: int, output_integer_bits: int):
        """log_x_for_x_greater_than_or_equal_to_1_impl: log of a Q(in).(31-in) z >= 1."""
        accum_bits = output_integer_bits + 1
        log_2, sqrt_sqrt_half, sqrt_half = 1488522236, 1805811301, 1518500250
        alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
        quarter = 1 << (29 - accum_bits)                  # Rescale<accum>(1/4)
        clz_a = self.b.op("CLZ", [z], self.b.shape_of(z), "int32")
        r_a = self.sat_double(self.mul(self.shl(z, self.sub(clz_a, 1)), sqrt_half))
        pow_a = self.add(self.shl(self.sub(input_integer_bits, clz_a), 31 - accum_bits), quarter)
        z_b = self.mul(z, sqrt_half)
        head_b = self.sub(self.b.op("CLZ", [z_b], self.b.shape_of(z_b), "int32"), 1)
        r_b = self.select("GREATER", z, self.sar(INT32_MAX, head_b), INT32_MAX,
                          self.shl(z, head_b))
        pow_b = self.sub(self.shl(self.sub(input_integer_bits, head_b), 31 - accum_bits), quarter)
        r = self.b.binary("MINIMUM", r_a, r_b)
        z_pow = self.b.binary("MAXIMUM", pow_a, pow_b)
        p = self.add(self.sar(r, 1), (sqrt_sqrt_half + 1) // 2)   # RoundingHalfSum(r, c), c odd
        q = self.sub(r, sqrt_sqrt_half)
        q = self.add(q, q)
        sq = self.mul(q, q)
        num = self.add(self.mul(q, r), self.mul(self.mul(q, sq), alpha_n))
        den = self.add(self.mul(p, self.add(self.add(alpha_i, q), self.mul(alpha_d, sq))),
                       self.mul(alpha_f, q))
        recip = self.one_over_one_plus_x(den)
        total = self.add(self.mul(z_pow, log_2), self.mul(self.rdbpot(num, accum_bits), recip))
        return self.sat_double(total)                      # Rescale<out> from Q(out + 1)
