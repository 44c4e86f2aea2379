"""The host CPU's fallback operators: whole-tensor TOSA ops the NPU engines do not run.

They use the same exact kernels as the NPU datapath, on operands in external memory:
GATHER, SCATTER, CONV3D, and the control-flow operators COND_IF and WHILE_LOOP
(EXT-CONTROLFLOW), whose sub-graphs the compiler serializes into the command's attributes
(compiler/steps.py) and the host interprets here, operator by operator (`run_graph`).
"""
from __future__ import annotations

import base64
import json
import zlib

import numpy as np

from npu_sim.isa.errors import UnsupportedError

from . import datapath as dp

STORAGE = {"bool": np.bool_, "int4": np.int8, "int8": np.int8, "int16": np.int16,
           "int32": np.int32, "int48": np.int64, "shape": np.int64}
MAX_ITERATIONS = 1 << 20          # a WHILE_LOOP that runs longer is taken as non-terminating


class Meter:
    """Counts the elements the host computes, so a loop's time follows its iterations."""

    elements = 0


def _scalar(x) -> int:
    return int(np.asarray(x).reshape(-1)[0])


def run_host_op(op: str, inputs: list[np.ndarray], attrs: dict, out_dtypes: list) -> list:
    if op == "GATHER":
        return [dp.gather(inputs[0], inputs[1])]
    if op == "SCATTER":
        return [dp.scatter(inputs[0], inputs[1], inputs[2])]
    if op == "CONV3D":
        acc = dp.conv3d_acc(inputs[0], inputs[1], tuple(attrs["pad"]), tuple(attrs["stride"]),
                            tuple(attrs["dilation"]), _scalar(inputs[3]), _scalar(inputs[4]))
        acc_dtype = "int48" if np.dtype(out_dtypes[0]) == np.int64 else "int32"
        return [dp.output_stage(acc, bias=inputs[2].reshape(-1), out_dtype=out_dtypes[0],
                                acc_dtype=acc_dtype)]
    if op in ("COND_IF", "WHILE_LOOP"):
        regions = decode_regions(attrs)
        results = _control_flow(op, attrs, regions, list(inputs))
        results = [results[i] for i in attrs.get("results", range(len(results)))]
        if "packed_offsets" in attrs:
            packed = np.zeros(int(attrs["packed_bytes"]), np.uint8)
            for r, offset in zip(results, attrs["packed_offsets"]):
                raw = np.ascontiguousarray(r).view(np.uint8).reshape(-1)
                packed[offset:offset + raw.size] = raw
            return [packed.view(np.int8)]
        return results
    if op == "HOST_UNPACK":
        dtype = np.dtype(STORAGE[attrs["dtype"]])
        shape = tuple(attrs["shape"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        raw = np.ascontiguousarray(inputs[0]).view(np.uint8).reshape(-1)
        start = int(attrs["offset"])
        return [raw[start:start + count * dtype.itemsize].copy().view(dtype).reshape(shape)]
    raise UnsupportedError(f"the host CPU has no implementation of {op}")



# ---------------------------------------------------------------------------------------------
# sub-graph interpreter
# ---------------------------------------------------------------------------------------------

class HostGraph:
    """A (sub-)graph as compiler.steps.graph_to_dict describes it."""

    def __init__(self, d: dict):
        self.inputs, self.outputs = d["inputs"], d["outputs"]
        self.operators = [(o[0], o[1], o[2], o[3]) for o in d["operators"]]
        self.shapes, self.dtypes, self.consts = {}, {}, {}
        for name, (shape, dtype, data) in d["tensors"].items():
            self.shapes[name], self.dtypes[name] = tuple(shape), dtype
            if data is not None:
                arr = np.frombuffer(base64.b64decode(data), dtype=np.uint8 if dtype == "bool"
                                    else STORAGE[dtype])
                arr = arr.astype(np.bool_) if dtype == "bool" else arr.copy()
                self.consts[name] = arr.reshape(shape)


def decode_regions(attrs: dict) -> dict[str, HostGraph]:
    chunks, i = [], 0
    while f"regions.{i}" in attrs:
        chunks.append(attrs[f"regions.{i}"])
        i += 1
    if not chunks:
        return {}
    payload = json.loads(zlib.decompress(base64.b64decode("".join(chunks))))
    return {name: HostGraph(d) for name, d in payload.items()}


def _control_flow(op: str, attrs: dict, regions: dict, inputs: list) -> list:
    if op == "COND_IF":
        cond = bool(np.asarray(inputs[0]).reshape(-1)[0])
        branch = regions[attrs["then_graph"] if cond else attrs["else_graph"]]
        return run_graph(branch, inputs[1:], regions)
    cond_graph, body = regions[attrs["cond_graph"]], regions[attrs["body_graph"]]
    values = inputs
    for _ in range(MAX_ITERATIONS):
        if not bool(np.asarray(run_graph(cond_graph, values, regions)[0]).reshape(-1)[0]):
            return values
        values = run_graph(body, values, regions)
    raise UnsupportedError(f"WHILE_LOOP did not end within {MAX_ITERATIONS} iterations")


def run_graph(g: HostGraph, inputs: list, regions: dict | None = None) -> list[np.ndarray]:
    """Run a graph on its inputs (in g.inputs order); returns its outputs in g.outputs order."""
    regions = regions or {}
    values = dict(g.consts)
    for name, x in zip(g.inputs, inputs):
        values[name] = np.asarray(x).astype(STORAGE[g.dtypes[name]], copy=False).reshape(g.shapes[name])
    pending = list(g.operators)
    while pending:                       # any topological order will do; file order usually is one
        left = []
        for o in pending:
            if all(n in values for n in o[1]):
                for name, r in zip(o[2], _evaluate(g, o, values, regions)):
                    Meter.elements += np.size(r)
                    values[name] = np.asarray(r).astype(STORAGE[g.dtypes[name]], copy=False) \
                        .reshape(g.shapes[name])
            else:
                left.append(o)
        if len(left) == len(pending):
            raise UnsupportedError(f"sub-graph operator {left[0][0]} has an undefined input")
        pending = left
    return [values[n] for n in g.outputs]


def _clamp_bounds(attrs: dict, dtype) -> tuple[int, int]:
    size = np.dtype(dtype).itemsize
    lo = np.frombuffer(bytes(attrs["min_val"][:size]), np.dtype(dtype).newbyteorder("<"))[0]
    hi = np.frombuffer(bytes(attrs["max_val"][:size]), np.dtype(dtype).newbyteorder("<"))[0]
    return int(lo), int(hi)


def _ints(x) -> list[int]:
    return [int(v) for v in np.asarray(x).reshape(-1)]


def _evaluate(g: HostGraph, o, values: dict, regions: dict) -> list:
    op, ins, outs, a = o
    x = [values[n] for n in ins]
    out_dtype = np.dtype(STORAGE[g.dtypes[outs[0]]]) if outs else None
    out_shape = g.shapes[outs[0]] if outs else ()
    if op in ("CONST", "CONST_SHAPE"):
        return [g.consts[outs[0]]]
    if op == "IDENTITY":
        return [x[0].copy()]
    if op in ("COND_IF", "WHILE_LOOP"):
        return _control_flow(op, a, regions, x)
    if op == "CLAMP":
        return [dp.clamp(x[0], *_clamp_bounds(a, x[0].dtype))]
    if op == "TABLE":
        return [dp.table(x[0], x[1])]
    if op == "RESCALE":
        return [dp.rescale(x[0], x[1], x[2], x[3], x[4], scale32=bool(a["scale32"]),
                           rounding_mode=a["rounding_mode"], per_channel=bool(a["per_channel"]),
                           input_unsigned=bool(a["input_unsigned"]),
                           output_unsigned=bool(a["output_unsigned"]), out_dtype=out_dtype)]
    if op == "MUL":
        return [dp.elementwise(op, x[:2], out_dtype, shift=_scalar(x[2]) if len(x) > 2 else 0)]
    if op == "ARITHMETIC_RIGHT_SHIFT":
        return [dp.elementwise(op, x[:2], out_dtype, round=bool(a.get("round", False)))]
    if op == "NEGATE":
        return [dp.elementwise(op, x[:1], out_dtype, input_zp=_scalar(x[1]), output_zp=_scalar(x[2]))]
    if op in dp.ELEMENTWISE_OPS:
        return [dp.elementwise(op, x, out_dtype)]
    acc_dtype = "int48" if out_dtype == np.int64 else "int32"
    if op in ("CONV2D", "DEPTHWISE_CONV2D", "CONV3D"):
        kernel = {"CONV2D": dp.conv2d_acc, "DEPTHWISE_CONV2D": dp.depthwise_conv2d_acc,
                  "CONV3D": dp.conv3d_acc}[op]
        acc = kernel(x[0], x[1], tuple(a["pad"]), tuple(a["stride"]), tuple(a["dilation"]),
                     _scalar(x[3]), _scalar(x[4]))
        return [dp.output_stage(acc, bias=x[2].reshape(-1), out_dtype=out_dtype, acc_dtype=acc_dtype)]
    if op == "TRANSPOSE_CONV2D":
        acc = dp.transpose_conv2d_acc(x[0], x[1], tuple(a["stride"]), a["out_pad"][0], a["out_pad"][2],
                                      out_size=tuple(out_shape[1:3]), input_zp=_scalar(x[3]),
                                      weight_zp=_scalar(x[4]))
        return [dp.output_stage(acc, bias=x[2].reshape(-1), out_dtype=out_dtype, acc_dtype=acc_dtype)]
    if op == "MATMUL":
        acc = dp.matmul_acc(x[0], x[1], _scalar(x[2]), _scalar(x[3]))
        return [dp.output_stage(acc, out_dtype=out_dtype, acc_dtype=acc_dtype)]
    if op == "AVG_POOL2D":
        return [dp.avg_pool2d(x[0], tuple(a["kernel"]), tuple(a["stride"]), tuple(a["pad"]),
                              _scalar(x[1]), _scalar(x[2]), out_dtype)]
    if op == "MAX_POOL2D":
        return [dp.max_pool2d(x[0], tuple(a["kernel"]), tuple(a["stride"]), tuple(a["pad"]))]
    if op.startswith("REDUCE_"):
        return [dp.reduce(op, x[0], int(a["axis"]))]
    if op == "ARGMAX":
        return [dp.argmax(x[0], int(a["axis"]))]
    if op == "RESIZE":
        return [dp.resize(x[0], mode=a["mode"], scale=_ints(x[1]), offset=_ints(x[2]),
                          border=_ints(x[3]), out_size=tuple(out_shape[1:3]),
                          in_size=tuple(x[0].shape[1:3]), out_dtype=out_dtype)]
    if op == "GATHER":
        return [dp.gather(x[0], x[1])]
    if op == "SCATTER":
        return [dp.scatter(x[0], x[1], x[2])]
    if op == "CONCAT":
        return [np.concatenate(x, axis=int(a["axis"]))]
    if op == "PAD":
        pads = _ints(x[1])
        return [np.pad(x[0], [(pads[2 * i], pads[2 * i + 1]) for i in range(x[0].ndim)],
                       constant_values=np.asarray(x[2]).reshape(-1)[0])]
    if op == "RESHAPE":
        return [x[0].reshape(out_shape)]
    if op == "REVERSE":
        return [np.flip(x[0], axis=int(a["axis"]))]
    if op == "SLICE":
        start, size = _ints(x[1]), _ints(x[2])
        return [x[0][tuple(slice(s, s + n) for s, n in zip(start, size))]]
    if op == "TILE":
        return [np.tile(x[0], _ints(x[1]))]
    if op == "TRANSPOSE":
        return [np.transpose(x[0], a["perms"])]
    raise UnsupportedError(f"the host CPU cannot run {op} inside a control-flow sub-graph")
