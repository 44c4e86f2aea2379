"""Batch splitting: attention computed head by head, so the MAC array and the vector unit overlap.

A transformer's attention is a region of operators that never mixes its heads (the batch axis
of its MATMULs): scores = Q K^T, the softmax (REDUCE_MAX, SUB, an exp TABLE, REDUCE_SUM, a
reciprocal, MUL), context = probabilities V. Compiled whole, each of its steps is one pass over
every head (BERT-base: 12 x 128 x 128 scores, and 786 KB of int32 exponentials that push the
scores and probabilities off chip on a 1 MiB buffer), and the steps run one after another, so
the array idles through the softmax and the vector unit through the MATMULs.

Split into one copy of the region per head (its inputs sliced along the batch axis, its
outputs concatenated back), each head's tensors are small enough to stay on chip, and the
copies are ordered as a software pipeline: head h + 1's scores are computed before head h's
context, so the array works on the next head while the vector unit runs this one's softmax.
Each head's operators compute exactly what the whole region computed for that head, so the
results are bit-identical. Where an input comes from a conv's output channels (BERT's QKV
layer), each head may compute its own entry with a conv of its block of channels instead of
slicing it (compiler/head_source.py): the array then computes the next head's Q, K and V
while the vector unit runs this one's softmax, which otherwise waits for the whole conv.

A region is split where its tensors do not fit in the resident share of the buffer whole but
one head's do, and the compiler (compiler/driver.py) keeps the split only where the tiler's
estimates, the pipeline's steps counted at its busier engine's share, save SPLIT_GAIN of what
the region costs apart: the copies also load their small constants (tables, stage tables)
once a head, which the estimates do not weigh; and the heads compute their inputs only where
that pipeline's estimate, its resources' shares, beats the slicing one's.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from npu_sim.isa.dtypes import STORAGE
from npu_sim.isa.operators import DATA, ELEMENTWISE, OPERATORS

from .head_source import head_ops, per_head_source
from .ir import Graph, Operator, Tensor

class _NotADag(Exception):
    """The operators with a region's copies in place would depend on each other in a cycle."""


# Operators that compute each entry of a batch axis from that entry alone (a REDUCE only
# along another axis): a region of them splits along it.
_LOCAL = frozenset(ELEMENTWISE) | {"RESCALE", "TABLE", "MATMUL"}


def split_batches(graph: Graph, resident: int,
                  from_convs: bool = False) -> tuple[Graph, frozenset[str]]:
    """A copy of `graph` with every batch-local region seeded by a batched MATMUL split,
    where its tensors do not all fit in the `resident` bytes of the on-chip buffer at once
    but one batch entry's do (where everything fits, the steps need no splitting to stay on
    chip; where one entry's tensors do not fit either, splitting only multiplies the steps),
    and the names of the copies' tensors: compiler/placement.py keeps each until its reading
    engine's next step, so the other engine's steps of the pipeline never wait to write over
    it. `graph` itself and no names where no region qualifies. A graph with variables is
    left whole: their reads and writes are ordered by the operators' order alone.
    `from_convs`: each head computes its entry of an input that comes from a conv's output
    channels with its own conv (compiler/head_source.py) instead of slicing it."""
    if any(op.is_variable_access for op in graph.operators):
        return graph, frozenset()
    seeds, seen = [], set()
    for op in graph.operators:
        if op.op != "MATMUL" or id(op) in seen:
            continue
        found = _region(graph, op)
        if found is None or not _vector_work(found[0]):
            continue
        region, axes = found
        seen |= {id(o) for o in region}
        batch = graph.tensors[op.outputs[0]].shape[0]
        if _peak_bytes(graph, region, axes, batch, batch) > resident >= \
                _peak_bytes(graph, region, axes, batch, 1):
            seeds.append(op.outputs[0])
    if not seeds:
        return graph, frozenset()
    split = graph.copy()            # the regions are disjoint: each seed is still there
    producers = split.producers()
    pipelined: set[str] = set()
    sliced: dict[str, list[str]] = {}       # an input of a region -> its slices, made once
    computed: list[str] = []                # inputs the heads compute instead
    for name in seeds:
        region, axes = _region(split, producers[name])
        batch = split.tensors[name].shape[0]
        try:
            pipelined |= _split(split, region, axes, batch, sliced, from_convs, computed)
        except _NotADag:            # (cannot happen: _region() checks) the split is dropped
            return graph, frozenset()
    _drop_unread(split, computed)           # once every region reads the heads' own
    return split, frozenset(pipelined)


def _peak_bytes(graph: Graph, region: list[Operator], axes: dict, batch: int,
                entries: int) -> int:
    """The most bytes of the region's tensors alive at once, its operators run in order (its
    inputs from the start, each result until its last reader), for `entries` of its `batch`
    entries (a tensor of the batch, in `axes`, holds that share of its bytes; another all)."""
    made = {o.outputs[0] for o in region}
    last: dict[str, int] = {}
    for i, op in enumerate(region):
        for name in _data(op):
            last[name] = i
    size = {}
    for name in list(last) + list(made):
        nbytes = graph.tensors[name].nbytes
        size[name] = nbytes * entries // batch if name in axes else nbytes
    live = sum(size[n] for n in last if n not in made)
    peak = live
    for i, op in enumerate(region):
        live += size[op.outputs[0]]
        peak = max(peak, live)
        for name in set(_data(op)):
            if last.get(name) == i:
                live -= size[name]
        if op.outputs[0] not in last:
            live -= size[op.outputs[0]]
    return peak


def _vector_work(region: list[Operator]) -> bool:
    """Whether the region has work for the vector unit beside the array's (a MATMUL's own
    RESCALE and CLAMP run in the array's output stage; a RESHAPE is a view): without it
    there is nothing to overlap, and the tiler splits a batched MATMUL by itself."""
    array_outputs = {o.outputs[0] for o in region if o.op == "MATMUL"}
    for op in region:
        if op.op in ("MATMUL", "RESHAPE"):
            continue
        if op.op in ("RESCALE", "CLAMP") and op.inputs[0] in array_outputs:
            array_outputs.add(op.outputs[0])
            continue
        return True
    return False


def _data(op: Operator) -> list[str]:
    return OPERATORS[op.op].bound(op.inputs, DATA)


def _leading(shape, axis: int, batch: int) -> bool:
    """Whether `shape` has the batch at `axis` with only 1s before it: each entry is then one
    contiguous block of the tensor."""
    return 0 <= axis < len(shape) and shape[axis] == batch and math.prod(shape[:axis]) == 1


def _output_axis(graph: Graph, op: Operator, axes: dict, batch: int) -> int | None:
    """The axis of `op`'s output that carries the batch of its inputs in `axes`, where `op`
    computes each entry from that entry alone; else None."""
    if op.is_variable_access or len(op.outputs) != 1:
        return None
    out = graph.tensors[op.outputs[0]].shape
    carried = {axes[n] for n in _data(op) if n in axes}
    if len(carried) != 1:
        return None
    (axis,) = carried
    if op.op == "RESHAPE":          # an entry stays one block: the batch's axis in the new shape
        return next((b for b in range(len(out)) if _leading(out, b, batch)), None)
    if op.op == "TRANSPOSE":
        b = list(op.attrs["perms"]).index(axis)
        return b if _leading(out, b, batch) else None
    if op.op == "MATMUL":
        return 0 if axis == 0 else None
    if op.op.startswith("REDUCE_"):
        if op.attrs.get("axis") == axis:
            return None
    elif op.op not in _LOCAL:
        return None
    return axis if _leading(out, axis, batch) else None


def _region(graph: Graph, seed: Operator) -> tuple[list[Operator], dict] | None:
    """The operators reachable from `seed` through batch-local operators, in graph order, and
    the batch's axis in each of their tensors and of the outside inputs they split (RESHAPEs
    and TRANSPOSEs may move it, as ExecuTorch's attention views its scores 4-D for the
    softmax); None where the region does not qualify (a batch of one, an outside input with
    another batch size, or a path that leaves the region and comes back into it)."""
    batch = graph.tensors[seed.outputs[0]].shape[0]
    if batch < 2:
        return None
    consumers = graph.consumers()
    axes = {seed.outputs[0]: 0}
    for name in _data(seed):
        if graph.tensors[name].shape[0] == batch:
            axes[name] = 0
    members, frontier = {id(seed): seed}, [seed]
    while frontier:
        op = frontier.pop()
        for user in consumers.get(op.outputs[0], []):
            if id(user) in members:
                continue
            entries = _entry_axes(graph, user, axes, batch)
            axis = _output_axis(graph, user, {**axes, **entries}, batch)
            if axis is not None:
                axes.update(entries)
                axes[user.outputs[0]] = axis
                members[id(user)] = user
                frontier.append(user)
    made = {o.outputs[0] for o in members.values()}
    for op in members.values():
        axis = next(axes[n] for n in _data(op) if n in axes)
        for name in _data(op):
            shape = graph.tensors[name].shape
            if name not in axes and (len(shape) <= axis or shape[axis] != 1):
                return None         # neither the batch's entries nor broadcast over them
    if _reenters(members, made, consumers):
        return None
    position = {id(o): i for i, o in enumerate(graph.operators)}
    return sorted(members.values(), key=lambda o: position[id(o)]), axes


def _entry_axes(graph: Graph, op: Operator, axes: dict, batch: int) -> dict:
    """The batch's axis in `op`'s outside data inputs that hold one entry per batch entry at
    the axis its region inputs have it (an operand broadcast over the batch is shared)."""
    carried = [axes[n] for n in _data(op) if n in axes]
    if not carried:
        return {}
    return {name: carried[0] for name in _data(op)
            if name not in axes and _leading(graph.tensors[name].shape, carried[0], batch)}


def _reenters(members: dict, made: set, consumers: dict) -> bool:
    """Whether a path leaves the region and comes back into it (the region's outputs would
    then be needed before its copies all ran)."""
    outside = [u for name in made for u in consumers.get(name, []) if id(u) not in members]
    seen = set()
    while outside:
        op = outside.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        for name in op.outputs:
            for user in consumers.get(name, []):
                if id(user) in members:
                    return True
                outside.append(user)
    return False


def _one(shape, axis: int) -> tuple:
    return tuple(shape[:axis]) + (1,) + tuple(shape[axis + 1:])


def _split(graph: Graph, region: list[Operator], axes: dict, batch: int,
           sliced: dict[str, list[str]], from_convs: bool, computed: list[str]) -> set[str]:
    """Replace the region by one copy per batch entry; returns the copies' tensors. The
    inputs' slices are made once for every region (`sliced`); with `from_convs`, an input a
    conv's output channels give is computed head by head instead (head_source.py), and
    added to `computed`."""
    made = {o.outputs[0] for o in region}
    new_ops: list[Operator] = []
    where = region[0]

    def tensor(name: str, shape, dtype: str, data=None) -> str:
        while name in graph.tensors:        # a name the file or an earlier split took
            name += "'"
        graph.tensors[name] = Tensor(name, tuple(int(d) for d in shape), dtype, data)
        return name

    def emit(kind: str, inputs: list[str], output: str, attrs=None, into=None):
        (new_ops if into is None else into).append(
            Operator(kind, inputs, [output], dict(attrs or {}), where.location, where.index))

    def shape_const(name: str, values) -> str:
        name = tensor(name, (len(values),), "shape", np.asarray(values, np.int64))
        emit("CONST_SHAPE", [], name)
        return name

    heads: list[list[Operator]] = [[] for _ in range(batch)]   # each head's own inputs
    for op in region:
        for name in _data(op):
            if name in made or name in sliced or name not in axes:
                continue
            t, axis = graph.tensors[name], axes[name]
            source = None if t.is_const or not from_convs else \
                per_head_source(graph, name, axis, batch)
            if source is not None:
                sliced[name] = [tensor(f"{name}::head{h}", _one(t.shape, axis), t.dtype)
                                for h in range(batch)]
                for h, part in enumerate(sliced[name]):
                    heads[h] += head_ops(graph, source, h, part, tensor)
                computed.append(name)
                continue
            size = None if t.is_const else shape_const(f"{name}::head_size", _one(t.shape, axis))
            parts = []
            for h in range(batch):
                part = tensor(f"{name}::head{h}", _one(t.shape, axis), t.dtype)
                if t.is_const:
                    graph.tensors[part].data = np.ascontiguousarray(
                        np.take(t.data, [h], axis=axis), dtype=STORAGE[t.dtype])
                    emit("CONST", [], part)
                else:
                    start = [0] * len(t.shape)
                    start[axis] = h
                    emit("SLICE", [name, shape_const(f"{name}::head{h}_start", start), size],
                         part, into=heads[h])
                parts.append(part)
            sliced[name] = parts

    # a RESHAPE's copies take the shape of one entry
    shapes = {id(op): shape_const(f"{op.outputs[0]}::head_shape",
                                  _one(graph.tensors[op.outputs[0]].shape, axes[op.outputs[0]]))
              for op in region if op.op == "RESHAPE"}
    copies, renamed = [], {}
    for h in range(batch):
        ops = []
        for op in region:
            inputs = [renamed[n, h] if n in made else sliced[n][h] if n in sliced else n
                      for n in op.inputs]
            if op.op == "RESHAPE":
                inputs[1] = shapes[id(op)]
            out = graph.tensors[op.outputs[0]]
            renamed[out.name, h] = tensor(f"{out.name}::head{h}",
                                          _one(out.shape, axes[out.name]), out.dtype)
            ops.append(Operator(op.op, inputs, [renamed[out.name, h]], dict(op.attrs),
                                op.location, op.index))
        copies.append(ops)
    new_ops += _pipelined(copies, heads)

    consumers = graph.consumers()
    inside = {id(o) for o in region}
    for name in (op.outputs[0] for op in region):       # in order: the program is the same
        if name in graph.outputs or any(id(u) not in inside for u in consumers.get(name, [])):
            emit("CONCAT", [renamed[name, h] for h in range(batch)], name, {"axis": axes[name]})
    _replace(graph, region, new_ops)
    return {o.outputs[0] for ops in copies + heads for o in ops} | {
        p for parts in sliced.values() for p in parts}


def _pipelined(copies: list[list[Operator]], inputs: list[list[Operator]]) -> list[Operator]:
    """The copies' operators in a software pipeline: the next copy's first MATMUL (with the
    RESCALE of its output) before this copy's softmax and context, so the array computes the
    next head's scores while the vector unit runs this one's softmax. The step order is also
    what the buffers' lifetimes follow: the next head's scores then never take the room of
    this head's softmax, which would make the array wait for the vector unit. Each head's
    own inputs (`inputs`: slices, or the convs computing them) come just before its first
    MATMUL."""
    parts = []
    for ops in copies:
        first = 1                               # the region's seed, a MATMUL, comes first
        while first < len(ops) and ops[first].op in ("RESCALE", "CLAMP") and \
                ops[first].inputs[0] == ops[first - 1].outputs[0]:
            first += 1
        parts.append((ops[:first], ops[first:]))
    order = inputs[0] + parts[0][0]
    for h, (_, rest) in enumerate(parts):
        if h + 1 < len(parts):
            order += inputs[h + 1] + parts[h + 1][0]
        order += rest
    return order


def _drop_unread(graph: Graph, names: list[str]) -> None:
    """Remove the operators producing `names`, and in turn those producing their inputs,
    where nothing reads their outputs any more (each head computes its own entries)."""
    producers, consumers = graph.producers(), graph.consumers()
    gone: set[int] = set()

    def unread(name: str) -> bool:
        return name not in graph.outputs and all(id(u) in gone for u in consumers.get(name, []))

    todo = list(names)
    while todo:
        op = producers.get(todo.pop())
        if op is None or id(op) in gone or op.is_variable_access \
                or not all(unread(n) for n in op.outputs):
            continue
        gone.add(id(op))
        todo += op.inputs
    graph.operators = [op for op in graph.operators if id(op) not in gone]


def _replace(graph: Graph, region: list[Operator], new_ops: list[Operator]) -> None:
    """Put `new_ops` in place of the region, at its last operator, and order the operators
    topologically, keeping their order wherever it already allows (each tensor has one
    producer: split_batches() leaves graphs with variables whole)."""
    gone = {id(o) for o in region}
    last = region[-1]
    ops: list[Operator] = []
    for op in graph.operators:
        if op is last:
            ops += new_ops
        elif id(op) not in gone:
            ops.append(op)
    made = {}
    for i, op in enumerate(ops):
        for name in op.outputs:
            made[name] = i
    waits = [0] * len(ops)
    users: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        for name in set(op.inputs):
            j = made.get(name)
            if j is not None and j != i:
                waits[i] += 1
                users.setdefault(j, []).append(i)
    ready = [i for i in range(len(ops)) if not waits[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(ops[i])
        for k in users.get(i, []):
            waits[k] -= 1
            if not waits[k]:
                heapq.heappush(ready, k)
    if len(order) != len(ops):      # _region() refuses regions a path leaves and re-enters
        raise _NotADag
    graph.operators = order
