"""Cascading: a CONV2D computed tile by tile inside the windowed layer that reads it.

MobileNet-style blocks expand the channels with a 1x1 conv and filter them with a depthwise
conv; small CNNs pool a conv's output. The conv's output is then the network's largest tensor
(112x112x96 = 1.2 MB in MobileNetV2-224; 48x48x16 = 36 KB before ExecuTorch's small CNN's
max pool, on a 48 KiB buffer), so it makes a round trip to external memory. Fused, each tile
of the reader (a depthwise conv or a pool) computes its input rows on chip from the conv's
input just before it needs them (rows shared with the previous tile are copied on chip, not
recomputed), and the conv's output never exists in memory. The MACs are the same; the traffic
is the smaller conv input instead, and the MAC array computes the next band while the reader
(on the vector unit, for a pool) works on this one.
"""
from __future__ import annotations

import dataclasses

from npu_sim.isa.opcodes import mac_problem

from .ir import Graph, itemsize
from .lowering import TILE_SPACES
from .lowering.common import STAGE_COLUMNS, Context, Window
from .lowering.tensor_ops import conv_attrs
from .steps import Step, stage_table_name
from .tiling import Operand, Production

# Windowed readers whose data input is an NHWC box of the tile's rows, columns and channels.
READERS = ("DEPTHWISE_CONV2D", "MAX_POOL2D", "AVG_POOL2D")


def _producible(graph: Graph, step: Step, reader: Step, resident: int, room: int) -> bool:
    """A CONV2D with its output stage fused, not itself cascaded, worth computing inside
    `reader`. A pointwise conv into a MAC reader: no halo to recompute, and the reader's
    tiles are its own shape. Any conv into a vector-unit reader (a pool) whose output is too
    large to stay on chip (`resident` bytes) and whose band for one row of the reader, all
    channels, fits double-buffered in the `room` tiles have: the round trip through external
    memory goes, and the array computes the next band while the vector unit pools this one.
    (Where a band does not fit, the tiles would split the channels below the array's width
    and reload the conv's input per channel slice, losing more than the round trip.)"""
    if not (step.kind == "mac" and step.main.op == "CONV2D" and step.rescale is not None
            and step.producer is None):
        return False
    t = graph.tensors
    _, pkh, pkw, _ = t[step.main.inputs[1]].shape
    if reader.kind == "mac":
        return ((pkh, pkw) == (1, 1) and tuple(step.main.attrs["stride"]) == (1, 1)
                and not any(step.main.attrs["pad"]))
    mid, src, out = t[step.output], t[step.main.inputs[0]], t[reader.output]
    if mid.nbytes <= resident:
        return False
    kh, _, _, _ = _footprint(graph, reader.main)
    sy, _ = step.main.attrs["stride"]
    dy, _ = step.main.attrs["dilation"]
    src_rows = min(src.shape[1], (kh - 1) * sy + (pkh - 1) * dy + 1)
    band = (min(kh, mid.shape[1]) * mid.nbytes // mid.shape[1]
            + src_rows * src.nbytes // src.shape[1] + out.nbytes // out.shape[1])
    return 2 * band + t[step.main.inputs[1]].nbytes <= room


def fuse_producers(graph: Graph, steps: list[Step], resident: int, room: int) -> list[Step]:
    """Fold each CONV2D whose only reader is the windowed step right after it into that step
    as its producer, where that pays (`_producible`)."""
    readers: dict[str, int] = {}
    for step in steps:
        for name in set(step.inputs):
            readers[name] = readers.get(name, 0) + 1
    out: list[Step] = []
    for step in steps:
        prev = out[-1] if out else None
        if (prev is not None and step.main.op in READERS and step.kind in ("mac", "vector")
                and step.producer is None and step.main.inputs[0] == prev.output
                and readers.get(prev.output) == 1 and prev.output not in graph.outputs
                and _producible(graph, prev, step, resident, room)):
            out[-1] = dataclasses.replace(step, producer=prev)
        else:
            out.append(step)
    return out


def _footprint(graph: Graph, op) -> tuple[int, int, int, int]:
    """(kh, kw, sy, sx) of a reader's window."""
    kh, kw = op.attrs["kernel"] if "kernel" in op.attrs else graph.tensors[op.inputs[1]].shape[:2]
    sy, sx = op.attrs["stride"]
    return kh, kw, sy, sx


def cascade_space(step: Step, ctx: Context):
    """The reader's tile space, its input produced on chip by the conv."""
    space, opcode, attrs = TILE_SPACES.lookup(step.main.op, step.main.describe())(step, ctx)
    g, producer = ctx.graph, step.producer
    src, weights = producer.main.inputs[0], producer.main.inputs[1]
    _, h, w, ic = g.tensors[src].shape
    _, pkh, pkw, _ = g.tensors[weights].shape
    win = Window(producer.main, h, w, pkh, pkw)
    ifm = space.inputs[0]

    def source(box):
        """The conv input's box and padding that compute `box` of its output."""
        t = {"oh": box[1], "ow": box[2]}
        rows, cols = win.rows(t), win.cols(t)
        return (box[0], rows[:2], cols[:2], (0, ic)), (rows[2], rows[3], cols[2], cols[3])

    feeds = [ctx.operand("src", src, ("n", "oh", "ow"), lambda t: source(ifm.box(t))[0]),
             ctx.operand("src_weights", weights, ("c",),
                         lambda t: (ifm.box(t)[3], (0, pkh), (0, pkw), (0, ic))),
             ctx.operand("src_stage", stage_table_name(producer), ("c",),
                         lambda t: (ifm.box(t)[3], (0, STAGE_COLUMNS)))]
    produced = Operand(ifm.role, ifm.tensor, ifm.dtype, ifm.depends, ifm.box,
                       itemsize(ifm.dtype), shape=ifm.shape, produce=Production(
                           "conv2d", conv_attrs(g, producer),
                           {"ifm": "src", "weights": "src_weights", "stage": "src_stage"},
                           source))
    kh, kw, sy, sx = _footprint(g, step.main)
    reader = {"work": space.work, "floor": space.floor or space.work}

    def problem(s):
        rows, cols = (s["oh"] - 1) * sy + kh, (s["ow"] - 1) * sx + kw
        return mac_problem("conv2d", (s["n"] * rows * cols, s["c"]), (s["c"], pkh, pkw, ic))

    costs = {role: (lambda s, f=f, own=reader[role]: own(s) + f(s))
             for role, f in ctx.mac_costs(problem, producer.main).items()}
    space = dataclasses.replace(space, inputs=feeds + [produced] + space.inputs[1:], **costs)
    return space, opcode, attrs
