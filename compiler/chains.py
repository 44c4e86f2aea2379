"""Elementwise chains: consecutive vector operations fused into one vector-unit program.

A chain is a tree of elementwise operators whose intermediate tensors have a single consumer
inside the chain and the full output shape. The vector unit keeps those intermediates in its
registers: only the chain's external inputs and its final output cross the on-chip buffer, and
nothing in between is ever stored (a TFLite-style residual add is RESCALE, RESCALE, ADD, RESCALE
in one pass). A single elementwise operator is a chain of one.
"""
from __future__ import annotations

from npu_sim.isa.operators import DATA, ELEMENTWISE, OPERATORS

from .ir import Graph, Operator

MAX_CHAIN = 16       # micro-ops per vector program: bounds the JSON program a command carries


def data_inputs(op: Operator) -> list[str]:
    return OPERATORS[op.op].bound(op.inputs, DATA)


def fuse_chains(graph: Graph, steps: list) -> list:
    """Merge each vector elementwise step with the elementwise steps that only feed it."""
    consumers = graph.consumers()
    producer = {s.output: s for s in steps}
    absorbed: set[int] = set()

    def eligible(step, name, shape):
        return (step is not None and step.kind == "vector" and step.main.op in ELEMENTWISE
                and id(step) not in absorbed and name not in graph.outputs
                and len(consumers.get(name, [])) == 1 and graph.tensors[name].shape == shape)

    def collect(step, shape, members):
        for name in data_inputs(step.main):
            p = producer.get(name)
            if len(members) < MAX_CHAIN and eligible(p, name, shape):
                absorbed.add(id(p))
                collect(p, shape, members)
        members.append(step.main)

    for step in reversed(steps):
        if step.kind == "vector" and step.main.op in ELEMENTWISE and id(step) not in absorbed:
            members: list[Operator] = []
            collect(step, graph.tensors[step.output].shape, members)
            step.chain = members
    return [s for s in steps if id(s) not in absorbed]
