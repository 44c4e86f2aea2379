"""The operator-check table: op name -> function(OpContext) with that operator's own rules.

The generic argument-table checks (generic.py) run before these for every operator that has a
`Spec`; the functions here add the ERROR_IF / REQUIRE / LEVEL_CHECK lines of the operator's
pseudocode. Control-flow and variable operators have no `Spec`; their function does all checks.
"""
from __future__ import annotations

import numpy as np

from npu_sim.isa.operators import OPERATORS
from npu_sim.isa.registry import Registry

from .context import OpContext, c_div, c_mod, fmt_shape

CHECKS = Registry("validation rules", OPERATORS)
check = CHECKS.register


# ---- helpers shared by several families --------------------------------------------------------

def zero_point(ctx: OpContext, arg: str, dtype: str, type_var: str) -> None:
    """ERROR_IF(!is_same<T,i8_t>() && zp != 0) (a float zero point is read as a float)."""
    data = ctx.tensor(arg).data
    value = None if data is None or np.asarray(data).size == 0 else np.asarray(data).reshape(-1)[0].item()
    if value is not None and dtype != "int8" and value != 0:
        ctx.fail(f"{arg} is {value}; a zero point must be 0 unless {type_var} is int8 (here {dtype})",
                 f"!is_same<{type_var},i8_t>() && {arg} != 0", ctx.name(arg))


def axis_in_range(ctx: OpContext, axis: int, rank: int, what: str = "shape1") -> None:
    if axis < 0 or axis >= rank:
        ctx.fail(f"axis {axis} is outside [0, {rank}) for a rank-{rank} input",
                 f"axis < 0 || axis >= rank({what})")


def broadcast(ctx: OpContext, args: tuple[str, ...]) -> None:
    """ERROR_IF(shape != broadcast_shape(shape1, shape2[, shape3]))."""
    shapes = [ctx.shape(a) for a in args]
    rank = len(shapes[0])
    for arg, shape in zip(args[1:], shapes[1:]):
        if len(shape) != rank:
            ctx.fail(f"{arg} has rank {len(shape)} but {args[0]} has rank {rank}; broadcasting "
                     "needs equal ranks", "rank(shape1) != rank(shape2) (broadcast_shape)",
                     ctx.name(arg))
    result = list(shapes[0])
    for arg, shape in zip(args[1:], shapes[1:]):
        for i in range(rank):
            if result[i] == 1:
                result[i] = shape[i]
            elif shape[i] != 1 and shape[i] != result[i]:
                ctx.fail(f"dimension {i} of {arg} is {shape[i]}, which does not broadcast against "
                         f"{result[i]}", "shape2[i] != 1 && shape2[i] != shape[i] (broadcast_shape)",
                         ctx.name(arg))
    out = ctx.shape("output")
    if out != tuple(result):
        ctx.fail(f"output shape {fmt_shape(out)} does not equal the broadcast shape "
                 f"{fmt_shape(result)} of the inputs",
                 "shape != broadcast_shape(" + ", ".join(f"shape{i + 1}" for i in range(len(args))) + ")",
                 ctx.output())


def exact_output(ctx: OpContext, out_sym: str, actual: int, numerator: int, divisor: int,
                 formula: str, divisor_name: str) -> None:
    """ERROR_IF(O != idiv_check(numerator, divisor) + 1) with a readable message."""
    cond = f"{out_sym} != idiv_check({formula}, {divisor_name}) + 1"
    what = {"OH": "height", "OW": "width", "OD": "depth"}.get(out_sym, out_sym)
    if c_mod(numerator, divisor) != 0:
        ctx.fail(f"output {what} is not an integer: ({formula}) = {numerator} is not a multiple of "
                 f"{divisor_name} = {divisor}", cond, ctx.output())
    expected = c_div(numerator, divisor) + 1
    if actual != expected:
        ctx.fail(f"output {what} {actual} does not equal ({formula})/{divisor_name}+1 = {expected}",
                 cond, ctx.output())


def no_extra_rules(ctx: OpContext) -> None:
    """The argument table (operand types, ranks, equal shapes) is all this operator checks."""
