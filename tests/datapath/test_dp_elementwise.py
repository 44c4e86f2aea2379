"""Vector-unit elementwise kernels, CLAMP and TABLE vs the TOSA reference model."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

import npu_sim.datapath as dp
from dp_helpers import RANGE, clamp_attr, rand_bool, rand_int, tdt
from oracle import DType, GraphBuilder

I8, I16, I32, BOOL = np.int8, np.int16, np.int32, np.bool_


def _shapes(rng, n_inputs):
    """Equal-rank shapes broadcasting through size-1 dims, and the output shape."""
    rank = int(rng.integers(1, 5))
    base = [int(v) for v in rng.integers(1, 6, size=rank)]
    shapes = [tuple(1 if rng.random() < 0.3 else d for d in base) for _ in range(n_inputs)]
    out = tuple(max(s[i] for s in shapes) for i in range(rank))
    return shapes, out


def _data(rng, dt, shape, lo=None, hi=None):
    return rand_bool(rng, shape) if dt == BOOL else rand_int(rng, dt, shape, lo, hi)


# op -> (input dtypes allowed, arity, output dtype rule). Value generators below keep inputs
# in the valid (non-UNPREDICTABLE) domain.
BINARY_SAME = {"BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "LOGICAL_LEFT_SHIFT",
               "LOGICAL_RIGHT_SHIFT", "ARITHMETIC_RIGHT_SHIFT"}
CASES = [
    ("ADD", I32), ("SUB", I32), ("MAXIMUM", I32), ("MINIMUM", I32), ("INTDIV", I32),
    ("MUL", I8), ("MUL", I16), ("MUL", I32), ("MUL_SHIFT", I32),
    ("ARITHMETIC_RIGHT_SHIFT", I8), ("ARITHMETIC_RIGHT_SHIFT", I16), ("ARITHMETIC_RIGHT_SHIFT", I32),
    ("BITWISE_AND", I8), ("BITWISE_OR", I16), ("BITWISE_XOR", I32),
    ("BITWISE_NOT", I8), ("BITWISE_NOT", I16), ("BITWISE_NOT", I32),
    ("LOGICAL_LEFT_SHIFT", I8), ("LOGICAL_LEFT_SHIFT", I16), ("LOGICAL_LEFT_SHIFT", I32),
    ("LOGICAL_RIGHT_SHIFT", I8), ("LOGICAL_RIGHT_SHIFT", I16), ("LOGICAL_RIGHT_SHIFT", I32),
    ("LOGICAL_AND", BOOL), ("LOGICAL_OR", BOOL), ("LOGICAL_XOR", BOOL), ("LOGICAL_NOT", BOOL),
    ("ABS", I32), ("CLZ", I32),
    ("NEGATE", I8), ("NEGATE", I16), ("NEGATE", I32),
    ("SELECT", BOOL), ("SELECT", I8), ("SELECT", I16), ("SELECT", I32),
    ("EQUAL", I32), ("GREATER", I32), ("GREATER_EQUAL", I32),
]
UNARY = {"BITWISE_NOT", "LOGICAL_NOT", "ABS", "CLZ", "NEGATE"}


def _build_case(rng, op, dt):
    """Returns (tosa op, inputs, const extras, tosa attr, kernel attrs, out dtype)."""
    attr, kattrs, extras = None, {}, []
    arity = 1 if op in UNARY else 3 if op == "SELECT" else 2
    shapes, out_shape = _shapes(rng, arity)
    bits = {I8: 8, I16: 16, I32: 32}.get(dt)
    out_dt = dt
    if op in ("ADD", "SUB"):
        xs = [_data(rng, dt, s, -(1 << 30), (1 << 30) - 1) for s in shapes]  # no overflow
    elif op == "INTDIV":
        a = _data(rng, dt, shapes[0])
        b = _data(rng, dt, shapes[1])
        b[b == 0] = 7
        b[b == -1] = -3  # avoid INT_MIN / -1
        xs = [a, b]
    elif op.startswith("MUL"):
        shift = 0
        if op == "MUL_SHIFT":
            shift = int(rng.integers(1, 40))
            lim = min((1 << 31) - 1, 1 << ((30 + shift) // 2))  # keeps the result in int32
            xs = [_data(rng, dt, s, -lim, lim) for s in shapes]
        else:
            xs = [_data(rng, dt, s) for s in shapes]
        op, out_dt = "MUL", I32
        kattrs = {"shift": shift}
        extras = [([1], DType.INT8, [shift])]
    elif op in ("ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"):
        xs = [_data(rng, dt, shapes[0]), _data(rng, dt, shapes[1], 0, bits - 1)]
        if op == "ARITHMETIC_RIGHT_SHIFT":
            rnd = bool(rng.integers(0, 2))
            attr = ts.TosaSerializerAttribute()
            attr.ArithmeticRightShiftAttribute(rnd)
            kattrs = {"round": rnd}
    elif op == "ABS":
        xs = [_data(rng, dt, shapes[0], -(1 << 31) + 1)]
    elif op == "NEGATE":
        lo = RANGE[np.dtype(dt)][0] + (dt == I32)  # i32: -INT_MIN overflows (unpredictable)
        xs = [_data(rng, dt, shapes[0], lo)]
        izp, ozp = (int(rng.integers(-128, 128)), int(rng.integers(-128, 128))) if dt == I8 else (0, 0)
        kattrs = {"input_zp": izp, "output_zp": ozp}
        extras = [([1], tdt(dt), [izp]), ([1], tdt(dt), [ozp])]
    elif op == "SELECT":
        xs = [rand_bool(rng, shapes[0]), _data(rng, dt, shapes[1]), _data(rng, dt, shapes[2])]
    elif op in ("EQUAL", "GREATER", "GREATER_EQUAL"):
        xs = [_data(rng, dt, s, -4, 4) if rng.random() < 0.5 else _data(rng, dt, s) for s in shapes]
        out_dt = BOOL
    else:
        xs = [_data(rng, dt, s) for s in shapes]
        if op == "CLZ":
            xs[0] = xs[0] >> rng.integers(0, 32, size=xs[0].shape).astype(I32)  # all bit lengths
    return op, xs, extras, attr, kattrs, out_dt, out_shape


def _run_graph(op, xs, extras, attr, out_dt, out_shape):
    g = GraphBuilder()
    names = [g.tensor(x.shape, tdt(x.dtype), x) for x in xs]
    names += [g.tensor(shape, d, v, is_const=True) for shape, d, v in extras]
    out = g.output(out_shape, tdt(out_dt))
    g.op(op, names, [out], attr)
    return g.run()[out]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("op,dt", CASES, ids=[f"{o}-{np.dtype(d).name}" for o, d in CASES])
def test_elementwise(op, dt, seed):
    rng = np.random.default_rng(seed * 1000 + CASES.index((op, dt)))
    op, xs, extras, attr, kattrs, out_dt, out_shape = _build_case(rng, op, dt)
    ref = _run_graph(op, xs, extras, attr, out_dt, out_shape)
    got = dp.elementwise(op, xs, out_dt, **kattrs)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


CASTS = [(BOOL, I8), (BOOL, I16), (BOOL, I32), (I8, BOOL), (I16, BOOL), (I32, BOOL),
         (I8, I16), (I8, I32), (I16, I8), (I16, I32), (I32, I8), (I32, I16)]


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b in CASTS])
def test_cast(src, dst):
    rng = np.random.default_rng(CASTS.index((src, dst)))
    shape = tuple(int(v) for v in rng.integers(1, 6, size=3))
    x = _data(rng, src, shape)
    ref = _run_graph("CAST", [x], [], None, dst, shape)
    got = dp.elementwise("CAST", [x], dst)
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("seed", range(4))
def test_clamp(seed):
    rng = np.random.default_rng(800 + seed)
    dt = (I8, I16)[seed % 2]
    shape = tuple(int(v) for v in rng.integers(1, 7, size=int(rng.integers(1, 5))))
    x = rand_int(rng, dt, shape)
    lo, hi = sorted(int(v) for v in rng.integers(*RANGE[np.dtype(dt)], size=2))
    g = GraphBuilder()
    xi = g.tensor(shape, tdt(dt), x)
    out = g.output(shape, tdt(dt))
    g.op("CLAMP", [xi], [out], clamp_attr(dt, lo, hi))
    got = dp.clamp(x, lo, hi)
    assert got.dtype == np.dtype(dt)
    np.testing.assert_array_equal(got, g.run()[out])


@pytest.mark.parametrize("seed", range(4))
def test_table(seed):
    rng = np.random.default_rng(900 + seed)
    dt = (I8, I16)[seed % 2]
    shape = tuple(int(v) for v in rng.integers(1, 9, size=int(rng.integers(1, 5))))
    x = rand_int(rng, dt, shape)
    if dt == I8:
        tab = rand_int(rng, I8, (256,))
        out_dt = I8
    else:
        # REQUIRE: consecutive entries differ by an int16 value -> keep entries within +-2^14
        tab = np.cumsum(rng.integers(-600, 600, size=513)).clip(-(1 << 14) + 1, (1 << 14) - 1).astype(I16)
        if seed % 4 == 3:
            tab = rand_int(rng, I16, (513,), -(1 << 14) + 1, (1 << 14) - 1)
        out_dt = I32
    g = GraphBuilder()
    xi = g.tensor(shape, tdt(dt), x)
    ti = g.tensor(tab.shape, tdt(dt), tab, is_const=True)
    out = g.output(shape, tdt(out_dt))
    g.op("TABLE", [xi, ti], [out])
    got = dp.table(x, tab)
    assert got.dtype == np.dtype(out_dt)
    np.testing.assert_array_equal(got, g.run()[out])
