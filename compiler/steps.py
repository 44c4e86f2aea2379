"""Group TOSA operators into NPU steps: fusion of MAC ops with their output stage.

A step is what one engine family executes as a unit: a MAC-array operation with a fused
RESCALE (+ CLAMP), a vector-unit operation, a DMA data movement, a free alias (RESHAPE of a
contiguous tensor), or a host-CPU fallback operation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .chains import data_inputs, fuse_chains, table_inputs
from .ir import Graph, Operator
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


def plan_steps(graph: Graph) -> list[Step]:
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
