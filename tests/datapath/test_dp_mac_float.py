"""The MAC kernels' float path: exact float64 products and sums for every TOSA float type,
one round-to-nearest per accumulator, and results that do not depend on how outputs are tiled."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from npu_sim.datapath import mac

TYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16,
         "fp8e4m3": ml_dtypes.float8_e4m3fn, "fp8e5m2": ml_dtypes.float8_e5m2}


def _data(rng, shape, dtype):
    return (rng.standard_normal(shape) * 2).astype(TYPES[dtype])


def _conv_ref(x, w, pad, stride):
    """CONV2D in float64 by the spec's loops (products of the stored values, summed)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    t, b, l, r = pad
    xp = np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)))
    oc, kh, kw, _ = w.shape
    oh = (xp.shape[1] - kh) // stride[0] + 1
    ow = (xp.shape[2] - kw) // stride[1] + 1
    out = np.zeros((x.shape[0], oh, ow, oc))
    for oy in range(oh):
        for ox in range(ow):
            win = xp[:, oy * stride[0]:oy * stride[0] + kh, ox * stride[1]:ox * stride[1] + kw]
            out[:, oy, ox] = np.einsum("nhwc,ohwc->no", win, w)
    return out


@pytest.mark.parametrize("dtype", sorted(TYPES))
def test_float_conv_and_matmul_sums_are_the_float64_sums(dtype):
    rng = np.random.default_rng(len(dtype))
    x, w = _data(rng, (2, 7, 6, 5), dtype), _data(rng, (3, 3, 2, 5), dtype)
    got = mac.conv2d_acc(x, w, (1, 0, 1, 1), (2, 1))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _conv_ref(x, w, (1, 0, 1, 1), (2, 1)), rtol=1e-13, atol=1e-13)
    a, b = _data(rng, (2, 4, 9), dtype), _data(rng, (2, 9, 3), dtype)
    np.testing.assert_allclose(mac.matmul_acc(a, b),
                               np.einsum("nhc,ncw->nhw", a.astype(np.float64), b.astype(np.float64)),
                               rtol=1e-13, atol=1e-13)
    dw = _data(rng, (3, 3, 5, 2), dtype)
    got = mac.depthwise_conv2d_acc(x, dw, (1, 1, 1, 1))
    full = np.repeat(x, 2, axis=-1)      # channel c*M+m reads input channel c
    ref = np.stack([_conv_ref(full[..., j:j + 1], dw.reshape(3, 3, 10)[None, ..., j:j + 1],
                              (1, 1, 1, 1), (1, 1))[..., 0] for j in range(10)], axis=-1)
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)


def test_float_transpose_conv_scatters_each_product_once():
    rng = np.random.default_rng(7)
    x, w = _data(rng, (1, 3, 4, 2), "fp16"), _data(rng, (3, 2, 3, 2), "fp16")
    got = mac.transpose_conv2d_acc(x, w, (2, 2))
    ref = np.zeros(got.shape)
    xf, wf = x.astype(np.float64), w.astype(np.float64)
    for iy in range(3):
        for ix in range(4):
            for ky in range(2):
                for kx in range(3):
                    ref[0, iy * 2 + ky, ix * 2 + kx] += wf[:, ky, kx] @ xf[0, iy, ix]
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)


def test_float_stage_rounds_once_to_the_accumulator_then_to_out_t_then_adds_the_bias():
    acc = np.array([1 + 2.0 ** -30, 1 + 3 * 2.0 ** -12, 65520.0, 2.0 ** -26])
    got = mac.float_stage(acc, acc_dtype="fp32", out_dtype=np.float16)
    assert got.dtype == np.float16
    with np.errstate(over="ignore"):                     # 65520 rounds to fp16's +inf
        want = acc.astype(np.float32).astype(np.float16)
    np.testing.assert_array_equal(got, want)
    bias = np.array([2.0 ** -11], np.float16)
    got = mac.float_stage(np.array([1.0]), acc_dtype="fp32", out_dtype=np.float16, bias=bias)
    assert got[0] == np.float16(1.0)     # 1 + half an ulp of fp16: ties to even
    raw = mac.float_stage(acc, acc_dtype="fp16", out_dtype=None)
    assert raw.dtype == np.float16 and raw[2] == np.inf    # past fp16's largest: +inf
    again = mac.float_stage(acc, acc_dtype="fp32", out_dtype=None, acc_in=np.float32([1, 1, 1, 1]))
    np.testing.assert_array_equal(again, (acc + 1).astype(np.float32))


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_float_sums_do_not_depend_on_how_outputs_are_tiled(dtype):
    """Rows and channels split into tiles give the same bytes as the whole (the reduction
    is the same set of products in the same order)."""
    rng = np.random.default_rng(3)
    x, w = _data(rng, (1, 12, 10, 24), dtype), _data(rng, (16, 3, 3, 24), dtype)
    out_t = np.float32 if dtype == "fp32" else TYPES[dtype]

    def stage(acc):
        return mac.float_stage(acc, acc_dtype="fp32", out_dtype=out_t).view(np.uint8)

    whole = stage(mac.conv2d_acc(x, w, (1, 1, 1, 1)))
    top = stage(mac.conv2d_acc(x[:, :7], w[:8], (1, 0, 1, 1)))    # rows 0..5, channels 0..7
    bottom = stage(mac.conv2d_acc(x[:, 5:], w[8:], (0, 1, 1, 1)))  # rows 6..11, channels 8..15
    n = np.dtype(out_t).itemsize
    np.testing.assert_array_equal(top, whole[:, :6, :, :8 * n])
    np.testing.assert_array_equal(bottom, whole[:, 6:, :, 8 * n:])
