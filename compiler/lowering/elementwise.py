"""Lowering of the elementwise operators (activation, binary, unary, ternary, comparison).

Every elementwise operator runs as a micro-op of a vector-unit chain (compiler/chains.py fuses
them); a single operator is a chain of one. `chain_space` tiles a whole chain; MICRO_ATTRS
gives each operator's attributes as a micro-op.
"""
from __future__ import annotations

import json

from npu_sim.isa.dtypes import DTYPES
from npu_sim.isa.operators import CONST, DATA, ELEMENTWISE, OPERATORS

from ..ir import Graph, Operator
from ..steps import Step
from ..tiling import TileSpace
from .common import MICRO_ATTRS, TILE_SPACES, Context, const_int, operand
from .conversion import widening_copy


@MICRO_ATTRS.register("ADD", "SUB", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "INTDIV",
                      "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_LEFT_SHIFT",
                      "LOGICAL_RIGHT_SHIFT", "EQUAL", "GREATER",
                      "GREATER_EQUAL", "ABS", "BITWISE_NOT", "CLZ", "LOGICAL_NOT", "SELECT",
                      "TABLE", "POW", "CEIL", "FLOOR", "EXP", "LOG", "RECIPROCAL", "RSQRT", "SIN",
                      "COS", "ERF", "SIGMOID", "TANH")
def no_attributes(graph: Graph, op: Operator) -> dict:
    return {}


def _nan_mode(graph: Graph, op: Operator) -> dict:
    """Float MAXIMUM, MINIMUM and CLAMP carry their nan_mode (integers have no NaN)."""
    if DTYPES[graph.tensors[op.inputs[0]].dtype].kind != "float":
        return {}
    return {"nan_mode": op.attrs.get("nan_mode", "PROPAGATE")}


@MICRO_ATTRS.register("MAXIMUM", "MINIMUM")
def min_max(graph: Graph, op: Operator) -> dict:
    return _nan_mode(graph, op)


@MICRO_ATTRS.register("CLAMP")
def clamp(graph: Graph, op: Operator) -> dict:
    return {"lo": op.attrs["min_val"], "hi": op.attrs["max_val"], **_nan_mode(graph, op)}


@MICRO_ATTRS.register("MUL")
def mul(graph: Graph, op: Operator) -> dict:
    return {"shift": const_int(graph, operand(op, "shift"))}


@MICRO_ATTRS.register("ARITHMETIC_RIGHT_SHIFT")
def arithmetic_right_shift(graph: Graph, op: Operator) -> dict:
    return {"round": bool(op.attrs.get("round", False))}


@MICRO_ATTRS.register("NEGATE")
def negate(graph: Graph, op: Operator) -> dict:
    return {"input_zp": const_int(graph, operand(op, "input1_zp")),
            "output_zp": const_int(graph, operand(op, "output_zp"))}


@TILE_SPACES.register(*ELEMENTWISE)
def chain_space(step: Step, ctx: Context):
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
        row = OPERATORS[op.op]
        args = [results.get(n) or data_operand(n) for n in row.bound(op.inputs, DATA)]
        per_channel = op.op == "RESCALE" and bool(op.attrs["per_channel"])
        fn, immediate, attrs = op.op, {}, MICRO_ATTRS[op.op](g, op)
        if op.op == "RESCALE" and widening_copy(g, op):
            fn, tables, attrs = "CAST", [], {}
        elif op.op == "RESCALE" and g.tensors[op.inputs[1]].size == 1:
            # A per-tensor multiplier and shift travel in the command, not through memory.
            immediate = {"multiplier": const_int(g, op.inputs[1]), "shift": const_int(g, op.inputs[2])}
            tables = []
        else:
            tables = [table_operand(n, per_channel) for n in row.bound(op.inputs, CONST)]
        program.append({"fn": fn, "args": args, "tables": tables, **immediate,
                        "dtype": g.tensors[op.outputs[0]].dtype, **attrs})
        results[op.outputs[0]] = f"%{len(program) - 1}"
    # Each micro-op works on the tile's box of its result: an intermediate that broadcasts (a
    # softmax's row maximum) spans fewer dims, and a tile split along those computes it again,
    # so they split last.
    spans = [tuple(d for d, n, full in zip(names, g.tensors[op.outputs[0]].shape, out.shape)
                   if n == full) for op in step.chain]
    broadcast = {d for span in spans for d in names if d not in span}
    split_order = [d for d in names if d not in broadcast] + [d for d in names if d in broadcast]
    space = TileSpace(
        dims=dims, levels={d: i for i, d in enumerate(split_order)},
        orders=[tuple(names)], inputs=operands,
        output=ctx.operand("out", step.output, tuple(names), lambda t: tuple(t[d] for d in names)),
        work=lambda s: sum(ctx.vector_work(*(s[d] for d in span)) for span in spans))
    return space, "elementwise", {"program": json.dumps(program, separators=(",", ":"))}
