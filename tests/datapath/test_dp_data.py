"""RESIZE, GATHER, SCATTER vs the TOSA reference model."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

import npu_sim.datapath as dp
from dp_helpers import rand_int, resize_axis, tdt
from oracle import DType, GraphBuilder


@pytest.mark.parametrize("seed", range(14))
def test_resize(seed):
    rng = np.random.default_rng(1500 + seed)
    mode = ("NEAREST", "BILINEAR")[seed % 2]
    dt = np.int16 if seed % 4 >= 2 else np.int8
    n, h, w, c = int(rng.integers(1, 3)), *(int(v) for v in rng.integers(1, 9, size=2)), int(rng.integers(1, 4))
    yn, yd, oy, by, oh = resize_axis(rng, h)
    xn, xd, ox, bx, ow = resize_axis(rng, w)
    x = rand_int(rng, dt, (n, h, w, c))
    out_np = dt if mode == "NEAREST" else (np.int32 if dt == np.int8 else np.int64)
    out_dt = tdt(dt) if mode == "NEAREST" else (DType.INT32 if dt == np.int8 else DType.INT48)
    g = GraphBuilder()
    xi = g.tensor(x.shape, tdt(dt), x)
    sc = g.tensor([4], DType.SHAPE, [yn, yd, xn, xd], is_const=True)
    of = g.tensor([2], DType.SHAPE, [oy, ox], is_const=True)
    bo = g.tensor([2], DType.SHAPE, [by, bx], is_const=True)
    out = g.output((n, oh, ow, c), out_dt)
    attr = ts.TosaSerializerAttribute()
    attr.ResizeAttribute(getattr(ts.ResizeMode, mode))
    g.op("RESIZE", [xi, sc, of, bo], [out], attr)
    got = dp.resize(x, mode=mode, scale=(yn, yd, xn, xd), offset=(oy, ox), border=(by, bx),
                    in_origin=(0, 0), out_origin=(0, 0), out_size=(oh, ow), in_size=(h, w),
                    out_dtype=out_np)
    ref = g.run()[out]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)
    # whole-op defaults (out_size from border) agree
    np.testing.assert_array_equal(dp.resize(x, mode=mode, scale=(yn, yd, xn, xd), offset=(oy, ox),
                                            border=(by, bx)), ref)


@pytest.mark.parametrize("seed", range(3))
def test_gather(seed):
    rng = np.random.default_rng(1600 + seed)
    dt = (np.int8, np.int16, np.int32)[seed]
    n, k, c, w = (int(v) for v in rng.integers(1, 8, size=4))
    values = rand_int(rng, dt, (n, k, c))
    idx = rng.integers(0, k, size=(n, w)).astype(np.int32)
    g = GraphBuilder()
    vi = g.tensor(values.shape, tdt(dt), values)
    ii = g.tensor(idx.shape, DType.INT32, idx)
    out = g.output((n, w, c), tdt(dt))
    g.op("GATHER", [vi, ii], [out])
    got = dp.gather(values, idx)
    ref = g.run()[out]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("seed", range(3))
def test_scatter(seed):
    rng = np.random.default_rng(1700 + seed)
    dt = (np.int8, np.int16, np.int32)[seed]
    n, k, c = (int(v) for v in rng.integers(1, 8, size=3))
    w = int(rng.integers(1, k + 1))
    vin = rand_int(rng, dt, (n, k, c))
    idx = np.stack([rng.permutation(k)[:w] for _ in range(n)]).astype(np.int32)  # each once
    inp = rand_int(rng, dt, (n, w, c))
    g = GraphBuilder()
    vi = g.tensor(vin.shape, tdt(dt), vin)
    ii = g.tensor(idx.shape, DType.INT32, idx)
    xi = g.tensor(inp.shape, tdt(dt), inp)
    out = g.output((n, k, c), tdt(dt))
    g.op("SCATTER", [vi, ii, xi], [out])
    got = dp.scatter(vin, idx, inp)
    ref = g.run()[out]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)
