"""TFLite's data-layout builtins as single-operator models, bit-exact against the reference
kernels (see tflite_support.py)."""
import numpy as np
import pytest

from tflite_support import Model, check, options

Q = (0.05, 3)


def _one(op, in_shape, out_shape, consts=(), opts=None, opts_type=None, seed=0, n_out=1,
         dtype=np.int8):
    rng = np.random.default_rng(seed)
    m = Model()
    x = m.input(in_shape, *Q, dtype=dtype)
    ins = [x] + [m.const(np.asarray(c), np.asarray(c).dtype.type) for c in consts]
    outs = [m.output(s, *Q, dtype=dtype) for s in (out_shape if n_out > 1 else [out_shape])]
    m.op(op, ins, outs, opts, opts_type)
    check(m, rng)


@pytest.mark.parametrize("shapes", [((1, 4, 4, 3), (1, 48)), ((2, 6), (3, 2, 2)), ((1, 1, 5), (5,))])
def test_reshape(shapes):
    a, b = shapes
    _one("RESHAPE", a, b, consts=[np.array(b, np.int32)])


@pytest.mark.parametrize("shapes", [((1, 3, 1, 4), (3, 4), [0, 2]), ((2, 1, 5), (2, 5), [1]),
                                    ((1, 1, 1, 6), (6,), [])])
def test_squeeze(shapes):
    a, b, dims = shapes
    _one("SQUEEZE", a, b, opts=options("SqueezeOptions", squeezeDims=dims),
         opts_type="SqueezeOptions")


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenation(axis):
    rng = np.random.default_rng(axis + 5)
    m = Model()
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for s in shapes:
        s[axis] += int(rng.integers(0, 3))
    xs = [m.input(s, *Q) for s in shapes]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    y = m.output(out, *Q)
    m.op("CONCATENATION", xs, [y], options("ConcatenationOptions", axis=axis),
         "ConcatenationOptions")
    check(m, rng)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_pack_unpack(axis):
    rng = np.random.default_rng(axis)
    m = Model()
    xs = [m.input((3, 4), *Q) for _ in range(3)]
    shape = [3, 4]
    shape.insert(axis, 3)
    y = m.output(shape, *Q)
    m.op("PACK", xs, [y], options("PackOptions", valuesCount=3, axis=axis), "PackOptions")
    check(m, rng)
    _one("UNPACK", shape, [(3, 4)] * 3, opts=options("UnpackOptions", num=3, axis=axis),
         opts_type="UnpackOptions", n_out=3)


@pytest.mark.parametrize("axis,n", [(1, 2), (3, 4), (-2, 3)])
def test_split(axis, n):
    rng = np.random.default_rng(n)
    m = Model()
    a = m.const(np.array([axis], np.int32))
    x = m.input((1, 4, 6, 8), *Q)
    shape = [1, 4, 6, 8]
    shape[axis] //= n
    ys = [m.output(shape, *Q) for _ in range(n)]
    m.op("SPLIT", [a, x], ys, options("SplitOptions", numSplits=n), "SplitOptions")
    check(m, rng)


@pytest.mark.parametrize("pads", [[[0, 0], [1, 2], [0, 3], [0, 0]], [[1, 0], [0, 0], [2, 2], [1, 1]],
                                  [[0, 0], [0, 0], [0, 0], [3, 0]]])
def test_pad_padv2(pads):
    p = np.array(pads, np.int32)
    out = tuple(int(d + a + b) for d, (a, b) in zip((1, 3, 4, 2), pads))
    _one("PAD", (1, 3, 4, 2), out, consts=[p])
    m = Model()
    x = m.input((1, 3, 4, 2), *Q)
    value = m.const(np.array([-7], np.int8), np.int8, scale=Q[0], zp=Q[1])
    y = m.output(out, *Q)
    m.op("PADV2", [x, m.const(p), value], [y])
    check(m, np.random.default_rng(0))


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("pads", [[[0, 0], [2, 1], [1, 2], [0, 0]], [[0, 0], [0, 3], [3, 0], [1, 1]]])
def test_mirror_pad(mode, pads):
    pads = np.array(pads, np.int32)
    shape = (1, 4, 5, 3)
    out = tuple(int(d + a + b) for d, (a, b) in zip(shape, pads))
    _one("MIRROR_PAD", shape, out, consts=[pads],
         opts=options("MirrorPadOptions", mode=mode), opts_type="MirrorPadOptions")


@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (3, 1, 0, 2), (0, 3, 1, 2)])
def test_transpose(perm):
    shape = (2, 3, 4, 5)
    _one("TRANSPOSE", shape, tuple(shape[p] for p in perm), consts=[np.array(perm, np.int32)])


@pytest.mark.parametrize("mult", [(1, 2, 3), (3, 1, 1)])
def test_tile(mult):
    shape = (2, 3, 4)
    _one("TILE", shape, tuple(d * m for d, m in zip(shape, mult)), consts=[np.array(mult, np.int32)])


@pytest.mark.parametrize("case", [((2, 5, 6, 3), [1, 1, 2, 0], [1, 3, -1, 3], (1, 3, 4, 3)),
                                  ((7, 9), [2, 0], [4, 9], (4, 9)), ((4, 4, 4), [0, 3, 1], [-1, 1, 2], (4, 1, 2))])
def test_slice(case):
    shape, begin, size, out = case
    _one("SLICE", shape, out, consts=[np.array(begin, np.int32), np.array(size, np.int32)])


def test_strided_slice_with_fewer_indices_than_dims_takes_the_rest_whole():
    """x[1] on a [2, 3, 4] tensor: begin, end and strides for the first axis only (TFLite
    expands the missing ellipsis at the end)."""
    _one("STRIDED_SLICE", (2, 3, 4), (3, 4), consts=[np.array([1], np.int32),
                                                    np.array([2], np.int32),
                                                    np.array([1], np.int32)],
         opts=options("StridedSliceOptions", shrinkAxisMask=1), opts_type="StridedSliceOptions")


def test_strided_slice_begin_mask_counts_on_a_shrunk_axis():
    """TFLite's kernel starts a shrunk axis at 0 when its begin_mask bit is set, whatever
    `begin` says (x[2] with the mask is row 0); so does the lowering."""
    _one("STRIDED_SLICE", (4, 3), (3,), consts=[np.array([2, 0], np.int32),
                                               np.array([3, 3], np.int32),
                                               np.array([1, 1], np.int32)],
         opts=options("StridedSliceOptions", beginMask=1, shrinkAxisMask=1),
         opts_type="StridedSliceOptions")



@pytest.mark.parametrize("case", [
    ((1, 8, 8, 4), [0, 1, 0, 0], [1, 7, 8, 4], [1, 2, 3, 1], 0, 0, 0, (1, 3, 3, 4)),
    ((4, 6), [1, -5], [0, 0], [1, 1], 0, 2, 1, (5,)),
    ((3, 9), [0, 2], [3, 9], [2, 4], 0, 0, 0, (2, 2)),
    ((5, 6), [4, 0], [0, 6], [-1, 2], 0, 0, 0, (4, 3)),           # negative strides: REVERSE
    ((5, 6), [0, 0], [0, 0], [-2, -1], 3, 3, 0, (3, 6)),
    ((7, 4), [-1, 1], [-8, 3], [-3, 1], 0, 0, 0, (3, 2)),
])
def test_strided_slice(case):
    shape, begin, end, strides, bmask, emask, shrink, out = case
    _one("STRIDED_SLICE", shape, out, consts=[np.array(v, np.int32) for v in (begin, end, strides)],
         opts=options("StridedSliceOptions", beginMask=bmask, endMask=emask,
                      shrinkAxisMask=shrink), opts_type="StridedSliceOptions")


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gather(axis):
    rng = np.random.default_rng(axis)
    shape = (4, 5, 6)
    idx = rng.integers(0, shape[axis], (3,)).astype(np.int32)
    out = list(shape)
    out[axis] = 3
    _one("GATHER", shape, tuple(out), consts=[idx], opts=options("GatherOptions", axis=axis),
         opts_type="GatherOptions")


@pytest.mark.parametrize("n,h,w,c,s", [(1, 3, 4, 8, 2), (2, 2, 3, 18, 3), (1, 4, 4, 4, 2)])
def test_depth_to_space_and_back(n, h, w, c, s):
    small, big = (n, h, w, c), (n, h * s, w * s, c // (s * s))
    _one("DEPTH_TO_SPACE", small, big,
         opts=options("DepthToSpaceOptions", blockSize=s), opts_type="DepthToSpaceOptions")
    _one("SPACE_TO_DEPTH", big, small,
         opts=options("SpaceToDepthOptions", blockSize=s), opts_type="SpaceToDepthOptions")


@pytest.mark.parametrize("axis,shape,out", [(0, (3, 4), (1, 3, 4)), (-1, (2, 5), (2, 5, 1))])
def test_expand_dims(axis, shape, out):
    _one("EXPAND_DIMS", shape, out, consts=[np.array([axis], np.int32)])


@pytest.mark.parametrize("sizes,axis", [([2, 3, 1], 1), ([5, -1], 2), ([1, 1, 2, 4], -1)])
def test_split_v(sizes, axis):
    rng = np.random.default_rng(len(sizes))
    shape = [2, 6, 8, 8]
    m = Model()
    x = m.input(shape, *Q)
    real = list(sizes)
    if -1 in real:
        real[real.index(-1)] = shape[axis] - (sum(real) + 1)
    outs = []
    for s in real:
        o = list(shape)
        o[axis] = s
        outs.append(m.output(o, *Q))
    m.op("SPLIT_V", [x, m.const(np.array(sizes, np.int32)), m.const(np.array([axis], np.int32))],
         outs, options("SplitVOptions", numSplits=len(sizes)), "SplitVOptions")
    check(m, rng)


def _batch_by_shape(m: Model, x: int, rank: int, rest: int) -> int:
    """[batch of x, rest] as Keras' dynamic-batch exports compute it: SHAPE, the batch sliced
    off (STRIDED_SLICE with shrink), PACKed with the other dim."""
    dims = m.tensor((rank,), np.int32)
    m.op("SHAPE", [x], [dims], options("ShapeOptions", outType=2), "ShapeOptions")   # INT32
    batch = m.tensor((), np.int32)
    m.op("STRIDED_SLICE", [dims, m.const([0]), m.const([1]), m.const([1])], [batch],
         options("StridedSliceOptions", shrinkAxisMask=1), "StridedSliceOptions")
    shape = m.tensor((2,), np.int32)
    m.op("PACK", [batch, m.const(np.array(rest, np.int32))], [shape],
         options("PackOptions", valuesCount=2, axis=0), "PackOptions")
    return shape


def test_a_reshape_whose_shape_comes_from_shape_runs_at_the_stored_batch():
    """Keras exports with a dynamic batch compute RESHAPE's shape at run time: SHAPE of the
    input, its batch sliced off (STRIDED_SLICE, shrink) and PACKed with the other dims. SHAPE is
    the input's static shape, a constant, and the shape arithmetic folds away at compile time."""
    from npu_sim import api
    from npu_sim.compiler.frontends.tflite import load_tflite_bytes
    from tflite_support import config
    rng = np.random.default_rng(3)
    m = Model()
    x = m.input((1, 2, 3, 4), *Q)
    m.tensors[x].shapeSignature = [-1, 2, 3, 4]
    new_shape = _batch_by_shape(m, x, 4, 24)
    y = m.output((1, 24), *Q)
    m.op("RESHAPE", [x, new_shape], [y])
    check(m, rng)
    program = api.compile_model(load_tflite_bytes(m.serialize(), "shape.tflite"), config())
    ops = {op for layer in program.layers for op in layer.ops}
    assert not ops & {"SLICE", "CONCAT"}, ops          # nothing of the shape arithmetic runs


@pytest.mark.parametrize("shape,block,pads", [((1, 5, 6, 3), (2, 3), ((1, 0), (0, 0))),
                                              ((2, 7, 4), (2,), ((1, 2),)),
                                              ((1, 4, 4, 2), (2, 2), ((0, 0), (2, 2)))])
def test_space_to_batch_nd_and_back(shape, block, pads):
    """SPACE_TO_BATCH_ND pads with the zero point and moves the blocks into the batch;
    BATCH_TO_SPACE_ND puts them back and crops (here what the first padded)."""
    padded = [n + a + b for n, (a, b) in zip(shape[1:], pads)]
    moved = (shape[0] * int(np.prod(block)), *[n // k for n, k in zip(padded, block)],
             *shape[1 + len(block):])
    m = Model()
    x = m.input(shape, *Q)
    y = m.tensor(moved, np.int8, *Q)
    m.op("SPACE_TO_BATCH_ND", [x, m.const(block), m.const(pads)], [y])
    back = m.output(shape, *Q)
    m.outputs.insert(0, y)
    m.op("BATCH_TO_SPACE_ND", [y, m.const(block), m.const(pads)], [back])
    check(m, np.random.default_rng(len(shape)))


def test_a_dynamic_batch_export_gets_the_shapes_tflite_works_out():
    """A Keras export with a dynamic batch stores batch 1 everywhere, and a -1 where a shape is
    computed, with a placeholder shape: here a dilated 1-D convolution as SPACE_TO_BATCH_ND, CONV_2D and
    BATCH_TO_SPACE_ND, whose middle tensors hold batch 2 when the graph runs, and a RESHAPE
    stored as [1, 1] (signature [-1, -1]) whose shape comes from SHAPE. The shapes are worked out as TFLite's interpreter
    works them out, and the outputs match its reference kernels."""
    rng = np.random.default_rng(5)
    m = Model()
    x = m.input((1, 8, 3), *Q)
    m.tensors[x].shapeSignature = [-1, 8, 3]
    s2b = m.tensor((1, 5, 3), np.int8, *Q)                  # stored batch 1; it runs with 2
    m.tensors[s2b].shapeSignature = [-1, 5, 3]
    m.op("SPACE_TO_BATCH_ND", [x, m.const([2]), m.const([[1, 1]])], [s2b])
    wide = m.tensor((1, 1, 5, 3), np.int8, *Q)
    m.op("EXPAND_DIMS", [s2b, m.const(np.array(1, np.int32))], [wide])
    w = m.const(rng.integers(-127, 128, (4, 1, 3, 3)), np.int8, scale=0.01, zp=0)
    bias = m.const(rng.integers(-100, 100, 4), np.int32, scale=0.05 * 0.01, zp=0)
    conv = m.tensor((1, 1, 3, 4), np.int8, 0.08, -2)
    m.op("CONV_2D", [wide, w, bias], [conv], options("Conv2DOptions", padding=1, strideH=1,
                                                     strideW=1),
         "Conv2DOptions")
    narrow = m.tensor((1, 3, 4), np.int8, 0.08, -2)
    m.op("RESHAPE", [conv, m.const([-1, 3, 4])], [narrow])
    b2s = m.tensor((1, 6, 4), np.int8, 0.08, -2)
    m.op("BATCH_TO_SPACE_ND", [narrow, m.const([2]), m.const([[0, 0]])], [b2s])
    flat_shape = _batch_by_shape(m, b2s, 3, 24)
    flat = m.tensor((1, 1), np.int8, 0.08, -2)                # as the converter stores it
    m.tensors[flat].shapeSignature = [-1, -1]
    m.op("RESHAPE", [b2s, flat_shape], [flat])
    y = m.output((1, 24), 0.08, -2)
    m.op("RELU", [flat], [y])
    check(m, rng)
