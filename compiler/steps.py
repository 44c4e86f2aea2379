"""Group TOSA operators into NPU steps: fusion of MAC ops with their output stage.

A step is what one engine family executes as a unit: a MAC-array operation with a fused
RESCALE (+ CLAMP), a vector-unit operation, a DMA data movement, a free alias (RESHAPE of a
contiguous tensor), or a host-CPU fallback operation.

Control flow (COND_IF, WHILE_LOOP: EXT-CONTROLFLOW) runs on the host CPU: the operator carries
its sub-graphs (serialized into its attributes) and the host interprets them with the same exact
kernels (npu_sim/ops/control.py).
"""
from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass, field

import numpy as np

from npu_sim.isa.dtypes import STORAGE
from npu_sim.isa.operators import CONST, DATA, OPERATORS

from .chains import fuse_chains
from .ir import Graph, Operator, Tensor


@dataclass
class Step:
    kind: str                      # "mac" | "vector" | "dma" | "alias" | "host"
    main: Operator
    rescale: Operator | None = None
    clamp: Operator | None = None
    chain: list[Operator] = field(default_factory=list)   # fused elementwise ops, main last
    # A conv computed tile by tile into main's data input, which then never exists in memory
    # (compiler/cascade.py).
    producer: Step | None = None
    # its per-channel stage table, where another MAC step's identical one serves it too
    stage_table: str | None = None

    @property
    def output(self) -> str:
        return (self.clamp or self.rescale or self.main).outputs[0]

    @property
    def ops(self) -> list[str]:
        first = self.producer.ops if self.producer else []
        if self.chain:
            return first + [o.op for o in self.chain]
        return first + [o.op for o in (self.main, self.rescale, self.clamp) if o is not None]

    @property
    def inputs(self) -> list[str]:
        """Tensors the step reads from memory (attribute-like constants are excluded)."""
        if self.kind == "mac":
            data = self.producer.inputs if self.producer else self.main.inputs[:1]
            return data + [self.main.inputs[1], stage_table_name(self)]
        if self.kind == "host":
            return list(self.main.inputs)
        inside = {o.outputs[0] for o in self.chain}
        data = [t for o in (self.chain or [self.main])
                for t in OPERATORS[o.op].bound(o.inputs, DATA, CONST) if t not in inside]
        if self.producer:
            data = self.producer.inputs + [t for t in data if t != self.producer.output]
        return data


class HostOutputStep(Step):
    """Copies one result of a multi-result host operator out of its packed result: a step of
    the operator, not an operator of its own, so it counts no operators."""

    @property
    def ops(self) -> list[str]:
        return []


def stage_table_name(step: Step) -> str:
    """The per-output-channel [bias, multiplier, shift] table of a MAC step."""
    return step.stage_table or f"{step.output}::stage"


def _kind(op: Operator) -> str:
    if op.is_variable_access:
        return "dma"                   # a copy between the variable's storage and a tensor
    return OPERATORS[op.op].engine


def _fusable_rescale(graph: Graph, acc: str, users: list[Operator]) -> Operator | None:
    if acc in graph.outputs or len(users) != 1 or users[0].op != "RESCALE":
        return None
    r = users[0]
    if r.inputs[0] != acc or r.attrs.get("input_unsigned") or r.attrs.get("output_unsigned"):
        return None
    if not all(graph.tensors[n].is_const for n in r.inputs[1:5]):
        return None
    return r


# MAC operators with a bias operand (input 2) that the output stage adds.
BIASED_MAC_OPS = frozenset(o.name for o in OPERATORS.values() if "bias" in o.operand_names)


def separate_dynamic_bias(graph: Graph) -> int:
    """A MAC op whose bias is not a constant (TOSA does not require it to be one) becomes the op
    with a zero constant bias followed by an ADD of the bias, reshaped to broadcast along the
    output channels: the MAC output stage holds constant per-channel tables only. The sum is
    the same: the accumulator plus the bias, which valid graphs never overflow."""
    rewritten, ops = 0, []
    for op in graph.operators:
        bias = op.inputs[2] if op.op in BIASED_MAC_OPS and len(op.inputs) > 2 else None
        if bias is None or graph.tensors[bias].is_const:
            ops.append(op)
            continue
        out = graph.tensors[op.outputs[0]]
        b = graph.tensors[bias]
        acc = Tensor(f"{out.name}::acc", out.shape, out.dtype)
        zero = Tensor(f"{out.name}::zero_bias", (1,), b.dtype, np.zeros(1, STORAGE[b.dtype]))
        bshape = (1,) * (len(out.shape) - 1) + (b.shape[0],)
        shape = Tensor(f"{out.name}::bias_shape", (len(bshape),), "shape", np.array(bshape, np.int64))
        wide = Tensor(f"{out.name}::bias", bshape, b.dtype)
        for t in (acc, zero, shape, wide):
            graph.tensors[t.name] = t
        ops.append(Operator(op.op, op.inputs[:2] + [zero.name] + op.inputs[3:], [acc.name],
                            op.attrs, op.location, op.index))
        ops.append(Operator("RESHAPE", [bias, shape.name], [wide.name], {}, op.location, op.index))
        ops.append(Operator("ADD", [acc.name, wide.name], [out.name], {}, op.location, op.index))
        rewritten += 1
    graph.operators = ops
    return rewritten


# ---- control flow on the host -------------------------------------------------------------------

CONTROL_FLOW = {"COND_IF", "WHILE_LOOP"}
HOST_UNPACK = "HOST_UNPACK"           # host step: result i of a packed multi-result host op
_REGION_KEYS = ("then_graph", "else_graph", "cond_graph", "body_graph")
_CHUNK = 60000                        # characters per attribute string (the encoding's limit is 64 KiB)


def _jsonable(value):
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    return value


def graph_to_dict(graph: Graph) -> dict:
    """A JSON-able description of a (sub-)graph: what the host interpreter needs to run it."""
    tensors = {}
    for name, t in graph.tensors.items():
        data = None
        if t.data is not None:
            arr = np.ascontiguousarray(t.data, dtype=STORAGE[t.dtype])
            data = base64.b64encode(arr.astype(np.uint8) if t.dtype == "bool" else arr).decode()
        tensors[name] = [list(int(d) for d in t.shape), t.dtype, data]
    return {"inputs": list(graph.inputs), "outputs": list(graph.outputs), "tensors": tensors,
            "operators": [[o.op, list(o.inputs), list(o.outputs),
                           {k: _jsonable(v) for k, v in o.attrs.items()}] for o in graph.operators]}


def _regions_used(root: Graph, op: Operator) -> list[str]:
    names, todo = [], [op]
    while todo:
        o = todo.pop()
        for key in _REGION_KEYS:
            name = o.attrs.get(key)
            if name and name in root.regions and name not in names:
                names.append(name)
                todo.extend(root.regions[name].operators)
    return names


def region_attrs(root: Graph, op: Operator) -> dict:
    """The sub-graphs a control-flow operator runs (transitively), compressed, as attributes
    `regions.0`, `regions.1`, ... of at most 60000 characters each."""
    payload = {name: graph_to_dict(root.regions[name]) for name in _regions_used(root, op)}
    text = base64.b64encode(zlib.compress(json.dumps(payload, separators=(",", ":")).encode(), 9)).decode()
    chunks = [text[i:i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]
    return {f"regions.{i}": c for i, c in enumerate(chunks)}


def prepare_host_control_flow(graph: Graph) -> int:
    """Attach the sub-graphs to every COND_IF / WHILE_LOOP and give each a single result tensor.

    Placement and lowering give a step one result, so an operator whose results are used more
    than once is rewritten: it writes its used results packed into one byte tensor, and a
    HOST_UNPACK step per result copies it out. Results nobody reads are dropped; an operator
    none of whose results are read is removed (control flow has no side effects)."""
    consumers = graph.consumers()
    ops, count = [], 0
    for op in graph.operators:
        if op.op not in CONTROL_FLOW:
            ops.append(op)
            continue
        count += 1
        used = [i for i, n in enumerate(op.outputs) if n in graph.outputs or consumers.get(n)]
        if not used:
            continue
        attrs = {**op.attrs, **region_attrs(graph, op), "results": used}
        if len(used) == 1:
            ops.append(Operator(op.op, op.inputs, [op.outputs[used[0]]], attrs, op.location, op.index))
            continue
        offsets, end = [], 0
        for i in used:
            offsets.append(end)
            end += -(-graph.tensors[op.outputs[i]].nbytes // 8) * 8
        packed = Tensor(f"{op.outputs[used[0]]}::results", (max(end, 1),), "int8")
        graph.tensors[packed.name] = packed
        attrs.update(packed_offsets=offsets, packed_bytes=max(end, 1))
        ops.append(Operator(op.op, op.inputs, [packed.name], attrs, op.location, op.index))
        for i, offset in zip(used, offsets):
            t = graph.tensors[op.outputs[i]]
            ops.append(Operator(HOST_UNPACK, [packed.name], [t.name],
                                {"offset": offset, "shape": list(t.shape), "dtype": t.dtype},
                                op.location, op.index))
    graph.operators = ops
    return count


def plan_steps(graph: Graph) -> list[Step]:
    separate_dynamic_bias(graph)
    prepare_host_control_flow(graph)
    consumers = graph.consumers()
    fused: set[int] = set()
    steps = []
    for op in graph.operators:
        if id(op) in fused or OPERATORS[op.op].engine == "none":
            continue
        step = (HostOutputStep if op.op == HOST_UNPACK else Step)(_kind(op), op)
        if step.kind == "mac":
            step.rescale = _fusable_rescale(graph, op.outputs[0], consumers.get(op.outputs[0], []))
            if step.rescale is not None:
                fused.add(id(step.rescale))
                out = step.rescale.outputs[0]
                users = consumers.get(out, [])
                if out not in graph.outputs and len(users) == 1 and users[0].op == "CLAMP":
                    step.clamp = users[0]
                    fused.add(id(step.clamp))
        steps.append(step)
    return fuse_chains(graph, steps)
