"""float32 TFLite builtins, and the QUANTIZE/DEQUANTIZE of float-edged models, as single-operator
models over several shapes: compiled and simulated, within 1e-5 of the output range of TFLite's
reference kernels (ai-edge-litert, BUILTIN_REF); DEQUANTIZE is exact, and QUANTIZE's integers
are equal except where TFLite's quotient x / scale lies within an ulp of a half (TOSA has no
float division: the frontend multiplies by the fp32 reciprocal)."""
import numpy as np
import pytest
from ai_edge_litert.interpreter import OpResolverType

from tflite_support import Model, check_float, float_input, float_output, options, run_both

F = np.float32
SAME, VALID = 0, 1
RELU, RELU_N1, RELU6 = 1, 2, 3


_model = Model
_in, _out = float_input, float_output


SHAPES2 = [((1, 4, 4, 8), (1, 4, 4, 8)), ((2, 3, 5), (5,)), ((1, 6, 6, 3), (1, 1, 1, 3))]


@pytest.mark.parametrize("shapes", SHAPES2)
@pytest.mark.parametrize("op,opts", [("ADD", "AddOptions"), ("SUB", "SubOptions"),
                                     ("MUL", "MulOptions"), ("SQUARED_DIFFERENCE", None),
                                     ("MAXIMUM", None), ("MINIMUM", None)])
def test_binary(op, opts, shapes):
    a, c = shapes
    rng = np.random.default_rng(len(op) + len(c))
    for act in ((0, RELU6) if opts else (0,)):
        m = _model()
        x, y = _in(m, a), _in(m, c)
        out = _out(m, tuple(np.broadcast_shapes(a, c)))
        if opts:
            m.op(op, [x, y], [out], options(opts, fusedActivationFunction=act), opts)
        else:
            m.op(op, [x, y], [out])
        check_float(m, rng)


POOLS = [((1, 8, 8, 4), (2, 2), (2, 2), VALID, 0), ((1, 9, 7, 3), (3, 3), (2, 2), SAME, RELU),
         ((1, 48, 48, 6), (2, 2), (2, 2), SAME, 0), ((1, 9, 9, 5), (2, 2), (2, 2), SAME, 0)]


@pytest.mark.parametrize("case", POOLS)
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"])
def test_pools(op, case):
    shape, k, s, pad, act = case
    rng = np.random.default_rng(len(str(case)))
    m = _model()
    x = _in(m, shape)
    n, h, w, c = shape
    oh = -(-h // s[0]) if pad == SAME else (h - k[0]) // s[0] + 1
    ow = -(-w // s[1]) if pad == SAME else (w - k[1]) // s[1] + 1
    y = _out(m, (n, oh, ow, c))
    m.op(op, [x], [y], options("Pool2DOptions", padding=pad, strideH=s[0], strideW=s[1],
                               filterHeight=k[0], filterWidth=k[1], fusedActivationFunction=act),
         "Pool2DOptions")
    check_float(m, rng)


def _unary(op, shape, opts=None, opts_type=None, seed=0, scale=1.0, out_dtype=F, extra=(),
           kernels=OpResolverType.BUILTIN_REF):
    rng = np.random.default_rng(seed)
    m = _model()
    x = _in(m, shape)
    y = m.output(shape, None, None, dtype=out_dtype)
    m.op(op, [x, *extra], [y], opts, opts_type)
    feed = {"in0": (rng.standard_normal(shape) * scale).astype(F)}
    check_float(m, rng, feed=feed, kernels=kernels)


@pytest.mark.parametrize("shape", [(1, 10), (2, 3, 7), (1, 1, 2, 300)])
@pytest.mark.parametrize("op", ["LOGISTIC", "TANH", "HARD_SWISH", "RELU", "RELU6", "RELU_N1_TO_1",
                                "RELU_0_TO_1"])
def test_unary(op, shape):
    _unary(op, shape, seed=shape[-1], scale=4.0)


@pytest.mark.parametrize("shape,beta", [((1, 3), 1.0), ((2, 3, 7), 1.0), ((4, 33), 0.5),
                                        ((1, 2, 300), 2.0)])
@pytest.mark.parametrize("op", ["SOFTMAX", "LOG_SOFTMAX"])
def test_softmax(op, shape, beta):
    opts = (options("SoftmaxOptions", beta=beta), "SoftmaxOptions") if op == "SOFTMAX" else ()
    if op == "LOG_SOFTMAX" and beta != 1.0:
        return
    _unary(op, shape, *opts, seed=shape[-1], scale=3.0)


@pytest.mark.parametrize("op,positive", [("ABS", False), ("NEG", False), ("EXP", False),
                                         ("SIN", False), ("COS", False), ("LOG", True),
                                         ("RSQRT", True), ("SQRT", True)])
def test_float_math(op, positive):
    """Inputs of magnitude up to ~6 (within a few ulp of TFLite's libm), positive for LOG,
    RSQRT and SQRT, with an exact zero for SQRT."""
    rng = np.random.default_rng(len(op))
    shape = (2, 3, 9)
    v = (rng.standard_normal(shape) * 2).astype(F)
    if positive:
        v = np.abs(v) + F(0.01)
    if op == "SQRT":
        v[0, 0, 0] = 0.0
    m = _model()
    y = _out(m, shape)
    m.op(op, [_in(m, shape)], [y])
    check_float(m, rng, feed={"in0": v})


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu(approximate):
    """GELU over [-8, 8] (its tail below -5 is tinier than the output range's 1e-5)."""
    rng = np.random.default_rng(9)
    shape = (4, 64)
    m = _model()
    y = _out(m, shape)
    m.op("GELU", [_in(m, shape)], [y], options("GeluOptions", approximate=approximate),
         "GeluOptions")
    check_float(m, rng, feed={"in0": rng.uniform(-8, 8, shape).astype(F)})


@pytest.mark.parametrize("op,opts", [("DIV", "DivOptions"), ("POW", None)])
def test_div_and_pow(op, opts):
    rng = np.random.default_rng(len(op))
    m = _model()
    x, e = _in(m, (2, 3, 5)), _in(m, (1, 1, 5))
    y = _out(m, (2, 3, 5))
    if opts:
        m.op(op, [x, e], [y], options(opts, fusedActivationFunction=RELU), opts)
    else:
        m.op(op, [x, e], [y])
    base = rng.standard_normal((2, 3, 5)).astype(F)
    other = rng.uniform(0.5, 2.0, (1, 1, 5)).astype(F)
    if op == "POW":                      # a positive base: real powers
        base = np.abs(base) + F(0.1)
    check_float(m, rng, feed={"in0": base, "in1": other})


@pytest.mark.parametrize("shape", [(1, 10), (2, 3, 7), (1, 2, 2, 40)])
def test_l2_normalization(shape):
    _unary("L2_NORMALIZATION", shape, options("L2NormOptions"), "L2NormOptions", seed=shape[-1],
           scale=3.0)


@pytest.mark.parametrize("shape,radius,bias,alpha,beta", [
    ((1, 2, 2, 6), 2, 1.0, 1.0, 0.5), ((1, 3, 3, 12), 3, 2.0, 0.1, 0.75),
    ((1, 1, 1, 5), 9, 0.5, 0.3, 1.5)])            # a radius past the depth
def test_local_response_normalization(shape, radius, bias, alpha, beta):
    """Against TFLite's default kernel: its reference kernel sums the channels [c - r, c + r),
    one short of TensorFlow's definition, which the default kernel and NNAPI's follow."""
    _unary("LOCAL_RESPONSE_NORMALIZATION", shape,
           options("LocalResponseNormalizationOptions", radius=radius, bias=bias, alpha=alpha,
                   beta=beta), "LocalResponseNormalizationOptions", seed=radius, scale=2.0,
           kernels=OpResolverType.BUILTIN)


@pytest.mark.parametrize("alpha", [0.1, 0.3])
def test_leaky_relu(alpha):
    _unary("LEAKY_RELU", (2, 40), options("LeakyReluOptions", alpha=alpha), "LeakyReluOptions")


@pytest.mark.parametrize("alpha_shape", [(1, 1, 6), (6,), (4, 4, 6)])
def test_prelu(alpha_shape):
    rng = np.random.default_rng(1)
    m = _model()
    x = _in(m, (1, 4, 4, 6))
    a = m.const(rng.uniform(-0.5, 0.5, alpha_shape), F)
    y = _out(m, (1, 4, 4, 6))
    m.op("PRELU", [x, a], [y])
    check_float(m, rng)


@pytest.mark.parametrize("op", ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"])
@pytest.mark.parametrize("shape,axes,keep", [((1, 6, 6, 4), (1, 2), True), ((2, 5, 7), (2,), False),
                                             ((3, 4, 5), (0, 2), True)])
def test_reductions(op, shape, axes, keep):
    rng = np.random.default_rng(len(axes))
    m = _model()
    x = _in(m, shape)
    out = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep else \
        tuple(d for i, d in enumerate(shape) if i not in axes)
    y = _out(m, out)
    m.op(op, [x, m.const(np.array(axes, np.int32))], [y], options("ReducerOptions", keepDims=keep),
         "ReducerOptions")
    check_float(m, rng)


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("shape,axis", [((2, 9), 1), ((3, 4, 5), 0)])
def test_arg(op, shape, axis):
    rng = np.random.default_rng(axis)
    m = _model()
    x = _in(m, shape)
    y = m.output(tuple(d for i, d in enumerate(shape) if i != axis), dtype=np.int32, scale=None)
    cls = "ArgMaxOptions" if op == "ARG_MAX" else "ArgMinOptions"
    m.op(op, [x, m.const(np.array([axis], np.int32))], [y],
         options(cls, outputType=2), cls)
    check_float(m, rng)


@pytest.mark.parametrize("case", [((1, 4, 4, 3), (8, 8), False, True), ((1, 5, 3, 2), (7, 9), True, False),
                                  ((1, 6, 6, 2), (3, 4), False, False)])
def test_resize_bilinear(case):
    shape, size, align, half = case
    rng = np.random.default_rng(size[0])
    m = _model()
    x = _in(m, shape)
    y = _out(m, (shape[0], *size, shape[3]))
    m.op("RESIZE_BILINEAR", [x, m.const(np.array(size, np.int32))], [y],
         options("ResizeBilinearOptions", alignCorners=align, halfPixelCenters=half),
         "ResizeBilinearOptions")
    check_float(m, rng)


def test_layout_builtins_carry_floats():
    """RESHAPE, TRANSPOSE, PAD, CONCATENATION, SLICE, GATHER and TILE on float32 data."""
    rng = np.random.default_rng(9)
    m = _model()
    x = _in(m, (1, 4, 6, 3))
    r = m.tensor((1, 6, 4, 3), F)
    m.op("TRANSPOSE", [x, m.const(np.array([0, 2, 1, 3], np.int32))], [r])
    p = m.tensor((1, 8, 4, 3), F)
    m.op("PAD", [r, m.const(np.array([[0, 0], [1, 1], [0, 0], [0, 0]], np.int32))], [p])
    c = m.tensor((1, 8, 4, 6), F)
    m.op("CONCATENATION", [p, p], [c], options("ConcatenationOptions", axis=3),
         "ConcatenationOptions")
    s = m.tensor((1, 3, 4, 6), F)
    m.op("SLICE", [c, m.const(np.array([0, 2, 0, 0], np.int32)),
                   m.const(np.array([1, 3, 4, 6], np.int32))], [s])
    g = m.tensor((1, 3, 2, 6), F)
    m.op("GATHER", [s, m.const(np.array([3, 0], np.int32))], [g],
         options("GatherOptions", axis=2), "GatherOptions")
    t = m.tensor((6, 6), F)
    m.op("RESHAPE", [g, m.const(np.array([6, 6], np.int32))], [t])
    y = _out(m, (12, 6))
    m.op("TILE", [t, m.const(np.array([2, 1], np.int32))], [y])
    check_float(m, rng)


# the float edges -----------------------------------------------------------------------------

def _quotient_near_half(x: np.ndarray, scale: float) -> np.ndarray:
    """Where TFLite's fp32 quotient x / scale is within two ulp of a half-integer."""
    q = np.abs(x.astype(F) / F(scale))
    return np.abs(q - np.floor(q) - 0.5) <= 2 * np.spacing(q)


@pytest.mark.parametrize("shape,scale,zp", [((1, 96, 96, 1), 0.0329434908926487, -9),
                                            ((1, 140), 0.003455499652773142, -111),
                                            ((4, 50), 0.05, 0), ((2, 7, 9), 1 / 64, 17)])
def test_quantize_float_to_int8(shape, scale, zp):
    rng = np.random.default_rng(len(shape))
    m = _model()
    x = _in(m, shape)
    y = m.output(shape, scale, zp)
    m.op("QUANTIZE", [x], [y])
    values = rng.standard_normal(shape) * (140 * scale)            # reaches both saturations
    values.flat[:6] = np.array([0.5, -0.5, 1.5, -2.5, 126.5, -127.5]) * scale  # halves
    feed = {"in0": values.astype(F)}
    _, ref, got = run_both(m, rng, feed=feed)
    want, have = ref["out0"], got["out0"]
    assert have.dtype == np.int8 and have.shape == want.shape
    differ = have != want
    assert not np.any(differ & ~_quotient_near_half(feed["in0"], scale))
    assert np.all(np.abs(have.astype(int) - want.astype(int)) <= 1)
    assert np.sum(differ.flat[6:]) <= 2          # the random values (the planted halves aside)


@pytest.mark.parametrize("shape,scale,zp", [((1, 3), 1 / 256, -128), ((2, 5, 11), 0.0137, 9),
                                            ((1, 140), 0.00390625, -128)])
def test_dequantize_is_exact(shape, scale, zp):
    rng = np.random.default_rng(shape[-1])
    m = _model()
    x = m.input(shape, scale, zp)
    y = _out(m, shape)
    m.op("DEQUANTIZE", [x], [y])
    _, ref, got = run_both(m, rng)
    assert got["out0"].dtype == np.float32 and np.array_equal(got["out0"], ref["out0"])
