"""Tiled forms: stitching tiles computed with tile-local pads/origins equals the whole op.

The whole-op kernels are checked against the reference model elsewhere; these tests need no
reference model. `slack` boxes carry extra input rows/cols past what the tile needs, which the
floor output size (convs/pools) or the explicit origins (transpose conv/resize) must ignore.
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_sim.datapath as dp
from dp_helpers import rand_int, resize_axis


def _tiles(rng, total):
    """Random partition of range(total) into (start, stop) tiles."""
    cuts = sorted(set(int(v) for v in rng.integers(1, max(total, 2), size=int(rng.integers(1, 5)))))
    edges = [0] + [c for c in cuts if 0 < c < total] + [total]
    return list(zip(edges[:-1], edges[1:]))


def _window_box(o0, o1, k, s, d, pad_lo, n, rng, slack):
    """Input box [lo, hi) and tile-local pads for outputs o0..o1-1 of a sliding window."""
    need_lo = o0 * s - pad_lo
    need_hi = (o1 - 1) * s - pad_lo + (k - 1) * d + 1
    lo, hi = max(need_lo, 0), min(need_hi, n)
    if slack and hi < n:
        hi = int(rng.integers(hi, n + 1))
    hi = max(hi, lo)
    return lo, hi, lo - need_lo, max(need_hi - hi, 0)


def _stitch_window_op(rng, x, kernel, stride, dilation, pad, full, fn, slack):
    n_out = full.shape[1:3]
    out = np.zeros_like(full)
    for y0, y1 in _tiles(rng, n_out[0]):
        ylo, yhi, pt, pb = _window_box(y0, y1, kernel[0], stride[0], dilation[0], pad[0], x.shape[1], rng, slack)
        for x0, x1 in _tiles(rng, n_out[1]):
            xlo, xhi, pl, pr = _window_box(x0, x1, kernel[1], stride[1], dilation[1], pad[2], x.shape[2], rng, slack)
            t = fn(x[:, ylo:yhi, xlo:xhi], (pt, pb, pl, pr))
            assert t.shape[1] >= y1 - y0 and t.shape[2] >= x1 - x0
            out[:, y0:y1, x0:x1] = t[:, :y1 - y0, :x1 - x0]
    np.testing.assert_array_equal(out, full)


def _geom(rng, n, max_k=5, dil=True):
    k = int(rng.integers(2, max_k + 1))
    s = int(rng.integers(1, 4))
    d = int(rng.integers(1, 3)) if dil else 1
    lo, hi = int(rng.integers(0, k)), int(rng.integers(0, k))
    return k, s, d, lo, hi


@pytest.mark.parametrize("slack", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_conv_family_tiles(seed, slack):
    rng = np.random.default_rng(2000 + seed)
    h, w, c = int(rng.integers(3, 20)), int(rng.integers(3, 20)), int(rng.integers(1, 6))
    ky, sy, dy, pt, pb = _geom(rng, h)
    kx, sx, dx, pl, pr = _geom(rng, w)
    if (h + pt + pb - (ky - 1) * dy) < 1 or (w + pl + pr - (kx - 1) * dx) < 1:
        dy = dx = 1
    pad, stride, dil = (pt, pb, pl, pr), (sy, sx), (dy, dx)
    x = rand_int(rng, np.int8, (2, h, w, c))
    izp, wzp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    wt = rand_int(rng, np.int8, (3, ky, kx, c))
    dw = rand_int(rng, np.int8, (ky, kx, c, 2))
    full = dp.conv2d_acc(x, wt, pad, stride, dil, izp, wzp)
    _stitch_window_op(rng, x, (ky, kx), stride, dil, pad, full,
                      lambda t, p: dp.conv2d_acc(t, wt, p, stride, dil, izp, wzp), slack)
    full = dp.depthwise_conv2d_acc(x, dw, pad, stride, dil, izp, wzp)
    _stitch_window_op(rng, x, (ky, kx), stride, dil, pad, full,
                      lambda t, p: dp.depthwise_conv2d_acc(t, dw, p, stride, dil, izp, wzp), slack)
    full = dp.avg_pool2d(x, (ky, kx), stride, pad, izp, 3, np.int8)
    _stitch_window_op(rng, x, (ky, kx), stride, (1, 1), pad, full,
                      lambda t, p: dp.avg_pool2d(t, (ky, kx), stride, p, izp, 3, np.int8), slack)
    full = dp.max_pool2d(x, (ky, kx), stride, pad)
    _stitch_window_op(rng, x, (ky, kx), stride, (1, 1), pad, full,
                      lambda t, p: dp.max_pool2d(t, (ky, kx), stride, p), slack)


def _tconv_box(o0, o1, k, s, pad_lo, n, rng, slack):
    lo = max(-((pad_lo + k - 1 - o0) // s), 0)  # ceil((o0 - pad_lo - (k-1)) / s)
    hi = min((o1 - 1 - pad_lo) // s + 1, n)
    if slack:
        lo, hi = int(rng.integers(0, lo + 1)), int(rng.integers(hi, n + 1)) if hi < n else hi
    return lo, max(hi, lo)


@pytest.mark.parametrize("slack", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_transpose_conv2d_tiles(seed, slack):
    rng = np.random.default_rng(2100 + seed)
    h, w, ic, oc = (int(v) for v in rng.integers(1, 9, size=4))
    kh, kw = (int(v) for v in rng.integers(1, 6, size=2))
    sy, sx = (int(v) for v in rng.integers(1, 4, size=2))
    opt, opb = (int(v) for v in rng.integers(-kh + 1, 3, size=2))
    opl, opr = (int(v) for v in rng.integers(-kw + 1, 3, size=2))
    oh = max((h - 1) * sy + opt + opb + kh, 1)
    ow = max((w - 1) * sx + opl + opr + kw, 1)
    x = rand_int(rng, np.int8, (1, h, w, ic))
    wt = rand_int(rng, np.int8, (oc, kh, kw, ic))
    izp, wzp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    full = dp.transpose_conv2d_acc(x, wt, (sy, sx), opt, opl, (0, 0), (0, 0), (oh, ow), izp, wzp)
    out = np.zeros_like(full)
    for y0, y1 in _tiles(rng, oh):
        ylo, yhi = _tconv_box(y0, y1, kh, sy, opt, h, rng, slack)
        for x0, x1 in _tiles(rng, ow):
            xlo, xhi = _tconv_box(x0, x1, kw, sx, opl, w, rng, slack)
            out[:, y0:y1, x0:x1] = dp.transpose_conv2d_acc(
                x[:, ylo:yhi, xlo:xhi], wt, (sy, sx), opt, opl, (ylo, xlo), (y0, x0),
                (y1 - y0, x1 - x0), izp, wzp)
    np.testing.assert_array_equal(out, full)


@pytest.mark.parametrize("slack", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_resize_tiles(seed, slack):
    rng = np.random.default_rng(2200 + seed)
    h, w = (int(v) for v in rng.integers(1, 12, size=2))
    yn, yd, oy, by, oh = resize_axis(rng, h)
    xn, xd, ox, bx, ow = resize_axis(rng, w)
    x = rand_int(rng, np.int16 if seed % 2 else np.int8, (1, h, w, 3))
    for mode in ("NEAREST", "BILINEAR"):
        kw = dict(mode=mode, scale=(yn, yd, xn, xd), offset=(oy, ox), border=(by, bx), in_size=(h, w))
        full = dp.resize(x, in_origin=(0, 0), out_origin=(0, 0), out_size=(oh, ow), **kw)
        out = np.zeros_like(full)

        def box(o0, o1, sn, sd, off, n):
            v = np.arange(o0, o1) * sd + off
            i = v // sn
            lo, hi = max(int(i.min()), 0), min(int(i.max()) + 2, n)
            if slack:
                lo, hi = int(rng.integers(0, lo + 1)), int(rng.integers(hi, n + 1))
            return lo, hi

        for y0, y1 in _tiles(rng, oh):
            ylo, yhi = box(y0, y1, yn, yd, oy, h)
            for x0, x1 in _tiles(rng, ow):
                xlo, xhi = box(x0, x1, xn, xd, ox, w)
                out[:, y0:y1, x0:x1] = dp.resize(x[:, ylo:yhi, xlo:xhi], in_origin=(ylo, xlo),
                                                 out_origin=(y0, x0), out_size=(y1 - y0, x1 - x0), **kw)
        np.testing.assert_array_equal(out, full)
