"""Activation and elementwise operators: CLAMP, the binary/unary/ternary/comparison families
(the PRO-FP ones included: POW, CEIL, FLOOR, EXP, LOG, RECIPROCAL, RSQRT, SIN, COS, ERF,
SIGMOID, TANH), MUL, TABLE and NEGATE ([SPEC] pseudocode/operators/<OP>.tosac)."""
from __future__ import annotations

from .context import OpContext
from .registry import broadcast, check, no_extra_rules, zero_point

_BINARY = ("ADD", "SUB", "POW", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR",
           "INTDIV", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_LEFT_SHIFT",
           "LOGICAL_RIGHT_SHIFT", "MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "GREATER_EQUAL")

check("ABS", "BITWISE_NOT", "CLZ", "LOGICAL_NOT", "CEIL", "FLOOR", "EXP", "LOG", "RECIPROCAL",
      "RSQRT", "SIN", "COS", "ERF", "SIGMOID", "TANH")(no_extra_rules)


@check(*_BINARY)
def binary(ctx: OpContext) -> None:
    broadcast(ctx, ("input1", "input2"))


@check("MUL")
def mul(ctx: OpContext) -> None:
    shift = ctx.scalar("shift")
    if shift is not None:
        if not 0 <= shift <= 63:
            ctx.fail_require(f"shift is {shift}; it must be in [0, 63]", "0 <= shift && shift <= 63",
                             ctx.name("shift"))
        in_t = ctx.dtype("input1")
        if in_t != "int32" and shift != 0:
            ctx.fail_require(f"shift is {shift}; a non-zero shift needs int32 inputs (here {in_t})",
                             "is_same<in_t,int32_t>() || shift == 0", ctx.name("shift"))
    broadcast(ctx, ("input1", "input2"))


@check("SELECT")
def select(ctx: OpContext) -> None:
    broadcast(ctx, ("input1", "input2", "input3"))


def _attr_value(ctx: OpContext, key: str, dtype: str) -> int:
    """CLAMP's bounds, which the frontend decoded from in_out_t values (None: it could not)."""
    value = ctx.attr(key)
    if value is None:
        ctx.fail(f"attribute {key} does not hold a {dtype} value", f"{key} is not a value of in_out_t")
    return value


@check("CLAMP")
def clamp(ctx: OpContext) -> None:
    dtype = ctx.dtype("input")
    lo = _attr_value(ctx, "min_val", dtype)
    hi = _attr_value(ctx, "max_val", dtype)
    if lo != lo or hi != hi:
        ctx.fail(f"min_val {lo} or max_val {hi} is NaN", "isNaN(min_val) || isNaN(max_val)")
    if hi < lo:
        ctx.fail(f"max_val {hi} is smaller than min_val {lo}", "max_val < min_val")


@check("TABLE")
def table(ctx: OpContext) -> None:
    expected = ctx.row.get("TABLE_SIZE")
    size = ctx.dims.get("TABLE_SIZE")
    if expected is not None and size != expected:
        ctx.fail_require(f"table has {size} entries; a {ctx.dtype('input1')} TABLE needs {expected}",
                         "length(table) == TABLE_SIZE", ctx.name("table"))


@check("NEGATE")
def negate(ctx: OpContext) -> None:
    dt = ctx.dtype("input1")
    zero_point(ctx, "input1_zp", dt, "in_out_t")
    zero_point(ctx, "output_zp", dt, "in_out_t")
