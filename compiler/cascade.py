"""Cascading: a pointwise CONV2D computed tile by tile inside the depthwise conv that reads it.

MobileNet-style blocks expand the channels with a 1x1 conv and filter them with a depthwise
conv. The expanded tensor is the block's largest (112x112x96 = 1.2 MB in MobileNetV2-224), so
on a 1 MiB buffer it makes a round trip to DRAM. Fused, each depthwise tile's input rows are
computed on chip from the block input just before they are needed (rows shared with the
previous tile are copied on chip, not recomputed), and the expanded tensor never exists in
memory. The MACs are the same; the traffic is the smaller block input instead.
"""
from __future__ import annotations

import dataclasses

from npu_sim.isa.opcodes import mac_problem

from .ir import Graph, itemsize
from .lowering.common import STAGE_COLUMNS, Context
from .lowering.tensor_ops import conv_attrs, depthwise_conv2d
from .steps import Step, stage_table_name
from .tiling import Operand, Production


def _pointwise(graph: Graph, step: Step) -> bool:
    """A 1x1, stride-1, unpadded CONV2D with its output stage fused."""
    op = step.main
    if step.kind != "mac" or op.op != "CONV2D" or step.rescale is None or step.producer:
        return False
    _, kh, kw, _ = graph.tensors[op.inputs[1]].shape
    return ((kh, kw) == (1, 1) and tuple(op.attrs["stride"]) == (1, 1)
            and not any(op.attrs["pad"]))


def fuse_pointwise_producers(graph: Graph, steps: list[Step]) -> list[Step]:
    """Fold each pointwise conv whose only reader is the depthwise conv right after it into
    that step as its producer."""
    readers: dict[str, int] = {}
    for step in steps:
        for name in set(step.inputs):
            readers[name] = readers.get(name, 0) + 1
    out: list[Step] = []
    for step in steps:
        prev = out[-1] if out else None
        if (prev is not None and step.kind == "mac" and step.main.op == "DEPTHWISE_CONV2D"
                and step.producer is None and _pointwise(graph, prev)
                and step.main.inputs[0] == prev.output and readers.get(prev.output) == 1
                and prev.output not in graph.outputs):
            out[-1] = dataclasses.replace(step, producer=prev)
        else:
            out.append(step)
    return out


def cascade_space(step: Step, ctx: Context):
    """The depthwise conv's tile space, its input produced on chip by the pointwise conv."""
    space, opcode, attrs = depthwise_conv2d(step, ctx)
    g, producer = ctx.graph, step.producer
    src, weights = producer.main.inputs[0], producer.main.inputs[1]
    ic = g.tensors[src].shape[-1]
    ifm = space.inputs[0]
    kh, kw = g.tensors[step.main.inputs[1]].shape[:2]
    sy, sx = step.main.attrs["stride"]

    def src_box(t):
        n, rows, cols, _ = ifm.box(t)
        return n, rows, cols, (0, ic)

    feeds = [ctx.operand("src", src, ("n", "oh", "ow"), src_box),
             ctx.operand("src_weights", weights, ("c",), lambda t: (t["c"], (0, 1), (0, 1), (0, ic))),
             ctx.operand("src_stage", stage_table_name(producer), ("c",),
                         lambda t: (t["c"], (0, STAGE_COLUMNS)))]
    produced = Operand(ifm.role, ifm.tensor, ifm.dtype, ifm.depends, ifm.box,
                       itemsize(ifm.dtype), shape=ifm.shape, produce=Production(
                           "conv2d", {**conv_attrs(g, producer), "pad": (0, 0, 0, 0)},
                           {"ifm": "src", "weights": "src_weights", "stage": "src_stage"}))
    dw_work = space.work

    def work(s):
        pixels = s["n"] * ((s["oh"] - 1) * sy + kh) * ((s["ow"] - 1) * sx + kw)
        return dw_work(s) + ctx.mac_work(mac_problem("conv2d", (pixels, s["c"]), (s["c"], 1, 1, ic)),
                                     producer.main)

    space = dataclasses.replace(space, inputs=feeds + [produced] + space.inputs[1:], work=work)
    return space, opcode, attrs
