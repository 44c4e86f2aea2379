"""Functional execution of one command on the modelled memories (bit-exact datapath).

DMA commands copy and fill views; compute commands run the kernel their opcode registers in
npu_sim/ops. Every MAC opcode shares the array's accumulation of partial sums and its output
stage (bias, rescale, clamp), applied here."""
from __future__ import annotations

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
    acc = _MAC[cmd.op](x, a)
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
