"""Pooling, reductions and ARGMAX vs the TOSA reference model."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

import npu_sim.datapath as dp
from dp_helpers import rand_bool, rand_int, tdt
from oracle import DType, GraphBuilder


def _pool_geometry(rng, h, w, kmax=5):
    """kernel/stride/pad with pad < kernel and an exact output size (TOSA ERROR_IFs)."""
    def axis(n):
        while True:
            k = int(rng.integers(1, min(kmax, n + 2) + 1))
            s = int(rng.integers(1, 4))
            lo, hi = int(rng.integers(0, k)), int(rng.integers(0, k))
            span = n + lo + hi - k
            if span >= 0 and span % s == 0:
                return k, s, lo, hi, span // s + 1
    ky, sy, pt, pb, oh = axis(h)
    kx, sx, pl, pr, ow = axis(w)
    return (ky, kx), (sy, sx), (pt, pb, pl, pr), (oh, ow)


@pytest.mark.parametrize("seed", range(12))
def test_avg_pool2d(seed):
    rng = np.random.default_rng(1100 + seed)
    dt = np.int16 if seed % 3 == 2 else np.int8
    n, h, w, c = int(rng.integers(1, 3)), *(int(v) for v in rng.integers(1, 12, size=2)), int(rng.integers(1, 6))
    if seed == 0:  # a large global pool
        h, w = 9, 13
        kernel, stride, pad, (oh, ow) = (9, 13), (1, 1), (0, 0, 0, 0), (1, 1)
    else:
        kernel, stride, pad, (oh, ow) = _pool_geometry(rng, h, w)
    x = rand_int(rng, dt, (n, h, w, c))
    izp, ozp = (int(rng.integers(-128, 128)), int(rng.integers(-128, 128))) if dt == np.int8 else (0, 0)
    g = GraphBuilder()
    xi = g.tensor(x.shape, tdt(dt), x)
    zi = g.tensor([1], tdt(dt), [izp], is_const=True)
    zo = g.tensor([1], tdt(dt), [ozp], is_const=True)
    out = g.output((n, oh, ow, c), tdt(dt))
    attr = ts.TosaSerializerAttribute()
    attr.AvgPool2dAttribute(list(kernel), list(stride), list(pad), DType.INT32)
    g.op("AVG_POOL2D", [xi, zi, zo], [out], attr)
    got = dp.avg_pool2d(x, kernel, stride, pad, izp, ozp, dt)
    ref = g.run()[out]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


def test_avg_pool2d_rounding_ties():
    """Sums that are exact .5 multiples of the count (both signs) round away from zero."""
    x = np.array([1, 2, -1, -2, 3, -3, 5, -5], np.int8).reshape(1, 1, 8, 1)
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    zi = g.tensor([1], DType.INT8, [0], is_const=True)
    zo = g.tensor([1], DType.INT8, [0], is_const=True)
    out = g.output((1, 1, 7, 1), DType.INT8)
    attr = ts.TosaSerializerAttribute()
    attr.AvgPool2dAttribute([1, 2], [1, 1], [0, 0, 0, 0], DType.INT32)
    g.op("AVG_POOL2D", [xi, zi, zo], [out], attr)
    np.testing.assert_array_equal(dp.avg_pool2d(x, (1, 2), (1, 1), (0, 0, 0, 0), 0, 0, np.int8),
                                  g.run()[out])


@pytest.mark.parametrize("seed", range(6))
def test_max_pool2d(seed):
    rng = np.random.default_rng(1200 + seed)
    dt = np.int16 if seed % 2 else np.int8
    n, h, w, c = int(rng.integers(1, 3)), *(int(v) for v in rng.integers(1, 12, size=2)), int(rng.integers(1, 6))
    kernel, stride, pad, (oh, ow) = _pool_geometry(rng, h, w)
    x = rand_int(rng, dt, (n, h, w, c), edge_frac=0.3)
    g = GraphBuilder()
    xi = g.tensor(x.shape, tdt(dt), x)
    out = g.output((n, oh, ow, c), tdt(dt))
    attr = ts.TosaSerializerAttribute()
    attr.MaxPool2dAttribute(list(kernel), list(stride), list(pad), ts.NanPropagationMode.PROPAGATE)
    g.op("MAX_POOL2D", [xi], [out], attr)
    got = dp.max_pool2d(x, kernel, stride, pad)
    ref = g.run()[out]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


REDUCE_CASES = [("REDUCE_SUM", np.int32), ("REDUCE_MAX", np.int8), ("REDUCE_MAX", np.int16),
                ("REDUCE_MAX", np.int32), ("REDUCE_MIN", np.int8), ("REDUCE_MIN", np.int32),
                ("REDUCE_ALL", np.bool_), ("REDUCE_ANY", np.bool_)]


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("op,dt", REDUCE_CASES, ids=[f"{o}-{np.dtype(d).name}" for o, d in REDUCE_CASES])
def test_reduce(op, dt, seed):
    rng = np.random.default_rng(1300 + 10 * seed + REDUCE_CASES.index((op, dt)))
    rank = int(rng.integers(1, 5))
    shape = tuple(int(v) for v in rng.integers(1, 6, size=rank))
    axis = int(rng.integers(0, rank))
    if dt == np.bool_:
        x = rand_bool(rng, shape) | (rng.random(shape) < 0.5)  # mix of all-true rows
    elif op == "REDUCE_SUM":
        x = rand_int(rng, dt, shape, -(1 << 27), 1 << 27)  # no int32 overflow
    else:
        x = rand_int(rng, dt, shape)
    oshape = tuple(1 if i == axis else d for i, d in enumerate(shape))
    g = GraphBuilder()
    xi = g.tensor(shape, tdt(dt), x)
    out = g.output(oshape, tdt(dt))
    attr = ts.TosaSerializerAttribute()
    if op in ("REDUCE_MAX", "REDUCE_MIN"):
        getattr(attr, op.title().replace("_", "") + "Attribute")(axis, ts.NanPropagationMode.PROPAGATE)
    else:
        getattr(attr, op.title().replace("_", "") + "Attribute")(axis)
    g.op(op, [xi], [out], attr)
    got = dp.reduce(op, x, axis)
    ref = g.run()[out]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("seed", range(4))
def test_argmax(seed):
    rng = np.random.default_rng(1400 + seed)
    dt = np.int16 if seed % 2 else np.int8
    rank = int(rng.integers(1, 5))
    shape = tuple(int(v) for v in rng.integers(1, 7, size=rank))
    axis = int(rng.integers(0, rank))
    x = rand_int(rng, dt, shape, -3, 3)  # many ties: the first index must win
    oshape = tuple(d for i, d in enumerate(shape) if i != axis)
    g = GraphBuilder()
    xi = g.tensor(shape, tdt(dt), x)
    out = g.output(oshape, DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.ArgMaxAttribute(axis, ts.NanPropagationMode.PROPAGATE)
    g.op("ARGMAX", [xi], [out], attr)
    got = dp.argmax(x, axis)
    ref = g.run()[out]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)
