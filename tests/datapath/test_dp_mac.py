"""MAC kernels (+ fused output stage) vs the TOSA reference model, and tile stitching."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

import npu_sim.datapath as dp
from npu_sim.datapath import mac
from dp_helpers import add_rescale, clamp_attr, fit_pad, rand_int, tdt
from oracle import DType, GraphBuilder

KINDS = ("i8", "i8", "i8i4", "i16")  # activation x weight type mixes (i8 twice: the main case)


def _operands(rng, kind, xshape, wshape):
    """Random input/weights/zero points for a (activation, weight) type mix."""
    if kind == "i16":
        x, izp = rand_int(rng, np.int16, xshape), 0
    else:
        x, izp = rand_int(rng, np.int8, xshape), int(rng.integers(-128, 128))
    if kind == "i8i4":
        w, wzp = rng.integers(-7, 8, size=wshape).astype(np.int8), 0  # int4_t is -7..7
    else:
        w, wzp = rand_int(rng, np.int8, wshape), int(rng.integers(-128, 128))
    return x, izp, w, wzp


def _stage_params(rng, kind, oc, bound):
    """Random RESCALE (+CLAMP) parameters valid for accumulators with |acc| <= bound."""
    int48 = kind == "i16"
    scale32 = not int48
    per_channel = bool(rng.integers(0, 2))
    n = oc if per_channel else 1
    mbits = 31 if scale32 else 15
    out_np = [np.int8, np.int8, np.int16, np.int32][rng.integers(0, 4)]
    out_bits = {np.int8: (3, 9), np.int16: (12, 18), np.int32: (3, 30)}[out_np]
    need = bound.bit_length() + 1  # REQUIRE |value| < 2^(shift-1)
    # |out| ~ 2^(bound bits + mbits - 1 - shift): aim at the output type's range, some saturate
    target = bound.bit_length() + mbits - rng.integers(*out_bits, size=n)
    shift = np.clip(target, max(need, 2), 62).astype(np.int64)
    lo = (1 << (mbits - 1))
    mult = rng.integers(lo, 2 * lo, size=n).astype(np.int64)
    ozp = int(rng.integers(-128, 128)) if out_np == np.int8 else 0
    rounding = str(rng.choice(["SINGLE_ROUND", "DOUBLE_ROUND"])) if scale32 else "SINGLE_ROUND"
    clamp = None
    if out_np != np.int32:
        info = np.iinfo(out_np)
        clamp = (int(rng.integers(info.min, info.min // 8)), int(rng.integers(info.max // 8, info.max)))
    return dict(multiplier=mult, shift=shift, scale32=scale32, rounding_mode=rounding,
                per_channel=per_channel, output_zp=ozp, clamp=clamp, out_dtype=out_np)


def _check_chain(g, op, inputs, acc_shape, attr, acc, bias, kind, rng):
    """g has placeholders/consts in `inputs`; add op -> RESCALE -> CLAMP, run, compare both."""
    int48 = kind == "i16"
    acc_dt = DType.INT48 if int48 else DType.INT32
    acc_out = g.output(acc_shape, acc_dt)
    g.op(op, inputs, [acc_out], attr)
    full = acc if bias is None else acc + bias.astype(np.int64)
    p = _stage_params(rng, kind, acc_shape[-1], int(np.abs(full).max()))
    out_dt = tdt(p["out_dtype"])
    res = add_rescale(g, acc_out, acc_shape, acc_dt, out_dt, p["multiplier"], p["shift"], 0,
                      p["output_zp"], scale32=p["scale32"], rounding_mode=p["rounding_mode"],
                      per_channel=p["per_channel"], output=p["clamp"] is None)
    if p["clamp"] is not None:
        final = g.output(acc_shape, out_dt)
        g.op("CLAMP", [res], [final], clamp_attr(p["out_dtype"], *p["clamp"]))
        res = final
    ref = g.run()
    acc_dtype = "int48" if int48 else "int32"
    got_acc = dp.output_stage(acc, bias=bias, acc_dtype=acc_dtype)
    np.testing.assert_array_equal(got_acc, ref[acc_out])
    assert got_acc.dtype == ref[acc_out].dtype
    got = dp.output_stage(acc, bias=bias, acc_dtype=acc_dtype, **p)
    assert got.dtype == ref[res].dtype
    np.testing.assert_array_equal(got, ref[res])


def _bias(rng, kind, oc):
    if kind == "i16":
        return rng.integers(-(1 << 26), 1 << 26, size=oc).astype(np.int64), DType.INT48
    return rng.integers(-(1 << 14), 1 << 14, size=oc).astype(np.int32), DType.INT32


def _zp_consts(g, kind, izp, wzp):
    xdt = DType.INT16 if kind == "i16" else DType.INT8
    wdt = DType.INT4 if kind == "i8i4" else DType.INT8
    return g.tensor([1], xdt, [izp], is_const=True), g.tensor([1], wdt, [wzp], is_const=True)


def _xdt(kind):
    return DType.INT16 if kind == "i16" else DType.INT8


def _wdt(kind):
    return DType.INT4 if kind == "i8i4" else DType.INT8


@pytest.mark.parametrize("seed", range(18))
def test_conv2d(seed):
    rng = np.random.default_rng(100 + seed)
    kind = KINDS[seed % 4] if seed < 16 else "i8"
    n, ic, oc = int(rng.integers(1, 3)), int(rng.integers(1, 20)), int(rng.integers(1, 9))
    if seed >= 16:  # long dot products: the K-chunked float32 MAC path
        ic = int(rng.integers(300, 700))
    h, w_ = (int(v) for v in rng.integers(1, 12, size=2))
    kh, kw = (int(v) for v in rng.integers(1, 5, size=2))
    sy, sx = (int(v) for v in rng.integers(1, 4, size=2))
    dy, dx = (int(v) for v in rng.integers(1, 3, size=2))
    pt, pb = fit_pad(rng, h, (kh - 1) * dy + 1, sy, 3)
    pl, pr = fit_pad(rng, w_, (kw - 1) * dx + 1, sx, 3)
    oh = (h + pt + pb - (kh - 1) * dy - 1) // sy + 1
    ow = (w_ + pl + pr - (kw - 1) * dx - 1) // sx + 1
    x, izp, wt, wzp = _operands(rng, kind, (n, h, w_, ic), (oc, kh, kw, ic))
    bias, bdt = _bias(rng, kind, oc)
    acc = dp.conv2d_acc(x, wt, (pt, pb, pl, pr), (sy, sx), (dy, dx), izp, wzp)
    assert acc.shape == (n, oh, ow, oc)
    g = GraphBuilder()
    xi = g.tensor(x.shape, _xdt(kind), x)
    wi = g.tensor(wt.shape, _wdt(kind), wt, is_const=True)
    bi = g.tensor([oc], bdt, bias, is_const=True)
    zi, zw = _zp_consts(g, kind, izp, wzp)
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute([pt, pb, pl, pr], [sy, sx], [dy, dx], False,
                         DType.INT48 if kind == "i16" else DType.INT32)
    _check_chain(g, "CONV2D", [xi, wi, bi, zi, zw], (n, oh, ow, oc), attr, acc, bias, kind, rng)


@pytest.mark.parametrize("seed", range(10))
def test_depthwise_conv2d(seed):
    rng = np.random.default_rng(200 + seed)
    kind = KINDS[seed % 4]
    n, c, m = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 4))
    h, w_ = (int(v) for v in rng.integers(1, 12, size=2))
    kh, kw = (int(v) for v in rng.integers(1, 5, size=2))
    sy, sx = (int(v) for v in rng.integers(1, 4, size=2))
    dy, dx = (int(v) for v in rng.integers(1, 3, size=2))
    pt, pb = fit_pad(rng, h, (kh - 1) * dy + 1, sy, 3)
    pl, pr = fit_pad(rng, w_, (kw - 1) * dx + 1, sx, 3)
    oh = (h + pt + pb - (kh - 1) * dy - 1) // sy + 1
    ow = (w_ + pl + pr - (kw - 1) * dx - 1) // sx + 1
    x, izp, wt, wzp = _operands(rng, kind, (n, h, w_, c), (kh, kw, c, m))
    bias, bdt = _bias(rng, kind, c * m)
    acc = dp.depthwise_conv2d_acc(x, wt, (pt, pb, pl, pr), (sy, sx), (dy, dx), izp, wzp)
    assert acc.shape == (n, oh, ow, c * m)
    g = GraphBuilder()
    xi = g.tensor(x.shape, _xdt(kind), x)
    wi = g.tensor(wt.shape, _wdt(kind), wt, is_const=True)
    bi = g.tensor([c * m], bdt, bias, is_const=True)
    zi, zw = _zp_consts(g, kind, izp, wzp)
    attr = ts.TosaSerializerAttribute()
    attr.DepthwiseConv2dAttribute([pt, pb, pl, pr], [sy, sx], [dy, dx], False,
                                  DType.INT48 if kind == "i16" else DType.INT32)
    _check_chain(g, "DEPTHWISE_CONV2D", [xi, wi, bi, zi, zw], (n, oh, ow, c * m), attr, acc,
                 bias, kind, rng)


@pytest.mark.parametrize("seed", range(6))
def test_conv3d(seed):
    rng = np.random.default_rng(300 + seed)
    kind = KINDS[seed % 4]
    n, ic, oc = 1, int(rng.integers(1, 6)), int(rng.integers(1, 5))
    sizes = [int(v) for v in rng.integers(1, 7, size=3)]
    ks = [int(v) for v in rng.integers(1, 4, size=3)]
    st = [int(v) for v in rng.integers(1, 3, size=3)]
    dl = [int(v) for v in rng.integers(1, 3, size=3)]
    pads = [fit_pad(rng, s, (k - 1) * d + 1, t, 2) for s, k, t, d in zip(sizes, ks, st, dl)]
    outs = [(s + a + b - (k - 1) * d - 1) // t + 1 for s, (a, b), k, t, d in zip(sizes, pads, ks, st, dl)]
    x, izp, wt, wzp = _operands(rng, kind, (n, *sizes, ic), (oc, *ks, ic))
    bias, bdt = _bias(rng, kind, oc)
    pad6 = [p for ab in pads for p in ab]
    acc = dp.conv3d_acc(x, wt, pad6, st, dl, izp, wzp)
    assert acc.shape == (n, *outs, oc)
    g = GraphBuilder()
    xi = g.tensor(x.shape, _xdt(kind), x)
    wi = g.tensor(wt.shape, _wdt(kind), wt, is_const=True)
    bi = g.tensor([oc], bdt, bias, is_const=True)
    zi, zw = _zp_consts(g, kind, izp, wzp)
    attr = ts.TosaSerializerAttribute()
    attr.Conv3dAttribute(pad6, st, dl, False, DType.INT48 if kind == "i16" else DType.INT32)
    _check_chain(g, "CONV3D", [xi, wi, bi, zi, zw], (n, *outs, oc), attr, acc, bias, kind, rng)


@pytest.mark.parametrize("seed", range(10))
def test_transpose_conv2d(seed):
    rng = np.random.default_rng(400 + seed)
    kind = KINDS[seed % 4]
    n, ic, oc = int(rng.integers(1, 3)), int(rng.integers(1, 12)), int(rng.integers(1, 7))
    h, w_ = (int(v) for v in rng.integers(1, 8, size=2))
    kh, kw = (int(v) for v in rng.integers(1, 5, size=2))
    sy, sx = (int(v) for v in rng.integers(1, 4, size=2))
    opad = [int(rng.integers(-k + 1, 3)) for k in (kh, kh, kw, kw)]  # > -K, may be negative
    oh = (h - 1) * sy + opad[0] + opad[1] + kh
    ow = (w_ - 1) * sx + opad[2] + opad[3] + kw
    if oh < 1 or ow < 1:
        opad = [0, 0, 0, 0]
        oh, ow = (h - 1) * sy + kh, (w_ - 1) * sx + kw
    x, izp, wt, wzp = _operands(rng, kind, (n, h, w_, ic), (oc, kh, kw, ic))
    bias, bdt = _bias(rng, kind, oc)
    acc = dp.transpose_conv2d_acc(x, wt, (sy, sx), opad[0], opad[2], (0, 0), (0, 0), (oh, ow),
                                  izp, wzp)
    g = GraphBuilder()
    xi = g.tensor(x.shape, _xdt(kind), x)
    wi = g.tensor(wt.shape, _wdt(kind), wt, is_const=True)
    bi = g.tensor([oc], bdt, bias, is_const=True)
    zi, zw = _zp_consts(g, kind, izp, wzp)
    attr = ts.TosaSerializerAttribute()
    attr.TransposeConv2dAttribute(opad, [sy, sx], False,
                                  DType.INT48 if kind == "i16" else DType.INT32)
    _check_chain(g, "TRANSPOSE_CONV2D", [xi, wi, bi, zi, zw], (n, oh, ow, oc), attr, acc, bias,
                 kind, rng)


@pytest.mark.parametrize("seed", range(8))
def test_matmul(seed):
    rng = np.random.default_rng(500 + seed)
    kind = "i16" if seed % 3 == 2 else "i8"
    n, h, c, w_ = (int(v) for v in rng.integers(1, 24, size=4))
    dt = np.int16 if kind == "i16" else np.int8
    a, b = rand_int(rng, dt, (n, h, c)), rand_int(rng, dt, (n, c, w_))
    azp, bzp = (0, 0) if kind == "i16" else (int(rng.integers(-128, 128)), int(rng.integers(-128, 128)))
    acc = dp.matmul_acc(a, b, azp, bzp)
    g = GraphBuilder()
    ai = g.tensor(a.shape, tdt(dt), a)
    bi = g.tensor(b.shape, tdt(dt), b)
    za = g.tensor([1], tdt(dt), [azp], is_const=True)
    zb = g.tensor([1], tdt(dt), [bzp], is_const=True)
    _check_chain(g, "MATMUL", [ai, bi, za, zb], (n, h, w_), None, acc, None, kind, rng)


@pytest.mark.parametrize("acc", ["int32", "int48"])
def test_conv2d_accumulator_limits_like_reference(acc):
    """A bias at the accumulator's limits: the spec REQUIREs no overflow; the reference model
    wraps an int32 accumulator (int8 x int8) and saturates an int48 one (int16 x int8), and
    output_stage matches it."""
    wide = acc == "int48"
    x = np.full((1, 1, 1, 4 if wide else 8), 32767 if wide else -128, np.int16 if wide else np.int8)
    w = np.full((2, 1, 1, x.shape[-1]), 127 if wide else -128, np.int8)
    bits = 48 if wide else 32
    bias = np.array([(1 << (bits - 1)) - 1, -(1 << (bits - 1))], np.int64 if wide else np.int32)
    acc_t = DType.INT48 if wide else DType.INT32
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT16 if wide else DType.INT8, x)
    wi = g.tensor(w.shape, DType.INT8, w, is_const=True)
    bi = g.tensor([2], acc_t, bias, is_const=True)
    zi, zw = _zp_consts(g, "i16" if wide else "i8", 0, 0)
    out = g.output((1, 1, 1, 2), acc_t)
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute([0, 0, 0, 0], [1, 1], [1, 1], False, acc_t)
    g.op("CONV2D", [xi, wi, bi, zi, zw], [out], attr)
    got = dp.output_stage(dp.conv2d_acc(x, w), bias=bias, acc_dtype=acc)
    np.testing.assert_array_equal(got, g.run()[out])


# ---- exactness paths (no reference model needed) ---------------------------------------------

def _brute_matmul(a, b, azp, bzp):
    a = a.astype(object) - azp
    b = b.astype(object) - bzp
    return np.array([[[sum(a[i, r, k] * b[i, k, c] for k in range(a.shape[2]))
                       for c in range(b.shape[2])] for r in range(a.shape[1])]
                     for i in range(a.shape[0])], dtype=object)


@pytest.mark.parametrize("c,lo,hi,path", [(3, -20, 20, "f32"), (1500, -128, 127, "f32-chunked"),
                                          (9000, -32768, 32767, "f64"),
                                          (300, -32768, 32767, "i64")])
def test_matmul_precision_paths_exact(c, lo, hi, path, monkeypatch):
    """Covers the float32 (whole / K-chunked), float64 and int64 MAC paths (the sums come
    back in the dtype they were computed in, exact)."""
    rng = np.random.default_rng(c)
    a = rng.integers(lo, hi, size=(1, 3, c), endpoint=True)
    b = rng.integers(lo, hi, size=(1, c, 2), endpoint=True)
    if c == 9000:  # worst-case sums: every product at +-2^30
        a = np.where(rng.random(a.shape) < 0.5, lo, hi)
        b = np.where(rng.random(b.shape) < 0.5, lo, hi)
    if path == "i64":  # the real trigger needs K >= 2^23 for int16; lower the threshold
        monkeypatch.setattr(mac, "_F64_EXACT", 1)
    if path == "f32-chunked":  # a small problem takes float64 by the types; a large one chunks
        monkeypatch.setattr(mac, "_SMALL_MACS", 0)
    dt = np.int8 if hi < 128 else np.int16
    a, b = a.astype(dt), b.astype(dt)
    plan = mac._mac_plan(c, mac._maxabs(a), mac._maxabs(b))
    expect = {"f32": (np.float32, c), "f64": (np.float64, c), "i64": (np.int64, c)}
    if path == "f32-chunked":
        assert plan[0] is np.float32 and plan[1] < c
    else:
        assert plan == expect[path]
    got = dp.matmul_acc(a, b)
    assert got.dtype == {"f32": np.float32, "f32-chunked": np.float64, "f64": np.float64,
                         "i64": np.int64}[path]
    assert (got.astype(np.int64).astype(object) == _brute_matmul(a, b, 0, 0)).all()
    if path == "i64":  # conv im2col and transpose conv on the int64 path too
        x, w = a.reshape(1, 1, 3, c), b.transpose(2, 0, 1).reshape(2, 1, 1, c).astype(np.int8)
        ref = _brute_matmul(a, w.reshape(2, c).T[None], 0, 0).reshape(1, 1, 3, 2)
        assert (dp.conv2d_acc(x, w).astype(object) == ref).all()
        assert (dp.transpose_conv2d_acc(x, w).astype(object) == ref).all()


def test_conv2d_large_k_int16_exact():
    rng = np.random.default_rng(7)
    x = rand_int(rng, np.int16, (1, 3, 3, 700), edge_frac=0.8)
    w = rand_int(rng, np.int8, (2, 3, 3, 700), edge_frac=0.8)
    got = dp.conv2d_acc(x, w, (1, 1, 1, 1))
    xp = np.pad(x.astype(object), [(0, 0), (1, 1), (1, 1), (0, 0)])
    for oy in range(3):
        for ox in range(3):
            for o in range(2):
                ref = (xp[0, oy:oy + 3, ox:ox + 3, :] * w[o].astype(object)).sum()
                assert got[0, oy, ox, o] == ref


def test_depthwise_int64_path_exact():
    """16x16 kernel of int16 x int8 products overflows int32 sums: the int64 path is used."""
    rng = np.random.default_rng(8)
    x = rand_int(rng, np.int16, (1, 17, 16, 2), edge_frac=0.9)
    w = rand_int(rng, np.int8, (16, 16, 2, 1), edge_frac=0.9)
    got = dp.depthwise_conv2d_acc(x, w, (0, 0, 0, 0), (1, 1), (1, 1), 0, -5)
    assert got.shape == (1, 2, 1, 2)
    for oy in range(2):
        for c in range(2):
            ref = (x[0, oy:oy + 16, :, c].astype(object) * (w[:, :, c, 0].astype(object) + 5)).sum()
            assert got[0, oy, 0, c] == ref


@pytest.mark.parametrize("seed", range(4))
def test_depthwise_slabs_match_one_pass(seed, monkeypatch):
    """Depthwise accumulates output rows in slabs of about _DW_CHUNK elements: slabs of a
    row or a few rows, with strides, dilation and padding, give the one-pass sums."""
    rng = np.random.default_rng(900 + seed)
    x = rand_int(rng, np.int8, (2, 13 if seed < 3 else 2, 9, 3))
    w = rand_int(rng, np.int8, (3, 2, 3, 2))
    # seed 3: two input rows under six of padding, so whole slabs read padding only
    pad = (1, 2, 0, 1) if seed < 3 else (4, 6, 0, 1)
    args = (pad, (1 + seed % 2, 2), (1, 1 + seed // 2), -3, 5)
    whole = dp.depthwise_conv2d_acc(x, w, *args)
    assert whole.shape[1] > 1 and whole.any()
    for chunk in (1, 60, 200):
        monkeypatch.setattr(mac, "_DW_CHUNK", chunk)
        monkeypatch.setattr(mac, "_DW_GEOMETRIES", {})      # slabs are kept with the geometry
        got = dp.depthwise_conv2d_acc(x, w, *args)
        assert got.dtype == whole.dtype == np.float32 and np.array_equal(got, whole), chunk


def _py_conv2d(x, w, pad, stride, dilation, izp, wzp):
    """CONV2D sums in Python integers (negative pads crop the input)."""
    t, b, l, r = pad
    xs = x.astype(object)[:, max(-t, 0):x.shape[1] - max(-b, 0), max(-l, 0):x.shape[2] - max(-r, 0)]
    xp = np.pad(xs - izp, [(0, 0), (max(t, 0), max(b, 0)), (max(l, 0), max(r, 0)), (0, 0)])
    oc, kh, kw, _ = w.shape
    oh = (xp.shape[1] - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (xp.shape[2] - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    wc = w.astype(object) - wzp
    out = np.zeros((x.shape[0], oh, ow, oc), dtype=object)
    for oy in range(oh):
        for ox in range(ow):
            win = xp[:, oy * stride[0]:oy * stride[0] + (kh - 1) * dilation[0] + 1:dilation[0],
                     ox * stride[1]:ox * stride[1] + (kw - 1) * dilation[1] + 1:dilation[1]]
            out[:, oy, ox] = np.tensordot(win, wc, axes=([1, 2, 3], [1, 2, 3]))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_conv2d_geometries_match_python_sums(seed, monkeypatch):
    """A tile geometry's plan is worked out once and kept: tiles sharing it (called again
    with new data), cropping (negative) pads, im2col in row blocks (a small _CHUNK), the
    plan the data decide (int16 activations) and the dtypes' plan all give the exact sums."""
    rng = np.random.default_rng(1300 + seed)
    xdt = np.int16 if seed % 3 == 2 else np.int8
    pad = [(1, 0, 1, 1), (-1, 2, 0, -2), (2, 2, -1, 0)][seed % 3]
    stride, dilation = (1 + seed % 2, 1), (1, 1 + seed // 3)
    if seed >= 4:
        monkeypatch.setattr(mac, "_CHUNK", 40)           # blocks of one or a few output rows
    monkeypatch.setattr(mac, "_GEOMETRIES", {})
    izp, wzp = int(rng.integers(-128, 128)) if xdt == np.int8 else 0, int(rng.integers(-9, 9))
    for _ in range(2):                                   # the second call reuses the geometry
        x = rand_int(rng, xdt, (2, 9, 8, 5))
        w = rand_int(rng, np.int8, (3, 3, 2, 5))
        got = dp.conv2d_acc(x, w, pad, stride, dilation, izp, wzp)
        want = _py_conv2d(x, w, pad, stride, dilation, izp, wzp)
        assert got.shape == want.shape
        assert (got.astype(object) == want).all()
    assert len(mac._GEOMETRIES) == 1


@pytest.mark.parametrize("seed", range(4))
def test_depthwise_geometries_match_python_sums(seed, monkeypatch):
    """Depthwise tiles keep their slabs' layout by geometry: a second tile of the same shapes
    with new data, cropping (negative) width pads, slabs of a few rows, and int16 activations
    give the exact sums (Python integers)."""
    rng = np.random.default_rng(1400 + seed)
    xdt = np.int16 if seed == 3 else np.int8
    pad = [(1, 1, -1, 2), (0, 2, 1, -1), (2, 0, 0, 0), (1, 1, 1, 1)][seed]
    stride, dilation = (1 + seed % 2, 1), (1, 1 + seed // 2)
    monkeypatch.setattr(mac, "_DW_GEOMETRIES", {})
    monkeypatch.setattr(mac, "_DW_CHUNK", 30 if seed % 2 else 1 << 16)
    izp, wzp = int(rng.integers(-128, 128)) if xdt == np.int8 else 0, int(rng.integers(-9, 9))
    for _ in range(2):
        x = rand_int(rng, xdt, (2, 8, 7, 3))
        w = rand_int(rng, np.int8, (3, 2, 3, 2))
        got = dp.depthwise_conv2d_acc(x, w, pad, stride, dilation, izp, wzp)
        # as a CONV2D of each input channel alone: output channel c*M + m
        want = np.concatenate([_py_conv2d(x[..., c:c + 1], w[:, :, c, :].transpose(2, 0, 1)[
            ..., None], pad, stride, dilation, izp, wzp) for c in range(3)], axis=-1)
        assert got.shape == want.shape
        assert (got.astype(object) == want).all()
    assert list(mac._DW_GEOMETRIES.values())[0] is not None     # the kept plan ran
