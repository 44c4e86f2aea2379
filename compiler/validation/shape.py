"""Shape operators: TOSA 1.1 draft, EXT-SHAPE, experimental ([SPEC] chapters/shape.adoc,
pseudocode/operators/<OP>.tosac, tosa.xml of the 1.1 draft).

"shape_t values must be resolvable to constants at backend compile time" ([SPEC]
introduction, Tensors), so each shape operator is computed here, right after its rules are
checked: its output tensor gets the value as a constant, which the checks of later operators
read (a RESHAPE whose shape comes from DIV_CEIL_SHAPE checks the quotient against its output)
and which the rest of the compiler treats like a CONST_SHAPE. Nothing of them runs on the
machine: a shape operator has no step, and a shape_t graph output is a constant.

tensor_size_t is int64 here (the reference model's shape_t storage). REQUIRE(...) lines decide
on constants, so they are checked like every other REQUIRE the compiler can decide, with one
departure, where the reference model (tosa-tools 2026.8.0) and the spec disagree and npu-sim
follows the model: DIV_FLOOR_SHAPE, DIV_CEIL_SHAPE and MOD_SHAPE do not REQUIRE input1 >= 0 and
input2 >= 1 (Arm's generator makes valid tests with negative operands); they compute the
pseudocode's C arithmetic on any signs (quotients toward zero, DIV_CEIL adding 1 for a non-zero
remainder, the remainder taking the dividend's sign) and REQUIRE only a defined division.
"""
from __future__ import annotations

import numpy as np

from .context import OpContext
from .registry import check

_I64 = (-(1 << 63), (1 << 63) - 1)


def _shape_value(ctx: OpContext, arg: str, name: str | None = None) -> list[int]:
    """A shape_t operand's values, checked against MAX_SHAPE_LEN."""
    name = name or ctx.name(arg)
    tensor = ctx.graph.tensors[name]
    length = int(tensor.shape[0])
    ctx.level(length, "MAX_SHAPE_LEN", f"length({arg})", name)
    if tensor.data is None:
        ctx.fail(f"{arg} '{name}' has no value when the graph is compiled (its producer is not "
                 "resolved before this operator)", f"{arg} is not a compile-time constant (CTC)",
                 name)
    return [int(v) for v in np.asarray(tensor.data, dtype=np.int64).reshape(-1)]


def _resolve(ctx: OpContext, values: list[int]) -> None:
    """ERROR_IF(length(output) != length(result)); then the output holds the result."""
    out = ctx.tensor("output")
    if int(out.shape[0]) != len(values):
        ctx.fail(f"output '{out.name}' is a shape_t of length {out.shape[0]}, but the result has "
                 f"length {len(values)}", "length(output) != length(result)", out.name)
    ctx.level(len(values), "MAX_SHAPE_LEN", "length(output)", out.name)
    out.data = np.array(values, dtype=np.int64)


def _pairs(ctx: OpContext) -> list[tuple[int, int]]:
    a, b = _shape_value(ctx, "input1"), _shape_value(ctx, "input2")
    if len(a) != len(b):
        ctx.fail(f"input1 has length {len(a)} and input2 length {len(b)}; they must be equal",
                 "length(input1) != length(input2)", ctx.name("input2"))
    return list(zip(a, b))


def _in_range(ctx: OpContext, v: int, formula: str) -> int:
    if not _I64[0] <= v <= _I64[1]:
        ctx.fail_require(f"{formula} = {v} overflows tensor_size_t (int64)",
                         f"{formula} in range of tensor_size_t")
    return v


def _wrap(v: int) -> int:
    """int64 two's-complement wrap-around (apply_mul_s has no REQUIRE; the model wraps)."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def _trunc_div(ctx: OpContext, a: int, b: int) -> int:
    """apply_intdiv_s: C division, rounding toward zero."""
    if b == 0 or (a == _I64[0] and b == -1):
        ctx.fail_require(f"{a} / {b} is not defined in tensor_size_t", "b != 0 && !(a == INT64_MIN "
                         "&& b == -1)")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _c_mod(ctx: OpContext, a: int, b: int) -> int:
    return a - _trunc_div(ctx, a, b) * b


# The arithmetic is the pseudocode's on int64 (apply_*_s), as the reference model computes it;
# see the module docstring for where it departs from the spec's REQUIREs.
_BINARY = {
    "ADD_SHAPE": lambda ctx, a, b: _in_range(ctx, a + b, f"{a} + {b}"),
    "SUB_SHAPE": lambda ctx, a, b: _in_range(ctx, a - b, f"{a} - {b}"),
    "MUL_SHAPE": lambda ctx, a, b: _wrap(a * b),
    "MAX_SHAPE": lambda ctx, a, b: max(a, b),
    "MIN_SHAPE": lambda ctx, a, b: min(a, b),
    "DIV_FLOOR_SHAPE": _trunc_div,
    "DIV_CEIL_SHAPE": lambda ctx, a, b: _trunc_div(ctx, a, b) + (_c_mod(ctx, a, b) != 0),
    "MOD_SHAPE": lambda ctx, a, b: _c_mod(ctx, a, b),
}


@check(*_BINARY)
def binary_shape(ctx: OpContext) -> None:
    fn = _BINARY[ctx.op.op]
    _resolve(ctx, [fn(ctx, a, b) for a, b in _pairs(ctx)])


def _log2_floor(v: int) -> int:
    return v.bit_length() - 1


_UNARY = {
    "EXP2_SHAPE": lambda v: 1 << v,
    "LOG2_FLOOR_SHAPE": _log2_floor,
    "LOG2_CEIL_SHAPE": lambda v: _log2_floor(v) + (v != 1 << _log2_floor(v)),
}


@check(*_UNARY)
def unary_shape(ctx: OpContext) -> None:
    values = _shape_value(ctx, "input")
    for v in values:
        if ctx.op.op == "EXP2_SHAPE" and not 0 <= v < ctx.cfg.level.MAX_LOG2_SIZE:
            ctx.fail_require(f"input value {v} is outside [0, MAX_LOG2_SIZE = "
                             f"{ctx.cfg.level.MAX_LOG2_SIZE})", "0 <= input[index] < MAX_LOG2_SIZE")
        if ctx.op.op != "EXP2_SHAPE" and v < 1:
            ctx.fail_require(f"input value {v} has no base-2 logarithm", "input[index] >= 1")
    _resolve(ctx, [_UNARY[ctx.op.op](v) for v in values])


@check("ASSERT_EQUAL_SHAPE")
def assert_equal_shape(ctx: OpContext) -> None:
    broadcast = bool(ctx.attr("allow_broadcast", False))
    for i, (a, b) in enumerate(_pairs(ctx)):
        if broadcast and (a == 1 or b == 1 or a == b):
            continue
        if not broadcast and a == b:
            continue
        how = "broadcast-compatible" if broadcast else "equal"
        ctx.fail(f"element {i} is {a} in input1 and {b} in input2; the shapes are not {how}",
                 "input2[index] != 1 && input2[index] != input1[index]" if broadcast
                 else "input1[index] != input2[index]")


@check("CONCAT_SHAPE")
def concat_shape(ctx: OpContext) -> None:
    names = ctx.lists["input"]
    if not names:
        ctx.fail("has an empty input list", "input == []")
    values = []
    for name in names:
        part = _shape_value(ctx, "input", name)
        if not part:
            ctx.fail(f"input '{name}' is the empty shape_t (of a rank-0 tensor)", "input[i] == []",
                     name)
        values += part
    _resolve(ctx, values)


@check("SLICE_SHAPE")
def slice_shape(ctx: OpContext) -> None:
    values = _shape_value(ctx, "input")
    start, size = ctx.scalar("start"), ctx.scalar("size")
    if start is None or size is None:
        ctx.fail("start and size must each hold one value", "length(start) != 1 || length(size) != 1")
    if size <= 0:
        ctx.fail(f"size is {size}; it must be at least 1", "size_value <= 0", ctx.name("size"))
    if start < 0:
        ctx.fail(f"start is {start}; it must be at least 0", "start_value < 0", ctx.name("start"))
    if start + size > len(values):
        ctx.fail(f"start {start} + size {size} is past the input's length {len(values)}",
                 "start_value + size_value > length(input)", ctx.name("size"))
    _resolve(ctx, values[start:start + size])


@check("DIM")
def dim(ctx: OpContext) -> None:
    shape = ctx.shape("input1")
    axis = ctx.attr_int("axis")
    if axis >= len(shape):
        ctx.fail(f"axis {axis} is not below the input's rank {len(shape)}", "axis >= rank(shape)")
    if axis < 0:
        ctx.fail(f"axis {axis} is negative", "axis < 0")
    _resolve(ctx, [shape[axis]])
