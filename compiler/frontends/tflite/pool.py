"""MAX_POOL_2D and AVERAGE_POOL_2D. TFLite's int8 average rounds halves away from zero while
TOSA's AVG_POOL2D rounds them up, so the average is taken twice: U = avg(x) is right whenever
it is positive, and NOT(avg(NOT x)) (the average rounded halves down) everywhere else. Where
every window holds an odd count of input elements (a 3x3 or 7x7 window inside the input), no
average is exactly half way between two integers, the roundings agree, and U alone is
TFLite's."""
from __future__ import annotations

from .context import Lowering
from .mac import VALID, spatial_input, window_pads


def _odd_counts(size: int, k: int, stride: int, before: int, out: int) -> bool:
    """Whether every window along one dim covers an odd count of the `size` input entries
    (padding counts for neither TOSA's divisor nor TFLite's)."""
    return all((min(o * stride - before + k, size) - max(o * stride - before, 0)) % 2
               for o in range(out))


def _window(L: Lowering):
    x, o, opt = L.t(0), L.o(), L.op.options
    L.need_int8(x, o)
    if x.zero_point != o.zero_point or x.scale != o.scale:
        L.fail("input and output quantization differ; TFLite requires them equal")
    kh, kw = opt.get("filter_height", 1), opt.get("filter_width", 1)
    sh, sw = opt.get("stride_h", 1), opt.get("stride_w", 1)
    pad, ex = opt.get("padding", VALID), opt.get("explicit_padding")   # (top, bottom, left, right)
    pt, pb, ch = window_pads(pad, x.shape[1], kh, sh, 1, o.shape[1], ex and ex[:2])
    pl, pr, cw = window_pads(pad, x.shape[2], kw, sw, 1, o.shape[2], ex and ex[2:])
    xin = spatial_input(L, L.value(0), (ch, cw))
    return xin, {"kernel": (kh, kw), "stride": (sh, sw), "pad": (pt, pb, pl, pr)}


def _finish(L: Lowering, y: str):
    lo, hi = L.act_range(L.op.options.get("fused_activation_function", 0), L.o())
    if lo > -128 or hi < 127:
        L.b.clamp(y, lo, hi, L.out())
    else:
        L.b.reshape(y, L.o().shape, L.out())


def max_pool_2d(L: Lowering):
    xin, attrs = _window(L)
    y = L.b.op("MAX_POOL2D", [xin], L.o().shape, "int8", {**attrs, "nan_mode": "PROPAGATE"})
    _finish(L, y)


def average_pool_2d(L: Lowering):
    xin, attrs = _window(L)
    b, shape = L.b, L.o().shape
    attrs = {**attrs, "acc_type": "int32"}

    def avg(v):
        return b.op("AVG_POOL2D", [v, b.scalar(0, "int8"), b.scalar(0, "int8")], shape, "int8", attrs)

    up = avg(xin)
    _, h, w, _ = b.shape_of(xin)
    (kh, kw), (sh, sw), (pt, _, pl, _) = attrs["kernel"], attrs["stride"], attrs["pad"]
    if _odd_counts(h, kh, sh, pt, shape[1]) and _odd_counts(w, kw, sw, pl, shape[2]):
        _finish(L, up)
        return
    not_x = b.op("BITWISE_NOT", [xin], b.shape_of(xin), "int8")
    down = b.op("BITWISE_NOT", [avg(not_x)], shape, "int8")
    positive = b.op("GREATER", [b.widen(up), b.bcast(0, "int32", 4)], shape, "bool")
    y = b.op("SELECT", [positive, up, down], shape, "int8")
    _finish(L, y)
