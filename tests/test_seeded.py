"""The seeded data a run makes up for inputs it is not given (npu_sim/seeded.py)."""
import numpy as np
import pytest

from npu_sim import api, seeded
from npu_sim.isa.dtypes import STORAGE

from oracle import DType, GraphBuilder


def test_stream_zero_of_seed_zero_is_splitmix64():
    # SplitMix64's published first outputs from state 0
    assert seeded.words(0, 0, 3).tolist() == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
                                              0x06C45D188009454F]
    # pinned: the data of `npu-sim run` without --input changes only on purpose
    assert seeded.integers(0, 0, (6,), 8).tolist() == [-30, 110, 6, -8, 27, 83]


def test_streams_differ_and_a_word_does_not_depend_on_how_many_are_drawn():
    a, b, c = (seeded.words(s, k, 64) for s, k in ((0, 0), (1, 0), (0, 1)))
    assert not np.array_equal(a, b) and not np.array_equal(a, c) and not np.array_equal(b, c)
    assert seeded.words(5, 2, 10)[7] == seeded.words(5, 2, 3, skip=7)[0]


@pytest.mark.parametrize("bits", [1, 4, 8, 16, 32, 48, 64])
def test_integers_cover_their_range_evenly(bits):
    x = seeded.integers(3, 1, (4096,), bits)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    assert x.dtype == np.int64 and lo <= x.min() and x.max() <= hi
    if bits <= 8:       # every value drawn, in counts a uniform source gives (chi-square)
        counts = np.bincount(x - lo, minlength=1 << bits)
        expected = x.size / (1 << bits)
        dof = (1 << bits) - 1
        assert counts.min() > 0
        assert ((counts - expected) ** 2 / expected).sum() < dof + 5 * np.sqrt(2 * dof)
    else:               # both halves and both extremes' neighbourhoods reached
        span = hi - lo
        assert x.min() < lo + span // 16 and x.max() > hi - span // 16
        assert 0.45 < (x < 0).mean() < 0.55


def test_empty_and_scalar_shapes():
    assert seeded.integers(0, 0, (0, 3), 8).shape == (0, 3)
    assert seeded.normal(0, 0, (2, 0)).shape == (2, 0)
    assert seeded.integers(0, 0, (), 16).shape == ()


def test_a_chunked_draw_is_the_unchunked_one():
    # inputs past one chunk are made a chunk at a time (bounded temporaries); the words are
    # the counter's, wherever the chunks fall
    n = seeded._CHUNK + 5
    x = seeded.integers(2, 3, (n,), 32)
    assert np.array_equal(x, seeded.words(2, 3, n).view(np.int64) >> 32)
    y = seeded.normal(2, 3, (n,))
    w = [seeded.words(2, 3, n, skip=k * n) for k in range(6)]
    want = sum((v >> np.uint64(32)).astype(np.float64) + (v & np.uint64(0xFFFFFFFF))
               for v in w) * 2.0 ** -32 - 6
    assert np.array_equal(y, want)


def test_normal_has_mean_zero_and_unit_variance():
    y = seeded.normal(0, 0, (3, 20000))
    assert y.shape == (3, 20000) and y.dtype == np.float64
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02 and np.abs(y).max() <= 6
    # exact sums of 32-bit uniforms: multiples of 2^-32
    assert np.array_equal(y * 2.0 ** 32, np.round(y * 2.0 ** 32))


NAMES = {DType.INT32: "int32", DType.FP32: "fp32", DType.FP16: "fp16"}   # ADD's types


@pytest.mark.parametrize("dtype", list(NAMES))
def test_random_inputs_are_seeded_per_input(dtype, tmp_path):
    g = GraphBuilder()
    a, b = g.tensor((2, 64), dtype), g.tensor((2, 64), dtype)
    out = g.output((2, 64), dtype)
    g.op("ADD", [a, b], [out])
    path = tmp_path / "add.tosa"
    path.write_bytes(g.serialize())
    program = api.compile_model(path, api.load_config("default"))
    first, again = api.random_inputs(program, seed=9), api.random_inputs(program, seed=9)
    other = api.random_inputs(program, seed=10)
    assert [v.dtype for v in first.values()] == [STORAGE[NAMES[dtype]]] * 2
    assert all(np.array_equal(first[k], again[k]) for k in first)
    x, y = first.values()
    assert not np.array_equal(x, y) and not np.array_equal(x, other[next(iter(other))])
    # an input's data is the same when the others are given
    second = list(first)[1]
    only = api.random_inputs(program, seed=9, names={second})
    assert list(only) == [second] and np.array_equal(only[second], y)
    if dtype in (DType.FP32, DType.FP16):
        assert np.isfinite(x).all() and x.std() > 0.5


def test_random_booleans(tmp_path):
    g = GraphBuilder()
    x = g.tensor((4, 64), DType.BOOL)
    g.op("LOGICAL_NOT", [x], [g.output((4, 64), DType.BOOL)])
    path = tmp_path / "not.tosa"
    path.write_bytes(g.serialize())
    (value,) = api.random_inputs(api.compile_model(path, api.load_config("default")), 5).values()
    assert value.dtype == np.bool_ and 0.4 < value.mean() < 0.6
