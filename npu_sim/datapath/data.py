"""Data-movement kernels with arithmetic: RESIZE (tiled), GATHER, SCATTER."""

from __future__ import annotations

import numpy as np

from .fp import is_float, narrow


def _axis_coords(o0, no, n_d, n_n, off, size):
    """Per-output-index (i0, i1, d) along one axis, following the TOSA RESIZE pseudocode."""
    o = np.arange(o0, o0 + no, dtype=np.int64)
    v = o * n_d + off
    i = v // n_n  # idiv_floor
    d = v - i * n_n
    return np.maximum(i, 0), np.minimum(i + 1, size - 1), d


def resize(ifm_box, *, mode: str, scale, offset, border=(0, 0), in_origin=(0, 0),
           out_origin=(0, 0), out_size=None, in_size=None, out_dtype=None) -> np.ndarray:
    """RESIZE for global output rows/cols out_origin .. +out_size (integer modes).

    ifm_box holds global input rows y0.. / cols x0.. (in_origin) and must cover every
    (clamped) input index those outputs read; in_size=(IH, IW) is the full input size used
    for clamping. BILINEAR returns the unnormalised sum (scaled by yn*xn) in out_dtype
    (int32 for int8 input, int64 holding int48 for int16). `border` only affects the full
    output size, which the caller already folded into out_size.
    """
    x = np.asarray(ifm_box)
    yn, yd, xn, xd = scale
    offy, offx = offset
    y0, x0 = in_origin
    n, h, w, c = x.shape
    ih, iw = in_size if in_size is not None else (h, w)
    if out_size is None:  # whole op
        by, bx = border
        out_size = (((ih - 1) * yn - offy + by) // yd + 1 - out_origin[0],
                    ((iw - 1) * xn - offx + bx) // xd + 1 - out_origin[1])
    oh, ow = out_size
    iy0, iy1, dy = _axis_coords(out_origin[0], oh, yd, yn, offy, ih)
    ix0, ix1, dx = _axis_coords(out_origin[1], ow, xd, xn, offx, iw)
    iy0, iy1, ix0, ix1 = iy0 - y0, iy1 - y0, ix0 - x0, ix1 - x0  # box-local indices
    if mode == "NEAREST":
        iy = np.where(2 * dy >= yn, iy1, iy0)
        ix = np.where(2 * dx >= xn, ix1, ix0)
        r = x[:, iy][:, :, ix]
        return r.astype(out_dtype) if out_dtype is not None else r
    if mode != "BILINEAR":
        raise ValueError(f"unsupported resize mode {mode!r}")
    if is_float(x.dtype):
        # the float form: fractions dy/yn, dx/xn, the four weighted taps summed in fp64 in the
        # spec's order and rounded once into the output type (NEAREST above is the same test)
        v = x.astype(np.float64)
        fy = (dy / yn)[None, :, None, None]
        fx = (dx / xn)[None, None, :, None]
        acc = (v[:, iy0][:, :, ix0] * (1 - fy) * (1 - fx) + v[:, iy0][:, :, ix1] * (1 - fy) * fx
               + v[:, iy1][:, :, ix0] * fy * (1 - fx) + v[:, iy1][:, :, ix1] * fy * fx)
        return narrow(acc, out_dtype if out_dtype is not None else x.dtype)
    v = x.astype(np.int64)
    # Separable form of v00*(yn-dy)*(xn-dx) + v01*(yn-dy)*dx + v10*dy*(xn-dx) + v11*dy*dx:
    # same integer, |v|*yn*xn <= 2^15 * 2^22, exact in int64.
    rows = v[:, iy0] * (yn - dy)[None, :, None, None] + v[:, iy1] * dy[None, :, None, None]
    acc = rows[:, :, ix0] * (xn - dx)[None, None, :, None] + rows[:, :, ix1] * dx[None, None, :, None]
    if out_dtype is None:
        out_dtype = np.int32 if x.dtype == np.int8 else np.int64
    return acc.astype(out_dtype)


def gather(values, indices) -> np.ndarray:
    """GATHER: values [N,K,C], indices [N,W] -> [N,W,C]."""
    values, idx = np.asarray(values), np.asarray(indices).astype(np.intp)
    return np.take_along_axis(values, idx[:, :, None], axis=1)


def scatter(values_in, indices, input) -> np.ndarray:
    """SCATTER: copy of values_in [N,K,C] with rows indices[n,w] replaced by input[n,w]."""
    out = np.array(values_in, copy=True)
    idx = np.asarray(indices).astype(np.intp)
    n = np.arange(idx.shape[0])[:, None]
    out[n, idx] = np.asarray(input)
    return out
