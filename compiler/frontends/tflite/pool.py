"""MAX_POOL_2D and AVERAGE_POOL_2D.

TFLite's int8 average rounds halves away from zero; TOSA's AVG_POOL2D rounds them up.
- Where every window holds an odd count of input elements (a 3x3 or 7x7 window inside the
  input), no average is exactly half way between two integers: one AVG_POOL2D.
- Where every window covers the same even count c (no padding in any window) and the output
  has at least as many pixels as a window has taps, the sums come from the MAC array: a
  DEPTHWISE_CONV2D with weights of 2^6, then one RESCALE by 1 / (2^6 c) with DOUBLE_ROUND,
  whose +-2^30 (by the sum's sign) sends a tie away from zero. Its (multiplier, shift) is
  checked against TFLite's rule on every sum a window can hold (`_exact_division`); the 2^6
  keeps that +-2^30 below half a step of the result.
- Else the average is taken twice: U = avg(x) is right whenever it is positive, and
  NOT(avg(NOT x)) (the average rounded halves down) everywhere else.
"""
from __future__ import annotations

import numpy as np

from .context import Lowering
from .mac import VALID, spatial_input, window_pads

SUM_WEIGHT_LOG2 = 6         # the window sums' weight: 2^6 keeps 2^30 / 2^shift below 1 / (2c)
MAX_SUMMED = 1 << 12        # windows of at most this many taps (_exact_division tries them all)


def _odd_counts(size: int, k: int, stride: int, before: int, out: int) -> bool:
    """Whether every window along one dim covers an odd count of the `size` input entries
    (padding counts for neither TOSA's divisor nor TFLite's)."""
    return all((min(o * stride - before + k, size) - max(o * stride - before, 0)) % 2
               for o in range(out))


def _inside(size: int, k: int, stride: int, before: int, out: int) -> bool:
    """Whether every window along one dim lies within the `size` input entries."""
    return before <= 0 and (out - 1) * stride - before + k <= size


def _tflite_average(sums: np.ndarray, count: int) -> np.ndarray:
    """TFLite's int8 average of window sums: halves rounded away from zero."""
    half = count // 2
    return np.where(sums > 0, (sums + half) // count, -((half - sums) // count))


def _exact_division(count: int):
    """(multiplier, shift) of a DOUBLE_ROUND RESCALE that takes every sum of `count` int8
    values, weighted 2^SUM_WEIGHT_LOG2, to TFLite's average of them; None if none does."""
    sums = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
    want = _tflite_average(sums, count)
    weighted = sums << SUM_WEIGHT_LOG2
    for shift in range(32, 63):
        multiplier = round((1 << shift) / (count << SUM_WEIGHT_LOG2))
        if not 0 < multiplier < 1 << 31:
            continue
        # TOSA's apply_scale_32 with double_round: the rounding +-2^30 follows the sign
        rnd = (1 << (shift - 1)) + np.where(weighted >= 0, 1 << 30, -(1 << 30))
        if np.array_equal((weighted * multiplier + rnd) >> shift, want):
            return multiplier, shift
    return None


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

    _, h, w, c = b.shape_of(xin)
    (kh, kw), (sh, sw), (pt, _, pl, _) = attrs["kernel"], attrs["stride"], attrs["pad"]
    if _odd_counts(h, kh, sh, pt, shape[1]) and _odd_counts(w, kw, sw, pl, shape[2]):
        _finish(L, avg(xin))
        return
    # the array streams a step's pixels past its taps: a pool of fewer output pixels than
    # taps (a global average) would leave it idle, where the vector unit only adds
    summed = kh * kw <= MAX_SUMMED and shape[1] * shape[2] >= kh * kw and _inside(
        h, kh, sh, pt, shape[1]) and _inside(w, kw, sw, pl, shape[2])
    scale = _exact_division(kh * kw) if summed else None
    if scale is not None:
        weights = b.const(np.full((kh, kw, c, 1), 1 << SUM_WEIGHT_LOG2), "int8", "weight")
        sums = b.op("DEPTHWISE_CONV2D", [xin, weights, b.const(np.zeros(c), "int32", "bias"),
                                         b.scalar(0, "int8"), b.scalar(0, "int8")],
                    shape, "int32", {"pad": attrs["pad"], "stride": attrs["stride"],
                                     "dilation": (1, 1), "local_bound": False,
                                     "acc_type": "int32"})
        _finish(L, b.rescale(sums, *scale, "int8"))
        return
    up = avg(xin)
    not_x = b.op("BITWISE_NOT", [xin], b.shape_of(xin), "int8")
    down = b.op("BITWISE_NOT", [avg(not_x)], shape, "int8")
    positive = b.op("GREATER", [b.widen(up), b.bcast(0, "int32", 4)], shape, "bool")
    y = b.op("SELECT", [positive, up, down], shape, "int8")
    _finish(L, y)
