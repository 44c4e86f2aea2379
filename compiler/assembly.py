"""Assembled data movement: parts of one output in external memory that would each write it in
short runs (a CONCAT of narrow channel blocks, the border of a PAD of a few channels) are put
together on chip, block by block, and stored in long runs.

A CONCAT along channels of 3-channel maps writes 3-byte runs, a 32-byte burst each, however its
inputs are read. Assembled, each block of the output is built in an on-chip buffer (its parts
loaded or filled into it, where a short run costs a bank word, not a burst) and stored whole.
Blocks alternate between two buffers, each block's parts queued ahead of the previous block's
store. The planner costs both ways with the machine's DMA cost (compiler/staging.py) and
assembles only when that is cheaper.
"""
from __future__ import annotations


from npu_sim.isa.commands import ONCHIP, TensorView, dense
from npu_sim.isa.records import record

from .allocate import align
from .staging import MAX_BLOCKS, MIN_BLOCK_BYTES, dma_cycles, side_cycles

# A part: what is written (a source view shaped like its box, or a fill word) and its box of
# the output, (start, count) per dim.


@record(frozen=True)
class Assembly:
    axis: int                       # blocks split this dim of the output
    block: int                      # entries of it per block
    buffer_bytes: int               # one of the two buffers

    @property
    def working_set(self) -> int:
        return 2 * align(self.buffer_bytes)


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
    if isinstance(source, TensorView):
        return dma_cycles(source, view, hw, memory_cost)
    return hw.dma.setup_cycles + side_cycles(view, hw, memory_cost)


def _estimate(dst, parts, plan: Assembly, hw, memory_cost) -> float:
    """Cycles of the assembly: each block's parts and its store, as a pipeline."""
    n = dst.shape[plan.axis]
    loads, stores, shared = [], [], False
    for start in range(0, n, plan.block):
        buf, store, pieces = block_parts(dst, parts, plan.axis, start,
                                         min(plan.block, n - start), 0)
        loads.append(sum(_part_cycles(s, v, hw, memory_cost) for s, v in pieces))
        stores.append(dma_cycles(buf, store, hw, memory_cost))
        shared |= any(isinstance(s, TensorView) and s.mem == dst.mem for s, _ in pieces)
    if shared:                          # one external port for the parts and the stores
        return sum(loads) + sum(stores)
    return max(sum(loads), sum(stores)) + min(loads[0], stores[-1])


def plan(dst: TensorView, parts, hw, memory_cost, budget: int) -> Assembly | None:
    """The cheapest assembly of `parts` into `dst` within `budget` bytes of buffers, or None
    when writing each part directly is at least as fast (or nothing fits)."""
    if not dst.mem or not dst.count:
        return None
    views = [box_view(dst, box) for _, box in parts]
    if all(v.burst_bytes() <= 1.25 * v.nbytes for v in views):
        return None                     # every part already writes whole bursts
    best, best_cost = None, sum(_part_cycles(s, v, hw, memory_cost)
                                for (s, _), v in zip(parts, views))
    for axis, n in enumerate(dst.shape):
        if n <= 1:
            continue
        per = dst.nbytes // n
        block = n
        while True:
            candidate = Assembly(axis, block, per * block)
            if candidate.working_set <= budget and -(-n // block) <= MAX_BLOCKS:
                cost = _estimate(dst, parts, candidate, hw, memory_cost)
                if cost < best_cost:
                    best, best_cost = candidate, cost
            if block == 1 or per * block <= MIN_BLOCK_BYTES:
                break
            block = -(-block // 2)
    return best
