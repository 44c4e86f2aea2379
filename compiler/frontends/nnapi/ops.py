"""NNAPI operations as TFLite builtin records, one function per OperationType. Each checks the
operation's definition in types.spec first (operand counts, types, ranks, the output dimensions
the inputs imply; ModelError, the HAL's INVALID_ARGUMENT) and then what this device supports
(UnsupportedError)."""
from __future__ import annotations

import numpy as np

from .model import OperandType as T
from .translate import Translator

Q8 = {T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED}
FLOAT_TENSORS = {T.TENSOR_FLOAT32, T.TENSOR_FLOAT16}
Q8F = Q8 | FLOAT_TENSORS
Q8_INT = Q8 | {T.TENSOR_INT32}
ANY = Q8_INT | FLOAT_TENSORS | {T.TENSOR_BOOL8, T.TENSOR_QUANT16_SYMM}
SAME, VALID = 0, 1                      # TFLite's Padding enum
_IMPLICIT = {1: SAME, 2: VALID}         # NNAPI PaddingCode


def _act(t: Translator, i: int) -> int:
    code = t.scalar(i, T.INT32)
    t.need(code in (0, 1, 2, 3), f"fused activation code {code} is not one of 0-3")
    return code


def layout(t: Translator, i: int) -> bool:
    return False if t.is_omitted(i) else bool(t.scalar(i, T.BOOL))


def io_tensors(t: Translator, nchw: bool):
    """(input tensor, output tensor) of an NHWC kernel, transposed around it when NCHW."""
    x, y = t.op.inputs[0], t.op.outputs[0]
    if not nchw:
        return x, y, lambda: None
    xi, yi = t.to_nhwc(x), t.from_nhwc(y)
    return xi, yi, lambda: t.nhwc_back(yi, y)


def nhwc(dims, nchw):
    return (dims[0], dims[2], dims[3], dims[1]) if nchw else tuple(dims)


def _window_out(size, k, stride, dil, pad_code=None, pads=None):
    eff = (k - 1) * dil + 1
    if pads is not None:
        return (size + pads[0] + pads[1] - eff) // stride + 1
    return (size + stride - 1) // stride if pad_code == SAME else (size - eff + stride) // stride


def _spatial(t: Translator, first: int, explicit: bool, has_kernel: bool):
    """Padding, strides (and filter size) of the pooling and convolution signatures:
    explicit: padL, padR, padT, padB, strideW, strideH[, filterW, filterH];
    implicit: padCode, strideW, strideH[, filterW, filterH]. Returns (options, next index)."""
    i = first
    if explicit:
        l, r, top, bot = (t.scalar(i + k, T.INT32) for k in range(4))
        t.need(min(l, r, top, bot) >= 0, "explicit paddings must be non-negative")
        opts = {"explicit_padding": (top, bot, l, r), "padding": VALID}
        i += 4
    else:
        code = t.scalar(i, T.INT32)
        t.need(code in _IMPLICIT, f"implicit padding code {code} is not 1 (SAME) or 2 (VALID)")
        opts = {"padding": _IMPLICIT[code]}
        i += 1
    sw, sh = t.scalar(i, T.INT32), t.scalar(i + 1, T.INT32)
    t.need(sw > 0 and sh > 0, "strides must be positive")
    opts.update(stride_w=sw, stride_h=sh)
    i += 2
    if has_kernel:
        fw, fh = t.scalar(i, T.INT32), t.scalar(i + 1, T.INT32)
        t.need(fw > 0 and fh > 0, "filter sizes must be positive")
        opts.update(filter_width=fw, filter_height=fh)
        i += 2
    return opts, i


def _out_hw(t, opts, ih, iw, kh, kw, dh=1, dw=1):
    ex = opts.get("explicit_padding")
    oh = _window_out(ih, kh, opts["stride_h"], dh, opts["padding"], ex and ex[:2])
    ow = _window_out(iw, kw, opts["stride_w"], dw, opts["padding"], ex and ex[2:])
    t.need(oh > 0 and ow > 0, "the window is larger than the padded input")
    return oh, ow


def _is_implicit(t: Translator, short: int, bool_at: int) -> bool:
    return t.n_inputs() == short or (t.n_inputs() > bool_at and
                                     t.operand(bool_at).type == T.BOOL)


def pool(builtin: str, types=Q8F):
    def lower(t: Translator):
        t.counts((7, 8, 10, 11))
        implicit = _is_implicit(t, 7, 7)
        opts, i = _spatial(t, 1, not implicit, True)
        opts["fused_activation_function"] = _act(t, i)
        nchw = layout(t, i + 1)
        t.rank(0, (4,))
        n, ih, iw, c = nhwc(t.operand(0).dimensions, nchw)
        oh, ow = _out_hw(t, opts, ih, iw, opts["filter_height"], opts["filter_width"])
        t.out_shape((n, c, oh, ow) if nchw else (n, oh, ow, c))
        t.types(types, 0, "o0")
        x, y, done = io_tensors(t, nchw)
        t.emit(builtin, [x], [y], **opts)
        done()
    return lower


def _bias_rule(t: Translator, x, w, b):
    if x.type in Q8:
        t.need(b.type == T.TENSOR_INT32 and b.zero_point == 0, "a quantized operation's bias "
               "must be TENSOR_INT32 with zeroPoint 0")
        if w.type != T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            t.need(abs(b.scale - x.scale * w.scale) <= 1e-6 * max(b.scale, 1e-30) + 1e-12,
                   f"bias scale {b.scale:g} must equal input scale x filter scale "
                   f"{x.scale * w.scale:g}")
    t.need(len(b.dimensions) == 1, f"bias must have rank 1, got {list(b.dimensions)}")


def _filter_types(t: Translator, x, w):
    if w.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        t.need(x.type in Q8, "per-channel filters need a quantized 8-bit input")
        t.need(w.zero_point == 0, "per-channel filters have zeroPoint 0")
    else:
        t.need(w.type == x.type, f"filter type {w.type.name} must match input {x.type.name}")


def conv_2d(t: Translator):
    t.counts((7, 8, 10, 11, 13))
    implicit = _is_implicit(t, 7, 7)
    opts, i = _spatial(t, 3, not implicit, False)
    opts["fused_activation_function"] = _act(t, i)
    nchw = layout(t, i + 1)
    dw, dh = (1, 1) if t.is_omitted(i + 2) else (t.scalar(i + 2, T.INT32), t.scalar(i + 3, T.INT32))
    t.need(dw > 0 and dh > 0, "dilation factors must be positive")
    x, w, b = t.operand(0), t.operand(1), t.operand(2)
    t.rank(0, (4,))
    t.rank(1, (4,), "filter")
    n, ih, iw, c = nhwc(x.dimensions, nchw)
    oc, kh, kw, fc = w.dimensions
    t.need(fc == c, f"filter depth {fc} must equal input depth {c}")
    t.need(b.dimensions == (oc,), f"bias dimensions {list(b.dimensions)} must be [{oc}]")
    oh, ow = _out_hw(t, opts, ih, iw, kh, kw, dh, dw)
    t.out_shape((n, oc, oh, ow) if nchw else (n, oh, ow, oc))
    _filter_types(t, x, w)
    _bias_rule(t, x, w, b)
    t.types(Q8F, 0, "o0")
    xi, yi, done = io_tensors(t, nchw)
    t.emit("CONV_2D", [xi, t.op.inputs[1], t.op.inputs[2]], [yi], dilation_w_factor=dw,
           dilation_h_factor=dh, **opts)
    done()


def depthwise_conv_2d(t: Translator):
    t.counts((8, 9, 11, 12, 14))
    implicit = _is_implicit(t, 8, 8)
    opts, i = _spatial(t, 3, not implicit, False)
    mult = t.scalar(i, T.INT32)
    opts["fused_activation_function"] = _act(t, i + 1)
    nchw = layout(t, i + 2)
    dw, dh = (1, 1) if t.is_omitted(i + 3) else (t.scalar(i + 3, T.INT32), t.scalar(i + 4, T.INT32))
    t.need(dw > 0 and dh > 0, "dilation factors must be positive")
    x, w, b = t.operand(0), t.operand(1), t.operand(2)
    t.rank(0, (4,))
    t.rank(1, (4,), "filter")
    n, ih, iw, c = nhwc(x.dimensions, nchw)
    one, kh, kw, oc = w.dimensions
    t.need(one == 1, f"filter dimension 0 is {one}; it must be 1")
    t.need(mult > 0 and oc == c * mult, f"filter depth {oc} must be input depth {c} x "
           f"depth multiplier {mult}")
    t.need(b.dimensions == (oc,), f"bias dimensions {list(b.dimensions)} must be [{oc}]")
    oh, ow = _out_hw(t, opts, ih, iw, kh, kw, dh, dw)
    t.out_shape((n, oc, oh, ow) if nchw else (n, oh, ow, oc))
    _filter_types(t, x, w)
    _bias_rule(t, x, w, b)
    t.types(Q8F, 0, "o0")
    xi, yi, done = io_tensors(t, nchw)
    t.emit("DEPTHWISE_CONV_2D", [xi, t.op.inputs[1], t.op.inputs[2]], [yi], dilation_w_factor=dw,
           dilation_h_factor=dh, depth_multiplier=mult, **opts)
    done()


def grouped_conv_2d(t: Translator):
    """numGroups convolutions over the input's channel groups (a SPLIT), their outputs
    concatenated: each group is the CONV_2D of its filters, bias and per-channel scales."""
    t.counts((9, 12))
    implicit = t.n_inputs() == 9
    opts, i = _spatial(t, 3, not implicit, False)
    groups = t.scalar(i, T.INT32)
    opts["fused_activation_function"] = _act(t, i + 1)
    nchw = layout(t, i + 2)
    x, w, b = t.operand(0), t.operand(1), t.operand(2)
    t.rank(0, (4,))
    t.rank(1, (4,), "filter")
    n, ih, iw, c = nhwc(x.dimensions, nchw)
    oc, kh, kw, fc = w.dimensions
    t.need(groups > 0 and c % groups == 0 and oc % groups == 0, f"{groups} groups must divide "
           f"the input depth {c} and the output depth {oc}")
    t.need(fc * groups == c, f"filter depth {fc} must be input depth {c} / {groups} groups")
    t.need(b.dimensions == (oc,), f"bias dimensions {list(b.dimensions)} must be [{oc}]")
    oh, ow = _out_hw(t, opts, ih, iw, kh, kw)
    t.out_shape((n, oc, oh, ow) if nchw else (n, oh, ow, oc))
    _filter_types(t, x, w)
    _bias_rule(t, x, w, b)
    t.types(Q8F, 0, "o0")
    xi, yi, done = io_tensors(t, nchw)
    step = oc // groups
    pieces = [t.synth((n, ih, iw, fc), t.tensors[xi].dtype, like=xi) for _ in range(groups)]
    t.emit("SPLIT", [t.const([3]), xi], pieces, num_splits=groups)
    outs = []
    for g, piece in enumerate(pieces):
        wg = t.part(t.op.inputs[1], 0, g * step, step)
        bg = t.part(t.op.inputs[2], 0, g * step, step)
        outs.append(t.synth((n, oh, ow, step), t.tensors[yi].dtype, like=yi))
        t.emit("CONV_2D", [piece, wg, bg], [outs[-1]], **opts)
    t.emit("CONCATENATION", outs, [yi], axis=3)
    done()


def transpose_conv_2d(t: Translator):
    t.counts((9, 11))
    x, w, b = t.operand(0), t.operand(1), t.operand(2)
    t.rank(0, (4,))
    t.rank(1, (4,), "filter")
    explicit = t.n_inputs() == 11
    if explicit:
        l, r, top, bot = (t.scalar(3 + k, T.INT32) for k in range(4))
        sw, sh = t.scalar(7, T.INT32), t.scalar(8, T.INT32)
        act, nchw = _act(t, 9), layout(t, 10)
    else:
        sw, sh = t.scalar(5, T.INT32), t.scalar(6, T.INT32)
        act, nchw = _act(t, 7), layout(t, 8)
    t.need(sw > 0 and sh > 0, "strides must be positive")
    n, ih, iw, c = nhwc(x.dimensions, nchw)
    oc, kh, kw, fc = w.dimensions
    t.need(fc == c, f"filter depth {fc} must equal input depth {c}")
    t.need(b.dimensions == (oc,), f"bias dimensions {list(b.dimensions)} must be [{oc}]")
    if explicit:
        t.need(min(l, r, top, bot) >= 0, "explicit paddings must be non-negative")
        oh, ow = (ih - 1) * sh + kh - top - bot, (iw - 1) * sw + kw - l - r
        opts = {"explicit_padding": (top, bot, l, r), "padding": VALID}
    else:
        shape = [int(v) for v in t.tensor_const(3).reshape(-1)]
        t.need(len(shape) == 4, "the output shape tensor must hold 4 values")
        code = t.scalar(4, T.INT32)
        t.need(code in _IMPLICIT, f"implicit padding code {code} is not 1 or 2")
        oh, ow = nhwc(shape, nchw)[1:3]
        opts = {"padding": _IMPLICIT[code]}
    t.out_shape((n, oc, oh, ow) if nchw else (n, oh, ow, oc))
    _filter_types(t, x, w)
    _bias_rule(t, x, w, b)
    t.types(Q8F, 0, "o0")
    xi, yi, done = io_tensors(t, nchw)
    t.emit("TRANSPOSE_CONV", [t.const([n, oh, ow, oc]), t.op.inputs[1], xi, t.op.inputs[2]], [yi],
           stride_w=sw, stride_h=sh, fused_activation_function=act, **opts)
    done()


def fully_connected(t: Translator):
    t.counts((4,))
    x, w, b = t.operand(0), t.operand(1), t.operand(2)
    t.rank(1, (2,), "weights")
    units, size = w.dimensions
    t.need(size > 0 and x.count % size == 0, f"input of {x.count} elements is not a whole "
           f"number of rows of {size}")
    t.need(b.dimensions == (units,), f"bias dimensions {list(b.dimensions)} must be [{units}]")
    t.out_shape((x.count // size, units))
    _filter_types(t, x, w)
    _bias_rule(t, x, w, b)
    act = _act(t, 3)
    t.types(Q8F, 0, 1, "o0")
    t.emit("FULLY_CONNECTED", t.op.inputs[:3], t.op.outputs, fused_activation_function=act)


def broadcast(t: Translator, a, b):
    try:
        return tuple(np.broadcast_shapes(tuple(a.dimensions), tuple(b.dimensions)))
    except ValueError:
        t.invalid(f"dimensions {list(a.dimensions)} and {list(b.dimensions)} do not broadcast")


def binary(builtin: str, fused: bool = True, requant: bool = False, types=None):
    def lower(t: Translator):
        t.counts((3,) if fused else (2,))
        a, b = t.operand(0), t.operand(1)
        t.out_shape(broadcast(t, a, b))
        opts = {"fused_activation_function": _act(t, 2)} if fused else {}
        kind = t.types(types or (Q8F if fused else Q8_INT | FLOAT_TENSORS), 0, 1, "o0")
        ins = list(t.op.inputs[:2])
        if requant and kind in Q8:      # MAXIMUM/MINIMUM requantize each input to the output's
            ins = [requantized(t, k, t.op.outputs[0]) for k in ins]
        t.emit(builtin, ins, t.op.outputs, **opts)
    return lower


def requantized(t: Translator, k: int, like: int) -> int:
    src, dst = t.tensors[k], t.tensors[like]
    if src.scales[:1] == dst.scales[:1] and src.zero_point == dst.zero_point:
        return k
    r = t.synth(src.shape, src.dtype, like=like)
    t.emit("QUANTIZE", [k], [r])
    return r


def unary(builtin: str, types=Q8F):
    def lower(t: Translator):
        t.counts((1,))
        t.out_shape(t.operand(0).dimensions)
        t.types(types, 0, "o0")
        t.emit(builtin, t.op.inputs[:1], t.op.outputs)
    return lower


def fixed_quant(t: Translator, scale: float, zp_u8: int):
    o = t.output()
    if o.type not in Q8:
        return
    zp = zp_u8 - (128 if o.type == T.TENSOR_QUANT8_ASYMM_SIGNED else 0)
    t.need(o.scale == scale and o.zero_point == zp, f"a {o.type.name} output must have scale "
           f"{scale:g} and zeroPoint {zp}, got {o.scale:g} and {o.zero_point}")


def logistic(t: Translator):
    unary("LOGISTIC")(t)
    fixed_quant(t, 1 / 256, 0)


def tanh(t: Translator):
    unary("TANH")(t)
    fixed_quant(t, 1 / 128, 128)


def dequantize(t: Translator):
    t.counts((1,))
    t.out_shape(t.operand(0).dimensions)
    t.types(Q8, 0)
    t.need(t.output().type in FLOAT_TENSORS, "the output must be a float tensor")
    t.emit("DEQUANTIZE", t.op.inputs[:1], t.op.outputs)


def quantize(t: Translator):
    t.counts((1,))
    t.out_shape(t.operand(0).dimensions)
    t.types(FLOAT_TENSORS, 0)
    t.types(Q8, "o0")
    t.emit("QUANTIZE", t.op.inputs[:1], t.op.outputs)
