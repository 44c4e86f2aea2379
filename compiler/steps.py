"""Group TOSA operators into NPU steps: fusion of MAC ops with their output stage.

A step is what one engine family executes as a unit: a MAC-array operation with a fused
RESCALE (+ CLAMP), a vector-unit operation, a DMA data movement, a free alias (RESHAPE of a
contiguous tensor), or a host-CPU fallback operation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .chains import data_inputs, fuse_chains, table_inputs
from .ir import STORAGE, Graph, Operator, Tensor
from .operands import DATA_MOVEMENT, ELEMENTWISE, OPERANDS, REDUCTIONS

VECTOR_OPS = ELEMENTWISE | REDUCTIONS | {"AVG_POOL2D", "MAX_POOL2D", "RESIZE", "ARGMAX"}
# MAC operators with a tiled lowering; the others run on the host CPU.
TILED_MAC_OPS = {"CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "MATMUL"}


@dataclass
class Step:
    kind: str                      # "mac" | "vector" | "dma" | "alias" | "host"
    main: Operator
    rescale: Operator | None = None
    clamp: Operator | None = None
    chain: list[Operator] = field(default_factory=list)   # fused elementwise ops, main last

    @property
    def output(self) -> str:
        return (self.clamp or self.rescale or self.main).outputs[0]

    @property
    def ops(self) -> list[str]:
        if self.chain:
            return [o.op for o in self.chain]
        return [o.op for o in (self.main, self.rescale, self.clamp) if o is not None]

    @property
    def inputs(self) -> list[str]:
        """Tensors the step reads from memory (attribute-like constants are excluded)."""
        if self.kind == "mac":
            return self.main.inputs[:2] + [stage_table_name(self)]
        if self.kind == "host":
            return list(self.main.inputs)
        if self.chain:
            inside = {o.outputs[0] for o in self.chain}
            return [t for o in self.chain for t in data_inputs(o) + table_inputs(o)
                    if t not in inside]
        names = OPERANDS.get(self.main.op)
        if names is None:            # CONCAT: a list of data inputs
            return list(self.main.inputs)
        return [t for n, t in zip(names, self.main.inputs) if n not in _NOT_READ.get(
            self.main.op, ()) and not n.endswith("_zp")]


_NOT_READ = {"MUL": ("shift",), "PAD": ("padding", "pad_const"), "RESHAPE": ("shape",),
             "SLICE": ("start", "size"), "TILE": ("multiples",),
             "RESIZE": ("scale", "offset", "border")}


def stage_table_name(step: Step) -> str:
    """The per-output-channel [bias, multiplier, shift] table of a MAC step."""
    return f"{step.output}::stage"


def _kind(op: Operator) -> str:
    if op.op in TILED_MAC_OPS:
        return "mac"
    if op.op in VECTOR_OPS:
        return "vector"
    if op.op in ("RESHAPE", "IDENTITY"):
        return "alias"
    if op.op in DATA_MOVEMENT:
        return "dma"
    return "host"


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
BIASED_MAC_OPS = {"CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"}


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


def plan_steps(graph: Graph) -> list[Step]:
    separate_dynamic_bias(graph)
    consumers = graph.consumers()
    fused: set[int] = set()
    steps = []
    for op in graph.operators:
        if id(op) in fused or op.op in ("CONST", "CONST_SHAPE"):
            continue
        step = Step(_kind(op), op)
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
