"""float math builtins, each a TOSA operator or two in the builtin's float type:

- ABS, NEG, EXP, LOG, SIN, COS, RSQRT and POW are TOSA's operators of the same name;
- SQRT is POW(x, 0.5) (TOSA has no square root; POW is exact to its bounds at 0 and 1);
- DIV is x * RECIPROCAL(y) (TOSA has no float division: one more rounding, within a few ulp);
- REDUCE_PROD is one REDUCE_PRODUCT per axis, the axes kept;
- L2_POOL_2D is sqrt(AVG_POOL2D(x^2)), the average over the window's unpadded elements as
  TFLite's kernel divides;
- GELU is 0.5 x (1 + ERF(x / sqrt 2)) (the kernel writes 0.5 x erfc(-x / sqrt 2), the same
  function, to keep its tail for x far below 0, which TOSA's ERF leaves to its error bound),
  or with `approximate` 0.5 x (1 + TANH(sqrt(2 / pi) (x + 0.044715 x^3))).
"""
from __future__ import annotations

import math

from .context import Lowering
from .elementwise import operand_at_rank
from .floats import finish, fmul, konst, pool, zero
from .reduce import const_axes


def _unary(op: str):
    def lower(L: Lowering):
        L.b.op(op, [L.value(0)], L.o().shape, L.ftype, {}, L.out())
    return lower


def neg(L: Lowering):
    L.b.op("NEGATE", [L.value(0), zero(L), zero(L)], L.o().shape, L.ftype, {}, L.out())


def _sqrt(L: Lowering, x: str) -> str:
    shape = L.b.shape_of(x)
    return L.b.op("POW", [x, konst(L, 0.5, len(shape))], shape, L.ftype, {})


def sqrt(L: Lowering):
    L.b.reshape(_sqrt(L, L.value(0)), L.o().shape, L.out())


def div(L: Lowering):
    rank = len(L.o().shape)
    y = operand_at_rank(L, 1, rank)
    recip = L.b.op("RECIPROCAL", [y], L.b.shape_of(y), L.ftype, {})
    finish(L, fmul(L, operand_at_rank(L, 0, rank), recip))


def pow_(L: Lowering):
    rank = len(L.o().shape)
    L.b.binary("POW", operand_at_rank(L, 0, rank), operand_at_rank(L, 1, rank), L.ftype,
               out=L.out())


def reduce_prod(L: Lowering):
    x, b = L.value(0), L.b
    for axis in const_axes(L, 1, len(L.t(0).shape)):
        shape = list(b.shape_of(x))
        shape[axis] = 1
        x = b.op("REDUCE_PRODUCT", [x], shape, L.ftype, {"axis": axis})
    b.reshape(x, L.o().shape, L.out())


def l2_pool_2d(L: Lowering):
    x = L.value(0)
    squares = fmul(L, x, x)
    pool(L, "AVG_POOL2D", squares, then=lambda mean: _sqrt(L, mean))


def gelu(L: Lowering):
    x, b = L.value(0), L.b
    shape, rank = b.shape_of(x), len(b.shape_of(x))
    if L.op.options.get("approximate", False):
        cube = fmul(L, fmul(L, x, x), x)
        inner = b.binary("ADD", x, fmul(L, konst(L, 0.044715, rank), cube), L.ftype)
        curve = b.op("TANH", [fmul(L, konst(L, math.sqrt(2 / math.pi), rank), inner)], shape,
                     L.ftype, {})
    else:
        curve = b.op("ERF", [fmul(L, x, konst(L, math.sqrt(0.5), rank))], shape, L.ftype, {})
    one_plus = b.binary("ADD", konst(L, 1.0, rank), curve, L.ftype)
    finish(L, fmul(L, fmul(L, konst(L, 0.5, rank), x), one_plus))


BUILTINS = {"ABS": _unary("ABS"), "EXP": _unary("EXP"), "LOG": _unary("LOG"),
            "SIN": _unary("SIN"), "COS": _unary("COS"), "RSQRT": _unary("RSQRT"), "NEG": neg,
            "SQRT": sqrt, "DIV": div, "POW": pow_, "REDUCE_PROD": reduce_prod,
            "L2_POOL_2D": l2_pool_2d, "GELU": gelu}
