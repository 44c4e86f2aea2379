"""The tensor operators on the machine: convolutions and MATMUL on the MAC array, pooling and
ARGMAX on the vector unit, and their whole-tensor host evaluations."""
from __future__ import annotations

import numpy as np

from .. import datapath as dp
from .common import HOST_OPS, MAC_KERNELS, SHAPE_CHECKS, VECTOR_KERNELS, VECTOR_WORK, HostCall, \
    check_stage, classed


def _sliding_window(kernel):
    """A convolution's tile: tile-local padding, the layer's stride, dilation and zero points."""
    def accumulate(x: dict, a: dict) -> np.ndarray:
        return kernel(x["ifm"], x["weights"], a["pad"], a["stride"], a["dilation"],
                      a["input_zp"], a["weight_zp"])
    return accumulate


MAC_KERNELS.register("conv2d")(_sliding_window(dp.conv2d_acc))
MAC_KERNELS.register("depthwise_conv2d")(_sliding_window(dp.depthwise_conv2d_acc))
MAC_KERNELS.register("conv3d")(_sliding_window(dp.conv3d_acc))


@MAC_KERNELS.register("transpose_conv2d")
def transpose_conv2d(x: dict, a: dict) -> np.ndarray:
    return dp.transpose_conv2d_acc(x["ifm"], x["weights"], a["stride"], a["out_pad_top"],
                                   a["out_pad_left"], a["in_origin"], a["out_origin"],
                                   a["out_size"], a["input_zp"], a["weight_zp"])


@MAC_KERNELS.register("matmul")
def matmul(x: dict, a: dict) -> np.ndarray:
    return dp.matmul_acc(x["a"], x["b"], a["a_zp"], a["b_zp"])


@VECTOR_KERNELS.register("avg_pool2d")
def avg_pool2d(x: dict, a: dict, out: np.ndarray):
    out[...] = dp.avg_pool2d(x["in0"], a["kernel"], a["stride"], a["pad"], a["input_zp"],
                             a["output_zp"], out.dtype)


@VECTOR_KERNELS.register("max_pool2d")
def max_pool2d(x: dict, a: dict, out: np.ndarray):
    out[...] = dp.max_pool2d(x["in0"], a["kernel"], a["stride"], a["pad"],
                             a.get("nan_mode", "PROPAGATE"))


@VECTOR_KERNELS.register("argmax")
def argmax(x: dict, a: dict, out: np.ndarray):
    out[...] = dp.argmax(x["in0"], a["axis"], a.get("nan_mode", "PROPAGATE"))


@VECTOR_WORK.register("avg_pool2d", "max_pool2d")
def pool_work(cmd) -> dict:
    """One lane operation per window element of every output."""
    return classed(cmd.op.upper(),
                   next(iter(cmd.outputs.values())).count * int(np.prod(cmd.attrs["kernel"])),
                   cmd.inputs["in0"].dtype)


@VECTOR_WORK.register("argmax")
def argmax_work(cmd) -> dict:
    return classed("ARGMAX", cmd.inputs["in0"].count, cmd.inputs["in0"].dtype)


# ---- host evaluation ---------------------------------------------------------------------------

def _acc_dtype(call: HostCall) -> str:
    return "int48" if np.dtype(call.out_dtypes[0]) == np.int64 else "int32"


def _biased(call: HostCall, acc, bias=True) -> list:
    b = call.inputs[2].reshape(-1) if bias else None
    if dp.is_float(call.inputs[0].dtype):     # MATMUL accumulates in its output type, convs in acc_type
        acc_type = call.attrs.get("acc_type") or ("fp16" if call.out_dtypes[0] == np.float16
                                                  else "fp32")
        return [dp.float_stage(acc, acc_dtype=acc_type, out_dtype=call.out_dtypes[0], bias=b)]
    return [dp.output_stage(acc, bias=b, out_dtype=call.out_dtypes[0], acc_dtype=_acc_dtype(call))]


def _window_host(kernel):
    def evaluate(call: HostCall) -> list:
        a = call.attrs
        return _biased(call, kernel(call.inputs[0], call.inputs[1], tuple(a["pad"]),
                                    tuple(a["stride"]), tuple(a["dilation"]), call.scalar(3),
                                    call.scalar(4)))
    return evaluate


HOST_OPS.register("CONV2D")(_window_host(dp.conv2d_acc))
HOST_OPS.register("DEPTHWISE_CONV2D")(_window_host(dp.depthwise_conv2d_acc))
HOST_OPS.register("CONV3D")(_window_host(dp.conv3d_acc))


@HOST_OPS.register("TRANSPOSE_CONV2D")
def transpose_conv2d_host(call: HostCall) -> list:
    a = call.attrs
    return _biased(call, dp.transpose_conv2d_acc(
        call.inputs[0], call.inputs[1], tuple(a["stride"]), a["out_pad"][0], a["out_pad"][2],
        out_size=tuple(call.out_shapes[0][1:3]), input_zp=call.scalar(3),
        weight_zp=call.scalar(4)))


@HOST_OPS.register("MATMUL")
def matmul_host(call: HostCall) -> list:
    return _biased(call, dp.matmul_acc(call.inputs[0], call.inputs[1], call.scalar(2),
                                       call.scalar(3)), bias=False)


@HOST_OPS.register("AVG_POOL2D")
def avg_pool2d_host(call: HostCall) -> list:
    a = call.attrs
    return [dp.avg_pool2d(call.inputs[0], tuple(a["kernel"]), tuple(a["stride"]), tuple(a["pad"]),
                          call.scalar(1), call.scalar(2), call.out_dtypes[0])]


@HOST_OPS.register("MAX_POOL2D")
def max_pool2d_host(call: HostCall) -> list:
    a = call.attrs
    return [dp.max_pool2d(call.inputs[0], tuple(a["kernel"]), tuple(a["stride"]), tuple(a["pad"]),
                          a.get("nan_mode", "PROPAGATE"))]


HOST_OPS.register("FFT2D")(lambda call: list(dp.fft2d(call.inputs[0], call.inputs[1],
                                                      bool(call.attrs.get("inverse")))))
HOST_OPS.register("RFFT2D")(lambda call: list(dp.rfft2d(call.inputs[0])))
HOST_OPS.register("ARGMAX")(lambda call: [dp.argmax(call.inputs[0], int(call.attrs["axis"]),
                                                    call.attrs.get("nan_mode", "PROPAGATE"))])


# ---- structural checks of loaded programs --------------------------------------------------------

def _convolution_check(spatial: int, depthwise: bool):
    def check(x: dict, a: dict, out, need) -> None:
        ifm, w, o = x["ifm"].shape, x["weights"].shape, out.shape
        need(len(ifm) == len(w) == len(o) == spatial + 2, f"operands of rank {spatial + 2}")
        kernel = w[:2] if depthwise else w[1:1 + spatial]
        channels = w[2] * w[3] if depthwise else w[0]
        need((w[2] if depthwise else w[-1]) == ifm[-1], "weights and IFM disagree on channels")
        pads = a["pad"]
        expect = [(i + pads[2 * j] + pads[2 * j + 1] - (k - 1) * d - 1) // st + 1 for j, (i, k, st, d)
                  in enumerate(zip(ifm[1:1 + spatial], kernel, a["stride"], a["dilation"]))]
        need(o == (ifm[0], *expect, channels), f"output shape should be {[ifm[0], *expect, channels]}")
        check_stage(x, out, need)
    return check


SHAPE_CHECKS.register("conv2d")(_convolution_check(2, False))
SHAPE_CHECKS.register("depthwise_conv2d")(_convolution_check(2, True))
SHAPE_CHECKS.register("conv3d")(_convolution_check(3, False))


@SHAPE_CHECKS.register("transpose_conv2d")
def check_transpose_conv2d(x: dict, a: dict, out, need) -> None:
    ifm, w = x["ifm"].shape, x["weights"].shape
    need(len(ifm) == len(w) == len(out.shape) == 4, "operands of rank 4")
    need(w[3] == ifm[3] and out.shape[3] == w[0], "channels of IFM, weights and output disagree")
    check_stage(x, out, need)


@SHAPE_CHECKS.register("matmul")
def check_matmul(x: dict, a: dict, out, need) -> None:
    (n, h, c), (n2, c2, w) = (x["a"].shape + (0, 0, 0))[:3], (x["b"].shape + (0, 0, 0))[:3]
    need(len(x["a"].shape) == len(x["b"].shape) == 3 and n == n2 and c == c2
         and out.shape == (n, h, w), "expected [N,H,C] x [N,C,W] -> [N,H,W]")
    check_stage(x, out, need)


@SHAPE_CHECKS.register("avg_pool2d", "max_pool2d")
def check_pool(x: dict, a: dict, out, need) -> None:
    i = x["in0"].shape
    need(len(i) == len(out.shape) == 4, "operands of rank 4")
    t, b, l, r = a["pad"]
    expect = [max((n + lo + hi - k) // s + 1, 0) for n, lo, hi, k, s in
              zip(i[1:3], (t, l), (b, r), a["kernel"], a["stride"])]
    need(out.shape == (i[0], *expect, i[3]), f"output shape should be {[i[0], *expect, i[3]]}")


@SHAPE_CHECKS.register("argmax")
def check_argmax(x: dict, a: dict, out, need) -> None:
    i, axis = x["in0"].shape, a["axis"]
    need(0 <= axis < len(i), f"axis {axis} of a rank-{len(i)} input")
    want = i[:axis] + i[axis + 1:]
    need(out.shape == want or out.count == int(np.prod(want, dtype=np.int64)),
         f"output shape should be {list(want)}")
