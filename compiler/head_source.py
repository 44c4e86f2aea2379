"""Where a split region's input comes from a conv, each head computes its own part of it.

A transformer's attention reads Q, K and V that one conv computes for every head at once
(BERT-base's QKV layer, 2,304 output channels), laid out per head by SLICEs, RESHAPEs and
TRANSPOSEs. Split head by head (compiler/batch_split.py), the region slices those inputs, so
every head waits for the whole conv: the array computes all of Q, K and V, then the heads
run, and the vector unit's softmaxes have nothing of the array's to run beside.

Each head's entry of such an input is a block of the conv's output channels, viewed as the
entry's shape, directly or transposed (K^T). `per_head_source` finds that block by running
the layout operators on an image of the conv's output that holds each element's own index,
and each head then computes its block with a conv of those output channels (the weights'
rows, the bias and the output stage's per-channel parameters of the block) and a RESHAPE,
or a TRANSPOSE for a transposed entry. A conv's output channel depends only on its own
weights' row, so the head's block is bit for bit what the whole conv computed there.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from npu_sim.isa.dtypes import STORAGE

from .ir import Graph, Operator
from .lowering import FOLDS

_LAYOUT = ("RESHAPE", "TRANSPOSE", "SLICE")
_STAGE = ("RESCALE", "CLAMP")
# Index images past this many elements are not drawn (a conv output of 4 M elements: 16 MB).
_MAX_IMAGE = 1 << 22


@dataclasses.dataclass
class HeadSource:
    """How head h computes its entry of an input: `stage` (the conv, then its RESCALE and
    CLAMP) on output channels [first + h * width, + width), then the entry is those
    channels viewed as its shape (`transposed`: the transpose of the rows-by-channels
    matrix)."""
    stage: list[Operator]
    first: int
    width: int
    transposed: bool


def per_head_source(graph: Graph, name: str, axis: int, batch: int) -> HeadSource | None:
    """How each of the `batch` entries of `name` along `axis` comes from a block of output
    channels of the conv whose output stage produces it through layout operators; None
    where it does not, or where the conv's output has readers other than layout operators
    (the whole conv would run beside the heads' own)."""
    producers, consumers = graph.producers(), graph.consumers()
    layout, src = [], name
    while (op := producers.get(src)) is not None and op.op in _LAYOUT \
            and not op.is_variable_access:
        layout.append(op)
        src = op.inputs[0]
    stage = _conv_stage(graph, producers, consumers, src)
    if not layout or stage is None or graph.tensors[src].size > _MAX_IMAGE \
            or any(u.op not in _LAYOUT for u in consumers.get(src, [])):
        return None
    image = _index_image(graph, src, layout[::-1])
    if image is None:
        return None
    channels = graph.tensors[src].shape[-1]
    whole = np.arange(graph.tensors[src].size, dtype=image.dtype).reshape(-1, channels)
    found = None
    for h in range(batch):
        entry = np.take(image, h, axis=axis).ravel()
        first = int(entry.min() % channels) if entry.size else 0
        width = entry.size // whole.shape[0]
        if width * whole.shape[0] != entry.size or first + width > channels:
            return None
        block = whole[:, first:first + width]
        if np.array_equal(entry, block.ravel()):
            transposed = False
        elif np.array_equal(entry, block.T.ravel()):
            transposed = True
        else:
            return None
        if found is None:
            found = HeadSource(stage, first, width, transposed)
        elif (first, width, transposed) != (found.first + h * found.width, found.width,
                                            found.transposed):
            return None
    return found


def _conv_stage(graph: Graph, producers: dict, consumers: dict, name: str) -> list | None:
    """[CONV2D, RESCALE(, CLAMP)] producing `name`, each output read by the next alone and
    no graph output, with constant weights, bias and per-channel or per-tensor parameters."""
    stage = []
    op = producers.get(name)
    while op is not None and op.op in _STAGE:
        stage.append(op)
        op = producers.get(op.inputs[0])
    if op is None or op.op != "CONV2D" or not stage or stage[-1].op != "RESCALE":
        return None
    stage = [op] + stage[::-1]
    for a, b in zip(stage, stage[1:]):
        if [id(u) for u in consumers.get(a.outputs[0], [])] != [id(b)] \
                or a.outputs[0] in graph.outputs:
            return None
    if stage[-1].outputs[0] in graph.outputs \
            or not all(graph.tensors[n].is_const for o in stage for n in o.inputs[1:]):
        return None
    return stage


def _index_image(graph: Graph, src: str, layout: list[Operator]) -> np.ndarray | None:
    """The layout operators run on an image of `src` holding each element's index."""
    t = graph.tensors[src]
    dtype = np.int32 if t.size < 1 << 31 else np.int64
    tensors = {src: dataclasses.replace(t, data=np.arange(t.size, dtype=dtype).reshape(t.shape))}
    for op in layout:
        for n in op.inputs[1:]:
            tensors[n] = graph.tensors[n]
        tensors[op.outputs[0]] = dataclasses.replace(graph.tensors[op.outputs[0]], data=None)
    scratch = Graph(tensors, [], [], [])
    for op in layout:
        try:
            value = FOLDS[op.op](scratch, op)
        except (ValueError, IndexError, TypeError):     # a layout the folds do not take:
            return None                                  # the heads slice it instead
        if value is None or np.shape(value) != scratch.tensors[op.outputs[0]].shape:
            return None
        scratch.tensors[op.outputs[0]].data = np.asarray(value)
    return scratch.tensors[layout[-1].outputs[0]].data


def head_ops(graph: Graph, source: HeadSource, h: int, entry: str, fresh) -> list[Operator]:
    """Head h's operators computing its entry, the new tensor `entry` (of its final shape):
    the conv and its output stage on its block of channels, then the view. `fresh(name,
    shape, dtype, data=None)` makes a new tensor and returns its name."""
    lo, width = source.first + h * source.width, source.width
    conv, *rest = source.stage
    channels = graph.tensors[conv.outputs[0]].shape[-1]
    ops: list[Operator] = []

    def block(name: str) -> str:
        """A constant's rows of the block, where it has one per output channel."""
        t = graph.tensors[name]
        if not t.shape or t.shape[0] != channels or channels == 1:
            return name
        part = fresh(f"{name}[{lo}:{lo + width}]", (width,) + tuple(t.shape[1:]), t.dtype,
                     np.ascontiguousarray(t.data[lo:lo + width], dtype=STORAGE[t.dtype]))
        ops.append(Operator("CONST", [], [part], {}, conv.location, conv.index))
        return part

    previous = conv.inputs[0]
    for op in source.stage:             # named after the entry: Q's, K's and V's convs apart
        out = graph.tensors[op.outputs[0]]
        made = fresh(f"{entry}::{op.op.lower()}", tuple(out.shape[:-1]) + (width,), out.dtype)
        inputs = [previous] + [block(n) for n in op.inputs[1:]]
        ops.append(Operator(op.op, inputs, [made], dict(op.attrs), op.location, op.index))
        previous = made
    rows = graph.tensors[previous].size // width
    shape_of = graph.tensors[entry].shape
    if source.transposed:
        matrix = fresh(f"{entry}::rows", (rows, width), graph.tensors[previous].dtype)
        ops += _reshape(previous, matrix, (rows, width), fresh, conv)
        flipped = fresh(f"{entry}::cols", (width, rows), graph.tensors[previous].dtype)
        ops.append(Operator("TRANSPOSE", [matrix], [flipped], {"perms": [1, 0]},
                            conv.location, conv.index))
        previous = flipped
    ops += _reshape(previous, entry, shape_of, fresh, conv)
    return ops


def _reshape(src: str, dst: str, shape, fresh, where: Operator) -> list[Operator]:
    size = fresh(f"{dst}::shape", (len(shape),), "shape", np.asarray(shape, np.int64))
    return [Operator("CONST_SHAPE", [], [size], {}, where.location, where.index),
            Operator("RESHAPE", [src, size], [dst], {}, where.location, where.index)]
