"""Weight buffering: copy boxes of a constant from a slow weights memory into free room of the
faster feature-map memory while the weights memory idles, and let its reader load them there.

Where the weights live apart from the feature maps in a slower memory (edge-256: flash at
1 B/cycle beside a system SRAM at 8), a step whose loads of a constant outlast its compute
waits for them, while the steps before it that read no constants (layer norms, softmaxes,
data movement) leave the weights memory idle, and the on-chip buffer has no room for their
copies: a weight-heavy step needs the whole of it. As Vela buffers weights in system SRAM,
such a reader's boxes are copied there during those idle steps, by the steps' tile plans'
estimates as many as the idle time loads, spread evenly over the reader's loads (a reader
streams a box while it computes on the box before, so the boxes it loads fast let the
weights memory catch up); its loads then take fewer cycles, on the feature maps' DMA queue,
so the weights' queue stays free for the weights memory. Only as many as bring the
reader's loads down to its compute: more would gain nothing.

A copy goes from the weights memory straight to the feature-map memory, CHUNK bytes at a
time on the constants' queue: the DMA channel buffers each burst, so each memory's port is
held for its own bytes (npu_sim/cost.py), and the copy needs no room on chip. Its room in the
feature-map memory is reserved, beside the feature maps, from the step it is copied in to the
reader; where the feature maps leave room for only some of the boxes, those are copied.

Copies queued between steps run over a stretch of steps that load no weights. What no
stretch takes rides inside single steps instead (`riders`): the copies go among the step's
own tiles, between one tile's loads and the next's, as many as the weights memory idles
through the step by its estimate (all of it in a step that loads no weights, as a
MobileNetV2's 1x1 convs whose weights are staged on chip; in one that does, what its busiest
lane's transfers or RIDE_COMPUTE of its compute leave beside its own loads). Weights whose
leading rows are staged (MobileNetV2's classifier) are buffered too, all but those rows.

A reader served from both memories gets a third tile buffer for its weights where its plan
leaves the room (`third_buffer`, taken by Lowering.plan, so that prefetch, this planning and
the lowering see one working set): with two, each fast box is in before the array frees the
buffer the next slow box needs, and the weights memory waits for that tile. A
transfer-bound step whose feature-map loads wait out their memory's latency for the buffer
two tiles back gets one too (`latency_buffer`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .allocate import align
from .prefetch import TILED, book_idle
from .staging import latency_cycles
from .tiling import iterate_tiles

CHUNK = 8192                # bytes per copy (a box's row at least): larger ones save only a
                            # few DMA setups, and hold the constants' queue longer
MARGIN = 0.9                # of an idle stretch's estimated cycles, the share it books
RIDE_COMPUTE = 0.9          # of a step's estimated compute, riders may count on beside its loads


@dataclass(frozen=True)
class Buffered:
    """A preload (compiler/lower.py): boxes of a constant copied into their room in the
    feature-map memory (Placement.buffered), `chunk` bytes at a time."""
    boxes: tuple
    chunk: int


def plan_buffering(graph, steps, placement, lowering, preloads: dict, memory_cost) -> dict:
    """Add to `preloads` (step -> (constant, reader, part) to copy after it, as
    plan_prefetch() returns) the boxes to buffer in the feature-map memory over idle
    stretches; return the riders: step -> (constant, reader, Buffered) to copy among that
    step's tiles."""
    slow, fast = memory_cost(placement.weights_id), memory_cost(placement.fm_id)
    if placement.weights_id == placement.fm_id or not fast < slow:
        return {}
    n = len(steps)
    apart = lowering.channels > 1       # the constants' DMA queue is theirs alone
    idle, quiet = [0.0] * n, [True] * n
    loads: dict[int, tuple] = {}    # reader -> (plan, weights' lane, floor, constant, _boxes())
    readers: dict[str, set[int]] = {}
    for i, step in enumerate(steps):
        for name in step.inputs:
            readers.setdefault(placement.root(name), set()).add(i)
    for i, step in enumerate(steps):
        if step.kind not in TILED:
            continue
        space, _, _, plan = lowering.plan(step, placement.workspaces[i][1])
        if plan is None:
            continue
        slow_loads, weights, others = _weights_lane(space, plan, placement, slow)
        heaviest = (0, None, None)
        for opnd, boxes, moved in weights:
            if (moved > heaviest[0] and opnd.tensor == placement.root(opnd.tensor)
                    and readers[opnd.tensor] == {i}):
                heaviest = (moved, opnd.tensor, boxes)
        # A step loading from the weights memory itself keeps it from copies queued before
        # it: its loads pass them, which would then wait for the steps after. Copies riding
        # among its tiles may take what its busiest lane's transfers, or RIDE_COMPUTE of its
        # compute, leave beside its own loads (the compute as the array and vector unit are
        # charged, a little of it kept back: the tiles' estimates are not the machine;
        # MobileNetV2's block 1 on edge-256 loads under 5 KB in 180k cycles, and kept to
        # its transfers' share flash idled 92k of them). With one DMA queue for everything,
        # the copies wait behind all its transfers.
        quiet[i] = not slow_loads
        queued = slow_loads if apart else plan.transfer
        beside = RIDE_COMPUTE * plan.compute if apart else 0.0
        busy = plan.cost if quiet[i] else max(plan.transfer, beside)
        idle[i] = max(0.0, busy - queued)
        # A reader's weights are worth buffering while their loads outlast its compute and,
        # on a queue of their own, its other transfers: a box from the faster memory adds to
        # the feature maps' lane what it takes off the weights'.
        lane, floor = slow_loads if apart else plan.transfer, plan.compute
        if heaviest[1] is not None and lane > floor:
            if apart:
                floor = max(floor, _other_lane(space, plan, placement, others))
            if lane > floor:
                loads[i] = (plan, lane, floor, *heaviest[1:])
    outputs = {placement.root(o) for o in graph.outputs}
    for start, items in preloads.items():      # the weights memory's time the preloads take
        for name, reader, part in items:
            if not graph.tensors[name].is_const:   # a staged graph input is a feature map
                continue
            book_idle(idle, max(start, 0), reader,
                      preload_bytes(graph, placement, name, part) * slow)
    riders = _Riders(placement, idle, slow)
    for reader, (plan, lane, floor, name, boxes) in sorted(loads.items()):
        if name in outputs or name in placement.pack_of:
            continue
        if not boxes:                           # its staged rows serve them all
            continue
        if not _pays(plan, lane, floor, boxes, slow, fast):
            continue
        # as many boxes as bring the reader's loads down to its compute, by its estimate, or
        # as the idle steps before it load; spread over all its loads
        room = sum(idle[:reader]) * MARGIN / slow
        copied = sum(nbytes for nbytes, _ in boxes.values())
        value = sum(nbytes * count for nbytes, count in boxes.values())
        wanted = min((lane - floor) / (slow - fast), room * value / copied)
        chosen = list(_spread(boxes, wanted))
        chunk = max(CHUNK, _row_bytes(boxes))   # a chunk copies whole rows of a box
        for first, last in _stretches(idle, quiet, reader):
            # Each step's share is queued with its commands (after the step before), so the
            # copies keep pace with the steps: the preloads planned after later steps need not
            # queue behind all of them.
            portions, size, room = [], 0, 0.0
            for j in range(first + 1, last + 1):
                room += idle[j] * MARGIN / slow
                take = []
                while chosen and size + boxes[chosen[0]][0] <= room:
                    size += boxes[chosen[0]][0]
                    take.append(chosen.pop(0))
                if take:
                    portions.append((j - 1, tuple(take)))
            taken = sum((take for _, take in portions), ())
            if not taken:
                continue
            if not placement.buffer(name, taken, portions[0][0], reader):
                chosen[:0] = taken                # left to the riders
                continue
            book_idle(idle, first + 1, last + 1, size * slow)
            for j, take in portions:
                preloads.setdefault(j, []).append((name, reader, Buffered(take, chunk)))
        for j in range(reader):
            if not chosen:
                break
            if idle[j] > 0:
                riders.ride(j, name, reader, boxes, chosen, chunk)
    for staged in preloads.values():          # a queue carries them in the order they are read
        staged.sort(key=lambda item: item[1])
    return riders.copies


def third_buffer(space, plan, placement, memory_cost, channels: int) -> str | None:
    """The role of the weights a step streams (two tile buffers) from a weights memory slower
    than the feature maps', on a DMA queue of their own, where plan_buffering() would find
    boxes of them worth moving to the faster memory (their loads outlast the step's compute
    and its other transfers, and _pays()); else None.

    Its weight loads then alternate slow and fast. With two buffers a fast box is in before
    the array frees the buffer the next slow one needs, and the weights memory waits for
    that tile: the box saves its slow load less the tile's compute, not less its fast load
    (BERT-base's second FC layer on edge-256: 6.3k cycles per three tiles where flash needs
    5.1k). A third buffer lets the weights memory stream on."""
    slow, fast = memory_cost(placement.weights_id), memory_cost(placement.fm_id)
    # (the tiler's busiest lane, bursts counted, is no less than the weights': a step it
    # finds compute-bound is, before any box is listed)
    if plan is None or channels < 2 or placement.weights_id == placement.fm_id or \
            not fast < slow or plan.transfer <= plan.compute:
        return None
    lane, weights, others = _weights_lane(space, plan, placement, slow)
    streamed = [(moved, opnd.role, boxes) for opnd, boxes, moved in weights
                if opnd is not space.output and plan.buffers.get(opnd.role) == 2]
    if not streamed or lane <= plan.compute:
        return None
    _, role, boxes = max(streamed, key=lambda item: item[0])
    floor = max(plan.compute, _other_lane(space, plan, placement, others))
    return role if lane > floor and _pays(plan, lane, floor, boxes, slow, fast) else None


def latency_buffer(space, plan, placement, hw) -> str | None:
    """The role of a streamed feature-map input (two tile buffers) of a transfer-bound step
    whose loads wait out their memory's latency: a load may start only once the tile two
    before has freed its buffer, and where that tile's compute, the queue's setup and the
    memory's latency outlast the load before it, the memory idles for the difference every
    tile (a TFLite QUANTIZE of a float input on default: 86 of each 374 cycles). A third
    buffer starts each load a tile earlier. None where no load waits so. Weights in a memory
    of their own are third_buffer()'s."""
    if plan is None or plan.n_tiles < 3 or plan.transfer <= plan.compute:
        return None
    compute = plan.compute / plan.n_tiles
    waits, role = 0.0, None
    for opnd in space.inputs:
        if opnd.on_chip or opnd.produce or plan.buffers.get(opnd.role) != 2:
            continue
        mem = getattr(placement.find(opnd.tensor), "mem", 0)
        if mem != placement.fm_id:              # (an external memory: ids count from 1)
            continue
        load = plan.buffer_bytes[opnd.role] * opnd.cost_per_byte
        wait = compute + hw.dma.setup_cycles + latency_cycles(hw, mem) - load
        if wait > waits:
            waits, role = wait, opnd.role
    return role


def _pays(plan, lane: float, floor: float, boxes, slow: float, fast: float) -> bool:
    """Whether a box of a reader's weights is worth moving to the faster memory: a reader
    streams a box while it computes the tile before, so a box there shortens its own tile
    only, to its compute (by the tile plan's per-tile estimate); its copy holds the faster
    memory's port a while in a step that may be waiting for it."""
    per_tile = lane / plan.n_tiles
    largest = max(nbytes for nbytes, _ in boxes.values())
    gain = per_tile - max(floor / plan.n_tiles, per_tile - largest * (slow - fast))
    return gain > largest * fast


def _weights_lane(space, plan, placement, slow: float):
    """(cycles of a step's loads from the weights memory, (operand, _boxes(), bytes moved) of
    each operand they load, the operands the other lane moves)."""
    lane, weights, others = 0.0, [], []
    for opnd in space.inputs + [space.output]:
        if opnd.on_chip or opnd is not space.output and opnd.role not in plan.buffers:
            continue
        if getattr(placement.find(opnd.tensor), "mem", 0) != placement.weights_id:
            others.append(opnd)                 # the feature maps' lane
            continue
        boxes = _boxes(space, plan, opnd, placement)
        moved = sum(nbytes * count for nbytes, count in boxes.values())
        lane += moved * slow
        weights.append((opnd, boxes, moved))
    return lane, weights, others


def _other_lane(space, plan, placement, others) -> float:
    """Cycles of a step's transfers on the feature maps' lane (`others`, of _weights_lane)."""
    return sum(opnd.cost_per_byte * nbytes * count for opnd in others
               for nbytes, count in _boxes(space, plan, opnd, placement).values())


class _Riders:
    """The copies riding inside single steps (plan_buffering()): step -> (constant, reader,
    Buffered), booked against each step's idle time."""

    def __init__(self, placement, idle: list[float], per_byte: float):
        self.placement, self.idle, self.per_byte = placement, idle, per_byte
        self.copies: dict[int, list] = {}

    def ride(self, j: int, name: str, reader: int, boxes, chosen: list, chunk: int) -> None:
        """Buffer the first of the `chosen` boxes that step `j` has idle time for among its
        own tiles, as many as the feature maps leave room for until the reader; what it
        cannot take stays chosen."""
        room, size, take = self.idle[j] * MARGIN / self.per_byte, 0, []
        while chosen and size + boxes[chosen[0]][0] <= room:
            size += boxes[chosen[0]][0]
            take.append(chosen.pop(0))
        while take and not self.placement.buffer(name, tuple(take), j, reader):
            keep = len(take) // 2
            chosen[:0] = take[keep:]
            del take[keep:]
        if not take:
            return
        self.idle[j] -= sum(boxes[box][0] for box in take) * self.per_byte
        self.copies.setdefault(j, []).append((name, reader, Buffered(tuple(take), chunk)))


def _row_bytes(boxes: dict[tuple, list[int]]) -> int:
    """The bytes of the longest leading row of `boxes`: a chunk copies whole ones (a scalar's
    box, of no dims, is one row)."""
    return max(align(nbytes // max(box[0][1], 1) if box else nbytes)
               for box, (nbytes, _) in boxes.items())


def _boxes(space, plan, opnd, placement) -> dict[tuple, list[int]]:
    """box -> [bytes, loads] of each box of an operand its step's tiles load, in the order
    first loaded: as the lowering loads it, again only when the box changes from the last
    box loaded (a box of staged rows is read where it is staged: it loads nothing, and the
    tile buffer keeps the box before). Kept with the plan, by what is staged of the operand
    (third_buffer() and plan_buffering() ask for the same)."""
    parts = tuple(placement.prefixes.get(placement.root(opnd.tensor), ()))
    key = ("boxes", space.output.tensor, opnd.role, opnd.tensor, parts)
    out = plan.memo.get(key)
    if out is None:
        out = plan.memo[key] = _listed_boxes(space, plan, opnd, placement if parts else None)
    return out


def _listed_boxes(space, plan, opnd, placement) -> dict[tuple, list[int]]:
    """_boxes() worked out over the plan's tiles (`placement` None: nothing staged)."""
    out: dict[tuple, list[int]] = {}
    previous = None
    for tile in iterate_tiles(plan, space.dims):
        box = tuple(map(tuple, opnd.box(tile)))
        if placement is not None and \
                placement.staged_box(opnd.tensor, box, opnd.dtype) is not None:
            continue
        if box != previous:
            if box not in out:
                count = opnd.itemsize
                for _, size in box:
                    count *= size
                out[box] = [count, 0]
            out[box][1] += 1
            previous = box
    return out


def _spread(boxes: dict[tuple, list[int]], wanted: float):
    """The boxes to buffer, spread evenly over the order they are loaded in, for `wanted`
    bytes of loads (all of them when that is more)."""
    total = sum(nbytes * count for nbytes, count in boxes.values())
    share, mark = min(1.0, max(wanted, 0.0) / total) if total else 0.0, 0.0
    for box in boxes:
        mark += share
        if mark >= 1.0 - 1e-9:
            mark -= 1.0
            yield box


def _stretches(idle: list[float], quiet: list[bool], reader: int):
    """(first, last) of each run of steps before `reader`, earliest first, that load nothing
    from the weights memory, with idle time for it."""
    a = 0
    while a < reader:
        if not quiet[a]:
            a += 1
            continue
        b = a
        while b + 1 < reader and quiet[b + 1]:
            b += 1
        if sum(idle[a:b + 1]) > 0:
            yield a, b
        a = b + 1


def preload_bytes(graph, placement, name: str, part) -> int:
    """Bytes a preload of plan_prefetch() copies from the weights memory."""
    if name in placement.packs:
        return placement.packs[name][1]
    t = graph.tensors[name]
    if part is None:
        return t.nbytes
    return t.nbytes // t.shape[0] * placement.prefixes[name][part][2]
