"""Functional execution of one command on the modelled memories (bit-exact datapath).

DMA commands copy and fill views; compute commands run the kernel their opcode registers in
npu_sim/ops. Every MAC opcode shares the array's accumulation of partial sums and its output
stage (bias, rescale, clamp), applied here."""
from __future__ import annotations

from functools import partial

import numpy as np

from npu_sim.isa.commands import Compute, DmaCopy, DmaFill
from npu_sim.isa.dtypes import fill_element

from . import datapath as dp
from .datapath.scale import INT32_EXACT
from .hostcpu import run_host_op
from .memory import Memories
from .ops import MAC_KERNELS, VECTOR_KERNELS

FLOAT_ACCUMULATORS = ("fp16", "fp32")
STAGE_CHUNK = 1 << 14       # elements per output-stage pass: bounds its int64 temporaries
# Output elements of an integer MAC tile computed at once: a larger tile (large-8k's 112x112x96
# expansion, 4.8 MB of int32 sums) runs in slabs of its output rows, each from the input rows
# its windows read, so its sums and im2col copies are a slab's, not the tile's. Each output
# sums the same products either way: the integer result is the same.
ROW_SLAB = 1 << 16
# Weights of a conv or MATMUL tile converted at once (to the kernels' exact-sum dtype): larger
# ones (a 2048 x 1000 classifier, 8 MB as int32) run in slabs of output channels. 2^17: half
# a MiB as float32 (MobileNetV2's 1280 x 1000 classifier on large-8k: 2.2 MiB off the run's
# peak; ResNet-50 on large-8k, whose slabs each convert the input again, 5% slower).
CHANNEL_SLAB = 1 << 17
# the kernels as plain dicts (a Registry lookup is a Python call), complete once ops is imported
_MAC, _VECTOR = dict(MAC_KERNELS), dict(VECTOR_KERNELS)


def _wrap_acc(acc: np.ndarray, acc_dtype: str) -> np.ndarray:
    if acc_dtype == "int32":
        if acc.dtype == np.int32:
            return acc
        return acc.astype(np.int64).astype(np.int32)       # two's-complement wrap, as the model
    return acc.astype(np.int64)


def _mac(cmd: Compute, x: dict, out: np.ndarray, out_name: str):
    a = cmd.attrs
    if a["acc_dtype"] in FLOAT_ACCUMULATORS or cmd.op not in _ROW_SLABS:
        _mac_tile(cmd.op, x, a, out, out_name)
        return
    weights = x["b"] if cmd.op == "matmul" else x["weights"]
    parts = [(x, a, out)]
    if weights.size > CHANNEL_SLAB and cmd.op != "depthwise_conv2d":
        parts = _channel_slabs(cmd.op == "matmul", x, a, out,
                               max(1, CHANNEL_SLAB * out.shape[-1] // weights.size))
    for x_part, a_part, out_part in parts:
        rows = None
        if out_part.size > ROW_SLAB:
            rows = _ROW_SLABS[cmd.op](x_part, a_part, out_part,
                                      max(1, ROW_SLAB * out_part.shape[1] // out_part.size))
        for tile in rows or [(x_part, a_part, out_part)]:
            _mac_tile(cmd.op, *tile, out_name)


def _channel_slabs(matmul: bool, x: dict, a: dict, out: np.ndarray, step: int) -> list:
    """A conv's or MATMUL's tile in slabs of `step` output channels (the output's last axis):
    each with its weights' channels, and its share of the per-channel stage tables."""
    channels = out.shape[-1]
    parts = []
    for c0 in range(0, channels, step):
        cut = slice(c0, c0 + step)
        part = dict(x)
        if matmul:
            part["b"] = x["b"][..., cut]
        else:
            part["weights"] = x["weights"][cut]
        for name in ("bias", "multiplier", "shift"):
            if name in x and x[name].shape[0] == channels:
                part[name] = x[name][cut]
        if "acc_in" in x:
            part["acc_in"] = x["acc_in"][..., cut]
        parts.append((part, a, out[..., cut]))
    return parts


def _window_slabs(kh_axis: int, x: dict, a: dict, out: np.ndarray, rows: int) -> list:
    """A 2-D convolution's tile in slabs of `rows` output rows: (inputs, attributes, output)
    of each, its input rows those the slab's windows read, its padding what they see of the
    tile's edges; [] where a slab would read padding alone (the tile then runs whole)."""
    ifm, kh = x["ifm"], x["weights"].shape[kh_axis]
    top, _, left, right = a["pad"]
    sy, dy = a["stride"][0], a["dilation"][0]
    parts = []
    for r0 in range(0, out.shape[1], rows):
        r1 = min(r0 + rows, out.shape[1])
        first, last = r0 * sy - top, (r1 - 1) * sy - top + (kh - 1) * dy
        lo, hi = max(first, 0), min(last, ifm.shape[1] - 1)
        if hi < lo:
            return []
        part = {**x, "ifm": ifm[:, lo:hi + 1]}
        if "acc_in" in x:
            part["acc_in"] = x["acc_in"][:, r0:r1]
        parts.append((part, {**a, "pad": (lo - first, last - hi, left, right)},
                      out[:, r0:r1]))
    return parts


def _matmul_slabs(x: dict, a: dict, out: np.ndarray, rows: int) -> list:
    """A MATMUL tile ([N, H, C] x [N, C, W]) in slabs of `rows` of its H rows."""
    parts = []
    for r0 in range(0, out.shape[1], rows):
        part = {**x, "a": x["a"][:, r0:r0 + rows]}
        if "acc_in" in x:
            part["acc_in"] = x["acc_in"][:, r0:r0 + rows]
        parts.append((part, a, out[:, r0:r0 + rows]))
    return parts


_ROW_SLABS = {"conv2d": partial(_window_slabs, 1), "depthwise_conv2d": partial(_window_slabs, 0),
              "matmul": _matmul_slabs}


def _mac_tile(op: str, x: dict, a: dict, out: np.ndarray, out_name: str):
    acc = _MAC[op](x, a)
    if a["acc_dtype"] in FLOAT_ACCUMULATORS:      # a float accumulator and output stage
        out[...] = dp.float_stage(acc, acc_dtype=a["acc_dtype"], acc_in=x.get("acc_in"),
                                  out_dtype=None if out_name == "acc_out" else out.dtype,
                                  bias=x.get("bias"))
        return
    if "acc_in" in x:                   # partial sums of a split reduction
        if a["acc_dtype"] == "int32" and acc.dtype in INT32_EXACT:
            # int32 holds these sums exactly, and an int32 add wraps as the register does
            acc = acc.astype(np.int32)
            acc += x["acc_in"]
        else:                           # add in int64
            acc = acc.astype(np.int64) + x["acc_in"].astype(np.int64)
    if out_name == "acc_out":
        out[...] = _wrap_acc(acc, a["acc_dtype"])
        return
    bias, multiplier, shift = x.get("bias"), x.get("multiplier"), x.get("shift")
    scale32, rounding = a.get("scale32", True), a.get("rounding_mode", "SINGLE_ROUND")
    zp, clamp, acc_dtype = a.get("output_zp", 0), a.get("clamp"), a["acc_dtype"]
    # a tile's sums in one pass, or in slabs of about STAGE_CHUNK
    for part in (...,) if acc.size <= STAGE_CHUNK else _chunks(acc.shape):
        dp.output_stage(acc[part], bias=bias, multiplier=multiplier, shift=shift,
                        scale32=scale32, rounding_mode=rounding, per_channel=True,
                        output_zp=zp, clamp=clamp, out_dtype=out.dtype, acc_dtype=acc_dtype,
                        out=out[part])


def _chunks(shape):
    """Index tuples that split an array of `shape` into slabs of about STAGE_CHUNK elements
    along its leading axes (the last axis, channels, stays whole for the per-channel tables)."""
    axis, inner = len(shape) - 1, shape[-1] if shape else 1
    while axis > 0 and inner * shape[axis - 1] <= STAGE_CHUNK:
        axis -= 1
        inner *= shape[axis]
    if axis <= 0:
        yield (...,)
        return
    step = max(1, STAGE_CHUNK // inner)
    for lead in np.ndindex(*shape[:axis - 1]):
        for i in range(0, shape[axis - 1], step):
            yield lead + (slice(i, i + step),)


def execute(cmd, mem: Memories) -> int:
    """Apply a command to the memories; a host command returns the sub-graph work it did."""
    kind, array = type(cmd), mem.array
    if kind is DmaCopy:
        array(cmd.dst)[...] = array(cmd.src)
    elif kind is DmaFill:
        dst = array(cmd.dst)
        dst[...] = fill_element(cmd.value, cmd.dst.dtype)
    elif kind is Compute:
        ins, outputs = cmd.inputs, cmd.outputs
        # zip and map: no comprehension frame, every command of a run builds these
        x = dict(zip(ins, map(array, ins.values())))
        if cmd.unit == "mac":
            (name, view), = outputs.items()
            _mac(cmd, x, array(view), name)
        elif cmd.unit == "vector":
            _VECTOR[cmd.op](x, cmd.attrs, next(map(array, outputs.values())))
        else:
            return run_host_op(cmd.attrs["tosa_op"], [x[f"in{i}"] for i in range(len(x))],
                               cmd.attrs, list(map(array, outputs.values())))
    return 0
