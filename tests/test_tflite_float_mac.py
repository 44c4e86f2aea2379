"""float32 TFLite MAC builtins (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED,
BATCH_MATMUL) as single-operator models over several shapes, strides, dilations, paddings and
fused activations: compiled and simulated, within 1e-5 of the output range of TFLite's
reference kernels (ai-edge-litert, BUILTIN_REF)."""
import numpy as np
import pytest

from tflite_support import Model, check_float, float_input, float_output, options

F = np.float32
SAME, VALID = 0, 1
RELU, RELU_N1, RELU6 = 1, 2, 3
FP32_MACS = "large-8k"      # the preset whose MAC array has an fp32 x fp32 mode (default has none)


_model = Model
_in, _out = float_input, float_output


def _conv(op, shape, k, oc, stride, dil, padding, act, mult=1, seed=0):
    rng = np.random.default_rng(seed)
    m = _model()
    n, h, w, c = shape
    x = _in(m, shape)
    nout = oc if op == "CONV_2D" else c * mult
    wshape = (oc, *k, c) if op == "CONV_2D" else (1, *k, nout)
    wt = m.const(rng.standard_normal(wshape) * 0.3, F)
    bt = m.const(rng.standard_normal(nout), F)
    eff = [(kk - 1) * d + 1 for kk, d in zip(k, dil)]
    oh, ow = ((-(-h // stride[0]), -(-w // stride[1])) if padding == SAME else
              ((h - eff[0]) // stride[0] + 1, (w - eff[1]) // stride[1] + 1))
    y = _out(m, (n, oh, ow, nout))
    common = dict(padding=padding, strideH=stride[0], strideW=stride[1], dilationHFactor=dil[0],
                  dilationWFactor=dil[1], fusedActivationFunction=act)
    if op == "CONV_2D":
        m.op(op, [x, wt, bt], [y], options("Conv2DOptions", **common), "Conv2DOptions")
    else:
        m.op(op, [x, wt, bt], [y], options("DepthwiseConv2DOptions", depthMultiplier=mult,
                                           **common), "DepthwiseConv2DOptions")
    check_float(m, rng, FP32_MACS)


@pytest.mark.parametrize("case", [
    ((1, 9, 9, 3), (3, 3), 8, (1, 1), (1, 1), SAME, 0),
    ((1, 10, 7, 5), (3, 2), 6, (2, 2), (1, 1), SAME, RELU),
    ((2, 11, 11, 4), (3, 3), 16, (2, 1), (1, 1), VALID, RELU6),
    ((1, 12, 12, 3), (3, 3), 4, (1, 1), (2, 2), SAME, RELU_N1),
])
def test_conv_2d(case):
    _conv("CONV_2D", *case, seed=len(str(case)))


@pytest.mark.parametrize("case", [
    ((1, 9, 9, 4), (3, 3), 0, (1, 1), (1, 1), SAME, RELU6, 1),
    ((1, 10, 9, 3), (3, 3), 0, (2, 2), (1, 1), SAME, 0, 2),
    ((1, 12, 12, 8), (5, 5), 0, (1, 1), (2, 2), VALID, RELU, 1),
])
def test_depthwise_conv_2d(case):
    *rest, mult = case
    _conv("DEPTHWISE_CONV_2D", *rest, mult=mult, seed=len(str(case)))


@pytest.mark.parametrize("case", [((1, 4, 4, 3), (3, 3), 5, 2, SAME), ((1, 5, 3, 4), (2, 2), 3, 2, VALID)])
def test_transpose_conv(case):
    rng = np.random.default_rng(case[2])
    shape, (kh, kw), oc, s, pad = case
    n, h, w, c = shape
    oh, ow = (h * s, w * s) if pad == SAME else ((h - 1) * s + kh, (w - 1) * s + kw)
    m = _model()
    x = _in(m, shape)
    wt = m.const(rng.standard_normal((oc, kh, kw, c)), F)
    bt = m.const(rng.standard_normal(oc), F)
    y = _out(m, (n, oh, ow, oc))
    m.op("TRANSPOSE_CONV", [m.const([n, oh, ow, oc], np.int32), wt, x, bt], [y],
         options("TransposeConvOptions", padding=pad, strideH=s, strideW=s), "TransposeConvOptions")
    check_float(m, rng, FP32_MACS)


@pytest.mark.parametrize("case", [((1, 16), 10, 0, True), ((3, 20), 7, RELU, False),
                                  ((2, 3, 12), 5, RELU6, True), ((1, 140), 32, RELU, True)])
def test_fully_connected(case):
    shape, n, act, bias = case
    rng = np.random.default_rng(n)
    m = _model()
    x = _in(m, shape)
    wt = m.const(rng.standard_normal((n, shape[-1])) * 0.2, F)
    bt = m.const(rng.standard_normal(n), F) if bias else -1
    y = _out(m, (int(np.prod(shape[:-1])), n))
    m.op("FULLY_CONNECTED", [x, wt, bt], [y], options("FullyConnectedOptions",
         fusedActivationFunction=act), "FullyConnectedOptions")
    check_float(m, rng, FP32_MACS)


@pytest.mark.parametrize("case", [((2, 3, 4), (2, 4, 5), False, False), ((1, 5, 3), (1, 5, 4), True, False),
                                  ((2, 2, 3, 6), (1, 1, 6, 3), False, False)])
def test_batch_matmul(case):
    a, c, adj_x, adj_y = case
    rng = np.random.default_rng(len(a))
    m = _model()
    x, y = _in(m, a), _in(m, c)
    batch = np.broadcast_shapes(a[:-2], c[:-2])
    out = _out(m, tuple(batch) + ((a[-1] if adj_x else a[-2]), (c[-2] if adj_y else c[-1])))
    m.op("BATCH_MATMUL", [x, y], [out], options("BatchMatMulOptions", adjX=adj_x, adjY=adj_y),
         "BatchMatMulOptions")
    check_float(m, rng, FP32_MACS)


@pytest.mark.parametrize("op", ["CONV_2D", "FULLY_CONNECTED"])
def test_float16_quantized_weights(op):
    """TFLite's float16 post-training quantization: float16 weights and bias, each widened by a
    DEQUANTIZE, feeding a float32 MAC builtin (the frontend folds the exact widening)."""
    rng = np.random.default_rng(len(op))
    m = _model()
    shape, wshape = ((1, 6, 6, 3), (8, 3, 3, 3)) if op == "CONV_2D" else ((2, 24), (8, 24))
    x = _in(m, shape)
    widened = []
    for data in (rng.standard_normal(wshape) * 0.3, rng.standard_normal(8)):
        half = m.const(data, np.float16)
        wide = m.tensor(data.shape, F)
        m.op("DEQUANTIZE", [half], [wide])
        widened.append(wide)
    if op == "CONV_2D":
        y = _out(m, (1, 6, 6, 8))
        m.op(op, [x, *widened], [y], options("Conv2DOptions", padding=SAME, strideH=1, strideW=1,
                                             fusedActivationFunction=RELU), "Conv2DOptions")
    else:
        y = _out(m, (2, 8))
        m.op(op, [x, *widened], [y], options("FullyConnectedOptions"), "FullyConnectedOptions")
    check_float(m, rng, FP32_MACS)


def test_run_time_weights():
    """FULLY_CONNECTED whose weights and bias are graph inputs, not constants."""
    rng = np.random.default_rng(3)
    m = _model()
    x, wt, bt = _in(m, (3, 20)), _in(m, (7, 20)), _in(m, (7,))
    y = _out(m, (3, 7))
    m.op("FULLY_CONNECTED", [x, wt, bt], [y], options("FullyConnectedOptions",
         fusedActivationFunction=RELU), "FullyConnectedOptions")
    check_float(m, rng, FP32_MACS)
