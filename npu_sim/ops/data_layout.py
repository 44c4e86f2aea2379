"""Reductions, data layout, scatter/gather and RESIZE on the machine.

Reductions and RESIZE run on the vector unit; the data-layout operators are DMA descriptors,
with the vector unit's `permute` reordering a staged block in whole words where a DMA would
gather it byte by byte; here they also have their whole-tensor host evaluation, for
control-flow bodies. GATHER and SCATTER run on the host CPU."""
from __future__ import annotations

import numpy as np

from .. import datapath as dp
from .common import HOST_OPS, SHAPE_CHECKS, VECTOR_KERNELS, VECTOR_WORK, HostCall, classed

_COMBINE = {"REDUCE_SUM": np.add, "REDUCE_MAX": np.maximum, "REDUCE_MIN": np.minimum,
            "REDUCE_ALL": np.logical_and, "REDUCE_ANY": np.logical_or,
            "REDUCE_PRODUCT": np.multiply}


@VECTOR_KERNELS.register("reduce")
def reduce(x: dict, a: dict, out: np.ndarray):
    nan_mode = a.get("nan_mode", "PROPAGATE")
    if dp.is_float(x["in0"].dtype):
        # fp64 over the tile and the carried partial (fp32 or wider, acc_dtype), one rounding
        part = dp.fp_reduce(a["fn"], x["in0"], a["axis"], nan_mode)
        if "acc_in" in x:
            part = dp.fp_combine(a["fn"], x["acc_in"], part, nan_mode)
        out[...] = dp.narrow(part, out.dtype)
        return
    part = dp.reduce(a["fn"], x["in0"], a["axis"])
    if "acc_in" in x:                  # a partial result of a split reduction
        part = _COMBINE[a["fn"]](x["acc_in"], part)
    out[...] = part


@VECTOR_KERNELS.register("resize")
def resize(x: dict, a: dict, out: np.ndarray):
    out[...] = dp.resize(x["in0"], mode=a["mode"], scale=a["scale"], offset=a["offset"],
                         border=a["border"], in_origin=a["in_origin"],
                         out_origin=a["out_origin"], out_size=a["out_size"],
                         in_size=a["in_size"], out_dtype=out.dtype)


VECTOR_WORK.register("reduce")(lambda cmd: classed(cmd.attrs["fn"], cmd.inputs["in0"].count,
                                                   cmd.inputs["in0"].dtype))


@VECTOR_WORK.register("resize")
def resize_work(cmd) -> dict:
    """Bilinear interpolation reads and weighs four input pixels per output."""
    count = next(iter(cmd.outputs.values())).count
    return classed("RESIZE", count * (4 if cmd.attrs["mode"] == "BILINEAR" else 1),
                   cmd.inputs["in0"].dtype)


def _reach(shape, strides, base) -> tuple[int, int]:
    """The lowest and highest element of a rank-1 block a strided walk from `base` reads."""
    steps = [(n - 1) * s for n, s in zip(shape, strides)]
    return (base + sum(r for r in steps if r < 0), base + sum(r for r in steps if r > 0))


@VECTOR_KERNELS.register("permute")
def permute(x: dict, a: dict, out: np.ndarray):
    block, strides, base = x["in0"], a["strides"], a["base"]
    lo, hi = _reach(out.shape, strides, base)
    if out.size and not 0 <= lo <= hi < block.size:     # as_strided does not check
        raise IndexError(f"permute reads elements {lo}..{hi} of a block of {block.size}")
    # as unsigned words: as_strided rebuilds the array from an interface that cannot name
    # ml_dtypes' types (fp8)
    words = block.view(f"u{block.itemsize}")
    out[...] = np.lib.stride_tricks.as_strided(
        words[base:], out.shape, [s * block.itemsize for s in strides],
        writeable=False).view(block.dtype)


# a move per element, a lane's add-class operation (as CAST's and CLAMP's are)
VECTOR_WORK.register("permute")(lambda cmd: {"add": cmd.outputs["out"].count})


# ---- host evaluation ---------------------------------------------------------------------------

HOST_OPS.register(*_COMBINE)(
    lambda call: [dp.reduce(call.op, call.inputs[0], int(call.attrs["axis"]),
                            call.attrs.get("nan_mode", "PROPAGATE"))])
HOST_OPS.register("GATHER")(lambda call: [dp.gather(call.inputs[0], call.inputs[1])])
HOST_OPS.register("SCATTER")(lambda call: [dp.scatter(*call.inputs[:3])])
HOST_OPS.register("CONCAT")(
    lambda call: [np.concatenate(call.inputs, axis=int(call.attrs["axis"]))])
HOST_OPS.register("RESHAPE")(lambda call: [call.inputs[0].reshape(call.out_shapes[0])])
HOST_OPS.register("REVERSE")(lambda call: [np.flip(call.inputs[0], axis=int(call.attrs["axis"]))])
HOST_OPS.register("TILE")(lambda call: [np.tile(call.inputs[0], call.ints(1))])
HOST_OPS.register("TRANSPOSE")(lambda call: [np.transpose(call.inputs[0], call.attrs["perms"])])


@HOST_OPS.register("PAD")
def pad_host(call: HostCall) -> list:
    x, pads = call.inputs[0], call.ints(1)
    return [np.pad(x, [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)],
                   constant_values=np.asarray(call.inputs[2]).reshape(-1)[0])]


@HOST_OPS.register("SLICE")
def slice_host(call: HostCall) -> list:
    start, size = call.ints(1), call.ints(2)
    return [call.inputs[0][tuple(slice(s, s + n) for s, n in zip(start, size))]]


@HOST_OPS.register("RESIZE")
def resize_host(call: HostCall) -> list:
    x = call.inputs[0]
    return [dp.resize(x, mode=call.attrs["mode"], scale=call.ints(1), offset=call.ints(2),
                      border=call.ints(3), out_size=tuple(call.out_shapes[0][1:3]),
                      in_size=tuple(x.shape[1:3]), out_dtype=call.out_dtypes[0])]


# ---- structural checks of loaded programs --------------------------------------------------------

@SHAPE_CHECKS.register("reduce")
def check_reduce(x: dict, a: dict, out, need) -> None:
    i, axis = x["in0"].shape, a["axis"]
    need(0 <= axis < len(i), f"axis {axis} of a rank-{len(i)} input")
    want = i[:axis] + (1,) + i[axis + 1:]
    need(out.shape == want, f"output shape should be {list(want)}")
    need(x["acc_in"].shape == out.shape if "acc_in" in x else True, "acc_in and output disagree")


@SHAPE_CHECKS.register("resize")
def check_resize(x: dict, a: dict, out, need) -> None:
    i = x["in0"].shape
    need(len(i) == len(out.shape) == 4 and i[3] == out.shape[3] and i[0] == out.shape[0]
         and all(s > 0 for s in a["scale"]), "rank-4 operands, scale > 0")


@SHAPE_CHECKS.register("permute")
def check_permute(x: dict, a: dict, out, need) -> None:
    block, strides, base = x["in0"], a["strides"], a["base"]
    need(len(block.shape) == 1 and len(strides) == len(out.shape) and block.dtype == out.dtype,
         "a rank-1 block of the output's type, one stride per output dim")
    lo, hi = _reach(out.shape, strides, base)
    need(0 <= lo and hi < block.shape[0] or not out.count, "elements outside the block")
