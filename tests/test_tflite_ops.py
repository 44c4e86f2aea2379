"""Every supported TFLite builtin as a single-operator model built with the schema writers,
over several shapes and quantization parameters: compiled and simulated, it must match
TFLite's reference kernels (ai-edge-litert, BUILTIN_REF) bit for bit."""
import numpy as np
import pytest

from npu_sim.compiler.frontends.tflite import load_tflite_bytes
from tflite_support import Model, check, options

SAME, VALID = 0, 1
RELU, RELU_N1, RELU6 = 1, 2, 3


def _q(rng):
    return float(rng.uniform(0.01, 0.2)), int(rng.integers(-60, 60))


def _conv(rng, op, shape, k, oc, stride, dil, padding, act, depth_mult=1, cfg="default"):
    m = Model()
    n, h, w, c = shape
    s_in, z_in = _q(rng)
    x = m.input(shape, s_in, z_in)
    if op == "CONV_2D":
        wshape, nout = (oc, k[0], k[1], c), oc
    else:
        nout = c * depth_mult
        wshape = (1, k[0], k[1], nout)
    ws = rng.uniform(0.002, 0.02, nout)
    wt = m.const(rng.integers(-127, 128, wshape), np.int8, scale=ws, zp=[0] * nout,
                 qdim=0 if op == "CONV_2D" else 3)
    bt = m.const(rng.integers(-3000, 3000, nout), np.int32, scale=s_in * ws, zp=[0] * nout)
    eff = [(kk - 1) * d + 1 for kk, d in zip(k, dil)]
    if padding == SAME:
        oh, ow = -(-h // stride[0]), -(-w // stride[1])
    else:
        oh, ow = (h - eff[0]) // stride[0] + 1, (w - eff[1]) // stride[1] + 1
    y = m.output((n, oh, ow, nout), *_q(rng))
    common = dict(padding=padding, strideH=stride[0], strideW=stride[1], dilationHFactor=dil[0],
                  dilationWFactor=dil[1], fusedActivationFunction=act)
    if op == "CONV_2D":
        m.op(op, [x, wt, bt], [y], options("Conv2DOptions", **common), "Conv2DOptions")
    else:
        m.op(op, [x, wt, bt], [y], options("DepthwiseConv2DOptions", depthMultiplier=depth_mult,
                                           **common), "DepthwiseConv2DOptions")
    check(m, rng, cfg)


@pytest.mark.parametrize("case", [
    ((1, 9, 9, 3), (3, 3), 8, (1, 1), (1, 1), SAME, 0),
    ((1, 10, 7, 5), (3, 2), 6, (2, 2), (1, 1), SAME, RELU),
    ((2, 11, 11, 4), (3, 3), 16, (2, 1), (1, 1), VALID, RELU6),
    ((1, 12, 12, 3), (3, 3), 4, (1, 1), (2, 2), SAME, RELU_N1),
    ((1, 8, 8, 40), (1, 1), 33, (1, 1), (1, 1), VALID, 0),
])
def test_conv_2d(case):
    _conv(np.random.default_rng(hash(case) % 1000), "CONV_2D", *case)


def test_mac_builtins_tiled():
    """On a 4 KiB buffer the layers split into many tiles."""
    _conv(np.random.default_rng(5), "CONV_2D", (1, 16, 16, 16), (3, 3), 32, (1, 1), (1, 1), SAME,
          RELU, cfg="4 KiB")
    _conv(np.random.default_rng(6), "DEPTHWISE_CONV_2D", (1, 20, 20, 24), (3, 3), 0, (2, 2),
          (1, 1), SAME, RELU6, cfg="4 KiB")


@pytest.mark.parametrize("case", [
    ((1, 9, 9, 4), (3, 3), 0, (1, 1), (1, 1), SAME, RELU6, 1),
    ((1, 10, 9, 3), (3, 3), 0, (2, 2), (1, 1), SAME, 0, 2),
    ((1, 12, 12, 8), (5, 5), 0, (1, 1), (2, 2), VALID, RELU, 1),
    ((1, 7, 7, 6), (3, 3), 0, (2, 2), (1, 1), VALID, 0, 1),
])
def test_depthwise_conv_2d(case):
    *rest, mult = case
    _conv(np.random.default_rng(len(str(case))), "DEPTHWISE_CONV_2D", *rest, depth_mult=mult)


@pytest.mark.parametrize("case", [((1, 4, 4, 3), (3, 3), 5, 2, SAME), ((1, 5, 3, 4), (2, 2), 3, 2, VALID),
                                  ((1, 3, 3, 2), (3, 3), 4, 1, SAME), ((1, 4, 5, 3), (4, 4), 2, 2, SAME)])
def test_transpose_conv(case):
    rng = np.random.default_rng(7 + case[2])
    shape, (kh, kw), oc, s, pad = case
    n, h, w, c = shape
    oh, ow = (h * s, w * s) if pad == SAME else ((h - 1) * s + kh, (w - 1) * s + kw)
    m = Model()
    s_in, z_in = _q(rng)
    x = m.input(shape, s_in, z_in)
    ws = rng.uniform(0.002, 0.02, oc)
    wt = m.const(rng.integers(-127, 128, (oc, kh, kw, c)), np.int8, scale=ws, zp=[0] * oc)
    bt = m.const(rng.integers(-2000, 2000, oc), np.int32, scale=s_in * ws, zp=[0] * oc)
    os_ = m.const([n, oh, ow, oc], np.int32)
    y = m.output((n, oh, ow, oc), *_q(rng))
    m.op("TRANSPOSE_CONV", [os_, wt, x, bt], [y],
         options("TransposeConvOptions", padding=pad, strideH=s, strideW=s), "TransposeConvOptions")
    check(m, rng)


@pytest.mark.parametrize("case", [((1, 16), 10, 0, False, False), ((3, 20), 7, RELU, False, False),
                                  ((2, 3, 12), 5, RELU6, True, False), ((1, 64), 200, 0, False, False),
                                  ((2, 24), 9, RELU_N1, False, True)])
def test_fully_connected(case):
    shape, n, act, keep, per_channel = case
    rng = np.random.default_rng(n)
    k = shape[-1]
    m = Model()
    s_in, z_in = _q(rng)
    x = m.input(shape, s_in, z_in)
    ws = rng.uniform(0.002, 0.02, n) if per_channel else float(rng.uniform(0.002, 0.02))
    zps = [0] * n if per_channel else 0
    wt = m.const(rng.integers(-127, 128, (n, k)), np.int8, scale=ws, zp=zps)
    bt = m.const(rng.integers(-2000, 2000, n), np.int32, scale=s_in * np.asarray(ws), zp=zps)
    out_shape = shape[:-1] + (n,) if keep else (int(np.prod(shape[:-1])), n)
    y = m.output(out_shape, *_q(rng))
    m.op("FULLY_CONNECTED", [x, wt, bt], [y], options("FullyConnectedOptions",
         fusedActivationFunction=act, keepNumDims=keep), "FullyConnectedOptions")
    check(m, rng)


@pytest.mark.parametrize("scales", ["per-tensor", "per-channel", "dyadic"])
def test_fully_connected_rounds_once_as_the_reference_kernel(scales):
    """The reference FULLY_CONNECTED rounds acc * (in_scale * w_scale / out_scale) once, halves
    away from zero: 4,096 outputs, where TFLite's two roundings (MultiplyByQuantizedMultiplier)
    differ in about one in 500; with power-of-two scales many products are exact halves, of
    both signs."""
    rng = np.random.default_rng(17)
    k, n, rows = 256, 64, 64
    m = Model()
    dyadic = scales == "dyadic"
    s_in, z_in = (0.5, 3) if dyadic else _q(rng)
    x = m.input((rows, k), s_in, z_in)
    ws = 0.25 if dyadic else rng.uniform(0.002, 0.02, n) if scales == "per-channel" else 0.01
    zps = [0] * n if scales == "per-channel" else 0
    wt = m.const(rng.integers(-127, 128, (n, k)), np.int8, scale=ws, zp=zps)
    bt = m.const(rng.integers(-2000, 2000, n), np.int32, scale=s_in * np.asarray(ws), zp=zps)
    y = m.output((rows, n), 256.0 if dyadic else 0.05 * k * 0.01, -5)
    m.op("FULLY_CONNECTED", [x, wt, bt], [y], options("FullyConnectedOptions"),
         "FullyConnectedOptions")
    check(m, rng)


@pytest.mark.parametrize("case", [((2, 3, 4), (2, 4, 5), False, False), ((1, 5, 3), (1, 5, 4), True, False),
                                  ((2, 2, 3, 6), (1, 1, 6, 3), False, False), ((3, 4, 6), (3, 5, 6), False, True)])
def test_batch_matmul(case):
    a, c, adj_x, adj_y = case
    rng = np.random.default_rng(len(a) * 10 + a[-1])
    m = Model()
    x = m.input(a, *_q(rng))
    y = m.input(c, *_q(rng))
    mm = a[-1] if adj_x else a[-2]
    nn = c[-2] if adj_y else c[-1]
    batch = np.broadcast_shapes(a[:-2], c[:-2])
    out = m.output(tuple(batch) + (mm, nn), float(rng.uniform(0.5, 2)), int(rng.integers(-20, 20)))
    m.op("BATCH_MATMUL", [x, y], [out], options("BatchMatMulOptions", adjX=adj_x, adjY=adj_y),
         "BatchMatMulOptions")
    check(m, rng)


def _binary(op, a, c, act=0, seed=0, same_quant=False, opts=None):
    rng = np.random.default_rng(seed)
    m = Model()
    qa = _q(rng)
    x = m.input(a, *qa)
    y = m.input(c, *(qa if same_quant else _q(rng)))
    out = m.output(tuple(np.broadcast_shapes(a, c)), *(qa if same_quant else _q(rng)))
    if opts:
        m.op(op, [x, y], [out], options(opts, fusedActivationFunction=act), opts)
    else:
        m.op(op, [x, y], [out])
    check(m, rng)


SHAPES2 = [((1, 4, 4, 8), (1, 4, 4, 8)), ((2, 3, 5), (5,)), ((1, 6, 6, 3), (1, 1, 1, 3))]


@pytest.mark.parametrize("shapes", SHAPES2)
@pytest.mark.parametrize("op,opts", [("ADD", "AddOptions"), ("SUB", "SubOptions"),
                                     ("MUL", "MulOptions")])
def test_add_sub_mul(op, opts, shapes):
    for seed, act in ((1, 0), (2, RELU6)):
        _binary(op, *shapes, act=act, seed=seed + len(shapes[1]), opts=opts)


@pytest.mark.parametrize("shapes", SHAPES2)
def test_squared_difference(shapes):
    _binary("SQUARED_DIFFERENCE", *shapes, seed=3)


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("shapes", SHAPES2)
def test_maximum_minimum(op, shapes):
    _binary(op, *shapes, seed=4, same_quant=True)


def _pool(op, shape, k, s, pad, act, seed):
    rng = np.random.default_rng(seed)
    m = Model()
    q = _q(rng)
    x = m.input(shape, *q)
    n, h, w, c = shape
    oh = -(-h // s[0]) if pad == SAME else (h - k[0]) // s[0] + 1
    ow = -(-w // s[1]) if pad == SAME else (w - k[1]) // s[1] + 1
    y = m.output((n, oh, ow, c), *q)
    m.op(op, [x], [y], options("Pool2DOptions", padding=pad, strideH=s[0], strideW=s[1],
                               filterHeight=k[0], filterWidth=k[1], fusedActivationFunction=act),
         "Pool2DOptions")
    check(m, rng)
    return load_tflite_bytes(m.serialize(), "pool.tflite").op_histogram()


POOLS = [((1, 8, 8, 4), (2, 2), (2, 2), VALID, 0), ((1, 9, 7, 3), (3, 3), (2, 2), SAME, RELU),
         ((2, 6, 6, 5), (3, 2), (1, 1), SAME, 0), ((1, 7, 7, 8), (7, 7), (1, 1), VALID, RELU6),
         ((1, 10, 10, 2), (4, 4), (3, 3), SAME, 0), ((1, 9, 9, 4), (3, 3), (3, 3), VALID, 0),
         ((1, 7, 7, 6), (5, 5), (2, 2), SAME, 0), ((1, 6, 8, 3), (2, 4), (2, 2), VALID, 0),
         ((1, 12, 12, 5), (3, 2), (3, 2), VALID, RELU6), ((1, 14, 14, 3), (14, 14), (1, 1), VALID, 0)]
# every window's count of input elements odd (7x7, 3x3 inside, 5x5 whose padded edge
# windows hold 3 rows): one AVG_POOL2D, as no average is exactly half way
ODD = {POOLS[3], POOLS[5], POOLS[6]}
# windows of one even count inside the input, and at least as many output pixels as taps:
# sums from the array (2x2, 2x4 and 3x2 windows; ties of every sign in random int8 data)
SUMMED = {POOLS[0], POOLS[7], POOLS[8]}


@pytest.mark.parametrize("case", POOLS)
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pools(op, case):
    ops = _pool(op, *case, seed=len(str(case)))
    if op == "AVERAGE_POOL_2D":
        want = {"AVG_POOL2D": 0, "DEPTHWISE_CONV2D": 1} if case in SUMMED else {
            "AVG_POOL2D": 1 if case in ODD else 2, "DEPTHWISE_CONV2D": 0}
        assert {k: ops.get(k, 0) for k in want} == want, ops


@pytest.mark.parametrize("count", [2, 4, 6, 8, 16, 196, 4096])
def test_exact_division_is_tflites_average_of_every_window_sum(count):
    from npu_sim.compiler.frontends.tflite import pool
    from npu_sim.datapath.scale import apply_scale_32

    multiplier, shift = pool._exact_division(count)
    sums = np.arange(-128 * count, 127 * count + 1)
    got = apply_scale_32(sums << pool.SUM_WEIGHT_LOG2, multiplier, shift, True)
    half = count // 2   # TFLite: (sum +- half) / count, truncated, by the sum's sign
    want = [int((s + half) / count) if s > 0 else -int((half - s) / count) for s in sums.tolist()]
    assert got.tolist() == want


@pytest.mark.parametrize("shape,beta", [((1, 10), 1.0), ((2, 3, 7), 1.0), ((4, 33), 0.5), ((1, 1, 2, 300), 2.0)])
def test_softmax(shape, beta):
    rng = np.random.default_rng(shape[-1])
    m = Model()
    x = m.input(shape, float(rng.uniform(0.02, 0.3)), int(rng.integers(-30, 30)))
    y = m.output(shape, 1 / 256, -128)
    m.op("SOFTMAX", [x], [y], options("SoftmaxOptions", beta=beta), "SoftmaxOptions")
    check(m, rng)


def _unary(op, shape, q_in, q_out, opts=None, opts_type=None, seed=0):
    rng = np.random.default_rng(seed)
    m = Model()
    x = m.input(shape, *q_in)
    y = m.output(shape, *q_out)
    m.op(op, [x], [y], opts, opts_type)
    check(m, rng)


@pytest.mark.parametrize("q_in", [(0.05, 0), (0.1, -20), (0.02, 40), (0.3, 7), (0.0078125, -128)])
@pytest.mark.parametrize("op,q_out", [("LOGISTIC", (1 / 256, -128)), ("TANH", (1 / 128, 0)),
                                      ("HARD_SWISH", (0.04, -10)), ("RELU", (0.03, -128)),
                                      ("RELU6", (6 / 255, -128)), ("RELU_N1_TO_1", (2 / 255, 0)),
                                      ("RELU_0_TO_1", (1 / 255, -128)),
                                      ("QUANTIZE", (0.07, 5))])
def test_unary(op, q_out, q_in):
    _unary(op, (1, 5, 5, 11), q_in, q_out, seed=int(q_in[0] * 100))


def _every_byte(op, q_in, q_out, lowest=-128, opts=None, opts_type=None):
    """The builtin on every int8 input from `lowest` up: its whole table."""
    m = Model()
    values = np.arange(lowest, 128, dtype=np.int8)
    x = m.input(values.shape, *q_in)
    y = m.output(values.shape, *q_out)
    m.op(op, [x], [y], opts, opts_type)
    check(m, np.random.default_rng(0), feed={"in0": values})


@pytest.mark.parametrize("approximate", [False, True])
@pytest.mark.parametrize("q_in,q_out", [((0.05, 0), (0.03, -40)), ((0.1, -20), (0.08, 10)),
                                        ((0.02, 40), (0.01, -100))])
def test_gelu(approximate, q_in, q_out):
    _every_byte("GELU", q_in, q_out, opts=options("GeluOptions", approximate=approximate),
                opts_type="GeluOptions")


@pytest.mark.parametrize("q_in,q_out", [((0.05, -128), (0.02, -128)), ((0.003, 0), (0.1, -100)),
                                        ((0.5, -50), (0.01, 3)), ((1e-4, -100), (1.0, -128))])
def test_rsqrt(q_in, q_out):
    """Every input at or above the zero point (below it the reference kernel stops: RSQRT of a
    negative real)."""
    _every_byte("RSQRT", q_in, q_out, lowest=q_in[1])


@pytest.mark.parametrize("alpha,q_in,q_out", [(0.1, (0.05, 3), (0.04, -7)), (0.3, (0.1, -20), (0.08, 10)),
                                             (0.01, (0.02, 60), (0.03, -100)), (0.9, (0.2, 0), (0.2, 0))])
def test_leaky_relu(alpha, q_in, q_out):
    _unary("LEAKY_RELU", (2, 40), q_in, q_out, options("LeakyReluOptions", alpha=alpha),
           "LeakyReluOptions")


@pytest.mark.parametrize("alpha_shape,q", [((1, 1, 6), (0.05, 2, 0.01, 4, 0.04, -3)),
                                           ((6,), (0.1, -10, 0.02, -5, 0.06, 7)),
                                           ((4, 4, 6), (0.03, 50, 0.005, 0, 0.05, -60))])
def test_prelu(alpha_shape, q):
    rng = np.random.default_rng(1)
    m = Model()
    x = m.input((1, 4, 4, 6), q[0], q[1])
    a = m.const(rng.integers(-128, 128, alpha_shape), np.int8, scale=q[2], zp=q[3])
    y = m.output((1, 4, 4, 6), q[4], q[5])
    m.op("PRELU", [x, a], [y])
    check(m, rng)


@pytest.mark.parametrize("shape,scale,zp", [((1, 10), 0.1, 0), ((2, 3, 7), 0.05, -20),
                                            ((4, 33), 0.3, 10), ((1, 2, 100), 0.02, 5)])
def test_log_softmax(shape, scale, zp):
    rng = np.random.default_rng(shape[-1])
    m = Model()
    x = m.input(shape, scale, zp)
    y = m.output(shape, 16 / 256, 127)
    m.op("LOG_SOFTMAX", [x], [y])
    check(m, rng)
