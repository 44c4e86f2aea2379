"""Float64 NHWC reference ops for the calibration pass (batch axis = calibration samples).

Padding is given explicitly as (top, bottom, left, right); a negative bottom/right
means trailing rows/columns that the window never reaches (they are cropped),
matching how the TOSA lowering slices them away.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def _pad(x, pad, value=0.0):
    t, b, l, r = pad
    x = x[:, : x.shape[1] + min(b, 0), : x.shape[2] + min(r, 0)]
    return np.pad(x, ((0, 0), (t, max(b, 0)), (l, max(r, 0)), (0, 0)), constant_values=value)


def _windows(x, kh, kw, stride):
    """[N, OH, OW, C, KH, KW] view of sliding windows."""
    v = sliding_window_view(x, (kh, kw), axis=(1, 2))
    return v[:, :: stride[0], :: stride[1]]


def conv2d(x, w, stride, pad):
    """x [N,H,W,C], w OHWI [O,KH,KW,C] -> [N,OH,OW,O]."""
    o, kh, kw, c = w.shape
    xp = _pad(x, pad)
    if kh == kw == 1:
        xs = xp[:, :: stride[0], :: stride[1]]
        return xs @ w.reshape(o, c).T
    win = _windows(xp, kh, kw, stride)  # N,OH,OW,C,KH,KW
    n, oh, ow = win.shape[:3]
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n, oh, ow, kh * kw * c)
    return cols @ w.reshape(o, kh * kw * c).T


def depthwise_conv2d(x, w, stride, pad):
    """x [N,H,W,C], w HWCM [KH,KW,C,1] -> [N,OH,OW,C]."""
    kh, kw, c, _ = w.shape
    xp = _pad(x, pad)
    oh = (xp.shape[1] - kh) // stride[0] + 1
    ow = (xp.shape[2] - kw) // stride[1] + 1
    out = np.zeros((x.shape[0], oh, ow, c))
    for i in range(kh):
        for j in range(kw):
            out += xp[:, i : i + stride[0] * (oh - 1) + 1 : stride[0],
                      j : j + stride[1] * (ow - 1) + 1 : stride[1]] * w[i, j, :, 0]
    return out


def max_pool(x, k, stride, pad):
    win = _windows(_pad(x, pad, -np.inf), k[0], k[1], stride)
    return win.max(axis=(4, 5))


def conv_pads(size, k, s, mode="torch"):
    """(before, after) padding for one spatial axis.

    torch: symmetric k//2 with PyTorch's floor output size; the after-pad is
    trimmed (possibly negative = input rows cropped) so TOSA's exact-division
    rule holds. same: TensorFlow SAME (output ceil(size/s), extra pad after)."""
    if mode == "same":
        out = -(-size // s)
        total = max((out - 1) * s + k - size, 0)
        return total // 2, total - total // 2
    p = k // 2
    out = (size + 2 * p - k) // s + 1
    return p, (out - 1) * s + k - size - p
