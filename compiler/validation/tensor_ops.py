"""Tensor operators: ARGMAX, AVG_POOL2D, MAX_POOL2D, CONV2D, CONV3D, DEPTHWISE_CONV2D,
TRANSPOSE_CONV2D, MATMUL ([SPEC] pseudocode/operators/<OP>.tosac, tosa.xml level limits)."""
from __future__ import annotations

from .context import OpContext, fmt_shape
from .registry import axis_in_range, check, exact_output, zero_point


@check("ARGMAX")
def argmax(ctx: OpContext) -> None:
    shape1 = ctx.shape("input")
    axis = ctx.attr_int("axis")
    axis_in_range(ctx, axis, len(shape1))
    expected = shape1[:axis] + shape1[axis + 1:]
    if ctx.shape("output") != expected:
        ctx.fail(f"output shape {fmt_shape(ctx.shape('output'))} is not the input shape without "
                 f"axis {axis}: {fmt_shape(expected)}", "flatten(left_shape, right_shape) != shape",
                 ctx.output())


# ---- pooling ------------------------------------------------------------------------------------

def _pool_common(ctx: OpContext) -> None:
    ky, kx = ctx.attr_ints("kernel", 2, "kernel_y, kernel_x")
    sy, sx = ctx.attr_ints("stride", 2, "stride_y, stride_x")
    pt, pb, pl, pr = ctx.attr_ints("pad", 4, "pad_top, pad_bottom, pad_left, pad_right")
    if ky < 1 or kx < 1:
        ctx.fail(f"kernel [{ky},{kx}] has a size below 1", "kernel_y < 1 || kernel_x < 1")
    if sy < 1 or sx < 1:
        ctx.fail(f"stride [{sy},{sx}] has a value below 1", "stride_y < 1 || stride_x < 1")
    if min(pt, pb, pl, pr) < 0:
        ctx.fail(f"pad [{pt},{pb},{pl},{pr}] has a negative value",
                 "pad_top < 0 || pad_bottom < 0 || pad_left < 0 || pad_right < 0")
    if pr >= kx or pl >= kx:
        ctx.fail(f"pad_left/pad_right ({pl},{pr}) must be smaller than kernel_x = {kx}",
                 "pad_right >= kernel_x || pad_left >= kernel_x")
    if pt >= ky or pb >= ky:
        ctx.fail(f"pad_top/pad_bottom ({pt},{pb}) must be smaller than kernel_y = {ky}",
                 "pad_top >= kernel_y || pad_bottom >= kernel_y")
    d = ctx.dims
    exact_output(ctx, "OH", d["OH"], d["IH"] + pt + pb - ky, sy, "IH + pad_top + pad_bottom - kernel_y",
                 "stride_y")
    exact_output(ctx, "OW", d["OW"], d["IW"] + pl + pr - kx, sx, "IW + pad_left + pad_right - kernel_x",
                 "stride_x")
    for name, v in (("kernel_y", ky), ("kernel_x", kx), ("pad_top", pt), ("pad_bottom", pb),
                    ("pad_left", pl), ("pad_right", pr)):
        ctx.level(v, "MAX_KERNEL", name)
    ctx.level(sy, "MAX_STRIDE", "stride_y")
    ctx.level(sx, "MAX_STRIDE", "stride_x")


@check("AVG_POOL2D")
def avg_pool2d(ctx: OpContext) -> None:
    dt = ctx.dtype("input")
    zero_point(ctx, "input_zp", dt, "in_out_t")
    zero_point(ctx, "output_zp", dt, "in_out_t")
    _pool_common(ctx)


@check("MAX_POOL2D")
def max_pool2d(ctx: OpContext) -> None:
    _pool_common(ctx)


# ---- convolutions -------------------------------------------------------------------------------

_AXES_2D = (("H", "top", "bottom", "y"), ("W", "left", "right", "x"))
_AXES_3D = (("D", "d0", "d1", "d"),) + _AXES_2D


def _pad_name(side: str) -> str:
    return f"pad_{side}"


@check("CONV2D", "CONV3D", "DEPTHWISE_CONV2D")
def convolution(ctx: OpContext) -> None:
    axes = _AXES_3D if ctx.op.op == "CONV3D" else _AXES_2D
    n = len(axes)
    zero_point(ctx, "input_zp", ctx.dtype("input"), "in_t")
    zero_point(ctx, "weight_zp", ctx.dtype("weight"), "weight_t")
    pad = ctx.attr_ints("pad", 2 * n, ", ".join(_pad_name(s) for a in axes for s in a[1:3]))
    stride = ctx.attr_ints("stride", n, ", ".join(f"stride_{a[3]}" for a in axes))
    dilation = ctx.attr_ints("dilation", n, ", ".join(f"dilation_{a[3]}" for a in axes))
    if min(pad) < 0:
        ctx.fail(f"pad {list(pad)} has a negative value",
                 " || ".join(f"{_pad_name(s)} < 0" for a in axes for s in a[1:3]))
    if min(stride) < 1:
        ctx.fail(f"stride {list(stride)} has a value below 1",
                 " || ".join(f"stride_{a[3]} < 1" for a in axes))
    if min(dilation) < 1:
        ctx.fail(f"dilation {list(dilation)} has a value below 1",
                 " || ".join(f"dilation_{a[3]} < 1" for a in axes))
    d = ctx.dims
    for i, (ax, lo, hi, c) in enumerate(axes):
        p0, p1, s, dil = pad[2 * i], pad[2 * i + 1], stride[i], dilation[i]
        formula = f"I{ax} - 1 + pad_{lo} + pad_{hi} - (K{ax} - 1) * dilation_{c}"
        exact_output(ctx, f"O{ax}", d[f"O{ax}"], d[f"I{ax}"] - 1 + p0 + p1 - (d[f"K{ax}"] - 1) * dil,
                     s, formula, f"stride_{c}")
    if ctx.op.op == "DEPTHWISE_CONV2D":
        oc = d["C"] * d["M"]
        if ctx.shape("output")[3] != oc:
            ctx.fail(f"output has {ctx.shape('output')[3]} channels; C*M = {d['C']}*{d['M']} = {oc}",
                     "shape(output) != [N,OH,OW,C*M]", ctx.output())
        bc_cond = "BC != C*M && BC != 1"
    else:
        oc = d["OC"]
        bc_cond = "BC != OC && BC != 1"
    if d["BC"] != oc and d["BC"] != 1:
        ctx.fail(f"bias has {d['BC']} values; it needs {oc} (one per output channel) or 1", bc_cond,
                 ctx.name("bias"))
    for i, (ax, lo, hi, c) in enumerate(axes):
        ctx.level(dilation[i] * d[f"K{ax}"], "MAX_KERNEL", f"dilation_{c} * K{ax}")
        ctx.level(pad[2 * i], "MAX_KERNEL", f"pad_{lo}")
        ctx.level(pad[2 * i + 1], "MAX_KERNEL", f"pad_{hi}")
        ctx.level(stride[i], "MAX_STRIDE", f"stride_{c}")


@check("TRANSPOSE_CONV2D")
def transpose_conv2d(ctx: OpContext) -> None:
    zero_point(ctx, "input_zp", ctx.dtype("input"), "in_t")
    zero_point(ctx, "weight_zp", ctx.dtype("weight"), "weight_t")
    opt, opb, opl, opr = ctx.attr_ints("out_pad", 4, "out_pad_top, out_pad_bottom, out_pad_left, "
                                       "out_pad_right")
    sy, sx = ctx.attr_ints("stride", 2, "stride_y, stride_x")
    d = ctx.dims
    kh, kw = d["KH"], d["KW"]
    if opt <= -kh or opb <= -kh:
        ctx.fail(f"out_pad_top/out_pad_bottom ({opt},{opb}) must be greater than -KH = {-kh}",
                 "out_pad_top <= -KH || out_pad_bottom <= -KH")
    if opl <= -kw or opr <= -kw:
        ctx.fail(f"out_pad_left/out_pad_right ({opl},{opr}) must be greater than -KW = {-kw}",
                 "out_pad_left <= -KW || out_pad_right <= -KW")
    if sy < 1 or sx < 1:
        ctx.fail(f"stride [{sy},{sx}] has a value below 1", "stride_y < 1 || stride_x < 1")
    oh = (d["IH"] - 1) * sy + opt + opb + kh
    ow = (d["IW"] - 1) * sx + opl + opr + kw
    if d["OH"] != oh:
        ctx.fail(f"output height {d['OH']} does not equal (IH-1)*stride_y+out_pad_top+out_pad_bottom+KH"
                 f" = {oh}", "OH != (IH - 1) * stride_y + out_pad_top + out_pad_bottom + KH",
                 ctx.output())
    if d["OW"] != ow:
        ctx.fail(f"output width {d['OW']} does not equal (IW-1)*stride_x+out_pad_left+out_pad_right+KW"
                 f" = {ow}", "OW != (IW - 1) * stride_x + out_pad_left + out_pad_right + KW",
                 ctx.output())
    if d["BC"] != d["OC"] and d["BC"] != 1:
        ctx.fail(f"bias has {d['BC']} values; it needs {d['OC']} (one per output channel) or 1",
                 "BC != OC && BC != 1", ctx.name("bias"))
    ctx.level(kh, "MAX_KERNEL", "KH")
    ctx.level(kw, "MAX_KERNEL", "KW")
    for name, v in (("out_pad_top", opt), ("out_pad_bottom", opb), ("out_pad_left", opl),
                    ("out_pad_right", opr)):
        ctx.level(v, "MAX_KERNEL", name)
    ctx.level(sy, "MAX_STRIDE", "stride_y")
    ctx.level(sx, "MAX_STRIDE", "stride_x")


@check("MATMUL")
def matmul(ctx: OpContext) -> None:
    # 1.0.2 prints this rule inverted (is_same<in_t,i8_t>); the intended rule, as in the reference
    # model and the 1.1 draft, is that only int8 may have non-zero zero points.
    dt = ctx.dtype("A")
    zero_point(ctx, "A_zp", dt, "in_t")
    zero_point(ctx, "B_zp", dt, "in_t")


# ---- FFT ------------------------------------------------------------------------------------------

def _power_of_two(v: int) -> bool:
    return v >= 1 and v & (v - 1) == 0


@check("FFT2D", "RFFT2D")
def fft(ctx: OpContext) -> None:
    d = ctx.dims
    for axis in ("H", "W"):
        if not _power_of_two(d[axis]):
            ctx.fail(f"{axis} = {d[axis]} is not a power of two", f"!power_of_two({axis})")
    if ctx.op.op == "RFFT2D" and d["WO"] != d["W"] // 2 + 1:
        ctx.fail(f"outputs are {d['WO']} wide; RFFT2D gives W/2 + 1 = {d['W'] // 2 + 1}",
                 "shape(output_real) != [N,H,W/2 + 1]", ctx.output())
    ctx.level(d["H"], "MAX_KERNEL", "H")
    ctx.level(d["W"], "MAX_KERNEL", "W")
