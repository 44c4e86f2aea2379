"""Control flow on the host CPU: COND_IF and WHILE_LOOP run their sub-graphs, which the
compiler serializes into the command's attributes (compiler/steps.py), operator by operator
through the host evaluations of npu_sim/ops (`run_graph`). Also IDENTITY inside a body, and
HOST_UNPACK, which copies one result out of a packed multi-result host operator."""
from __future__ import annotations

import json
import zlib

import numpy as np

from npu_sim.isa.dtypes import STORAGE
from npu_sim.isa.errors import UnsupportedError
from npu_sim.isa.operators import OPERATORS

from .common import HOST_OPS, SHAPE_CHECKS, HostCall

MAX_ITERATIONS = 1 << 20          # a WHILE_LOOP that runs longer is taken as non-terminating


class Meter:
    """Counts the elements the host computes, so a loop's time follows its iterations."""

    elements = 0


class HostGraph:
    """A (sub-)graph as compiler.steps.graph_to_dict describes it."""

    def __init__(self, d: dict):
        from base64 import b64decode    # only here: only control flow carries sub-graphs
        self.inputs, self.outputs = d["inputs"], d["outputs"]
        self.operators = [(o[0], o[1], o[2], o[3]) for o in d["operators"]]
        self.shapes, self.dtypes, self.consts = {}, {}, {}
        for name, (shape, dtype, data) in d["tensors"].items():
            self.shapes[name], self.dtypes[name] = tuple(shape), dtype
            if data is not None:
                arr = np.frombuffer(b64decode(data), dtype=np.uint8 if dtype == "bool"
                                    else STORAGE[dtype])
                arr = arr.astype(np.bool_) if dtype == "bool" else arr.copy()
                self.consts[name] = arr.reshape(shape)


def decode_regions(attrs: dict) -> dict[str, HostGraph]:
    import base64                   # only here: only control flow carries sub-graphs
    chunks, i = [], 0
    while f"regions.{i}" in attrs:
        chunks.append(attrs[f"regions.{i}"])
        i += 1
    if not chunks:
        return {}
    payload = json.loads(zlib.decompress(base64.b64decode("".join(chunks))))
    return {name: HostGraph(d) for name, d in payload.items()}


def run_graph(g: HostGraph, inputs: list, regions: dict | None = None) -> list[np.ndarray]:
    """Run a graph on its inputs (in g.inputs order); returns its outputs in g.outputs order."""
    regions = regions or {}
    values = dict(g.consts)
    for name, x in zip(g.inputs, inputs):
        values[name] = np.asarray(x).astype(STORAGE[g.dtypes[name]], copy=False).reshape(g.shapes[name])
    pending = list(g.operators)
    while pending:                       # any topological order will do; file order usually is one
        left = []
        for op, ins, outs, attrs in pending:
            if not all(n in values for n in ins):
                left.append((op, ins, outs, attrs))
                continue
            call = HostCall(op, [values[n] for n in ins], attrs,
                            [STORAGE[g.dtypes[n]] for n in outs], [g.shapes[n] for n in outs],
                            regions)
            if OPERATORS[op].engine == "none":     # CONST, CONST_SHAPE: data the graph holds
                results = [values[n] for n in outs]
            else:
                results = HOST_OPS.lookup(op, "the host CPU in a control-flow body")(call)
            for name, r in zip(outs, results):
                Meter.elements += np.size(r)
                values[name] = np.asarray(r).astype(STORAGE[g.dtypes[name]], copy=False) \
                    .reshape(g.shapes[name])
        if len(left) == len(pending):
            raise UnsupportedError(f"sub-graph operator {left[0][0]} has an undefined input")
        pending = left
    return [values[n] for n in g.outputs]


@HOST_OPS.register("COND_IF")
def cond_if(call: HostCall) -> list:
    cond = bool(np.asarray(call.inputs[0]).reshape(-1)[0])
    branch = call.regions[call.attrs["then_graph" if cond else "else_graph"]]
    return run_graph(branch, call.inputs[1:], call.regions)


@HOST_OPS.register("WHILE_LOOP")
def while_loop(call: HostCall) -> list:
    cond_graph, body = call.regions[call.attrs["cond_graph"]], call.regions[call.attrs["body_graph"]]
    values = call.inputs
    for _ in range(MAX_ITERATIONS):
        if not bool(np.asarray(run_graph(cond_graph, values, call.regions)[0]).reshape(-1)[0]):
            return values
        values = run_graph(body, values, call.regions)
    raise UnsupportedError(f"WHILE_LOOP did not end within {MAX_ITERATIONS} iterations")


HOST_OPS.register("IDENTITY")(lambda call: [call.inputs[0].copy()])


@HOST_OPS.register("HOST_UNPACK")
def host_unpack(call: HostCall) -> list:
    dtype = np.dtype(STORAGE[call.attrs["dtype"]])
    shape = tuple(call.attrs["shape"])
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    raw = np.ascontiguousarray(call.inputs[0]).view(np.uint8).reshape(-1)
    start = int(call.attrs["offset"])
    return [raw[start:start + count * dtype.itemsize].copy().view(dtype).reshape(shape)]


# A host command's operands are whole tensors of its TOSA operator, in external memory; their
# views were checked against the memories, and the operator's evaluation takes them as they come.
SHAPE_CHECKS.register("host")(lambda x, a, out, need: None)
