"""Reductions, data layout, scatter/gather and RESIZE
([SPEC] pseudocode/operators/<OP>.tosac, tosa.xml level limits)."""
from __future__ import annotations

import numpy as np

from .context import OpContext, c_div, fmt_shape
from .registry import axis_in_range, check, exact_output, no_extra_rules

check("GATHER", "SCATTER")(no_extra_rules)      # N, K, W, C agree: checked by the argument table


@check("REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_SUM", "REDUCE_PRODUCT")
def reduction(ctx: OpContext) -> None:
    shape1, shape = ctx.shape("input"), ctx.shape("output")
    axis = ctx.attr_int("axis")
    axis_in_range(ctx, axis, len(shape1))
    if len(shape) != len(shape1):
        ctx.fail(f"output rank {len(shape)} differs from input rank {len(shape1)}",
                 "rank(shape) != rank(shape1)", ctx.output())
    if shape[axis] != 1:
        ctx.fail(f"output dimension {axis} (the reduced axis) is {shape[axis]}; it must be 1",
                 "shape[axis] != 1", ctx.output())
    for i, (a, b) in enumerate(zip(shape1, shape)):
        if i != axis and a != b:
            ctx.fail(f"output shape {fmt_shape(shape)} differs from input shape {fmt_shape(shape1)} "
                     f"outside axis {axis}", "shape[i] != shape1[i] for i != axis", ctx.output())


@check("CONCAT")
def concat(ctx: OpContext) -> None:
    names = ctx.lists["input1"]
    if not names:
        ctx.fail("has an empty input list", "input1 == []")
    shapes = [tuple(int(d) for d in ctx.graph.tensors[n].shape) for n in names]
    rank = len(shapes[0])
    axis = ctx.attr_int("axis")
    if axis < 0 or axis >= max(1, rank):
        ctx.fail(f"axis {axis} is outside [0, {max(1, rank)})", "axis < 0 || axis >= max(1,rank(shapes1[0]))")
    total = 0
    for name, shape in zip(names, shapes):
        if len(shape) != rank:
            ctx.fail(f"input '{name}' has rank {len(shape)} but the first input has rank {rank}",
                     "rank(shapes1[shape_index]) != rank(shapes1[0])", name)
        for i in range(rank):
            if i == axis:
                total += shape[i]
            elif shape[i] != shapes[0][i]:
                ctx.fail(f"input '{name}' shape {fmt_shape(shape)} differs from the first input "
                         f"{fmt_shape(shapes[0])} in dimension {i}, which is not the axis",
                         "shapes1[shape_index][axis_index] != shapes1[0][axis_index]", name)
    out = ctx.shape("output")
    if len(out) != rank:
        ctx.fail(f"output rank {len(out)} differs from input rank {rank}", "rank(shape) != rank(shapes1[0])",
                 ctx.output())
    if out[axis] != total:
        ctx.fail(f"output dimension {axis} is {out[axis]} but the inputs sum to {total} on that axis",
                 "axis_sum != shape[axis]", ctx.output())
    for i in range(rank):
        if i != axis and out[i] != shapes[0][i]:
            ctx.fail(f"output shape {fmt_shape(out)} differs from the inputs in dimension {i}",
                     "shape[i] != shapes1[0][i] for i != axis", ctx.output())


def _shape_operand(ctx: OpContext, arg: str, length: int, formula: str) -> list[int] | None:
    """A shape_t operand of `length` values (None when its value is not a constant)."""
    n = ctx.shape(arg)[0]
    if n != length:
        ctx.fail(f"{arg} has {n} values; {formula} = {length} expected", f"length({arg}) != {formula}",
                 ctx.name(arg))
    return ctx.values(arg)


@check("PAD")
def pad(ctx: OpContext) -> None:
    shape1, shape = ctx.shape("input1"), ctx.shape("output")
    padding = _shape_operand(ctx, "padding", 2 * len(shape1), "2*rank(shape1)")
    if len(shape) != len(shape1):
        ctx.fail(f"output rank {len(shape)} differs from input rank {len(shape1)}",
                 "rank(shape) != rank(shape1)", ctx.output())
    if padding is None:
        return
    for i in range(len(shape)):
        lo, hi = padding[2 * i], padding[2 * i + 1]
        if lo < 0 or hi < 0:
            ctx.fail(f"padding of dimension {i} is ({lo},{hi}); padding must be >= 0",
                     "padding[i * 2] < 0 || padding[(i * 2) + 1] < 0", ctx.name("padding"))
        if shape[i] != lo + shape1[i] + hi:
            ctx.fail(f"output dimension {i} is {shape[i]} but {lo} + {shape1[i]} + {hi} = "
                     f"{lo + shape1[i] + hi}", "shape[i] != padding[i * 2] + shape1[i] + padding[(i * 2) + 1]",
                     ctx.output())


@check("RESHAPE")
def reshape(ctx: OpContext) -> None:
    shape1, shape = ctx.shape("input1"), ctx.shape("output")
    new_shape = _shape_operand(ctx, "shape", len(shape), "rank(output)")
    if new_shape is not None and tuple(new_shape) != shape:
        ctx.fail(f"shape operand {fmt_shape(new_shape)} differs from the output shape {fmt_shape(shape)}",
                 "shape operand != shape(output)", ctx.name("shape"))
    size1, size = int(np.prod(shape1, dtype=object)), int(np.prod(shape, dtype=object))
    if size1 != size:
        ctx.fail(f"input {fmt_shape(shape1)} has {size1} elements but output {fmt_shape(shape)} has "
                 f"{size}", "tensor_size(shape1) != tensor_size(shape)", ctx.output())


@check("REVERSE")
def reverse(ctx: OpContext) -> None:
    axis_in_range(ctx, ctx.attr_int("axis"), len(ctx.shape("input1")), "shape")


@check("SLICE")
def slice_(ctx: OpContext) -> None:
    shape1, shape = ctx.shape("input1"), ctx.shape("output")
    rank = len(shape1)
    if ctx.shape("start")[0] != rank or ctx.shape("size")[0] != rank:
        ctx.fail(f"start has {ctx.shape('start')[0]} and size {ctx.shape('size')[0]} values; the input "
                 f"has rank {rank}", "rank(shape1) != length(start) || rank(shape1) != length(size)")
    if len(shape) != rank:
        ctx.fail(f"output rank {len(shape)} differs from input rank {rank}", "rank(shape1) != rank(shape)",
                 ctx.output())
    start, size = ctx.values("start"), ctx.values("size")
    if start is None or size is None:
        return
    for i in range(rank):
        if start[i] < 0:
            ctx.fail(f"start[{i}] is {start[i]}", "start[index] < 0", ctx.name("start"))
        if size[i] <= 0:
            ctx.fail(f"size[{i}] is {size[i]}; sizes must be positive", "size[index] <= 0", ctx.name("size"))
        if start[i] + size[i] > shape1[i]:
            ctx.fail(f"start[{i}] + size[{i}] = {start[i] + size[i]} exceeds input dimension {shape1[i]}",
                     "start[index] + size[index] > shape1[index]")
        if shape[i] != size[i]:
            ctx.fail(f"output dimension {i} is {shape[i]} but size[{i}] is {size[i]}",
                     "shape[index] != size[index]", ctx.output())


@check("TILE")
def tile(ctx: OpContext) -> None:
    shape1, shape = ctx.shape("input1"), ctx.shape("output")
    multiples = _shape_operand(ctx, "multiples", len(shape1), "rank(shape1)")
    if len(shape) != len(shape1):
        ctx.fail(f"output rank {len(shape)} differs from input rank {len(shape1)}",
                 "rank(shape1) != rank(shape)", ctx.output())
    if multiples is None:
        return
    for i in range(len(shape)):
        if shape1[i] * multiples[i] != shape[i]:
            ctx.fail(f"output dimension {i} is {shape[i]} but {shape1[i]} * multiples[{i}] "
                     f"({multiples[i]}) = {shape1[i] * multiples[i]}", "shape1[i] * multiples[i] != shape[i]",
                     ctx.output())


@check("TRANSPOSE")
def transpose(ctx: OpContext) -> None:
    shape1, shape = ctx.shape("input1"), ctx.shape("output")
    rank = len(shape1)
    if len(shape) != rank:
        ctx.fail(f"output rank {len(shape)} differs from input rank {rank}", "rank(shape1) != rank(shape)",
                 ctx.output())
    if int(np.prod(shape1, dtype=object)) != int(np.prod(shape, dtype=object)):
        ctx.fail(f"output {fmt_shape(shape)} and input {fmt_shape(shape1)} differ in element count",
                 "tensor_size(shape1) != tensor_size(shape)", ctx.output())
    perms = ctx.attr_ints("perms", rank)
    used = set()
    for p in perms:
        if p >= rank:
            ctx.fail(f"perms {list(perms)} has index {p} >= rank {rank}", "index >= rank(shape1)")
        if p < 0:
            ctx.fail(f"perms {list(perms)} has negative index {p}", "index < 0")
        if p in used:
            ctx.fail(f"perms {list(perms)} uses index {p} twice", "indexes_used[index] == true")
        used.add(p)
    for i, p in enumerate(perms):
        if shape1[p] != shape[i]:
            ctx.fail(f"output dimension {i} is {shape[i]} but input dimension perms[{i}] = {p} is "
                     f"{shape1[p]}", "shape1[perms[i]] != shape[i]", ctx.output())


@check("RESIZE")
def resize(ctx: OpContext) -> None:
    d = ctx.dims
    ih, iw, oh, ow = d["IH"], d["IW"], d["OH"], d["OW"]
    if max(oh, ow, ih, iw) >= 16384:
        ctx.fail(f"input {ih}x{iw} / output {oh}x{ow}: dimensions must be below 16384",
                 "max(OH,OW,IH,IW) >= 16384")
    scale, offset, border = ctx.values("scale", 4), ctx.values("offset", 2), ctx.values("border", 2)
    if scale is None or offset is None or border is None:
        return
    yn, yd, xn, xd = scale
    oy, ox = offset
    by, bx = border
    if min(scale) <= 0:
        ctx.fail(f"scale {scale} has a value <= 0",
                 "scale_y_n <= 0 || scale_y_d <= 0 || scale_x_n <= 0 || scale_x_d <= 0", ctx.name("scale"))
    if yn > (1 << 11) or xn > (1 << 11):
        ctx.fail(f"scale numerators ({yn}, {xn}) must be <= 2048",
                 "scale_y_n > (1 << 11) || scale_x_n > (1 << 11)", ctx.name("scale"))
    if yd >= 16 * yn or xd >= 16 * xn:
        ctx.fail(f"scale {scale} downscales by 16 or more", "scale_y_d >= 16 * scale_y_n || "
                 "scale_x_d >= 16 * scale_x_n", ctx.name("scale"))
    for name, off, n in (("offset_y", oy, yn), ("offset_x", ox, xn)):
        if off < -n or off >= 16 * n:
            ctx.fail(f"{name} {off} is outside [{-n}, {16 * n})",
                     f"{name} < -scale_{name[-1]}_n || {name} >= 16 * scale_{name[-1]}_n", ctx.name("offset"))
    for name, b, n in (("border_y", by, yn), ("border_x", bx, xn)):
        if b < -16 * n or b >= n:
            ctx.fail(f"{name} {b} is outside [{-16 * n}, {n})",
                     f"{name} < -16 * scale_{name[-1]}_n || {name} >= scale_{name[-1]}_n", ctx.name("border"))
    exact_output(ctx, "OH", oh, (ih - 1) * yn - oy + by, yd, "(IH - 1) * scale_y_n - offset_y + border_y",
                 "scale_y_d")
    exact_output(ctx, "OW", ow, (iw - 1) * xn - ox + bx, xd, "(IW - 1) * scale_x_n - offset_x + border_x",
                 "scale_x_d")
    # LEVEL_CHECK(scale_y_n/scale_y_d <= MAX_SCALE): integer division, as the pseudocode reads
    ctx.level(c_div(yn, yd), "MAX_SCALE", "scale_y_n/scale_y_d")
    ctx.level(c_div(xn, xd), "MAX_SCALE", "scale_x_n/scale_x_d")
