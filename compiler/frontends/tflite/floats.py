"""float32 and float16 builtins, and the QUANTIZE / DEQUANTIZE that put float edges on an int8
network, lowered to TOSA's fp32 or fp16 operators (the builtin's own float type) as TFLite's
reference kernels compute them:

- the MAC builtins are TOSA's float MAC operators (fp32 accumulation, zero points 0.0; a float16
  BATCH_MATMUL is an fp32-accumulating MATMUL cast to fp16, since a TOSA MATMUL accumulates in
  its output type), the fused activation a CLAMP to CalculateActivationRange's float bounds
  (RELU: [0, FLT_MAX]);
- SOFTMAX is exp(beta (x - max)) times the RECIPROCAL of its row sum, LOG_SOFTMAX
  x - max - log(sum), MEAN a REDUCE_SUM times 1/n (TFLite divides; TOSA has no float
  division, so these round once more, within a few ulp);
- DEQUANTIZE is (q - zp) * scale in fp32: one rounding of the exact product, as TFLite's
  double product cast to float, so it is exact; to float16 that fp32 value CAST (NNAPI's
  kernel computes in fp32 and converts); float16 -> float32 (TFLite's float16-quantized
  weights) is an exact CAST;
- QUANTIZE float -> int8 is round(x / scale) + zp, saturated, with TFLite's rounding of halves
  away from zero built from FLOOR of |x / scale|; the division is a MUL by the fp32 reciprocal
  of the scale, whose product can differ from TFLite's quotient in its last bit, which moves
  the integer only where the quotient lies within an ulp of a half (about 2 in 10^6 values
  of a standard normal input; none in the test models' inputs); a float16 input is first CAST
  to fp32, exactly.
"""
from __future__ import annotations

import numpy as np

from . import unary
from .context import FLOATS, Lowering
from .elementwise import operand_at_rank
from .reduce import const_axes, sum_over_axes
from .mac import VALID, batch_operands, conv_window, spatial_input, transpose_window, window_pads

F32 = np.float32


def konst(L: Lowering, value: float, rank: int) -> str:
    return L.b.bcast(value, L.ftype, rank)


def _activate(L: Lowering, y: str, fused: int, out: str | None) -> str:
    """The fused activation as a CLAMP (or a rename into `out`)."""
    b, bounds = L.b, L.act_range(fused, L.o())
    if not fused:
        return b.reshape(y, b.shape_of(y), out) if out else y
    return b.clamp(y, *bounds, out)


def finish(L: Lowering, y: str):
    """Fused activation of the builtin's options, then the TFLite output's shape and name."""
    o = L.o()
    fused = L.op.options.get("fused_activation_function", 0)
    if tuple(L.b.shape_of(y)) != tuple(o.shape):
        y = _activate(L, y, fused, None)
        L.b.reshape(y, o.shape, L.out())
    else:
        _activate(L, y, fused, L.out())


def zero(L: Lowering) -> str:
    return L.b.scalar(0.0, L.ftype)


def _weights(L: Lowering, k: int, shape) -> str:
    """Input k in TOSA's weight layout `shape` (a reshape of TFLite's): its constant, or the
    tensor computed at run time."""
    t, want = L.t(k), {v: k for k, v in FLOATS.items()}[L.ftype]
    if t.dtype != want:
        L.fail(f"weights '{t.name}' are {t.dtype}; a {want.lower()} builtin needs "
               f"{want.lower()} weights")
    if t.data is None:
        return L.b.reshape(L.value(k), shape)
    return L.b.const(t.data.reshape(shape), L.ftype, "weight")


def _bias(L: Lowering, k: int, n: int) -> str:
    """The bias: its constant, the tensor computed at run time, or zeros."""
    if not L.has_input(k):
        return L.b.const(np.zeros(n), L.ftype, "bias")
    if L.t(k).data is None:
        return L.b.reshape(L.value(k), (n,))
    return L.b.const(L.t(k).data.reshape(-1), L.ftype, "bias")


# MAC builtins -------------------------------------------------------------------------------

def _mac(L: Lowering, op: str, inputs: list[str], shape, attrs: dict):
    """op(inputs..., zero points) accumulating in fp32, then the fused activation."""
    y = L.b.op(op, [*inputs, zero(L), zero(L)], shape, L.ftype, {**attrs, "acc_type": "fp32"})
    finish(L, y)


def _conv_like(L: Lowering, op: str, weights: str, oc: int):
    o = L.o()
    xin, attrs = conv_window(L)
    _mac(L, op, [xin, weights, _bias(L, 2, oc)], (o.shape[0], *o.shape[1:3], oc), attrs)


def conv_2d(L: Lowering):
    shape = L.t(1).shape
    _conv_like(L, "CONV2D", _weights(L, 1, shape), shape[0])


def depthwise_conv_2d(L: Lowering):
    """TFLite's [1, kh, kw, c * multiplier] filter is TOSA's [kh, kw, c, multiplier]."""
    _, kh, kw, n = L.t(1).shape
    c = L.t(0).shape[3]
    _conv_like(L, "DEPTHWISE_CONV2D", _weights(L, 1, (kh, kw, c, n // c)), n)


def transpose_conv(L: Lowering):
    o, shape = L.o(), L.t(1).shape
    oc = shape[0]
    _mac(L, "TRANSPOSE_CONV2D", [L.value(2), _weights(L, 1, shape), _bias(L, 3, oc)],
         (o.shape[0], *o.shape[1:3], oc), transpose_window(L))


def fully_connected(L: Lowering):
    n, k = L.t(1).shape
    rows = int(np.prod(L.t(0).shape)) // k
    _mac(L, "CONV2D", [L.b.reshape(L.value(0), (1, rows, 1, k)), _weights(L, 1, (n, 1, 1, k)),
                       _bias(L, 2, n)], (1, rows, 1, n),
         {"pad": (0, 0, 0, 0), "stride": (1, 1), "dilation": (1, 1), "local_bound": False})


def batch_matmul(L: Lowering):
    b, o = L.b, L.o()
    (a, sa), (c, sc), batch = batch_operands(L)
    shape = (int(np.prod(batch, dtype=np.int64)), sa[-2], sc[-1])
    y = b.op("MATMUL", [a, c, zero(L), zero(L)], shape, "fp32", {})
    if L.ftype != "fp32":
        y = b.op("CAST", [y], shape, L.ftype, {})
    b.reshape(y, o.shape, L.out())


def pool(L: Lowering, op: str, src: str | None = None, then=None):
    """The pooling builtin on `src` (input 0 by default), `then` applied to its result before
    the fused activation."""
    x, o, opt = L.t(0), L.o(), L.op.options
    kh, kw = opt.get("filter_height", 1), opt.get("filter_width", 1)
    sh, sw = opt.get("stride_h", 1), opt.get("stride_w", 1)
    pad = opt.get("padding", VALID)
    pt, pb, ch = window_pads(pad, x.shape[1], kh, sh, 1, o.shape[1])
    pl, pr, cw = window_pads(pad, x.shape[2], kw, sw, 1, o.shape[2])
    attrs = {"kernel": (kh, kw), "stride": (sh, sw), "pad": (pt, pb, pl, pr)}
    xin = spatial_input(L, L.value(0) if src is None else src, (ch, cw))
    if op == "AVG_POOL2D":     # TOSA, like TFLite, divides by the window's unpadded count
        y = L.b.op(op, [xin, zero(L), zero(L)], o.shape, L.ftype, {**attrs, "acc_type": "fp32"})
    else:
        y = L.b.op(op, [xin], o.shape, L.ftype, {**attrs, "nan_mode": "PROPAGATE"})
    finish(L, then(y) if then else y)


def average_pool_2d(L):
    pool(L, "AVG_POOL2D")


def max_pool_2d(L):
    pool(L, "MAX_POOL2D")


# elementwise and unary builtins ------------------------------------------------------------

def _binary(L: Lowering, op: str) -> str:
    rank = len(L.o().shape)
    return L.b.binary(op, operand_at_rank(L, 0, rank), operand_at_rank(L, 1, rank), L.ftype)


def add(L):
    finish(L, _binary(L, "ADD"))


def sub(L):
    finish(L, _binary(L, "SUB"))


def mul(L):
    rank = len(L.o().shape)
    finish(L, fmul(L, operand_at_rank(L, 0, rank), operand_at_rank(L, 1, rank)))


def fmul(L: Lowering, a: str, c: str) -> str:
    return L.b.op("MUL", [a, c, L.b.scalar(0, "int8")],
                  np.broadcast_shapes(L.b.shape_of(a), L.b.shape_of(c)), L.ftype, {})


def squared_difference(L):
    d = _binary(L, "SUB")
    finish(L, fmul(L, d, d))


def maximum(L):
    finish(L, _binary(L, "MAXIMUM"))


def minimum(L):
    finish(L, _binary(L, "MINIMUM"))


def _unary(L: Lowering, op: str):
    L.b.op(op, [L.value(0)], L.o().shape, L.ftype, {}, L.out())


def logistic(L):
    _unary(L, "SIGMOID")


def tanh(L):
    _unary(L, "TANH")


def _clamped(lo: float, hi: float | None):
    """CLAMP to [lo, hi]; hi None: RELU's top, the fused activation's for the output type."""
    def lower(L: Lowering):
        L.b.clamp(L.value(0), lo, L.act_range(1, L.o())[1] if hi is None else hi, L.out())
    return lower


def hard_swish(L: Lowering):
    """x * min(6, max(0, x + 3)) / 6 (the division a MUL by 1/6)."""
    x, rank = L.value(0), len(L.o().shape)
    relu6 = L.b.clamp(L.b.binary("ADD", x, konst(L, 3.0, rank)), 0.0, 6.0)
    y = fmul(L, fmul(L, x, relu6), konst(L, float(F32(1) / F32(6)), rank))
    L.b.reshape(y, L.o().shape, L.out())


def _select_negative(L: Lowering, x: str, scaled: str, op: str):
    """x where x (op) 0 holds, `scaled` elsewhere."""
    b = L.b
    keep = b.op(op, [x, konst(L, 0.0, len(b.shape_of(x)))], b.shape_of(x), "bool")
    b.op("SELECT", [keep, x, scaled], L.o().shape, L.ftype, {}, L.out())


def leaky_relu(L: Lowering):
    x = L.value(0)
    alpha = float(L.op.options.get("alpha", 0.2))
    _select_negative(L, x, fmul(L, x, konst(L, alpha, len(L.o().shape))), "GREATER")


def prelu(L: Lowering):
    x, rank = L.value(0), len(L.o().shape)
    _select_negative(L, x, fmul(L, x, operand_at_rank(L, 1, rank)), "GREATER_EQUAL")


# softmax and reductions -----------------------------------------------------------------------

def _shifted(L: Lowering) -> tuple[str, int]:
    """beta * (x - max over the last axis), and that axis."""
    b, x = L.b, L.value(0)
    shape = b.shape_of(x)
    axis = len(shape) - 1
    mx = b.op("REDUCE_MAX", [x], shape[:-1] + (1,), L.ftype,
              {"axis": axis, "nan_mode": "PROPAGATE"})
    z = b.binary("SUB", x, mx)
    beta = float(L.op.options.get("beta", 1.0))
    return (z if beta == 1.0 else fmul(L, z, konst(L, beta, len(shape)))), axis


def _exp_sum(L: Lowering):
    """exp(x - max) and its sum over the last axis: (x - max, the exponentials, their sum)."""
    b = L.b
    z, axis = _shifted(L)
    e = b.op("EXP", [z], b.shape_of(z), L.ftype, {})
    return z, e, b.op("REDUCE_SUM", [e], b.shape_of(e)[:-1] + (1,), L.ftype, {"axis": axis})


def softmax(L: Lowering):
    _, e, total = _exp_sum(L)
    recip = L.b.op("RECIPROCAL", [total], L.b.shape_of(total), L.ftype, {})
    L.b.reshape(fmul(L, e, recip), L.o().shape, L.out())


def log_softmax(L: Lowering):
    z, _, total = _exp_sum(L)
    log = L.b.op("LOG", [total], L.b.shape_of(total), L.ftype, {})
    L.b.binary("SUB", z, log, L.ftype, out=L.out())


def mean(L: Lowering):
    total, n = sum_over_axes(L, L.value(0), L.ftype)
    y = fmul(L, total, konst(L, float(F32(1) / F32(n)), len(L.b.shape_of(total))))
    L.b.reshape(y, L.o().shape, L.out())


def sum_(L: Lowering):
    total, _ = sum_over_axes(L, L.value(0), L.ftype)
    L.b.reshape(total, L.o().shape, L.out())


def arg_max(L: Lowering):
    x, o = L.t(0), L.o()
    if o.dtype != "INT32":
        L.fail(f"output type {o.dtype}; only int32 indices are supported")
    L.b.op("ARGMAX", [L.value(0)], o.shape, "int32",
           {"axis": const_axes(L, 1, len(x.shape))[0], "nan_mode": "PROPAGATE"}, L.out())


def arg_min(L: Lowering):
    """The first maximum of -x."""
    x, o = L.t(0), L.o()
    if o.dtype != "INT32":
        L.fail(f"output type {o.dtype}; only int32 indices are supported")
    neg = L.b.op("NEGATE", [L.value(0), zero(L), zero(L)], x.shape, L.ftype, {})
    L.b.op("ARGMAX", [neg], o.shape, "int32",
           {"axis": const_axes(L, 1, len(x.shape))[0], "nan_mode": "PROPAGATE"}, L.out())


def resize_bilinear(L: Lowering):
    """TOSA RESIZE at TFLite's exact positions: half-pixel centres are (out + 1/2) in/out - 1/2,
    i.e. scale 2 out / 2 in with offset in - out; align_corners (in - 1)/(out - 1)."""
    x, o = L.t(0), L.o()
    align = L.op.options.get("align_corners", False)
    half = L.op.options.get("half_pixel_centers", False)
    scale, offset, border = [], [], []
    for i, out in ((x.shape[1], o.shape[1]), (x.shape[2], o.shape[2])):
        if align and out > 1:
            n, d, off = out - 1, max(i - 1, 1), 0
        elif half:
            n, d, off = 2 * out, 2 * i, i - out
        else:
            n, d, off = out, i, 0
        scale += [n, d]
        offset.append(off)
        border.append((out - 1) * d + off - (i - 1) * n)
    b = L.b
    b.op("RESIZE", [L.value(0), b.shape(scale), b.shape(offset), b.shape(border)], o.shape,
         L.ftype, {"mode": "BILINEAR"}, L.out())


# the float edges of an int8 network ---------------------------------------------------------

def quantize(L: Lowering):
    """float -> int8: clamp(round_half_away(x * (1/scale)) + zp), in fp32; int8 -> int8 requantizes."""
    x, o = L.t(0), L.o()
    if x.dtype not in FLOATS:
        return unary.quantize(L)
    if o.dtype != "INT8" or len(o.scales) != 1:
        L.fail(f"output '{o.name}' is {o.dtype} with {len(o.scales)} scales; per-tensor int8 "
               "is supported")
    b, rank = L.b, len(x.shape)
    k = lambda v: b.bcast(v, "fp32", rank)           # noqa: E731
    src = L.value(0)
    if x.dtype != "FLOAT32":                          # float16 widens exactly
        src = b.op("CAST", [src], x.shape, "fp32", {})
    y = b.op("MUL", [src, k(float(F32(1) / F32(o.scale))), b.scalar(0, "int8")], x.shape, "fp32")
    mag = b.op("ABS", [y], x.shape, "fp32", {})
    whole = b.op("FLOOR", [mag], x.shape, "fp32", {})
    up = b.op("GREATER_EQUAL", [b.binary("SUB", mag, whole), k(0.5)], x.shape, "bool")
    rounded = b.op("SELECT", [up, b.binary("ADD", whole, k(1.0)), whole], x.shape, "fp32")
    negative = b.op("GREATER", [k(0.0), y], x.shape, "bool")
    zero_fp32 = b.scalar(0.0, "fp32")
    negated = b.op("NEGATE", [rounded, zero_fp32, zero_fp32], x.shape, "fp32", {})
    signed = b.op("SELECT", [negative, negated, rounded], x.shape, "fp32")
    q = b.clamp(b.binary("ADD", signed, k(float(o.zero_point))), -128.0, 127.0)
    b.op("CAST", [q], o.shape, "int8", {}, L.out())


def dequantize(L: Lowering):
    """int8/int16 -> float: (q - zp) * scale, exact in fp32, then CAST to a float16 output;
    float16 -> float32: an exact CAST, folded at compile time when the input is a constant
    (TFLite's float16-quantized weights), so the MAC builtin reading it sees constant weights."""
    x, o = L.t(0), L.o()
    b, rank = L.b, len(x.shape)
    if x.dtype == "FLOAT16" and o.dtype == "FLOAT32":
        if x.data is None:
            b.op("CAST", [L.value(0)], o.shape, "fp32", {}, L.out())
            return
        o.data = np.asarray(x.data, np.float16).astype(F32).reshape(o.shape)
        b.const_named(L.names[o.index], o.data, "fp32")
        return
    if x.dtype not in ("INT8", "INT16") or len(x.scales) != 1:
        L.fail(f"input '{x.name}' is {x.dtype} with {len(x.scales)} scales; per-tensor int8 "
               "or int16, or float16 to float32, is supported")
    f = b.op("CAST", [L.value(0)], x.shape, "fp32", {})
    centred = b.binary("SUB", f, b.bcast(float(x.zero_point), "fp32", rank))
    y = b.op("MUL", [centred, b.bcast(float(F32(x.scale)), "fp32", rank), b.scalar(0, "int8")],
             x.shape, "fp32")
    if L.ftype != "fp32":
        y = b.op("CAST", [y], x.shape, L.ftype, {})
    b.reshape(y, o.shape, L.out())


BUILTINS = {
    "CONV_2D": conv_2d, "DEPTHWISE_CONV_2D": depthwise_conv_2d, "TRANSPOSE_CONV": transpose_conv,
    "FULLY_CONNECTED": fully_connected, "BATCH_MATMUL": batch_matmul,
    "AVERAGE_POOL_2D": average_pool_2d, "MAX_POOL_2D": max_pool_2d,
    "ADD": add, "SUB": sub, "MUL": mul, "SQUARED_DIFFERENCE": squared_difference,
    "MAXIMUM": maximum, "MINIMUM": minimum, "LOGISTIC": logistic, "TANH": tanh,
    "RELU": _clamped(0.0, None), "RELU6": _clamped(0.0, 6.0),
    "RELU_N1_TO_1": _clamped(-1.0, 1.0), "RELU_0_TO_1": _clamped(0.0, 1.0),
    "HARD_SWISH": hard_swish, "LEAKY_RELU": leaky_relu, "PRELU": prelu,
    "SOFTMAX": softmax, "LOG_SOFTMAX": log_softmax, "MEAN": mean, "SUM": sum_,
    "ARG_MAX": arg_max, "ARG_MIN": arg_min, "RESIZE_BILINEAR": resize_bilinear,
    "QUANTIZE": quantize, "DEQUANTIZE": dequantize,
}
