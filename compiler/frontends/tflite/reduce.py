"""Reductions and index builtins: MEAN, SUM, REDUCE_MAX/MIN, ARG_MAX/ARG_MIN, and the two
RESIZEs, each as TFLite's reference kernel computes it on int8."""
from __future__ import annotations

import numpy as np

from .context import Lowering, tosa_scale
from .fixedpoint import quantize_multiplier


def const_axes(L: Lowering, k: int, rank: int) -> list[int]:
    return sorted({int(a) + rank if int(a) < 0 else int(a) for a in L.const_input(k).reshape(-1)})


def sum_over_axes(L: Lowering, y: str, dtype: str) -> tuple[str, int]:
    """y summed over operand 1's axes of input 0 (one REDUCE_SUM per axis, the axes kept), and
    how many elements each sum adds."""
    x = L.t(0)
    axes = const_axes(L, 1, len(x.shape))
    for axis in axes:
        shape = list(L.b.shape_of(y))
        shape[axis] = 1
        y = L.b.op("REDUCE_SUM", [y], shape, dtype, {"axis": axis})
    return y, int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def _reduce_sum(L: Lowering):
    """sum(x - zp) over the axes, int32, the axes kept."""
    return sum_over_axes(L, L.b.widen(L.value(0), L.t(0).zero_point), "int32")


def mean(L: Lowering):
    """QuantizedMeanOrSum: 1/n folded into the multiplier of in/out scale (floor(m << k) / n,
    the shift lowered by k = min(floor(log2 n), 32, 31 + shift)), one MultiplyByQuantizedMultiplier
    of the zero-point-corrected sum, plus the output zero point."""
    x, o = L.t(0), L.o()
    L.need_int8(x, o)
    total, n = _reduce_sum(L)
    mult, shift = quantize_multiplier(float(x.scale) / float(o.scale))
    k = min(n.bit_length() - 1, 32, 31 + shift)
    mult, shift = ((mult << k) // n), shift - k
    y = L.b.rescale(total, mult, 31 - shift, "int8", output_zp=o.zero_point)
    L.b.reshape(y, o.shape, L.out())


def sum_(L: Lowering):
    """MultiplyByQuantizedMultiplier(sum(x - zp), in/out scale) + output zero point, saturated."""
    x, o = L.t(0), L.o()
    L.need_int8(x, o)
    total, _ = _reduce_sum(L)
    y = L.b.rescale(total, *tosa_scale(float(x.scale) / float(o.scale)), "int8",
                    output_zp=o.zero_point)
    L.b.reshape(y, o.shape, L.out())


def _reduce_extreme(L: Lowering, op: str):
    x, o = L.t(0), L.o()
    dtype = L.dtype(x)
    if x.dtype == "INT8" and (x.scales[:1] != o.scales[:1] or x.zero_point != o.zero_point):
        L.fail("input and output quantization differ")
    y = L.value(0)
    for axis in const_axes(L, 1, len(x.shape)):
        shape = list(L.b.shape_of(y))
        shape[axis] = 1
        y = L.b.op(op, [y], shape, dtype, {"axis": axis, "nan_mode": "PROPAGATE"})
    L.b.reshape(y, o.shape, L.out())


def reduce_max(L):
    _reduce_extreme(L, "REDUCE_MAX")


def reduce_min(L):
    _reduce_extreme(L, "REDUCE_MIN")


def _arg(L: Lowering, negate: bool):
    x, o = L.t(0), L.o()
    L.need_int8(x)
    if o.dtype != "INT32":
        L.fail(f"output type {o.dtype}; only int32 indices are supported")
    axis = const_axes(L, 1, len(x.shape))[0]
    v = L.value(0)
    if negate:                 # NOT maps the order reversed, so the first minimum is the first max
        v = L.b.op("BITWISE_NOT", [v], x.shape, "int8")
    L.b.op("ARGMAX", [v], o.shape, "int32", {"axis": axis, "nan_mode": "PROPAGATE"}, L.out())


def arg_max(L):
    _arg(L, False)


def arg_min(L):
    _arg(L, True)


def _scale_10(in_size: int, out_size: int, align: bool) -> int:
    if align and out_size > 1:
        return ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    return ((1 << 10) * in_size + out_size // 2) // out_size


def resize_bilinear(L: Lowering):
    """ResizeBilinearInteger: positions in 1/1024ths, which TOSA RESIZE takes as scale 1024/s10
    with the half-pixel offset; its int32 sum of weighted taps is TFLite's output_20, rounded
    to the nearest with halves away from zero."""
    x, o = L.t(0), L.o()
    L.need_int8(x, o)
    if x.scales[:1] != o.scales[:1] or x.zero_point != o.zero_point:
        L.fail("input and output quantization differ")
    align, half = L.op.options.get("align_corners", False), L.op.options.get("half_pixel_centers", False)
    n, ih, iw, c = x.shape
    _, oh, ow, _ = o.shape
    scale, offset, border = [], [], []
    for i, out in ((ih, oh), (iw, ow)):
        s10 = _scale_10(i, out, align)
        off = s10 // 2 - (1 << 9) if half else 0
        scale += [1024, s10]
        offset.append(off)
        border.append((out - 1) * s10 + off - (i - 1) * 1024)
    b = L.b
    acc = b.op("RESIZE", [L.value(0), b.shape(scale), b.shape(offset), b.shape(border)],
               o.shape, "int32", {"mode": "BILINEAR"})
    k = lambda c_: b.bcast(c_, "int32", 4)          # noqa: E731
    up = b.binary("ARITHMETIC_RIGHT_SHIFT", acc, k(20), attrs={"round": True})
    neg = b.binary("SUB", k(0), acc)
    down = b.binary("SUB", k(0), b.binary("ARITHMETIC_RIGHT_SHIFT", neg, k(20), attrs={"round": True}))
    y = b.op("SELECT", [b.binary("GREATER", acc, k(0), "bool"), up, down], o.shape, "int32")
    b.saturate(y, "int8", out=L.out())


def _nearest(out_size: int, in_size: int, align: bool, half: bool) -> np.ndarray:
    """GetNearestNeighbor's source index per output index (float32, as TFLite computes it)."""
    f = np.float32
    scale = f(in_size - 1) / f(out_size - 1) if align and out_size > 1 else f(in_size) / f(out_size)
    pos = (np.arange(out_size).astype(f) + f(0.5 if half else 0.0)) * scale
    idx = np.floor(pos) if not align else np.sign(pos) * np.floor(np.abs(pos) + f(0.5))
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half else idx


def resize_nearest_neighbor(L: Lowering):
    """A GATHER of rows, then of columns, at the source indices TFLite computes."""
    x, o = L.t(0), L.o()
    L.dtype(x)
    align, half = L.op.options.get("align_corners", False), L.op.options.get("half_pixel_centers", False)
    n, ih, iw, c = x.shape
    _, oh, ow, _ = o.shape
    b, dtype = L.b, L.dtype(o)
    rows = np.tile(_nearest(oh, ih, align, half), (n, 1))
    y = b.op("GATHER", [b.reshape(L.value(0), (n, ih, iw * c)), b.const(rows, "int32", "rows")],
             (n, oh, iw * c), dtype)
    cols = np.tile(_nearest(ow, iw, align, half), (n * oh, 1))
    y = b.op("GATHER", [b.reshape(y, (n * oh, iw, c)), b.const(cols, "int32", "cols")],
             (n * oh, ow, c), dtype)
    b.reshape(y, o.shape, L.out())


BUILTINS = {"MEAN": mean, "SUM": sum_, "REDUCE_MAX": reduce_max, "REDUCE_MIN": reduce_min,
            "ARG_MAX": arg_max, "ARG_MIN": arg_min, "RESIZE_BILINEAR": resize_bilinear,
            "RESIZE_NEAREST_NEIGHBOR": resize_nearest_neighbor}
