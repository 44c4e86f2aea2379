"""Functional execution of one command on the modelled memories (bit-exact datapath)."""
from __future__ import annotations

import json

import numpy as np

from npu_sim.isa.commands import Compute, DmaCopy, DmaFill

from . import datapath as dp
from .memory import STORAGE, Memories

_ACC_WRAP = {"int32": np.int32, "int48": np.int64}


def _wrap_acc(acc: np.ndarray, acc_dtype: str) -> np.ndarray:
    if acc_dtype == "int32":
        return acc.astype(np.int64).astype(np.int32)       # two's-complement wrap, as the model
    return acc.astype(np.int64)


def _mac(cmd: Compute, x: dict, out: np.ndarray, out_name: str):
    a = cmd.attrs
    if cmd.op == "conv2d":
        acc = dp.conv2d_acc(x["ifm"], x["weights"], a["pad"], a["stride"], a["dilation"],
                            a["input_zp"], a["weight_zp"])
    elif cmd.op == "depthwise_conv2d":
        acc = dp.depthwise_conv2d_acc(x["ifm"], x["weights"], a["pad"], a["stride"],
                                      a["dilation"], a["input_zp"], a["weight_zp"])
    elif cmd.op == "transpose_conv2d":
        acc = dp.transpose_conv2d_acc(x["ifm"], x["weights"], a["stride"], a["out_pad_top"],
                                      a["out_pad_left"], a["in_origin"], a["out_origin"],
                                      a["out_size"], a["input_zp"], a["weight_zp"])
    elif cmd.op == "conv3d":
        acc = dp.conv3d_acc(x["ifm"], x["weights"], a["pad"], a["stride"], a["dilation"],
                            a["input_zp"], a["weight_zp"])
    else:
        acc = dp.matmul_acc(x["a"], x["b"], a["a_zp"], a["b_zp"])
    if "acc_in" in x:                   # partial sums of a split reduction: add in int64
        acc = acc.astype(np.int64) + x["acc_in"].astype(np.int64)
    if out_name == "acc_out":
        out[...] = _wrap_acc(acc, a["acc_dtype"])
        return
    has_scale = "multiplier" in x
    for part in _chunks(acc.shape):
        out[part] = dp.output_stage(
            acc[part], bias=x.get("bias"), multiplier=x.get("multiplier") if has_scale else None,
            shift=x.get("shift") if has_scale else None, scale32=a.get("scale32", True),
            rounding_mode=a.get("rounding_mode", "SINGLE_ROUND"), per_channel=True,
            output_zp=a.get("output_zp", 0), clamp=a.get("clamp"), out_dtype=out.dtype,
            acc_dtype=a["acc_dtype"])


STAGE_CHUNK = 1 << 14       # elements per output-stage pass: bounds its int64 temporaries


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


def run_program(program: list[dict], x: dict) -> np.ndarray:
    """Run an elementwise chain: each micro-op reads operands or earlier results (%i)."""
    results: list[np.ndarray] = []
    for u in program:
        args = [results[int(a[1:])] if a[0] == "%" else x[a] for a in u["args"]]
        tables = [x[t] for t in u["tables"]]
        dtype = STORAGE[u["dtype"]]
        fn = u["fn"]
        if fn == "RESCALE":
            if not tables:                  # per-tensor parameters are immediates
                tables = [np.array([u["multiplier"]], np.int32), np.array([u["shift"]], np.int8)]
            r = dp.rescale(args[0], tables[0], tables[1], u["input_zp"], u["output_zp"],
                           scale32=u["scale32"], rounding_mode=u["rounding_mode"],
                           per_channel=u["per_channel"], input_unsigned=u["input_unsigned"],
                           output_unsigned=u["output_unsigned"], out_dtype=dtype)
        elif fn == "TABLE":
            r = dp.table(args[0], tables[0])
        elif fn == "CLAMP":
            r = dp.clamp(args[0], u["lo"], u["hi"])
        else:
            extra = {k: u[k] for k in ("shift", "round", "input_zp", "output_zp") if k in u}
            r = dp.elementwise(fn, args, dtype, **extra)
        results.append(r)
    return results[-1]


_COMBINE = {"REDUCE_SUM": np.add, "REDUCE_MAX": np.maximum, "REDUCE_MIN": np.minimum,
            "REDUCE_ALL": np.logical_and, "REDUCE_ANY": np.logical_or}


def _vector(cmd: Compute, x: dict, out: np.ndarray):
    a, op = cmd.attrs, cmd.op
    if op == "elementwise":
        out[...] = run_program(json.loads(a["program"]), x)
    elif op == "avg_pool2d":
        out[...] = dp.avg_pool2d(x["in0"], a["kernel"], a["stride"], a["pad"], a["input_zp"],
                                 a["output_zp"], out.dtype)
    elif op == "max_pool2d":
        out[...] = dp.max_pool2d(x["in0"], a["kernel"], a["stride"], a["pad"])
    elif op == "reduce":
        part = dp.reduce(a["fn"], x["in0"], a["axis"])
        if "acc_in" in x:
            part = _COMBINE[a["fn"]](x["acc_in"], part)
        out[...] = part
    elif op == "argmax":
        out[...] = dp.argmax(x["in0"], a["axis"])
    elif op == "resize":
        out[...] = dp.resize(x["in0"], mode=a["mode"], scale=a["scale"], offset=a["offset"],
                             border=a["border"], in_origin=a["in_origin"],
                             out_origin=a["out_origin"], out_size=a["out_size"],
                             in_size=a["in_size"], out_dtype=out.dtype)


def _host(cmd: Compute, x: dict, outs: dict) -> int:
    """Run a host operator; returns the elements its sub-graphs computed (0 without any)."""
    from .hostcpu import Meter, run_host_op
    Meter.elements = 0
    results = run_host_op(cmd.attrs["tosa_op"], [x[f"in{i}"] for i in range(len(x))], cmd.attrs,
                          [o.dtype for o in outs.values()])
    for o, r in zip(outs.values(), results):
        o[...] = r
    return Meter.elements


def execute(cmd, mem: Memories) -> int:
    """Apply a command to the memories; a host command returns the sub-graph work it did."""
    if isinstance(cmd, DmaCopy):
        mem.array(cmd.dst)[...] = mem.array(cmd.src)
    elif isinstance(cmd, DmaFill):
        dst = mem.array(cmd.dst)
        dst[...] = np.array(cmd.value).astype(STORAGE[cmd.dst.dtype])
    elif isinstance(cmd, Compute):
        x = {k: mem.array(v) for k, v in cmd.inputs.items()}
        outs = {k: mem.array(v) for k, v in cmd.outputs.items()}
        if cmd.unit == "mac":
            (name, out), = outs.items()
            _mac(cmd, x, out, name)
        elif cmd.unit == "vector":
            _vector(cmd, x, next(iter(outs.values())))
        else:
            return _host(cmd, x, outs)
    return 0
