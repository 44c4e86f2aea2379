"""Elementwise chains: consecutive vector operations fused into one vector-unit program.

A chain is a graph of elementwise operators whose intermediate tensors are read only inside
the chain (by one micro-op or several). The vector unit keeps those intermediates in its
registers: only the chain's external inputs and its final output cross the on-chip buffer, and
nothing in between is ever stored (a TFLite-style residual add is RESCALE, RESCALE, ADD, RESCALE
in one pass). An intermediate may be smaller than the output, broadcast along its unit dims
but not along the rows (a layer norm's per-token mean and scale, a softmax's row maximum
rescaled before it is subtracted): each tile computes its box of it, and the vector unit pays
for its elements only. A single elementwise operator is a chain of one.
"""
from __future__ import annotations

from npu_sim.isa.opcodes import OPCODES
from npu_sim.isa.operators import CONST, DATA, ELEMENTWISE, OPERATORS

from .ir import Graph, Operator
from .tiling import row_axis

MAX_CHAIN = 32       # micro-ops per vector program: bounds the JSON program a command carries
# The elementwise opcode's operands (isa/opcodes.py): data inputs in*, constant tables c*.
_OPERANDS = OPCODES["elementwise"].optional
MAX_DATA = sum(1 for n in _OPERANDS if n.startswith("in"))
MAX_TABLES = sum(1 for n in _OPERANDS if n.startswith("c"))


def _broadcasts(shape: tuple, to: tuple) -> bool:
    """A tensor of `shape` broadcasts to `to` along its unit dims (TOSA's elementwise rule:
    equal ranks), but not along the rows tiles stream (tiling.row_axis): each band of rows
    would compute all of it again."""
    axis = row_axis(to)
    return len(shape) == len(to) and all(d in (1, t) for d, t in zip(shape, to)) \
        and (axis is None or shape[axis] == to[axis])


def data_inputs(op: Operator) -> list[str]:
    return OPERATORS[op.op].bound(op.inputs, DATA)


def fuse_chains(graph: Graph, steps: list) -> list:
    """Merge each vector elementwise step with the elementwise steps that only feed it: those
    whose every consumer is in the chain (a DAG: an intermediate read by several of its
    micro-ops stays in a register for all of them, as a Newton-Raphson reciprocal's are)."""
    consumers = graph.consumers()
    producer = {s.output: s for s in steps}
    position = {id(s): i for i, s in enumerate(steps)}
    absorbed: set[int] = set()

    def elementwise(step):
        return step.kind == "vector" and step.main.op in ELEMENTWISE and id(step) not in absorbed

    def operands_fit(ops: list[Operator]) -> bool:
        """The chain of `ops` reads no more data inputs and constants than a command carries."""
        made = {o.outputs[0] for o in ops}
        data = {n for o in ops for n in data_inputs(o) if n not in made}
        # constants, but a per-tensor RESCALE's multiplier and shift travel as immediates
        tables = {n for o in ops
                  if not (o.op == "RESCALE" and graph.tensors[o.inputs[1]].size == 1)
                  for n in OPERATORS[o.op].bound(o.inputs, CONST)}
        return len(data) <= MAX_DATA and len(tables) <= MAX_TABLES

    for step in reversed(steps):
        if not elementwise(step):
            continue
        shape = graph.tensors[step.output].shape
        members, ops = [step], {id(step.main)}
        grown = True
        while grown and len(members) < MAX_CHAIN:
            grown = False
            for member in list(members):
                for name in data_inputs(member.main):
                    p = producer.get(name)
                    if (p is not None and elementwise(p) and id(p.main) not in ops
                            and name not in graph.outputs
                            and _broadcasts(graph.tensors[name].shape, shape)
                            and all(id(c) in ops for c in consumers.get(name, []))
                            and len(members) < MAX_CHAIN
                            and operands_fit([m.main for m in members] + [p.main])):
                        members.append(p)
                        ops.add(id(p.main))
                        grown = True
        absorbed |= {id(m) for m in members[1:]}
        step.chain = [m.main for m in sorted(members, key=lambda m: position[id(m)])]
    return [s for s in steps if id(s) not in absorbed]
