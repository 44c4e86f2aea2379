"""Assembled data movement: parts of one output in external memory that would each write it in
short runs (a CONCAT of narrow channel blocks, the border of a PAD of a few channels) are put
together on chip, block by block, and stored in long runs.

A CONCAT along channels of 3-channel maps writes 3-byte runs, a 32-byte burst each, however its
inputs are read. Assembled, each block of the output is built in an on-chip buffer (its parts
loaded or filled into it, where a short run costs a bank word, not a burst) and stored whole.
Blocks take a ring of buffers as staged moves do, their parts on some DMA queues and their
stores on others (compiler/staging.py, whose pipeline estimate costs both ways with the
machine's DMA cost); a move is assembled only when that is clearly cheaper.
"""
from __future__ import annotations


from npu_sim.isa.commands import ONCHIP, TensorView, dense
from npu_sim.isa.records import record

from .allocate import align
from .staging import (MAX_BLOCKS, MIN_BLOCK_BYTES, SLOTS, STAGE_MARGIN, block_work, dma_cycles,
                      latency_cycles, pipeline_cycles, side_cycles, spans_overlap)

# A part: what is written (a source view shaped like its box, or a fill word) and its box of
# the output, (start, count) per dim.


@record(frozen=True)
class Assembly:
    axis: int                       # blocks split this dim of the output
    block: int                      # entries of it per block
    buffer_bytes: int               # one of the ring's buffers
    slots: int = 2                  # buffers in the ring

    @property
    def working_set(self) -> int:
        return self.slots * align(self.buffer_bytes)


def box_view(view: TensorView, box) -> TensorView:
    """The part of `view` inside `box`."""
    addr = view.addr + sum(lo * s for (lo, _), s in zip(box, view.strides))
    return TensorView(view.mem, addr, tuple(n for _, n in box), view.strides, view.dtype)


def block_parts(dst: TensorView, parts, axis: int, start: int, count: int, addr: int):
    """(buffer, store, pieces) of the block of `count` entries of dst's `axis` from `start`,
    its buffer at `addr`: the store copies the buffer into dst, and each piece is a part's
    share of the block, (source piece or fill word, its place in the buffer)."""
    shape = list(dst.shape)
    shape[axis] = count
    buf = dense(ONCHIP, addr, shape, dst.dtype)
    pieces = []
    for source, box in parts:
        lo, n = box[axis]
        first, last = max(lo, start), min(lo + n, start + count)
        if first >= last:
            continue
        place = box[:axis] + ((first - start, last - first),) + box[axis + 1:]
        if isinstance(source, TensorView):
            source = box_view(source, tuple((first - lo, last - first) if d == axis else (0, m)
                                            for d, (_, m) in enumerate(box)))
        pieces.append((source, box_view(buf, place)))
    whole = tuple((start, count) if d == axis else (0, m) for d, m in enumerate(dst.shape))
    return buf, box_view(dst, whole), pieces


def _part_cycles(source, view: TensorView, hw, memory_cost) -> float:
    """A part written directly: its DMA (or fill), after its source memory's latency; the
    parts of a CONCAT along channels write spans that meet, so they run one after another."""
    if isinstance(source, TensorView):
        return latency_cycles(hw, source.mem) + dma_cycles(source, view, hw, memory_cost)
    return hw.dma.setup_cycles + side_cycles(view, hw, memory_cost)


def _blocks(dst, parts, axis: int, block: int, hw, memory_cost):
    """(BlockWork of each block, whether their stores' spans meet) of an assembly's blocks
    of `block` entries along `axis`."""
    n = dst.shape[axis]
    work, stores = [], []
    for start in range(0, n, block):
        buf, store, pieces = block_parts(dst, parts, axis, start, min(block, n - start), 0)
        work.append(block_work(pieces, [(buf, store)], hw, memory_cost))
        stores.append(store)
    return work, len(stores) > 1 and spans_overlap(stores[0], stores[1])


def candidates(dst: TensorView, budget: int):
    """Every assembly of `dst` within `budget` bytes of buffers: blocks along each dim,
    halved down to MIN_BLOCK_BYTES, through rings of each depth of SLOTS, those of one
    blocking in a row."""
    for axis, n in enumerate(dst.shape):
        if n <= 1:
            continue
        per = dst.nbytes // n
        block = n
        while True:
            blocks = -(-n // block)
            for slots in SLOTS:
                candidate = Assembly(axis, block, per * block, slots)
                if candidate.working_set <= budget and blocks <= MAX_BLOCKS \
                        and slots <= max(2, blocks):
                    yield candidate
            if block == 1 or per * block <= MIN_BLOCK_BYTES:
                break
            block = -(-block // 2)


def plan(dst: TensorView, parts, hw, memory_cost, budget: int, queues: int) -> Assembly | None:
    """The cheapest assembly of `parts` into `dst` within `budget` bytes of buffers, its
    blocks on `queues` DMA queues, or None when it does not beat writing each part directly
    by STAGE_MARGIN (or nothing fits)."""
    if not dst.mem or not dst.count:
        return None
    views = [box_view(dst, box) for _, box in parts]
    if all(v.burst_bytes() <= 1.25 * v.nbytes for v in views):
        return None                     # every part already writes whole bursts
    direct = sum(_part_cycles(s, v, hw, memory_cost) for (s, _), v in zip(parts, views))
    best, best_cost = None, direct * (1 - STAGE_MARGIN)
    blocking, work = None, None
    for candidate in candidates(dst, budget):
        if (candidate.axis, candidate.block) != blocking:   # its blocks' costs, once
            blocking = candidate.axis, candidate.block
            work, serialize = _blocks(dst, parts, *blocking, hw, memory_cost)
        cost = pipeline_cycles(work, hw, queues, candidate.slots, serialize)
        if cost < best_cost:
            best, best_cost = candidate, cost
    return best
