"""TFLite's reductions, ARG_MAX/ARG_MIN and the RESIZEs as single-operator models, bit-exact
against the reference kernels (see tflite_support.py)."""
import numpy as np
import pytest

from tflite_support import Model, check, options


def _reducer(op, shape, axes, keep, q_in, q_out, seed, feed_range=None):
    rng = np.random.default_rng(seed)
    m = Model()
    x = m.input(shape, *q_in)
    a = m.const(np.array(axes, np.int32))
    ax = {a_ % len(shape) for a_ in axes}
    out = [1 if i in ax else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i not in ax]
    y = m.output(out, *q_out)
    m.op(op, [x, a], [y], options("ReducerOptions", keepDims=keep), "ReducerOptions")
    feed = None
    if feed_range is not None:
        feed = {"in0": rng.integers(*feed_range, shape, endpoint=True).astype(np.int8)}
    check(m, rng, feed=feed)


MEANS = [((1, 5, 5, 8), [1, 2], True), ((2, 6, 7), [2], False), ((3, 4), [0, 1], False),
         ((1, 4, 6, 3), [-1], True), ((2, 3, 4, 5), [0, 2], False)]


@pytest.mark.parametrize("case", MEANS)
def test_mean(case):
    for seed, (qi, qo) in enumerate([((0.05, 3), (0.04, -5)), ((0.1, -20), (0.02, 10))]):
        _reducer("MEAN", *case, qi, qo, seed)


@pytest.mark.parametrize("case", MEANS[:3])
def test_sum(case):
    """TFLite's reference SUM reads int8 data as uint8 (reference_ops::QuantizedMeanOrSum is
    handed uint8 pointers), so it is compared where that reading is the same: inputs and
    outputs in [0, 127]. npu-sim sums the signed values."""
    shape, axes, keep = case
    n = int(np.prod([shape[a] for a in axes]))
    _reducer("SUM", shape, axes, keep, (0.05, 0), (0.05 * n, 0), 1, feed_range=(0, 127))


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
def test_reduce_max_min(op):
    _reducer(op, (2, 5, 6), [1], False, (0.05, 3), (0.05, 3), 2)
    _reducer(op, (1, 4, 4, 3), [1, 2], True, (0.1, -3), (0.1, -3), 3)
    _reducer(op, (3, 4, 5), [0, -1], False, (0.02, 9), (0.02, 9), 4)


@pytest.mark.parametrize("op,opts", [("ARG_MAX", "ArgMaxOptions"), ("ARG_MIN", "ArgMinOptions")])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_arg_max_min(op, opts, axis):
    rng = np.random.default_rng(axis + 2)
    m = Model()
    shape = (3, 4, 5)
    x = m.input(shape, 0.05, 2)
    a = m.const(np.array([axis], np.int32))
    out = [d for i, d in enumerate(shape) if i != axis % 3]
    y = m.output(out, dtype=np.int32, scale=None)
    m.op(op, [x, a], [y], options(opts, outputType=2), opts)
    feed = {"in0": rng.integers(-4, 4, shape).astype(np.int8)}     # many ties
    check(m, rng, feed=feed)


RESIZES = [((1, 4, 4, 3), (8, 8), False, False), ((1, 4, 4, 3), (8, 8), False, True),
           ((1, 5, 3, 2), (9, 7), True, False), ((2, 8, 6, 4), (4, 3), False, True),
           ((1, 3, 5, 2), (7, 4), False, False)]


@pytest.mark.parametrize("case", RESIZES)
@pytest.mark.parametrize("op,opts", [("RESIZE_BILINEAR", "ResizeBilinearOptions"),
                                     ("RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions")])
def test_resize(op, opts, case):
    shape, size, align, half = case
    rng = np.random.default_rng(size[0])
    m = Model()
    x = m.input(shape, 0.05, -3)
    s = m.const(np.array(size, np.int32))
    y = m.output((shape[0],) + size + (shape[3],), 0.05, -3)
    m.op(op, [x, s], [y], options(opts, alignCorners=align, halfPixelCenters=half), opts)
    check(m, rng)
