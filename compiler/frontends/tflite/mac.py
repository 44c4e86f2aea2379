"""CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED and BATCH_MATMUL: a TOSA MAC
operator on int32 accumulators, then RESCALE by TFLite's per-channel multipliers (DOUBLE_ROUND
is TFLite's two roundings) and CLAMP to the fused activation's range. FULLY_CONNECTED's reference
kernel rounds once instead: round(acc * scale), the scale a double (single_round())."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from npu_sim.isa.errors import UnsupportedError

from .context import Lowering, tosa_scales

SAME, VALID = 0, 1


def out_size(padding: int, size: int, k: int, stride: int, dil: int = 1) -> int:
    eff = (k - 1) * dil + 1
    return (size + stride - 1) // stride if padding == SAME else (size + stride - eff) // stride


def pad_before(padding: int, size: int, k: int, stride: int, dil: int = 1) -> int:
    """ComputePaddingWithOffset: TFLite pads SAME with the odd row at the end."""
    if padding != SAME:
        return 0
    total = (out_size(padding, size, k, stride, dil) - 1) * stride + (k - 1) * dil + 1 - size
    return max(total, 0) // 2


def window_pads(padding, size, k, stride, dil, out, explicit=None) -> tuple[int, int, int]:
    """(before, after, crop): TOSA needs (size - 1 + before + after - (k-1)*dil) to be exactly
    (out - 1) * stride, so the padding rows no output reads are dropped, and then input rows.
    `explicit` (before, after) replaces the padding scheme (NNAPI's explicit padding)."""
    if explicit is not None:
        before, after = explicit
    else:
        before = pad_before(padding, size, k, stride, dil)
        total = max((out - 1) * stride + (k - 1) * dil + 1 - size, 0) if padding == SAME else 0
        after = total - before
    excess = size - 1 + before + after - (k - 1) * dil - (out - 1) * stride
    cut = min(excess, after)
    return before, after - cut, excess - cut


def spatial_input(L: Lowering, x: str, crops: tuple[int, int]) -> str:
    """Input rows and columns no output reads, sliced away (TOSA's exact output size rule)."""
    if not any(crops):
        return x
    n, h, w, c = L.b.shape_of(x)
    shape = (n, h - crops[0], w - crops[1], c)
    return L.b.op("SLICE", [x, L.b.shape((0, 0, 0, 0)), L.b.shape(shape)], shape,
                  L.b.dtype_of(x))


def requantize(L: Lowering, acc: str, reals, out_t, fused: int, out: str | None = None) -> str:
    mult, shift = tosa_scales(reals)
    lo, hi = L.act_range(fused, out_t)
    info = np.iinfo(np.int8)
    last = lo <= info.min and hi >= info.max
    r = L.b.rescale(acc, mult, shift, "int8", output_zp=out_t.zero_point,
                    out=out if last else None)
    return r if last else L.b.clamp(r, lo, hi, out)


def single_round(L: Lowering, acc: str, reals, out_t, fused: int) -> str:
    """TFLite's reference FULLY_CONNECTED (the overloads taking float scales): round(acc * real)
    with halves away from zero, `real` the double in_scale * w_scale / out_scale, then the zero
    point and the activation's clamp. A SINGLE_ROUND RESCALE by the nearest 31-bit multiplier
    computes floor(acc * real' + 1/2); it differs only where a half-integer lies between
    acc * real and acc * real' (|real' - real| <= 2^-31 real: about one output in 10^7) or at an
    exact half below zero, which only a real of at most 31 fractional bits reaches: then both
    signs are rounded as positive and the negative results negated back."""
    pairs = [_nearest_scale(r) for r in reals]
    mult, shift = [m for m, _ in pairs], [sh for _, sh in pairs]
    b, zp = L.b, out_t.zero_point
    lo, hi = L.act_range(fused, out_t)
    if not any(_halves_reachable(r) for r in reals):
        r = b.rescale(acc, mult, shift, "int8", output_zp=zp, double_round=False)
    else:
        rank = len(b.shape_of(acc))
        up = b.rescale(acc, mult, shift, "int32", double_round=False)
        negated = b.op("NEGATE", [acc, b.scalar(0, "int32"), b.scalar(0, "int32")],
                       b.shape_of(acc), "int32")
        down = b.rescale(negated, mult, shift, "int32", double_round=False)
        down = b.op("NEGATE", [down, b.scalar(0, "int32"), b.scalar(0, "int32")],
                    b.shape_of(acc), "int32")
        positive = b.op("GREATER_EQUAL", [acc, b.bcast(0, "int32", rank)], b.shape_of(acc),
                        "bool")
        r = b.saturate(b.op("SELECT", [positive, up, down], b.shape_of(acc), "int32"), "int8",
                       output_zp=zp)
    info = np.iinfo(np.int8)
    return r if lo <= info.min and hi >= info.max else b.clamp(r, lo, hi)


def _nearest_scale(real: float) -> tuple[int, int]:
    """TOSA (multiplier, shift) nearest `real`: a 31-bit multiplier, fewer bits where the shift
    would pass 62."""
    if real <= 0.0:
        return 0, 31
    frac, exp = math.frexp(real)                 # real = frac * 2^exp, frac in [0.5, 1)
    shift = min(31 - exp, 62)
    m = round(Fraction(real) * 2 ** shift)
    if m >= 1 << 31:                             # rounded up to 2^31
        m, shift = m >> 1, shift - 1
    if shift < 2:
        raise UnsupportedError(f"a rescale factor {real:.3g} is outside what RESCALE can express")
    return int(m), shift


def _halves_reachable(real: float) -> bool:
    """Whether acc * real is exactly a half-integer for some int32 acc: real = M / 2^E with M
    odd and 1 <= E <= 31 (acc = 2^(E-1) times an odd number)."""
    den = Fraction(real).denominator            # a power of two: real is a double
    return 2 <= den <= 1 << 31


def _bias(L: Lowering, k: int, n: int) -> str:
    """The bias as an IR tensor: its constant, a tensor computed at run time, or zeros."""
    if not L.has_input(k):
        return L.b.const(np.zeros(n, np.int32), "int32", "bias")
    if L.t(k).dtype != "INT32":
        L.fail(f"bias '{L.t(k).name}' is {L.t(k).dtype}; int32 expected")
    if L.t(k).data is None:
        return L.b.reshape(L.value(k), (n,))
    return L.b.const(L.t(k).data.reshape(-1).astype(np.int32), "int32", "bias")


def _weights(L: Lowering, k: int, shape) -> str:
    """The weights in TOSA's layout `shape`: a constant, or a tensor computed at run time."""
    w = L.t(k).data
    if w is None:
        return L.b.reshape(L.value(k), shape)
    return L.b.const(w.reshape(shape), "int8", "weight")


def _filter_reals(L: Lowering, x, w, out_t, n: int):
    scales = np.broadcast_to(np.asarray(w.scales, np.float64), (n,))
    return [float(x.scale) * float(s) / float(out_t.scale) for s in scales]


def conv_window(L: Lowering):
    """A CONV_2D-like builtin's TOSA window attributes and its input, cropped to the rows and
    columns the windows read (shared by the integer and float lowerings)."""
    x, w, o = L.t(0), L.t(1), L.o()
    opt = L.op.options
    _, ih, iw, _ = x.shape
    _, kh, kw, _ = w.shape
    _, oh, ow, _ = o.shape
    sh, sw = opt.get("stride_h", 1), opt.get("stride_w", 1)
    dh, dw = opt.get("dilation_h_factor", 1), opt.get("dilation_w_factor", 1)
    pad, ex = opt.get("padding", VALID), opt.get("explicit_padding")   # (top, bottom, left, right)
    pt, pb, ch = window_pads(pad, ih, kh, sh, dh, oh, ex and ex[:2])
    pl, pr, cw = window_pads(pad, iw, kw, sw, dw, ow, ex and ex[2:])
    attrs = {"pad": (pt, pb, pl, pr), "stride": (sh, sw), "dilation": (dh, dw),
             "local_bound": False}
    return spatial_input(L, L.value(0), (ch, cw)), attrs


def transpose_window(L: Lowering) -> dict:
    """TRANSPOSE_CONV's TOSA attributes: TFLite pads as a forward convolution from the output
    would; TOSA takes that as negative out_pad."""
    w_t, x, o = L.t(1), L.t(2), L.o()
    _, kh, kw, _ = w_t.shape
    _, ih, iw, _ = x.shape
    _, oh, ow, _ = o.shape
    opt = L.op.options
    sh, sw = opt.get("stride_h", 1), opt.get("stride_w", 1)
    pad, ex = opt.get("padding", VALID), opt.get("explicit_padding")
    pt, pl = (ex[0], ex[2]) if ex else (pad_before(pad, oh, kh, sh), pad_before(pad, ow, kw, sw))
    opb, opr = oh - (ih - 1) * sh - kh + pt, ow - (iw - 1) * sw - kw + pl
    return {"out_pad": (-pt, opb, -pl, opr), "stride": (sh, sw), "local_bound": False}


def _conv_like(L: Lowering, op: str, weights: str, oc: int):
    x, w, o = L.t(0), L.t(1), L.o()
    L.need_int8(x, w, o)
    opt = L.op.options
    xin, attrs = conv_window(L)
    b = L.b
    acc = b.op(op, [xin, weights, _bias(L, 2, oc),
                    b.scalar(x.zero_point, "int8"), b.scalar(w.zero_point, "int8")],
               (o.shape[0], *o.shape[1:3], oc), "int32", {**attrs, "acc_type": "int32"})
    requantize(L, acc, _filter_reals(L, x, w, o, oc), o, opt.get("fused_activation_function", 0),
               L.out())


def conv_2d(L: Lowering):
    shape = L.t(1).shape
    _conv_like(L, "CONV2D", _weights(L, 1, shape), shape[0])


def depthwise_conv_2d(L: Lowering):
    _, kh, kw, oc = L.t(1).shape                # [1, KH, KW, C*M] -> TOSA [KH, KW, C, M]
    c = L.t(0).shape[3]
    _conv_like(L, "DEPTHWISE_CONV2D", _weights(L, 1, (kh, kw, c, oc // c)), oc)


def transpose_conv(L: Lowering):
    """Inputs: output shape, weights [OC, KH, KW, IC], input, optional bias."""
    w_t, x, o = L.t(1), L.t(2), L.o()
    L.need_int8(x, w_t, o)
    opt = L.op.options
    oc = w_t.shape[0]
    b = L.b
    acc = b.op("TRANSPOSE_CONV2D", [L.value(2), _weights(L, 1, w_t.shape), _bias(L, 3, oc),
                                    b.scalar(x.zero_point, "int8"), b.scalar(w_t.zero_point, "int8")],
               (o.shape[0], *o.shape[1:3], oc), "int32",
               {**transpose_window(L), "acc_type": "int32"})
    requantize(L, acc, _filter_reals(L, x, w_t, o, oc), o, opt.get("fused_activation_function", 0),
               L.out())


def fully_connected(L: Lowering):
    x, w_t, o = L.t(0), L.t(1), L.o()
    L.need_int8(x, w_t, o)
    n, k = w_t.shape
    rows = int(np.prod(x.shape)) // k
    b = L.b
    xin = b.reshape(L.value(0), (1, rows, 1, k))
    acc = b.op("CONV2D", [xin, _weights(L, 1, (n, 1, 1, k)), _bias(L, 2, n),
                          b.scalar(x.zero_point, "int8"), b.scalar(w_t.zero_point, "int8")],
               (1, rows, 1, n), "int32",
               {"pad": (0, 0, 0, 0), "stride": (1, 1), "dilation": (1, 1), "local_bound": False,
                "acc_type": "int32"})
    round_once = single_round if L.fc_single_round else requantize
    y = round_once(L, acc, _filter_reals(L, x, w_t, o, n), o,
                   L.op.options.get("fused_activation_function", 0))
    b.reshape(y, o.shape, L.out())


def batch_operands(L: Lowering):
    """BATCH_MATMUL's operands as rank-3 [batch, rows, cols] tensors: adj_x/adj_y TRANSPOSEd,
    the batch dimensions broadcast by TILE. Returns ((lhs, shape), (rhs, shape), batch)."""
    opt, b = L.op.options, L.b
    operands = []
    for k, adj in ((0, opt.get("adj_x", False)), (1, opt.get("adj_y", False))):
        name, shape = L.value(k), L.t(k).shape
        if adj:
            perm = tuple(range(len(shape) - 2)) + (len(shape) - 1, len(shape) - 2)
            shape = tuple(shape[p] for p in perm)
            name = b.op("TRANSPOSE", [name], shape, b.dtype_of(name), {"perms": perm})
        operands.append((name, shape))
    batch = tuple(np.broadcast_shapes(operands[0][1][:-2], operands[1][1][:-2]))
    nb = int(np.prod(batch, dtype=np.int64))
    flat = []
    for name, shape in operands:
        lead = (1,) * (len(batch) - len(shape) + 2) + tuple(shape[:-2])
        if lead != batch:
            name = b.reshape(name, lead + shape[-2:])
            mult = tuple(bb // aa for aa, bb in zip(lead, batch)) + (1, 1)
            name = b.op("TILE", [name, b.shape(mult)], batch + shape[-2:], b.dtype_of(name))
        flat.append((b.reshape(name, (nb,) + tuple(shape[-2:])), shape))
    return flat[0], flat[1], batch


def batch_matmul(L: Lowering):
    lhs, rhs, o = L.t(0), L.t(1), L.o()
    L.need_int8(lhs, rhs, o)
    b = L.b
    (a, sa), (c, sc), batch = batch_operands(L)
    nb = int(np.prod(batch, dtype=np.int64))
    acc = b.op("MATMUL", [a, c, b.scalar(lhs.zero_point, "int8"),
                          b.scalar(rhs.zero_point, "int8")], (nb, sa[-2], sc[-1]), "int32", {})
    y = requantize(L, acc, [float(lhs.scale) * float(rhs.scale) / float(o.scale)], o, 0, None)
    b.reshape(y, o.shape, L.out())
