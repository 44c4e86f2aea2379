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

A residual add is an elementwise chain reading a conv's output and the block's shortcut
(RESCALE, RESCALE, ADD, RESCALE): the conv's output (56x56x256 = 802 KB in ResNet-50's
layer1) is written out only for the chain to read it back. Cascaded, each tile of the chain
has the array compute its box of the conv's output into the buffer, and the vector unit forms
the sum from it and the shortcut's box: the conv's output crosses no memory port twice.
Where no band of whole rows fits the buffer (a 56-pixel row of 144 channels on edge-256's 16
KiB of tile room), the tiler's estimates decide instead (`cascade_by_estimate`): fused, the
array's work and the weights' loads hide the sum's vector work and the round trip. Where the
tensors stay on chip (a transformer's residual adds and GELU on a 1 MiB buffer), the chain
still rides along inside the conv's own tiles: the vector unit works on one tile's sum while
the array computes the next, instead of after the whole conv.

A depthwise-separable block (MobileNetV2's first) filters with a depthwise conv and mixes the
channels with a 1x1 conv: the depthwise output (112x112x32 = 401 KB in MobileNetV2-224 on
edge-256) is computed inside the 1x1 conv's tiles instead, each tile's channel slice from the
same slice of the depthwise input, where that pays (`_depthwise_into`). DS-CNN's blocks chain
depthwise and 1x1 convs: there each 1x1 conv runs inside the next depthwise conv instead.

A layer norm widens its input to int32 before summing it, and squares the centred values
before summing those: on a small buffer each int32 tensor (BERT-base: 393 KB) is written out
only for the sum to read it back. Such an elementwise chain is computed inside the reduction's
tiles by the vector unit instead (`_reduced`).

A bilinear int8 RESIZE widens to int32 (ExecuTorch's upsampling: 48x48x8 = 73 KB in its
misc_ops graph), which a RESCALE brings back to int8: on a small buffer the int32 map is
written out only for the RESCALE to read it back. Where the RESIZE's reader is an
elementwise chain alone and their tensors do not stay on chip, each tile of the chain has
the vector unit compute its box of the RESIZE first, from the input rows that box samples
(`_resized`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from npu_sim.isa.errors import DoesNotFitError
from npu_sim.isa.opcodes import mac_problem
from npu_sim.isa.operators import ELEMENTWISE

from .chains import data_inputs
from .ir import Graph, itemsize
from .lowering import TILE_SPACES
from .lowering.common import STAGE_COLUMNS, Context, Window
from .lowering.data_layout import resize_geometry
from .lowering.tensor_ops import conv_attrs
from .steps import Step, stage_table_name
from .tiling import Operand, Production

# Windowed readers whose data input is an NHWC box of the tile's rows, columns and channels
# (a CONV2D reads a depthwise conv's output as a pointwise conv: see _depthwise_into).
READERS = ("DEPTHWISE_CONV2D", "MAX_POOL2D", "AVG_POOL2D", "CONV2D")


def _pointwise(graph: Graph, op) -> bool:
    """A 1x1 CONV2D of stride 1 without padding."""
    _, kh, kw, _ = graph.tensors[op.inputs[1]].shape
    return (kh, kw) == (1, 1) and tuple(op.attrs["stride"]) == (1, 1) and not any(op.attrs["pad"])


def _depthwise_into(graph: Graph, step: Step, reader: Step, resident: int, room: int) -> bool:
    """A DEPTHWISE_CONV2D (one output channel per input channel) with its output stage fused,
    read by a pointwise conv (a depthwise-separable block's two halves), whose output is too
    large to stay on chip: computed tile by tile inside the pointwise conv, each tile's
    channel slice of it from the same slice of its input, it never crosses the memory port
    (written once and read back at least once otherwise). It pays only where the pointwise
    conv's tiles keep all its output channels, in bands of rows as tall as `room` allows with
    the reduction sliced as far as needed (a tile with a slice of the output channels would
    recompute the depthwise output once per slice and reload its input with the halo each
    time), and while what those bands load again, the halo rows of the depthwise input and
    the two convs' weights per band, is less than the round trip: bands of a row or two on a
    small buffer reload the input several times over."""
    t = graph.tensors
    if not (step.kind == "mac" and step.main.op == "DEPTHWISE_CONV2D"
            and step.rescale is not None and step.producer is None
            and t[step.main.inputs[1]].shape[3] == 1 and _pointwise(graph, reader.main)
            and t[step.output].nbytes > resident):
        return False
    src, mid, out = t[step.main.inputs[0]], t[step.output], t[reader.output]
    kh = t[step.main.inputs[1]].shape[0]
    sy, _ = step.main.attrs["stride"]
    dy, _ = step.main.attrs["dilation"]
    halo = min(src.shape[1], (kh - 1) * dy + 1) - sy      # input rows two bands both read
    src_row, mid_row = src.nbytes // src.shape[1], mid.nbytes // mid.shape[1]
    weights = t[step.main.inputs[1]].nbytes + t[reader.main.inputs[1]].nbytes
    rows = max(_band_rows(lambda r: 2 * (((r - 1) * sy + halo + sy) * src_row // slices
                                         + r * (mid_row // slices + out.nbytes // out.shape[1]))
                          + weights // slices, room, mid.shape[1])
               for slices in _slicings(src.shape[3]))
    # Each band reads its halo rows again and loads the two convs' weights again.
    return rows > 0 and (src.nbytes * max(halo, 0) // (rows * sy)
                         + weights * (-(-mid.shape[1] // rows) - 1)) < 2 * mid.nbytes


def _slicings(channels: int):
    """Slice counts a tile may split `channels` into: 1, 2, 4, ... down to a channel each."""
    slices = 1
    while slices <= channels:
        yield slices
        slices *= 2


def _band_rows(need, room: int, rows: int) -> int:
    """The most rows (up to `rows`) a band may take, needing `need(rows)` bytes of `room`
    (0: not even one)."""
    if need(1) > room:
        return 0
    lo, hi = 1, rows
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if need(mid) <= room else (lo, mid - 1)
    return lo


def _producible(graph: Graph, step: Step, reader: Step, resident: int, room: int) -> bool:
    """A CONV2D with its output stage fused, not itself cascaded, worth computing inside
    `reader`. A pointwise conv into a MAC reader: no halo to recompute, and the reader's
    tiles are its own shape. Any conv into a pool whose output is too large to stay on chip
    (`resident` bytes), or into an elementwise chain whose tensors (the conv's output, the
    chain's other inputs and its output) are, so some make round trips: those of the conv's
    output go, and the array computes the next band while the vector unit works on this one.
    It pays when a band of one row of the reader fits double-buffered in the `room` tiles
    have: with all its channels (a pool), or a slice of them (a chain, whose tiles then read
    the conv's input once per slice: while those extra reads move less than the round trip
    would). (Where no band fits, the tiles would split the channels below the array's width
    and reload the conv's input per slice, losing more than the round trip.)"""
    if reader.main.op == "CONV2D":
        return _depthwise_into(graph, step, reader, resident, room)
    if not _cascadable(graph, step, reader, resident):
        return False
    t = graph.tensors
    _, pkh, pkw, _ = t[step.main.inputs[1]].shape
    if reader.kind == "mac":
        return ((pkh, pkw) == (1, 1) and tuple(step.main.attrs["stride"]) == (1, 1)
                and not any(step.main.attrs["pad"]))
    mid, src, out = t[step.output], t[step.main.inputs[0]], t[reader.output]
    others = [t[n] for n in dict.fromkeys(reader.inputs) if n != step.output]
    if reader.chain:
        others = [o for o in others if o.shape == out.shape]
    kh, _, _, _ = _footprint(graph, reader)
    sy, _ = step.main.attrs["stride"]
    dy, _ = step.main.attrs["dilation"]
    src_rows = min(src.shape[1], (kh - 1) * sy + (pkh - 1) * dy + 1)
    sliced = (min(kh, mid.shape[1]) * mid.nbytes // mid.shape[1] + out.nbytes // out.shape[1]
              + sum(o.nbytes // o.shape[1] for o in others))
    weights = t[step.main.inputs[1]].nbytes
    slices = 1
    while slices == 1 or reader.chain and (slices - 1) * src.nbytes < mid.nbytes:
        if 2 * (src_rows * src.nbytes // src.shape[1] + sliced // slices) \
                + weights // slices <= room:
            return True
        slices *= 2
    return False


def _cascadable(graph: Graph, step: Step, reader: Step, resident: int) -> bool:
    """A CONV2D with its output stage fused, not itself cascaded; into a vector reader, one
    whose tensors (the conv's output, and a chain's other inputs of its shape and its output)
    do not all stay on chip (`resident` bytes), so some make round trips."""
    return _conv(step) and (reader.kind == "mac" or _round_trips(graph, step, reader, resident))


def _conv(step: Step) -> bool:
    """A CONV2D with its output stage fused, not itself cascaded."""
    return (step.kind == "mac" and step.main.op == "CONV2D" and step.rescale is not None
            and step.producer is None)


def _round_trips(graph: Graph, step: Step, reader: Step, resident: int) -> bool:
    """Some of the tensors of `step` and its vector reader (the conv's output, and a chain's
    other inputs of its shape and its output) do not stay on chip (`resident` bytes)."""
    t = graph.tensors
    mid, out = t[step.output], t[reader.output]
    others = [t[n] for n in dict.fromkeys(reader.inputs) if n != step.output]
    if reader.chain:
        others = [o for o in others if o.shape == out.shape]
    return mid.nbytes + sum(o.nbytes for o in others) \
        + (out.nbytes if reader.chain else 0) > resident


def _chain_reads(graph: Graph, step: Step, name: str) -> bool:
    """`step` is an elementwise chain on the vector unit that reads NHWC tensor `name` only
    as a data input of its output's shape (each tile's box of it is the tile's own)."""
    if not (step.kind == "vector" and step.chain and step.main.op in ELEMENTWISE):
        return False
    shape = graph.tensors[step.output].shape
    return (len(shape) == 4 and graph.tensors[name].shape == shape
            and any(name in data_inputs(op) for op in step.chain)
            and not any(name in op.inputs and name not in data_inputs(op) for op in step.chain))


def _reduced(graph: Graph, step: Step, reader: Step, resident: int) -> bool:
    """An elementwise chain read only by the reduction right after it (a layer norm's
    rescale to int32 before its sum, its square before the sum of squares) whose output is
    too large to stay on chip: computed tile by tile inside the reduction instead, it never
    makes the round trip (four bytes an element to write and read back, for one of input)."""
    return (reader.kind == "vector" and reader.main.op.startswith("REDUCE_")
            and step.kind == "vector" and bool(step.chain) and step.producer is None
            and reader.main.inputs[0] == step.output
            and graph.tensors[step.output].nbytes > resident)


def fuse_producers(graph: Graph, steps: list[Step], resident: int, room: int) -> list[Step]:
    """Fold each CONV2D whose only reader is the windowed step right after it into that step
    as its producer, where that pays (`_producible`); and into an elementwise chain, the
    latest such conv the chain reads (one after it, a residual block's projection shortcut,
    may not pay: it then runs before the conv, which nothing else waits for); and each
    elementwise chain into the reduction right after it that alone reads it (`_reduced`)."""
    alone = _alone(graph, steps)

    out: list[Step] = []
    for step in steps:
        at = None
        if step.producer is None and step.main.op in READERS and step.kind in ("mac", "vector"):
            if out and step.main.inputs[0] == out[-1].output and alone(out[-1]) and \
                    _producible(graph, out[-1], step, resident, room):
                at = len(out) - 1
        elif step.producer is None and out and alone(out[-1]) and \
                _reduced(graph, out[-1], step, resident):
            at = len(out) - 1
        elif step.producer is None and step.kind == "vector" and step.chain:
            reads = set(step.inputs)
            at = next((i for i in range(len(out) - 1, -1, -1)
                       if out[i].output in reads and alone(out[i])
                       and _chain_reads(graph, step, out[i].output)
                       and (_producible(graph, out[i], step, resident, room)
                            or _resized(graph, out[i], step, resident))), None)
        if at is None:
            out.append(step)
        else:
            out.append(dataclasses.replace(step, producer=out.pop(at)))
    return out


def _resized(graph: Graph, step: Step, reader: Step, resident: int) -> bool:
    """A RESIZE read by an elementwise chain (an int8 bilinear RESIZE's int32 output, which a
    RESCALE brings back to int8), where some of their tensors do not stay on chip: computed
    tile by tile inside the chain by the vector unit, its output never makes the round trip
    (four bytes an element, for the one of its input a tile samples)."""
    return (step.kind == "vector" and step.main.op == "RESIZE" and step.producer is None
            and _round_trips(graph, step, reader, resident))


def _alone(graph: Graph, steps: list[Step]) -> Callable[[Step], bool]:
    """A test of whether a step's output is read by one step alone and is no graph output."""
    readers: dict[str, int] = {}
    for step in steps:
        for name in set(step.inputs):
            readers[name] = readers.get(name, 0) + 1
    return lambda step: readers.get(step.output) == 1 and step.output not in graph.outputs


def _footprint(graph: Graph, reader: Step) -> tuple[int, int, int, int]:
    """(kh, kw, sy, sx) of a reader's window (an elementwise chain's is one element)."""
    if reader.chain or reader.main.op == "CONV2D":       # (a pointwise conv: _pointwise)
        return 1, 1, 1, 1
    op = reader.main
    kh, kw = op.attrs["kernel"] if "kernel" in op.attrs else graph.tensors[op.inputs[1]].shape[:2]
    sy, sx = op.attrs["stride"]
    return kh, kw, sy, sx


def cascade_space(step: Step, ctx: Context):
    """The reader's tile space, its input produced on chip by the conv."""
    space, opcode, attrs = TILE_SPACES.lookup(step.main.op, step.main.describe())(step, ctx)
    g, producer = ctx.graph, step.producer
    if producer.main.op == "RESIZE":
        return _resize_into(space, step, ctx), opcode, attrs
    if producer.kind == "vector":
        return _chain_into(space, step, ctx), opcode, attrs
    src, weights = producer.main.inputs[0], producer.main.inputs[1]
    _, h, w, ic = g.tensors[src].shape
    depthwise = producer.main.op == "DEPTHWISE_CONV2D"
    if depthwise:
        pkh, pkw, _, _ = g.tensors[weights].shape
    else:
        _, pkh, pkw, _ = g.tensors[weights].shape
    win = Window(producer.main, h, w, pkh, pkw)
    at = next(i for i, o in enumerate(space.inputs) if o.tensor == producer.output)
    ifm = space.inputs[at]
    batch, rows_dim, cols_dim, chan = ifm.depends        # the reader's dims of the NHWC axes

    def source(box):
        """The conv input's box and padding that compute `box` of its output (a depthwise
        conv's channel slice from the same slice of its input, a conv's from all of it)."""
        t = {"oh": box[1], "ow": box[2]}
        rows, cols = win.rows(t), win.cols(t)
        return ((box[0], rows[:2], cols[:2], box[3] if depthwise else (0, ic)),
                (rows[2], rows[3], cols[2], cols[3]))

    if depthwise:
        src_dims, weight_box = (batch, rows_dim, cols_dim, chan), \
            lambda t: ((0, pkh), (0, pkw), ifm.box(t)[3], (0, 1))
    else:
        src_dims, weight_box = (batch, rows_dim, cols_dim), \
            lambda t: (ifm.box(t)[3], (0, pkh), (0, pkw), (0, ic))
    feeds = [ctx.operand("src", src, src_dims, lambda t: source(ifm.box(t))[0]),
             ctx.operand("src_weights", weights, (chan,), weight_box),
             ctx.operand("src_stage", stage_table_name(producer), (chan,),
                         lambda t: (ifm.box(t)[3], (0, STAGE_COLUMNS)))]
    produced = Operand(ifm.role, ifm.tensor, ifm.dtype, ifm.depends, ifm.box,
                       itemsize(ifm.dtype), shape=ifm.shape, produce=Production(
                           "depthwise_conv2d" if depthwise else "conv2d",
                           conv_attrs(g, producer),
                           {"ifm": "src", "weights": "src_weights", "stage": "src_stage"},
                           source))
    kh, kw, sy, sx = _footprint(g, step)
    reader = {"work": space.work, "floor": space.floor or space.work}

    def problem(s):
        rows, cols = (s[rows_dim] - 1) * sy + kh, (s[cols_dim] - 1) * sx + kw
        if depthwise:
            return mac_problem("depthwise_conv2d", (s[batch] * rows * cols, s[chan]),
                               (pkh, pkw, s[chan], 1))
        return mac_problem("conv2d", (s[batch] * rows * cols, s[chan]),
                           (s[chan], pkh, pkw, ic))

    costs = {role: (lambda s, f=f, own=reader[role]: own(s) + f(s))
             for role, f in ctx.mac_costs(problem, producer.main).items()}
    shape = {}
    if step.chain:
        # An elementwise chain's own space splits its dims outermost first; cascaded, it
        # splits like the conv it computes: rows or channel slices (in whole folds of the
        # array), the channels outermost too, so each slice's weights load once.
        shape = {"levels": {batch: 1, rows_dim: 0, cols_dim: 1, chan: 0},
                 "orders": space.orders + [(chan, batch, rows_dim, cols_dim)],
                 "folds": ctx.folds(chan)}
    space = dataclasses.replace(space, inputs=space.inputs[:at] + feeds + [produced]
                                + space.inputs[at + 1:], **costs, **shape)
    return space, opcode, attrs


def _chain_into(space, step: Step, ctx: Context):
    """A reduction's tile space, its data input computed on chip by the elementwise chain
    (`_reduced`): the chain's output is that input, so its tiles have the same dims."""
    chain, _, program = TILE_SPACES.lookup(step.producer.main.op,
                                           step.producer.main.describe())(step.producer, ctx)
    at = next(i for i, o in enumerate(space.inputs) if o.tensor == step.producer.output)
    ifm = space.inputs[at]
    feeds = [dataclasses.replace(o, role=f"src_{o.role}") for o in chain.inputs]
    produced = Operand(ifm.role, ifm.tensor, ifm.dtype, ifm.depends, ifm.box,
                       itemsize(ifm.dtype), shape=ifm.shape, produce=Production(
                           "elementwise", program, {o.role: f"src_{o.role}" for o in chain.inputs},
                           lambda box: (box, ())))
    return dataclasses.replace(space, inputs=space.inputs[:at] + feeds + [produced]
                               + space.inputs[at + 1:],
                               work=lambda s: space.work(s) + chain.work(s))


def _resize_into(space, step: Step, ctx: Context):
    """An elementwise chain's tile space, its data input computed on chip by the RESIZE it
    reads (`_resized`): each tile's box of the RESIZE's output from the box of its input
    that box samples."""
    op = step.producer.main
    source, box_attrs, attrs, per_element = resize_geometry(ctx.graph, op)
    at = next(i for i, o in enumerate(space.inputs) if o.tensor == step.producer.output)
    ifm = space.inputs[at]
    src = ctx.operand("src", op.inputs[0], ifm.depends, lambda t: source(ifm.box(t)))
    produced = Operand(ifm.role, ifm.tensor, ifm.dtype, ifm.depends, ifm.box,
                       itemsize(ifm.dtype), shape=ifm.shape, produce=Production(
                           "resize", attrs, {"in0": "src"}, lambda box: (source(box), ()),
                           data="in0", box_attrs=box_attrs))
    return dataclasses.replace(
        space, inputs=space.inputs[:at] + [src, produced] + space.inputs[at + 1:],
        work=lambda s: space.work(s) + ctx.vector_work(
            per_element, *(s[d] for d in ifm.depends)))


def cascade_by_estimate(graph: Graph, steps: list[Step], resident: int, placed: tuple,
                        place) -> tuple[list[Step], tuple]:
    """(steps, their placement as `place(steps)` gives it) with each elementwise chain folding in
    the conv it reads that fuse_producers() turned down (its rule counts bytes of bands that
    fit; a small buffer fits none of whole rows, or the channel slices that do re-read the
    conv's input more than the round trip would move) where the tiler's estimate of the
    fused step is below the estimates of the two apart: the array's work and the weights'
    loads then hide the chain's vector work and the round trip, which apart take their own
    time. A chain whose tensors all stay on chip saves no round trip: it rides along only
    where the conv keeps its own tiles (`_rides_along`), so the vector unit works on one
    tile while the array computes the next. Of two convs the chain reads, the one that gains
    more. The estimates are made where `placed` (place(steps)) puts them, and each fusion
    kept only where, placed anew, the fused step in its own room still beats the two apart
    (a step's room changes with its neighbours'), and the riding ones only where all steps'
    estimates together (estimate_total) do not grow; retries without those that do not,
    else none (and none where the fused steps do not fit placed anew)."""
    refused: set[str] = set()
    for _ in range(3):
        gains = _estimated_gains(graph, steps, resident, placed[0], placed[1], refused)
        if not gains:
            break
        convs = {conv for conv, _, _ in gains.values()}
        fused = [dataclasses.replace(step, producer=steps[gains[at][0]]) if at in gains
                 else step for at, step in enumerate(steps) if at not in convs]
        apart = {steps[at].output: cost for at, (_, cost, _) in gains.items()}
        try:
            trial = place(fused)
        except DoesNotFitError:     # the convs' inputs, alive until the chains, do not fit
            break
        worse = {step.output for at, step in enumerate(fused) if step.output in apart
                 and not step_estimate(trial[0], trial[1], step, at) < apart[step.output]}
        riding = {steps[at].output for at, (_, _, trip) in gains.items() if not trip}
        if not worse and riding and \
                estimate_total(fused, trial)[0] > estimate_total(steps, placed)[0]:
            worse = riding          # the room they take costs their neighbours more
        if not worse:
            return fused, trial
        refused |= worse
    return steps, placed


def estimate_total(steps: list[Step], placed) -> tuple[float, float]:
    """(the compute steps' time, that of those outside pipelines) by the tiler's estimates:
    one step after another, but a pipeline's steps (compiler/batch_split.py) in the time of
    its busier engine's share. Split or not, the steps outside the region are the same
    operators, so the unsplit total less the split's `rest` is the region's cost apart."""
    placement, lowering = placed[0], placed[1]
    rest, engines = 0.0, {"mac": 0.0, "vector": 0.0}
    for i, step in enumerate(steps):
        if step.kind in engines:
            cycles = step_estimate(placement, lowering, step, i)
            if step.output in placement.pipelined:
                engines[step.kind] += cycles
            else:
                rest += cycles
    return rest + max(engines.values()), rest


def _rides_along(graph: Graph, placement, lowering, fused: Step, at: int, conv: int) -> bool:
    """The fused step tiles the conv as the conv alone tiles itself (as many tiles, as many
    output channels each), in whole folds of the array's columns or all its channels. Where
    the chain's tensors stay on chip no round trip is saved: the fusion gains only by the
    vector unit working beside the array, which the tiler's estimates (one's work after the
    other's) do not see, so it must not cost the array anything: thinner channel slices
    leave columns idle in every pass, and more tiles pay more fills. One tile leaves the
    vector unit nothing to work on beside the array."""
    try:
        plan = lowering.plan(fused, placement.workspaces[at][1])[3]
        own = lowering.plan(fused.producer, placement.workspaces[conv][1])[3]
    except DoesNotFitError:
        return False
    if plan is None or own is None:
        return False
    width = plan.sizes[next(reversed(plan.sizes))]  # an NHWC chain's channels: its last dim
    return (plan.n_tiles == own.n_tiles > 1 and width == own.sizes["oc"]
            and (width == graph.tensors[fused.output].shape[-1]
                 or width % lowering.hw.mac_array.cols == 0))


def step_plan(placement, lowering, step: Step, at: int):
    """The tiler's plan of `step` as step `at` of the placement (None: no plan fits)."""
    try:
        return lowering.plan(step, placement.workspaces[at][1])[3]
    except DoesNotFitError:
        return None


def step_estimate(placement, lowering, step: Step, at: int) -> float:
    """The tiler's estimate of `step` as step `at` of the placement (inf: no plan fits)."""
    plan = step_plan(placement, lowering, step, at)
    return math.inf if plan is None else plan.cost


def _estimated_gains(graph: Graph, steps: list[Step], resident: int, placement, lowering,
                     refused: set[str]) -> dict[int, tuple[int, float, bool]]:
    """chain's index -> (the conv's index, the two's estimates apart, whether fusing saves a
    round trip) for each chain not in `refused` whose fused estimate is below that of the two
    apart (see cascade_by_estimate())."""
    alone = _alone(graph, steps)
    index = {step.output: i for i, step in enumerate(steps)}
    chosen: dict[int, tuple[int, float, bool]] = {}
    for at, step in enumerate(steps):
        if step.producer is not None or step.kind != "vector" or not step.chain \
                or step.output in refused:
            continue
        best = None                     # (gain, conv, apart, saves a round trip)
        for name in dict.fromkeys(step.inputs):
            conv = index.get(name)
            if conv is None or not alone(steps[conv]) \
                    or not _chain_reads(graph, step, name) or not _conv(steps[conv]):
                continue
            apart = step_estimate(placement, lowering, steps[conv], conv) \
                + step_estimate(placement, lowering, step, at)
            candidate = dataclasses.replace(step, producer=steps[conv])
            fused = step_estimate(placement, lowering, candidate, at)
            trip = _round_trips(graph, steps[conv], step, resident)
            if not trip and not _rides_along(graph, placement, lowering, candidate, at, conv):
                continue
            if fused < apart and (best is None or apart - fused > best[0]):
                best = (apart - fused, conv, apart, trip)
        if best is not None:            # (its conv read by it alone: no other chain's)
            chosen[at] = best[1:]
    return chosen
