"""Elementwise chains: consecutive vector operations fused into one vector-unit program.

A chain is a tree of elementwise operators whose intermediate tensors have a single consumer
inside the chain and the full output shape. The vector unit keeps those intermediates in its
registers: only the chain's external inputs and its final output cross the on-chip buffer, and
nothing in between is ever stored (a TFLite-style residual add is RESCALE, RESCALE, ADD, RESCALE
in one pass). A single elementwise operator is a chain of one.
"""
from __future__ import annotations

import json

from .ir import Graph, Operator
from .operands import ELEMENTWISE, ELEMENTWISE_BINARY
from .tiling import TileSpace

MAX_CHAIN = 16


def data_inputs(op: Operator) -> list[str]:
    if op.op == "SELECT":
        return op.inputs[:3]
    return op.inputs[:2] if op.op in ELEMENTWISE_BINARY else op.inputs[:1]


def table_inputs(op: Operator) -> list[str]:
    """Constant per-channel or lookup tables the unit reads from the buffer."""
    if op.op == "RESCALE":
        return op.inputs[1:3]
    if op.op == "TABLE":
        return op.inputs[1:2]
    return []


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


def _micro_attrs(graph: Graph, op: Operator) -> dict:
    from .families import clamp_bounds, const_int
    if op.op == "RESCALE":
        a = {k: op.attrs[k] for k in ("scale32", "rounding_mode", "per_channel",
                                      "input_unsigned", "output_unsigned")}
        a.update(input_zp=const_int(graph, op.inputs[3]), output_zp=const_int(graph, op.inputs[4]))
        return a
    if op.op == "CLAMP":
        lo, hi = clamp_bounds(op, graph.tensors[op.inputs[0]].dtype)
        return {"lo": lo, "hi": hi}
    if op.op == "MUL":
        return {"shift": const_int(graph, op.inputs[2])}
    if op.op == "ARITHMETIC_RIGHT_SHIFT":
        return {"round": bool(op.attrs.get("round", False))}
    if op.op == "NEGATE":
        return {"input_zp": const_int(graph, op.inputs[1]),
                "output_zp": const_int(graph, op.inputs[2])}
    return {}


def chain_space(step, ctx):
    from .families import const_int
    """Tile space and program of an elementwise chain (TOSA elementwise ops have equal ranks)."""
    g = ctx.graph
    out = g.tensors[step.output]
    names = [f"d{i}" for i in range(len(out.shape))]
    dims = dict(zip(names, out.shape))
    roles: dict[str, str] = {}
    operands, program, results = [], [], {}

    def data_operand(tensor):
        if tensor not in roles:
            roles[tensor] = f"in{len([r for r in roles.values() if r.startswith('in')])}"
            shape = g.tensors[tensor].shape
            keep = [s == out.shape[i] for i, s in enumerate(shape)]
            operands.append(ctx.operand(
                roles[tensor], tensor, tuple(d for d, k in zip(names, keep) if k),
                lambda t, keep=keep: tuple(t[d] if k else (0, 1) for d, k in zip(names, keep))))
        return roles[tensor]

    def table_operand(tensor, per_channel):
        if tensor not in roles:
            roles[tensor] = f"c{len([r for r in roles.values() if r.startswith('c')])}"
            length = g.tensors[tensor].shape[0]
            if per_channel and names and length == out.shape[-1] and length > 1:
                operands.append(ctx.operand(roles[tensor], tensor, (names[-1],),
                                            lambda t: (t[names[-1]],)))
            else:
                operands.append(ctx.operand(roles[tensor], tensor, (),
                                            lambda t, n=length: ((0, n),)))
        return roles[tensor]

    for op in step.chain:
        args = [results.get(n) or data_operand(n) for n in data_inputs(op)]
        per_channel = op.op == "RESCALE" and bool(op.attrs["per_channel"])
        immediate = {}
        if op.op == "RESCALE" and g.tensors[op.inputs[1]].size == 1:
            # A per-tensor multiplier and shift travel in the command, not through memory.
            immediate = {"multiplier": const_int(g, op.inputs[1]), "shift": const_int(g, op.inputs[2])}
            tables = []
        else:
            tables = [table_operand(n, per_channel) for n in table_inputs(op)]
        program.append({"fn": op.op, "args": args, "tables": tables, **immediate,
                        "dtype": g.tensors[op.outputs[0]].dtype, **_micro_attrs(g, op)})
        results[op.outputs[0]] = f"%{len(program) - 1}"
    passes = len(program)
    space = TileSpace(
        dims=dims, levels={d: i for i, d in enumerate(names)}, orders=[tuple(names)],
        inputs=operands,
        output=ctx.operand("out", step.output, tuple(names), lambda t: tuple(t[d] for d in names)),
        work=lambda s: ctx.vector_work(passes, *s.values()))
    return space, "elementwise", {"program": json.dumps(program, separators=(",", ":"))}
