"""MAC-array kernels: CONV2D/3D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, MATMUL accumulators.

Each returns the exact sums of (x - x_zp) * (w - w_zp): int64, or the float32/float64/int32
the sums were computed in when it holds them exactly (an int64 copy of a tile costs 8 bytes an
output); wrapping/saturating to the TOSA accumulator type happens later, in output_stage, which
widens them slab by slab. Dot products run on BLAS in floating point
when provably exact: with A = max|x - x_zp| and B = max|w - w_zp| taken from the data, every
partial sum of K products is bounded by K*A*B, so float64 is exact when K*A*B < 2^53 and
float32 when K*A*B < 2^24 (8-bit: A*B <= 255^2 < 2^16, so float64 holds for any K < 2^37).
float32 is ~2x faster, so long K is split into float32-exact chunks summed in float64.
Otherwise integer (int64) matmul is used.

Floating-point operands (fp32, fp16, bf16, fp8; TOSA has no float zero points) take a float64
path: every product of two such values is exact in float64 (at most 24 + 24 significand bits),
and the K-term sums carry 29 more bits than the widest accumulator (fp32), so one rounding to
the accumulator type afterwards (float_stage) is a round-to-nearest accumulation that is more
precise than the acc_t the spec checks against, unbiased and deterministic: a command's sums
depend only on its operands and the order the tile schedule fixes (partial sums of a split
reduction are stored in the accumulator type and added by the next command).
"""

from __future__ import annotations

import math
from collections import namedtuple
from contextlib import nullcontext

import numpy as np

from .fp import is_float

_F32_EXACT = 1 << 24
_F64_EXACT = 1 << 53
_KC_MIN = 64  # measured: 64-term float32 chunks still beat one float64 GEMM by ~1.5x
_CHUNK = 1 << 22  # max elements of one im2col block (bounds temporary memory)
_DW_CHUNK = 1 << 16  # output elements per depthwise slab (bounds its per-tap products)
_SMALL_MACS = 1 << 18  # measured: below this, float64 GEMMs cost about what float32 ones do


_F64_PLAN = (np.float64, 1 << 62)   # float operands: float64 products and sums (see above)


def _ieee(floats: bool):
    """Float operands: inf and NaN (the suite's special-value tests) give their IEEE results
    (inf * 0 and inf - inf are NaN, overflow is inf) quietly. Integer operands raise no such
    flags, and skip the context's cost."""
    return np.errstate(invalid="ignore", over="ignore") if floats else nullcontext()


def _maxabs(a) -> int:
    # Two reductions, no |a| temporary; Python ints so that |int64 min| cannot wrap.
    return max(abs(int(a.min())), abs(int(a.max()))) if a.size else 0


def _centered_bound(x, zp) -> int:
    """max |x - zp| from x's extremes, without forming x - zp."""
    return max(abs(int(x.min()) - int(zp)), abs(int(x.max()) - int(zp))) if x.size else 0


_RANGES = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
           for t in (np.int8, np.uint8, np.int16, np.uint16)}


def _type_bound(x, zp) -> int | None:
    """max |x - zp| over every value of x's dtype (narrow integers), with no pass over x."""
    return _type_bound_of(x.dtype, zp)


def _type_bound_of(dtype, zp) -> int | None:
    r = _RANGES.get(dtype)
    return None if r is None else max(abs(r[0] - int(zp)), abs(r[1] - int(zp)))


def _centered_as(x, zp, dt) -> np.ndarray:
    """x - zp in the MAC dtype. Narrow integers convert straight to a float or 32-bit dtype:
    their differences are small integers, exact in float32 and int32; floats have no zero point."""
    if x.dtype in _NARROW and dt in _WIDE:
        y = x.astype(dt)
        if zp:
            y -= zp
        return y
    if is_float(x.dtype):
        return x.astype(dt)
    return _centered(x, zp).astype(dt, copy=False)


_NARROW = frozenset(_RANGES)
_WIDE = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64)) | frozenset(
    (np.float32, np.float64, np.int32, np.int64))


def _conv_plan(k: int, macs: int, x, x_zp, w, w_zp):
    """_mac_plan for centred integer operands, from their dtypes' ranges when those prove a
    whole GEMM exact: in float32, or in float64 for a small problem, where the passes over the
    data that might prove float32 exact cost more than float32 would save. Otherwise from the
    data's extremes."""
    plan = _type_plan(k, macs, x.dtype, x_zp, w.dtype, w_zp)
    return plan or _mac_plan(k, _centered_bound(x, x_zp), _centered_bound(w, w_zp))


def _type_plan(k: int, macs: int, x_dtype, x_zp, w_dtype, w_zp):
    """_conv_plan's plan from the operands' dtypes alone, or None when the data must decide."""
    a, b = _type_bound_of(x_dtype, x_zp), _type_bound_of(w_dtype, w_zp)
    if a is not None and b is not None:
        p = max(a * b, 1)
        if k * p < _F32_EXACT:
            return np.float32, k
        if macs < _SMALL_MACS and k * p < _F64_EXACT:
            return np.float64, k
    return None


def _mac_plan(k: int, a_max: int, b_max: int):
    """How to compute K-term dot products exactly: (dtype, chunk length of K)."""
    # Every partial sum of j products, each |a*b| <= p, is an integer <= j*p, so it is exact
    # in a float whose significand holds j*p (float32: < 2^24, float64: < 2^53).
    p = max(a_max * b_max, 1)
    if k * p < _F32_EXACT:
        return np.float32, k
    if k * p < _F64_EXACT:
        kc = (_F32_EXACT - 1) // p  # float32 chunks of kc terms, summed exactly in float64
        return (np.float32, kc) if kc >= _KC_MIN else (np.float64, k)
    return np.int64, k


def _centered(x, zp) -> np.ndarray:
    # int64 so that x - zp cannot wrap; converted to the MAC dtype afterwards.
    return x.astype(np.int64) - np.int64(zp) if zp else x.astype(np.int64)


def _matmul(a, b, plan) -> np.ndarray:
    """Exact a @ b of integer-valued arrays following `plan` (from _mac_plan), as int64."""
    return _exact_matmul(a, b, plan).astype(np.int64, copy=False)


def _exact_matmul(a, b, plan) -> np.ndarray:
    """a @ b in the plan's dtype: integer values, exactly (assign it to int64 storage)."""
    dt, kc = plan
    a, b = a.astype(dt, copy=False), b.astype(dt, copy=False)
    k = a.shape[-1]
    if kc >= k:
        return np.matmul(a, b)
    acc = np.matmul(a[..., :kc], b[..., :kc, :]).astype(np.float64)
    for i in range(kc, k, kc):
        acc += np.matmul(a[..., i:i + kc], b[..., i:i + kc, :])  # exact float32 -> float64 sum
    return acc


def _centered_padded(x, zp, dt, pads) -> np.ndarray:
    """x - zp in the MAC dtype (as _centered_as), zero-padded (or cropped, for negative pads)
    on the spatial axes 1..S of an [N, *S, C] array: one new C-contiguous array, written once
    (padding contributes exactly 0 after centring)."""
    x = x[(slice(None),) + tuple(slice(max(-lo, 0), x.shape[i + 1] - max(-hi, 0))
                                 for i, (lo, hi) in enumerate(pads))]
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    shape = (x.shape[0], *(n + lo + hi for n, (lo, hi) in zip(x.shape[1:-1], grow)), x.shape[-1])
    inner = (slice(None),) + tuple(slice(lo, lo + n) for n, (lo, _) in
                                   zip(x.shape[1:-1], grow))
    return _padded(x, zp, dt, shape, inner if any(lo or hi for lo, hi in grow) else None)


def _out_sizes(in_sizes, pads, kernel, stride, dilation):
    return [(i + lo + hi - (k - 1) * d - 1) // s + 1
            for i, (lo, hi), k, s, d in zip(in_sizes, pads, kernel, stride, dilation)]


def _windows(xp, out_sizes, kernel, stride, dilation) -> np.ndarray:
    """Strided view [N, *out, *kernel, C] of the padded, C-contiguous input (no copy)."""
    st = xp.strides
    S = len(kernel)
    shape = (xp.shape[0], *out_sizes, *kernel, xp.shape[-1])
    strides = (st[0], *(st[1 + i] * stride[i] for i in range(S)),
               *(st[1 + i] * dilation[i] for i in range(S)), st[-1])
    win = np.ndarray(shape, xp.dtype, buffer=xp, strides=strides)
    win.flags.writeable = False
    return win


class _Geometry(namedtuple("_Geometry", (
        "k",                # dot-product length: kernel taps x input channels
        "oc", "out_sizes", "out_shape", "floats",
        "plan",             # from the dtypes, or None: the data decide
        "pointwise",        # 1x1 unpadded: the input's stride slices (() at stride 1)
        "crop",             # slices of the input that negative pads crop
        "padded_shape",
        "inner",            # where the input sits in the padded array (None: unpadded)
        "window_shape",
        "window_steps",     # window strides in elements of the padded array
        "itemsize",         # of the plan's dtype (float32 where the data decide)
        "window_strides",   # window strides in bytes for that itemsize
        "step"))):          # output rows per im2col block
    """What a convolution tile's shapes, dtypes and attributes decide, worked out once for
    every tile that shares them (a layer's tiles repeat a few geometries). A namedtuple:
    typing.NamedTuple compiles each of its string annotations at import."""

    __slots__ = ()


_GEOMETRIES: dict = {}
_DW_GEOMETRIES: dict = {}          # depthwise: its slabs' layout, or None (general path)


def _geometry(ifm, weights, pads, stride, dilation, input_zp, weight_zp) -> _Geometry:
    key = (ifm.shape, ifm.dtype, weights.shape, weights.dtype, pads, stride, dilation,
           input_zp, weight_zp)
    g = _GEOMETRIES.get(key)
    if g is None:
        if len(_GEOMETRIES) >= 4096:
            _GEOMETRIES.clear()
        g = _GEOMETRIES[key] = _new_geometry(ifm, weights, pads, stride, dilation, input_zp,
                                             weight_zp)
    return g


def _new_geometry(ifm, weights, pads, stride, dilation, input_zp, weight_zp) -> _Geometry:
    kernel = weights.shape[1:-1]
    ic, oc = ifm.shape[-1], weights.shape[0]
    if weights.shape[-1] != ic:
        raise ValueError(f"channel mismatch: ifm {ifm.shape}, weights {weights.shape}")
    k = math.prod(weights.shape[1:])
    out_sizes = _out_sizes(ifm.shape[1:-1], pads, kernel, stride, dilation)
    n = ifm.shape[0]
    out_shape = (n, *[max(o, 0) for o in out_sizes], oc)
    floats = is_float(ifm.dtype)
    plan = _F64_PLAN if floats else _type_plan(k, math.prod(out_shape) * k, ifm.dtype,
                                               input_zp, weights.dtype, weight_zp)
    pointwise = None
    if all(w == 1 for w in kernel) and not any(lo or hi for lo, hi in pads):
        pointwise = () if all(st == 1 for st in stride) else (slice(None),) + tuple(
            slice(None, None, st) for st in stride)
    crop, padded_shape, inner = _pad_layout(ifm.shape, pads)
    # Chunk over the first output spatial axis so the im2col copy stays bounded.
    per_row = n * math.prod(out_sizes[1:]) * k
    steps = _window_steps(padded_shape, stride, dilation)
    itemsize = np.dtype(plan[0] if plan else np.float32).itemsize
    return _Geometry(k, oc, out_sizes, out_shape, floats, plan, pointwise, crop, padded_shape,
                     inner, (n, *out_sizes, *kernel, ic), steps, itemsize,
                     tuple(e * itemsize for e in steps), max(1, _CHUNK // max(per_row, 1)))


def _pad_layout(shape, pads):
    """For an [N, *S, C] input padded (cropped, where negative) by `pads` on its spatial axes:
    the slices that crop it (None: none), the padded shape, where the input sits in it
    (None: it fills it). _padded builds that array."""
    crop = (slice(None),) + tuple(slice(max(-lo, 0), shape[i + 1] - max(-hi, 0))
                                  for i, (lo, hi) in enumerate(pads))
    sizes = [len(range(*c.indices(d))) for c, d in zip(crop[1:], shape[1:-1])]
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    padded_shape = (shape[0], *(d + lo + hi for d, (lo, hi) in zip(sizes, grow)), shape[-1])
    inner = (slice(None),) + tuple(slice(lo, lo + d) for d, (lo, _) in zip(sizes, grow)) if any(
        lo or hi for lo, hi in grow) else None
    return crop if any(lo < 0 or hi < 0 for lo, hi in pads) else None, padded_shape, inner


def _window_steps(padded_shape, stride, dilation) -> tuple:
    """_windows' strides, in elements of a C-contiguous padded array of that shape."""
    steps = [1] * len(padded_shape)
    for i in range(len(padded_shape) - 2, -1, -1):
        steps[i] = steps[i + 1] * padded_shape[i + 1]
    S = len(stride)
    return (steps[0], *(steps[1 + i] * stride[i] for i in range(S)),
            *(steps[1 + i] * dilation[i] for i in range(S)), 1)


def _conv_nd_acc(ifm, weights, pads, stride, dilation, input_zp, weight_zp) -> np.ndarray:
    """Shared N-d convolution: ifm [N,*S,IC], weights [OC,*K,IC] -> int64 [N,*OS,OC] (im2col)."""
    g = _geometry(ifm, weights, pads, stride, dilation, input_zp, weight_zp)
    k, oc = g.k, g.oc
    plan = g.plan or _mac_plan(k, _centered_bound(ifm, input_zp),
                               _centered_bound(weights, weight_zp))
    dt = plan[0]
    whole = plan[1] >= k                     # one GEMM per block, in the plan's dtype
    out = np.empty(g.out_shape, dtype=dt if whole else np.float64)  # K-chunked sums in float64
    if out.size == 0:
        return out
    wc = _centered_as(weights, weight_zp, dt).reshape(oc, k).T  # [K*IC, OC]
    if g.floats:
        with _ieee(True):
            return _conv_gemms(g, ifm, input_zp, dt, wc, out, plan, whole)
    return _conv_gemms(g, ifm, input_zp, dt, wc, out, plan, whole)


def _conv_gemms(g: _Geometry, ifm, input_zp, dt, wc, out, plan, whole: bool) -> np.ndarray:
    k, oc = g.k, g.oc
    if g.pointwise is not None:
        # pointwise: the (strided) input is its own im2col, with no copy at stride 1
        xc = _centered_as(ifm, input_zp, dt)
        if g.pointwise:
            xc = xc[g.pointwise]
        _gemm_into(out.reshape(-1, oc), xc.reshape(-1, k), wc, plan, whole)
        return out
    xp = _padded(ifm if g.crop is None else ifm[g.crop], input_zp, dt, g.padded_shape, g.inner)
    size = xp.itemsize
    win = np.ndarray(g.window_shape, dt, buffer=xp, strides=g.window_strides if size == g.itemsize
                     else tuple(e * size for e in g.window_steps))
    win.flags.writeable = False
    step, rows = g.step, g.out_sizes[0]
    if step >= rows:                     # one block: the windows' copy is the im2col
        _gemm_into(out.reshape(-1, oc), win.reshape(-1, k), wc, plan, whole)
        return out
    for r0 in range(0, rows, step):
        cols = win[:, r0:r0 + step].reshape(-1, k)  # copies the windows: [M, K*IC]
        dst = out[:, r0:r0 + step]
        if dst.flags.c_contiguous:
            _gemm_into(dst.reshape(-1, oc), cols, wc, plan, whole)
        else:
            dst[...] = _exact_matmul(cols, wc, plan).reshape(dst.shape)
    return out


def _padded(x, zp, dt, shape, inner) -> np.ndarray:
    """x - zp in the MAC dtype (as _centered_as) inside a new C-contiguous array of `shape`,
    zero around it (`inner`: where x goes; None: x fills it), written once (padding
    contributes exactly 0 after centring)."""
    out = np.empty(shape, dt) if inner is None else np.zeros(shape, dt)
    dst = out if inner is None else out[inner]
    if is_float(x.dtype) or (x.dtype.itemsize <= 2 and (np.issubdtype(dt, np.floating)
                                                         or np.dtype(dt).itemsize >= 4)):
        dst[...] = x
        if zp and not is_float(x.dtype):
            dst -= dt(zp)
    else:
        dst[...] = _centered(x, zp)
    return out


def _gemm_into(dst, a, b, plan, whole: bool):
    if whole:
        np.matmul(a, b, out=dst)              # straight into the result
    else:
        dst[...] = _exact_matmul(a, b, plan)


def conv2d_acc(ifm, weights, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1), input_zp=0,
               weight_zp=0) -> np.ndarray:
    """CONV2D accumulators. ifm [N,H,W,IC], weights [OC,KH,KW,IC], pad (top,bottom,left,right).

    Output size uses floor division, so tiles need not divide exactly.
    """
    t, b, l, r = pad
    return _conv_nd_acc(np.asarray(ifm), np.asarray(weights), ((t, b), (l, r)), tuple(stride),
                        tuple(dilation), input_zp, weight_zp)


def conv3d_acc(ifm, weights, pad=(0, 0, 0, 0, 0, 0), stride=(1, 1, 1), dilation=(1, 1, 1),
               input_zp=0, weight_zp=0) -> np.ndarray:
    """CONV3D accumulators. ifm [N,D,H,W,IC], weights [OC,KD,KH,KW,IC], pad (d0,d1,t,b,l,r)."""
    pads = ((pad[0], pad[1]), (pad[2], pad[3]), (pad[4], pad[5]))
    return _conv_nd_acc(np.asarray(ifm), np.asarray(weights), pads, tuple(stride),
                        tuple(dilation), input_zp, weight_zp)


def depthwise_conv2d_acc(ifm, weights, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
                         input_zp=0, weight_zp=0) -> np.ndarray:
    """DEPTHWISE_CONV2D accumulators. weights [KH,KW,C,M]; output channel c*M+m. The exact
    sums come back as float32 or int32 when they provably hold them (the output stage widens
    them slab by slab), else int64."""
    ifm, weights = np.asarray(ifm), np.asarray(weights)
    key = (ifm.shape, ifm.dtype, weights.shape, weights.dtype, tuple(pad), tuple(stride),
           tuple(dilation), input_zp, weight_zp)
    g = _DW_GEOMETRIES.get(key, False)
    if g is False:
        if len(_DW_GEOMETRIES) >= 4096:
            _DW_GEOMETRIES.clear()
        g = _DW_GEOMETRIES[key] = _depthwise_geometry(ifm, weights, pad, stride, dilation,
                                                      input_zp, weight_zp)
    if g is not None:
        dt, acc_shape, out_shape, slabs = g
        wc = _centered_as(weights, weight_zp, dt)
        acc = np.empty(acc_shape, dtype=dt)
        size = acc.itemsize
        for rows, block, padded_shape, inner, window_shape, window_steps in slabs:
            xs = _padded(ifm[block], input_zp, dt, padded_shape, inner)
            win = np.ndarray(window_shape, dt, buffer=xs,
                             strides=tuple(e * size for e in window_steps))
            win.flags.writeable = False
            np.einsum("nhwyxc,yxcm->nhwcm", win, wc, out=acc[rows])
        return acc.reshape(out_shape)
    kh, kw, c, m = weights.shape
    if ifm.shape[-1] != c:
        raise ValueError(f"channel mismatch: ifm {ifm.shape}, weights {weights.shape}")
    pads = [(pad[0], pad[1]), (pad[2], pad[3])]
    # No reduction over channels, so no BLAS benefit. Integer operands: each slab's windows
    # against the taps in one einsum, in float32 when the KH*KW-term sums provably hold
    # (exact integers below 2^24 in any order), else int32 or int64. Float operands:
    # multiply-adds per tap in tap order, in float64 (the order fixes their rounding).
    floats = is_float(ifm.dtype)
    if floats:
        wc, dt = weights.astype(np.float64), np.float64
    else:
        a, b = _type_bound(ifm, input_zp), _type_bound(weights, weight_zp)
        if a is None or b is None or kh * kw * a * b >= 1 << 31:     # else int32 by the types
            a, b = _centered_bound(ifm, input_zp), _maxabs(_centered(weights, weight_zp))
        p = kh * kw * a * b
        dt = np.float32 if p < _F32_EXACT else np.int32 if p < (1 << 31) else np.int64
        wc = _centered_as(weights, weight_zp, dt)
    h = ifm.shape[1]
    oh, ow = _out_sizes(ifm.shape[1:3], pads, (kh, kw), stride, dilation)
    n = ifm.shape[0]
    acc = np.empty((n, max(oh, 0), max(ow, 0), c, m), dtype=dt)
    if acc.size == 0:
        return acc.reshape(n, acc.shape[1], acc.shape[2], c * m)
    sy, sx = stride
    dy, dx = dilation
    # Output rows in slabs of about _DW_CHUNK elements, each from its own centred and padded
    # input rows: the temporaries are a slab's, not a tile's (a 56x56x144 tile's per-tap
    # products took 1.8 MB, its padded int32 input as much again).
    rows = max(1, _DW_CHUNK // (n * ow * c * m))
    product = np.empty((n, min(rows, oh), ow, c, m), dtype=dt) if floats else None
    for r0 in range(0, oh, rows):
        out = acc[:, r0:r0 + rows]
        first = r0 * sy - pads[0][0]                         # input rows read, padding < 0
        last = (r0 + out.shape[1] - 1) * sy + (kh - 1) * dy - pads[0][0]
        lo, hi = max(first, 0), min(last, h - 1)
        if hi >= lo:
            block, top, bottom = ifm[:, lo:hi + 1], lo - first, last - hi
        else:                                                # the slab reads padding only
            block, top, bottom = ifm[:, :0], last - first + 1, 0
        # int8/int16 activations minus their zero point fit int32: no int64 copy.
        xs = _centered_padded(block, input_zp, dt, [(top, bottom), pads[1]])
        if not floats:
            win = _windows(xs, (out.shape[1], ow), (kh, kw), stride, dilation)
            np.einsum("nhwyxc,yxcm->nhwcm", win, wc, out=out)
            continue
        out[...] = 0
        prod = product[:, :out.shape[1]]
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dy, kx * dx
                tap = xs[:, y0:y0 + (out.shape[1] - 1) * sy + 1:sy, x0:x0 + (ow - 1) * sx + 1:sx]
                with _ieee(floats):
                    np.multiply(tap[..., None], wc[ky, kx], out=prod)
                    out += prod
    return acc.reshape(n, oh, ow, c * m)


def _depthwise_geometry(ifm, weights, pad, stride, dilation, input_zp, weight_zp):
    """depthwise_conv2d_acc's plan for integer operands whose dtypes decide the sums' dtype,
    worked out once for the tiles that share these shapes: (dtype, accumulator shape, output
    shape, per slab: its output rows, the input rows it reads, and _padded's and the windows'
    layout); None where the general path decides from the data (or the operands are float,
    or the output is empty)."""
    kh, kw, c, m = weights.shape
    if ifm.shape[-1] != c or is_float(ifm.dtype):
        return None
    a, b = _type_bound(ifm, input_zp), _type_bound(weights, weight_zp)
    if a is None or b is None or kh * kw * a * b >= 1 << 31:
        return None
    dt = np.float32 if kh * kw * a * b < _F32_EXACT else np.int32
    pads = [(pad[0], pad[1]), (pad[2], pad[3])]
    h, n = ifm.shape[1], ifm.shape[0]
    oh, ow = _out_sizes(ifm.shape[1:3], pads, (kh, kw), stride, dilation)
    if oh <= 0 or ow <= 0 or not n * c * m:
        return None
    sy, dy = stride[0], dilation[0]
    rows = max(1, _DW_CHUNK // (n * ow * c * m))       # as the general path's slabs
    slabs = []
    for r0 in range(0, oh, rows):
        count = min(rows, oh - r0)
        first = r0 * sy - pads[0][0]
        last = (r0 + count - 1) * sy + (kh - 1) * dy - pads[0][0]
        lo, hi = max(first, 0), min(last, h - 1)
        if hi >= lo:
            block, top, bottom = slice(lo, hi + 1), lo - first, last - hi
        else:
            block, top, bottom = slice(0, 0), last - first + 1, 0
        shape = (n, len(range(h)[block]), *ifm.shape[2:])
        crop, padded_shape, inner = _pad_layout(shape, [(top, bottom), pads[1]])
        block = (slice(None), block) + (() if crop is None else (crop[2],))
        slabs.append(((slice(None), slice(r0, r0 + count)), block, padded_shape, inner,
                      (n, count, ow, kh, kw, c), _window_steps(padded_shape, stride, dilation)))
    return dt, (n, oh, ow, c, m), (n, oh, ow, c * m), slabs


def transpose_conv2d_acc(ifm_box, weights, stride=(1, 1), out_pad_top=0, out_pad_left=0,
                         in_origin=(0, 0), out_origin=(0, 0), out_size=None, input_zp=0,
                         weight_zp=0) -> np.ndarray:
    """TRANSPOSE_CONV2D accumulators for global output rows/cols out_origin .. +out_size.

    ifm_box holds global input rows y0..y0+h-1 (cols x0..) where in_origin=(y0, x0); inputs
    outside the box contribute nothing. out[oy,ox] += x[iy,ix] . w[:,ky,kx] where
    oy = iy*sy + out_pad_top + ky (weights not flipped). out_size defaults to the full op
    size for the box at the origin (IH-1)*sy + out_pad_top + KH (bottom out_pad = 0).
    """
    x, w = np.asarray(ifm_box), np.asarray(weights)
    n, h, wd, ic = x.shape
    oc, kh, kw, _ = w.shape
    sy, sx = stride
    y0, x0 = in_origin
    oy0, ox0 = out_origin
    if out_size is None:
        out_size = ((h - 1) * sy + out_pad_top + kh - oy0, (wd - 1) * sx + out_pad_left + kw - ox0)
    oh, ow = out_size
    floats = is_float(x.dtype)
    xc = (x.astype(np.float64) if floats else _centered(x, input_zp)).reshape(-1, ic)
    wc = (w.astype(np.float64) if floats else _centered(w, weight_zp))
    wc = wc.transpose(3, 1, 2, 0).reshape(ic, -1)  # [IC, KH*KW*OC]
    # One matmul (IC-term sums) for all taps, then strided scatter-adds per tap, in tap order.
    if floats:
        with _ieee(True):
            prod = np.matmul(xc, wc)
    else:
        prod = _matmul(xc, wc, _mac_plan(ic, _maxabs(xc), _maxabs(wc)))
    prod = prod.reshape(n, h, wd, kh, kw, oc)
    out = np.zeros((n, oh, ow, oc), dtype=prod.dtype)

    def span(k, pad_lo, s, i0, ni, o0, no):
        # input indices i (global, inside the box) with o = i*s + pad_lo + k inside the window
        lo = max(i0, -((pad_lo + k - o0) // s))            # ceil((o0 - pad_lo - k) / s)
        hi = min(i0 + ni - 1, (o0 + no - 1 - pad_lo - k) // s)
        return lo, hi

    for ky in range(kh):
        iy_lo, iy_hi = span(ky, out_pad_top, sy, y0, h, oy0, oh)
        if iy_lo > iy_hi:
            continue
        ry = slice(iy_lo * sy + out_pad_top + ky - oy0, iy_hi * sy + out_pad_top + ky - oy0 + 1, sy)
        for kx in range(kw):
            ix_lo, ix_hi = span(kx, out_pad_left, sx, x0, wd, ox0, ow)
            if ix_lo > ix_hi:
                continue
            rx = slice(ix_lo * sx + out_pad_left + kx - ox0, ix_hi * sx + out_pad_left + kx - ox0 + 1, sx)
            with _ieee(floats):
                out[:, ry, rx] += prod[:, iy_lo - y0:iy_hi - y0 + 1, ix_lo - x0:ix_hi - x0 + 1, ky, kx]
    return out


def matmul_acc(a, b, a_zp=0, b_zp=0) -> np.ndarray:
    """MATMUL accumulators: a [N,H,C] x b [N,C,W] -> [N,H,W] exact sums (as the module
    says; float64 for floats)."""
    a, b = np.asarray(a), np.asarray(b)
    if is_float(a.dtype):
        with _ieee(True):
            return np.matmul(a.astype(np.float64), b.astype(np.float64))
    k = a.shape[-1]
    plan = _conv_plan(k, a.shape[0] * a.shape[1] * b.shape[-1] * k, a, a_zp, b, b_zp)
    return _exact_matmul(_centered_as(a, a_zp, plan[0]), _centered_as(b, b_zp, plan[0]), plan)


def float_stage(acc, *, acc_dtype: str, out_dtype, bias=None, acc_in=None) -> np.ndarray:
    """A float MAC command's result from its float64 sums: the accumulator register rounds
    them (with a split reduction's earlier partial sums `acc_in`) to `acc_dtype`; the output
    takes that rounded to out_t, then the bias added in out_t, as the spec's
    `out = static_cast<out_t>(acc); out = apply_add_s<out_t>(out, bias)`. With out_dtype None
    the accumulator itself is the result (raw partial sums). Each sum is computed in float64
    and rounded once, which is correctly rounded: float64 holds more than twice the bits of
    every narrower type plus two, so no double rounding."""
    storage = _FLOAT_STORAGE[acc_dtype]
    a = np.asarray(acc, dtype=np.float64)
    with _ieee(True):
        if acc_in is not None:
            a = a + np.asarray(acc_in).astype(np.float64)
        a = _round(a, storage)
        if out_dtype is None:
            return a
        out = _round(a.astype(np.float64), np.dtype(out_dtype))
        if bias is not None:
            out = _round(out.astype(np.float64) + np.asarray(bias).astype(np.float64).reshape(-1),
                         np.dtype(out_dtype))
        return out


_FLOAT_STORAGE = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16)}


def _round(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round float64 to `dtype`, to nearest even: numpy's own casts for fp32 and fp16; bf16
    through fp32 (24 >= 2 x 8 + 2 bits, so the two roundings of one operation's result are
    its one rounding)."""
    with np.errstate(over="ignore"):            # past the type's largest: +-inf, as IEEE rounds
        if dtype in (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)):
            return x.astype(dtype)
        return x.astype(np.float32).astype(dtype)
