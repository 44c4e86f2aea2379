"""Elementwise chains take the shape of the conv output they read.

Frontends compute a transformer's residual adds in 3-D ([1, tokens, hidden]) while its FC
layers are 1x1 CONV2Ds in NHWC ([tokens, 1, 1, hidden]): the add reads the conv's output
through a RESHAPE that only drops unit dimensions. A RESHAPE is a free view, but the add then
cannot run inside the conv's tiles (compiler/cascade.py needs the chain to read the conv's
NHWC output box for box), so its vector work waits for the whole conv instead of overlapping
the array's next tiles.

`align_to_conv_views` rewrites each elementwise chain (compiler/chains.py: the operators
the vector unit runs as one program) of output shape S that reads such a view into the
conv's shape T: views of T are read at their source, other data inputs through new
RESHAPEs (a constant is reshaped in place of a copy), and a result read outside the chain
keeps its name in shape T while its readers outside read a RESHAPE of it back to S (a graph
output keeps its name and shape S: the chain then writes a new tensor of shape T).
Elementwise operators compute each element from the same elements of their inputs, and S and
T order the elements alike (they differ by unit dimensions only, the channels last in both),
so every output is bit for bit what it was.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from npu_sim.isa.operators import ELEMENTWISE, OPERATORS

from .chains import data_inputs, fuse_chains
from .ir import Graph, Operator, Tensor
from .steps import Step

# Operators a conv's output passes through in its output stage.
_STAGE = ("RESCALE", "CLAMP")


def _past_stage(producers: dict[str, Operator], name: str) -> Operator | None:
    """The operator producing `name`, past the RESCALE and CLAMP of an output stage."""
    op = producers.get(name)
    while op is not None and op.op in _STAGE:
        op = producers.get(op.inputs[0])
    return op


def _conv_output(producers: dict[str, Operator], name: str) -> bool:
    """`name` is a CONV2D's output, or that of its output stage."""
    op = _past_stage(producers, name)
    return op is not None and op.op == "CONV2D"


def _unit_view(src: tuple, dst: tuple) -> bool:
    """dst orders src's elements alike: the two differ by unit dimensions only, and both end
    in the same (channel) dimension."""
    return (src != dst and bool(src) and bool(dst) and src[-1] == dst[-1] != 1
            and [d for d in src if d != 1] == [d for d in dst if d != 1])


def _to_shape(shape: tuple, src: tuple, dst: tuple) -> tuple:
    """A (possibly broadcast) operand's shape, for an operation whose output shape `src`
    becomes `dst`: the non-unit dimensions of the two correspond in order, and every other
    dimension of the operand is 1 (as src's are)."""
    out = [1] * len(dst)
    for i, j in zip((i for i, d in enumerate(src) if d != 1),
                    (j for j, d in enumerate(dst) if d != 1)):
        out[j] = shape[i]
    return tuple(out)


def _chains(graph: Graph) -> list[list[Operator]]:
    """The elementwise chains the vector unit will run (compiler/chains.py), as operators;
    a MAC operator's RESCALE and CLAMP are left out: they run in its output stage."""
    producers = graph.producers()

    def stage(op) -> bool:
        mac = op.op in _STAGE and _past_stage(producers, op.inputs[0])
        return bool(mac) and OPERATORS[mac.op].engine == "mac"

    steps = [Step("vector", op) for op in graph.operators
             if op.op in ELEMENTWISE and OPERATORS[op.op].engine == "vector" and not stage(op)]
    return [step.chain for step in fuse_chains(graph, steps)]


def align_to_conv_views(graph: Graph) -> int:
    """Rewrite each elementwise chain reading a unit-dimension view of a conv's output into
    the conv's shape (see the module's docstring) where the chain alone reads that output
    (else no cascade could take the conv in); returns how many chains were rewritten."""
    rewritten = 0
    producers, consumers = graph.producers(), graph.consumers()
    for chain in _chains(graph):
        shape = graph.tensors[chain[-1].outputs[0]].shape
        inside = {id(op) for op in chain}
        target = None
        for name in (n for op in chain for n in data_inputs(op)):
            view = producers.get(name)
            if view is None or view.op != "RESHAPE" or view.is_variable_access:
                continue
            src = graph.tensors[view.inputs[0]]
            if graph.tensors[name].shape == shape and _unit_view(src.shape, shape) \
                    and _conv_output(producers, src.name) \
                    and consumers.get(src.name) == [view] \
                    and all(id(op) in inside for op in consumers.get(name, [])) \
                    and not {src.name, name} & set(graph.outputs):
                target = src.shape
                break
        if target is not None and not any(graph.tensors[n].variable
                                          for op in chain for n in op.inputs):
            _rewrite(graph, chain, shape, target)
            rewritten += 1
            producers, consumers = graph.producers(), graph.consumers()
    return rewritten


def _rewrite(graph: Graph, chain: list[Operator], shape: tuple, target: tuple) -> None:
    """Put the chain's operators into shape `target` (see align_to_conv_views()). Its
    tensors keep their names, so its step and layer keep theirs, except a graph output's,
    which the RESHAPE giving it back its shape takes."""
    producers, consumers = graph.producers(), graph.consumers()
    inside = {id(op) for op in chain}
    made = {op.outputs[0] for op in chain}
    before: dict[int, list[Operator]] = {}      # id(op) -> new operators to run before it
    after: dict[int, list[Operator]] = {}
    renamed: dict[str, str] = {}                # a data input -> its tensor of shape `target`
    outside: dict[str, str] = {}                # a result -> its view of shape `shape`
    bypassed = set()

    def fresh(name: str, dims: tuple, dtype: str, data=None) -> str:
        while name in graph.tensors:
            name += "'"
        graph.tensors[name] = Tensor(name, dims, dtype, data)
        return name

    def reshape(src: str, dst: str, where: Operator) -> list[Operator]:
        dims = graph.tensors[dst].shape
        size = fresh(f"{dst}::shape", (len(dims),), "shape", np.asarray(dims, np.int64))
        return [Operator("CONST_SHAPE", [], [size], {}, where.location, where.index),
                Operator("RESHAPE", [src, size], [dst], {}, where.location, where.index)]

    for op in chain:
        for name in data_inputs(op):
            if name in made or name in renamed:
                continue
            t = graph.tensors[name]
            dims = _to_shape(t.shape, shape, target)
            source = producers.get(name)
            if source is not None and source.op == "RESHAPE" \
                    and graph.tensors[source.inputs[0]].shape == dims:
                renamed[name] = source.inputs[0]            # the view's own source
                bypassed.add(name)
            elif t.is_const:
                renamed[name] = fresh(f"{name}::aligned", dims, t.dtype,
                                      np.ascontiguousarray(t.data).reshape(dims))
                before.setdefault(id(op), []).append(
                    Operator("CONST", [], [renamed[name]], {}, op.location, op.index))
            else:
                renamed[name] = fresh(f"{name}::aligned", dims, t.dtype)
                before.setdefault(id(op), []).extend(reshape(name, renamed[name], op))
    for op in chain:
        out = graph.tensors[op.outputs[0]]
        dims = _to_shape(out.shape, shape, target)      # an intermediate may broadcast
        read_outside = any(id(u) not in inside for u in consumers.get(out.name, []))
        if out.name in graph.outputs:
            renamed[out.name] = fresh(f"{out.name}::aligned", dims, out.dtype)
            after[id(op)] = reshape(renamed[out.name], out.name, op)
        else:
            graph.tensors[out.name] = dataclasses.replace(out, shape=dims)
            if read_outside:
                outside[out.name] = fresh(f"{out.name}::view", out.shape, out.dtype)
                after[id(op)] = reshape(out.name, outside[out.name], op)
    for op in graph.operators:
        if id(op) in inside:
            data = data_inputs(op)
            op.inputs = [renamed.get(n, n) if n in data else n for n in op.inputs]
            op.outputs = [renamed.get(op.outputs[0], op.outputs[0])]
        else:
            op.inputs = [outside.get(n, n) for n in op.inputs]
    ops = []
    for op in graph.operators:
        ops += before.get(id(op), []) + [op] + after.get(id(op), [])
    used = {n for op in ops for n in op.inputs} | set(graph.outputs)
    dropped = {n for n in bypassed if n not in used}     # views the chain alone read
    ops = [op for op in ops if not (op.outputs and op.outputs[0] in dropped)]
    used = {n for op in ops for n in op.inputs} | set(graph.outputs)
    graph.operators = [op for op in ops if op.op != "CONST_SHAPE" or op.outputs[0] in used]
