"""The tensor operators on the machine: convolutions and MATMUL on the MAC array, pooling and
ARGMAX on the vector unit, and their whole-tensor host evaluations."""
from __future__ import annotations

import numpy as np

from .. import datapath as dp
from .common import HOST_OPS, MAC_KERNELS, VECTOR_KERNELS, VECTOR_WORK, HostCall, classed


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
    out[...] = dp.max_pool2d(x["in0"], a["kernel"], a["stride"], a["pad"])


@VECTOR_KERNELS.register("argmax")
def argmax(x: dict, a: dict, out: np.ndarray):
    out[...] = dp.argmax(x["in0"], a["axis"])


@VECTOR_WORK.register("avg_pool2d", "max_pool2d")
def pool_work(cmd) -> dict:
    """One lane operation per window element of every output."""
    return classed(cmd.op.upper(),
                   next(iter(cmd.outputs.values())).count * int(np.prod(cmd.attrs["kernel"])))


@VECTOR_WORK.register("argmax")
def argmax_work(cmd) -> dict:
    return classed("ARGMAX", cmd.inputs["in0"].count)


# ---- host evaluation ---------------------------------------------------------------------------

def _acc_dtype(call: HostCall) -> str:
    return "int48" if np.dtype(call.out_dtypes[0]) == np.int64 else "int32"


def _biased(call: HostCall, acc) -> list:
    return [dp.output_stage(acc, bias=call.inputs[2].reshape(-1), out_dtype=call.out_dtypes[0],
                            acc_dtype=_acc_dtype(call))]


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
    acc = dp.matmul_acc(call.inputs[0], call.inputs[1], call.scalar(2), call.scalar(3))
    return [dp.output_stage(acc, out_dtype=call.out_dtypes[0], acc_dtype=_acc_dtype(call))]


@HOST_OPS.register("AVG_POOL2D")
def avg_pool2d_host(call: HostCall) -> list:
    a = call.attrs
    return [dp.avg_pool2d(call.inputs[0], tuple(a["kernel"]), tuple(a["stride"]), tuple(a["pad"]),
                          call.scalar(1), call.scalar(2), call.out_dtypes[0])]


@HOST_OPS.register("MAX_POOL2D")
def max_pool2d_host(call: HostCall) -> list:
    a = call.attrs
    return [dp.max_pool2d(call.inputs[0], tuple(a["kernel"]), tuple(a["stride"]), tuple(a["pad"]))]


HOST_OPS.register("ARGMAX")(lambda call: [dp.argmax(call.inputs[0], int(call.attrs["axis"]))])
