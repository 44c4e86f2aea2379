"""Pooling and reductions: AVG_POOL2D, MAX_POOL2D, REDUCE_*, ARGMAX.

Window sums/maxima are separable (rows then columns), so the cost is KY + KX vector ops per
tile rather than KY * KX; global pools with large kernels stay cheap.
"""

from __future__ import annotations

import numpy as np

from .fp import is_float, narrow
from .scale import apply_scale_32, reciprocal_scale, signed_range, type_bits


def _out_size(n, lo, hi, k, s):
    return max((n + lo + hi - k) // s + 1, 0)


def _window_reduce(x, axis, k, s, o, fn):
    """fn-combine k strided slices along `axis`: out[i] = fn(x[i*s + j] for j < k)."""
    def sl(j):
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(j, j + (o - 1) * s + 1, s)
        return x[tuple(idx)]
    acc = sl(0).copy()
    for j in range(1, k):
        fn(acc, sl(j), out=acc)
    return acc


def _pool(x, kernel, stride, pad, fill, fn):
    ky, kx = kernel
    sy, sx = stride
    t, b, l, r = pad
    n, h, w, c = x.shape
    oh, ow = _out_size(h, t, b, ky, sy), _out_size(w, l, r, kx, sx)
    if oh == 0 or ow == 0:
        return np.empty((n, oh, ow, c), dtype=x.dtype)
    # Negative pads (tile interiors that start past the tensor edge) crop instead.
    x = x[:, max(-t, 0):h - max(-b, 0), max(-l, 0):w - max(-r, 0)]
    edges = [(0, 0), (max(t, 0), max(b, 0)), (max(l, 0), max(r, 0)), (0, 0)]
    # unpadded (a global pool): the windows read x itself, no padded copy
    xp = np.pad(x, edges, constant_values=fill) if any(map(any, edges)) else x
    return _window_reduce(_window_reduce(xp, 1, ky, sy, oh, fn), 2, kx, sx, ow, fn)


def avg_pool2d(ifm, kernel, stride, pad=(0, 0, 0, 0), input_zp=0, output_zp=0,
               out_dtype=None) -> np.ndarray:
    """AVG_POOL2D with tile-local pad (t,b,l,r); padding is excluded from sum and count."""
    x = np.asarray(ifm)
    out_dtype = np.dtype(out_dtype if out_dtype is not None else x.dtype)
    if is_float(x.dtype):
        # fp64 window sums (every partial sum rounded to nearest, never truncated) over the
        # valid positions, divided by their count and rounded once into the output type
        acc = _pool(x.astype(np.float64), kernel, stride, pad, 0.0, np.add)
        count = _pool(np.ones((1, x.shape[1], x.shape[2], 1)), kernel, stride, pad, 0.0, np.add)
        with np.errstate(all="ignore"):
            return narrow(acc / np.maximum(count, 1), out_dtype)
    xc = x.astype(np.int64)
    if input_zp:
        xc -= int(input_zp)
    ones = np.ones((1, x.shape[1], x.shape[2], 1), dtype=np.int64)
    acc = _pool(xc, kernel, stride, pad, 0, np.add)
    count = _pool(ones, kernel, stride, pad, 0, np.add)  # valid positions per window
    mul, shift = reciprocal_scale(np.maximum(count, 1))
    r = apply_scale_32(acc, mul, shift, False) + int(output_zp)
    return np.clip(r, *signed_range(type_bits(out_dtype))).astype(out_dtype)


def max_pool2d(ifm, kernel, stride, pad=(0, 0, 0, 0), nan_mode: str = "PROPAGATE") -> np.ndarray:
    """MAX_POOL2D with tile-local pad (t,b,l,r); padding never wins (filled with the type's
    minimum; floats: -inf, or NaN under nan_mode IGNORE, which np.fmax then skips)."""
    x = np.asarray(ifm)
    if is_float(x.dtype):
        fill, fn = (np.nan, np.fmax) if nan_mode == "IGNORE" else (-np.inf, np.maximum)
        return narrow(_pool(x.astype(np.float64), kernel, stride, pad, fill, fn), x.dtype)
    return _pool(x, kernel, stride, pad, np.iinfo(x.dtype).min, np.maximum)


_FP_REDUCE = {"REDUCE_SUM": np.sum, "REDUCE_PRODUCT": np.prod, "REDUCE_MAX": np.max,
              "REDUCE_MIN": np.min}
_FP_IGNORE = {"REDUCE_MAX": np.fmax.reduce, "REDUCE_MIN": np.fmin.reduce}
_FP_COMBINE = {"REDUCE_SUM": np.add, "REDUCE_PRODUCT": np.multiply, "REDUCE_MAX": np.maximum,
               "REDUCE_MIN": np.minimum}
_FP_COMBINE_IGNORE = {"REDUCE_MAX": np.fmax, "REDUCE_MIN": np.fmin}


def fp_combine(op: str, acc, part, nan_mode: str = "PROPAGATE") -> np.ndarray:
    """A split float reduction's carried partial `acc` combined with this tile's fp64 `part`."""
    table = _FP_COMBINE_IGNORE if nan_mode == "IGNORE" else {}
    with np.errstate(all="ignore"):
        return table.get(op, _FP_COMBINE[op])(np.asarray(acc).astype(np.float64), part)


def fp_reduce(op: str, x, axis: int, nan_mode: str = "PROPAGATE") -> np.ndarray:
    """A float reduction along `axis` (kept, size 1), in fp64: numpy's pairwise sums and
    products round to nearest at every step, so no bias builds up; the caller rounds once."""
    x = np.asarray(x).astype(np.float64)
    fn = _FP_IGNORE.get(op) if nan_mode == "IGNORE" else None
    with np.errstate(all="ignore"):
        if fn is not None:
            return np.expand_dims(fn(x, axis=axis), axis)
        return _FP_REDUCE[op](x, axis=axis, keepdims=True)


def reduce(op: str, x, axis: int, nan_mode: str = "PROPAGATE") -> np.ndarray:
    """REDUCE_SUM/PRODUCT/MAX/MIN/ALL/ANY along `axis`, keeping the reduced axis (size 1)."""
    x = np.asarray(x)
    if is_float(x.dtype):
        return narrow(fp_reduce(op, x, axis, nan_mode), x.dtype)
    if op == "REDUCE_SUM":
        # exact int64 sum, truncated to the type (overflow is unpredictable in TOSA)
        return x.astype(np.int64).sum(axis=axis, keepdims=True).astype(x.dtype)
    if op == "REDUCE_MAX":
        return x.max(axis=axis, keepdims=True)
    if op == "REDUCE_MIN":
        return x.min(axis=axis, keepdims=True)
    if op == "REDUCE_ALL":
        return np.all(x, axis=axis, keepdims=True)
    if op == "REDUCE_ANY":
        return np.any(x, axis=axis, keepdims=True)
    raise ValueError(f"unsupported reduction {op!r}")


def argmax(x, axis: int, nan_mode: str = "PROPAGATE") -> np.ndarray:
    """ARGMAX: first index of the maximum along `axis` (axis removed), int32. Floats: under
    PROPAGATE the first NaN wins (numpy's argmax), under IGNORE NaNs are skipped (index 0 when
    all are NaN), as the spec's loop over apply_max_s gives."""
    x = np.asarray(x)
    if is_float(x.dtype) and nan_mode == "IGNORE":
        v = x.astype(np.float64)
        nan = np.isnan(v)
        r = np.argmax(np.where(nan, -np.inf, v), axis=axis)
        # a row of -inf and NaN: the first -inf (or 0 if none) is the spec's answer
        first_real = np.argmax(~nan, axis=axis)
        top = np.take_along_axis(np.where(nan, -np.inf, v), np.expand_dims(r, axis), axis)
        r = np.where(np.squeeze(top, axis) == -np.inf, np.where(np.any(~nan, axis=axis),
                                                               first_real, 0), r)
        return r.astype(np.int32)
    return np.argmax(x.astype(np.float64) if is_float(x.dtype) else x, axis=axis).astype(np.int32)
