"""Staged data movement: a copy whose access pattern wastes an external memory's bursts goes
through on-chip buffers, block by block.

A DMA moves each contiguous run of an external memory in whole 32-byte bursts, so a TRANSPOSE
that reads an NCHW tensor pixel by pixel (1-byte runs of a 3-channel image) moves 32 bytes per
byte. Staged, each block is loaded in the source's own layout (long runs), then copied from the
on-chip buffer to the destination in the destination's layout (long runs there too): the
reordering happens on chip, where the banks pay a whole word per access, not a burst. Blocks
take a ring of buffers in turn, loads on some DMA queues and stores on others, so later blocks
load while earlier ones are reordered and stored; a deeper ring lets loads run further ahead
where the memory's port outpaces one DMA channel (large-8k: 200 B/cycle of HBM, 128 per
channel). A source dim of stride 0 (TILE's repeats) is loaded once and broadcast from the
buffer; a negative stride (REVERSE) is loaded forwards and reversed on chip.

The planner estimates both ways with the machine's DMA cost (bursts, words, the DMA's own
rate, one external port per memory: `memory_cost` gives a memory's port's cycles per byte,
the memory's latency, a queue's setup) and stages only when that is clearly cheaper.
"""
from __future__ import annotations

import itertools
import math

from npu_sim.isa.commands import ONCHIP, TensorView, dense
from npu_sim.isa.records import record

from .allocate import align

MAX_BLOCKS = 64            # bounds the commands of one move
MIN_BLOCK_BYTES = 2048     # smaller blocks pay more in setup than they overlap
SLOTS = (2, 3, 4)          # ring depths tried
MAX_STORE_PIECES = 8       # a block's store cut into at most these many DMAs (store_pieces)
# A staged or assembled plan must beat the direct copies by more than this fraction of them:
# its estimate models a pipeline of many commands (within about 10% of the machine on
# bench/data_movement.py's moves), a direct copy's is one DMA's, and staging takes buffer room
# and vector time from the layers around it.
STAGE_MARGIN = 0.03


@record(frozen=True)
class Stage:
    axis: int                       # blocks split this dim of the copy
    block: int                      # entries of it per block
    order: tuple[int, ...]          # the buffer's dims, outermost first (the source's layout)
    buffer_bytes: int               # one of the ring's buffers the blocks load into
    permuted_bytes: int = 0         # one of those the vector unit permutes a block into, in
                                    # the copy's order (0: the store gathers it from the first)
    slots: int = 2                  # buffers of each kind in the ring

    @property
    def working_set(self) -> int:
        return self.slots * (align(self.buffer_bytes) + align(self.permuted_bytes))


def side_cycles(view: TensorView, hw, memory_cost) -> float:
    """Cycles one side of a DMA takes: an external memory's bursts, or the banks' words."""
    if view.mem:
        return view.burst_bytes() * memory_cost(view.mem)
    sram = hw.sram
    return view.burst_bytes(sram.bytes_per_cycle) / (sram.banks * sram.bytes_per_cycle)


def dma_cycles(src: TensorView, dst: TensorView, hw, memory_cost) -> float:
    """A DMA's cycles as the machine costs them: its own rate, the banks' words, and each
    external memory's bursts (a copy within one memory reads and writes through its port)."""
    return hw.dma.setup_cycles + transfer_cycles(src, dst, hw, memory_cost)


def transfer_cycles(src: TensorView, dst: TensorView, hw, memory_cost) -> float:
    """dma_cycles without the setup, which a DMA queue overlaps with the transfer before."""
    if src.mem and src.mem == dst.mem:
        sides = ((src.burst_bytes() + dst.burst_bytes()) * memory_cost(src.mem),)
    else:
        sides = (side_cycles(src, hw, memory_cost), side_cycles(dst, hw, memory_cost))
    return max(dst.nbytes / hw.dma.bytes_per_cycle, *sides)


def split_queues(queues: list[int]) -> tuple[list[int], list[int]]:
    """(the loads' queues, the stores') of a staged move: apart where there are two or more,
    so a load never waits in its queue behind a store waiting for its block. The stores take
    those at even positions, which hold the feature maps' store queue (0, or 2 from three
    channels up: Lowering._channel) whenever every queue is offered."""
    if len(queues) < 2:
        return queues, queues
    return queues[1::2], queues[0::2]


def permute_operands(gather: TensorView) -> tuple[TensorView, int, tuple[int, ...]]:
    """The vector unit's `permute` of an on-chip gather: the block it reads in whole words
    (rank 1, the gather's footprint) and the gather's base and strides in its elements."""
    lo, hi = gather.footprint()
    size = gather.itemsize
    block = dense(ONCHIP, lo, ((hi - lo) // size,), gather.dtype)
    return block, (gather.addr - lo) // size, tuple(s // size for s in gather.strides)


def permute_cycles(gather: TensorView, out: TensorView, hw) -> float:
    """Cycles of the vector unit's permute: a lane move per element, or the banks serving
    the block's and the output's words (its fixed latency left out, as the tiler's vector
    estimates leave it)."""
    sram, vec = hw.sram, hw.vector_unit
    block, _, _ = permute_operands(gather)
    lanes = out.count * vec.cycles_per_lane["add"] / vec.lanes
    words = (block.burst_bytes(sram.bytes_per_cycle) + out.burst_bytes(sram.bytes_per_cycle))
    return max(lanes, words / (sram.banks * sram.bytes_per_cycle))


def _sub(view: TensorView, axis: int, start: int, count: int) -> TensorView:
    return TensorView(view.mem, view.addr + start * view.strides[axis],
                      view.shape[:axis] + (count,) + view.shape[axis + 1:], view.strides,
                      view.dtype)


def block_views(src: TensorView, dst: TensorView, stage: Stage, start: int, count: int,
                addr: int) -> tuple[TensorView, TensorView, TensorView, TensorView]:
    """(load source, buffer, buffer as the store reads it, store destination) of the block of
    `count` entries from `start` along the stage's axis, its buffer at `addr`."""
    s, d = _sub(src, stage.axis, start, count), _sub(dst, stage.axis, start, count)
    kept = [i for i in stage.order if s.strides[i] != 0]
    buf = dense(ONCHIP, addr, [s.shape[i] for i in kept], s.dtype)
    # the load reads the source forwards in its own layout (a reversed dim the right way round)
    load_addr, load_strides = s.addr, []
    for i in kept:
        if s.strides[i] < 0:
            load_addr += (s.shape[i] - 1) * s.strides[i]
        load_strides.append(abs(s.strides[i]))
    load = TensorView(s.mem, load_addr, tuple(buf.shape), tuple(load_strides), s.dtype)
    # the store reads the buffer in the copy's order: repeats at stride 0, reversals backwards
    strides, store_addr = [0] * len(s.shape), addr
    for j, i in enumerate(kept):
        strides[i] = buf.strides[j] if s.strides[i] > 0 else -buf.strides[j]
        if s.strides[i] < 0:
            store_addr += (s.shape[i] - 1) * buf.strides[j]
    held = TensorView(ONCHIP, store_addr, s.shape, tuple(strides), s.dtype)
    return load, buf, held, d


def latency_cycles(hw, mem: int) -> int:
    """The latency of external memory `mem` (numbered from 1 in the config's order)."""
    return hw.memory_latency_cycles(list(hw.memories)[mem - 1]) if mem else 0


def _port_cycles(views, memory_cost) -> dict[int, float]:
    """Cycles each external memory's port spends on the bursts of `views`."""
    port: dict[int, float] = {}
    for v in views:
        if v.mem:
            port[v.mem] = port.get(v.mem, 0.0) + v.burst_bytes() * memory_cost(v.mem)
    return port


def spans_overlap(a: TensorView, b: TensorView) -> bool:
    """Whether two views' spans meet: the emitter orders writes to them, however their
    elements interleave."""
    (alo, ahi), (blo, bhi) = a.footprint(), b.footprint()
    return a.mem == b.mem and alo < bhi and blo < ahi


@record(frozen=True)
class BlockWork:
    """One block of a staged or assembled move, costed as the machine costs its commands."""
    fill_count: int         # the DMAs that fill its buffer (a load, or an assembly's parts)
    fill_cycles: float      # their transfer cycles, setups apart
    latency: int            # the memory latency they wait out (once, or each if ordered)
    permute_cycles: float   # the vector unit's reorder of the block (0: none)
    store_count: int        # the DMAs that store it
    store_cycles: float     # their transfer cycles, setups apart
    port_cycles: float      # the busiest external port's cycles for the block, both ways
    one_port: bool          # fills and store go through one memory's port, sharing it
    words: float            # the bank words it moves on chip


def block_work(fills, stores, hw, memory_cost, permute: float = 0.0,
               words: float = 0.0) -> BlockWork:
    """The BlockWork of a block filled by `fills` ((source view or fill word, place in the
    buffer)) and stored by `stores` ((buffer view, destination))."""
    cycles, port = 0.0, _port_cycles([d for _, d in stores], memory_cost)
    latency, one_port = 0, False
    # fills whose places' spans meet (parts interleaved along the channels) are ordered, so
    # each waits out its memory's latency; others overlap theirs
    ordered = any(spans_overlap(a, b) for (_, a), (_, b) in zip(fills, fills[1:]))
    for source, place in fills:
        if isinstance(source, TensorView):
            cycles += transfer_cycles(source, place, hw, memory_cost)
            for mem, c in _port_cycles([source], memory_cost).items():
                port[mem] = port.get(mem, 0.0) + c
            if ordered or not latency:
                latency += latency_cycles(hw, source.mem)
            one_port |= bool(source.mem) and any(source.mem == d.mem for _, d in stores)
        else:
            cycles += side_cycles(place, hw, memory_cost)
    word = hw.sram.bytes_per_cycle
    words += sum(p.burst_bytes(word) for _, p in fills) / word
    words += sum(b.burst_bytes(word) for b, _ in stores) / word
    return BlockWork(len(fills), cycles, latency, permute, len(stores),
                     sum(transfer_cycles(b, d, hw, memory_cost) for b, d in stores),
                     max(port.values(), default=0.0), one_port, words)


def store_pieces(held: TensorView, store: TensorView,
                 neighbour: TensorView | None) -> list[tuple[TensorView, TensorView]]:
    """A block's store (from `held` on chip) as DMAs whose spans do not meet those of the
    neighbouring block's store, which would order them: whole where the two spans do not
    meet; else cut along its outermost dim (TILE's repeats) into at most MAX_STORE_PIECES
    pieces where that parts them; else whole."""
    if neighbour is None or not spans_overlap(store, neighbour):
        return [(held, store)]
    dims = [i for i, n in enumerate(store.shape) if n > 1]
    if dims:
        d = max(dims, key=lambda i: abs(store.strides[i]))
        if store.shape[d] <= MAX_STORE_PIECES and neighbour.shape[d] <= MAX_STORE_PIECES:
            mine = [_sub(store, d, j, 1) for j in range(store.shape[d])]
            theirs = [_sub(neighbour, d, j, 1) for j in range(neighbour.shape[d])]
            if not any(spans_overlap(a, b) for a in mine for b in theirs):
                return [(_sub(held, d, j, 1), piece) for j, piece in enumerate(mine)]
    return [(held, store)]


def pipeline_cycles(blocks: list[BlockWork], hw, queues: int, slots: int,
                    stores_serialize: bool) -> float:
    """Cycles of a move's blocks through a ring of `slots` buffers: the first block filled,
    permuted and stored, then one period per later block, set by the busiest resource: a
    memory's port (fills and stores together), the vector unit, the banks, the fills' or the
    stores' queues (`stores_serialize`: the stores' spans meet, so they run one at a time),
    or the ring (a buffer is filled again only once its block is read out of it)."""
    setup = hw.dma.setup_cycles
    loads, stores = split_queues(list(range(queues)))
    first = blocks[0]
    total = (first.fill_count + first.store_count) * setup + first.latency \
        + first.fill_cycles + first.permute_cycles + first.store_cycles
    for k, b in enumerate(blocks[1:], 1):
        fill, store = b.fill_cycles, b.store_cycles
        if loads == stores:                 # one queue: a block's fills, then an earlier store
            queue_cycles = (b.fill_count + b.store_count) * setup + fill + store
        else:
            if b.one_port:                  # in flight together, they share the port
                fill, store = max(fill, b.port_cycles), max(store, b.port_cycles)
            queue_cycles = max((b.fill_count * setup + fill) / len(loads),
                               (b.store_count * setup + store)
                               / (1 if stores_serialize else len(stores)))
        # a fill buffer's turn: filled, then read by the permute (or the store); a permuted
        # one's. The first `slots` blocks find their buffers free.
        ring = 0.0
        if k >= slots:
            stored = b.store_count * setup + store
            ring = b.fill_count * setup + b.latency + fill + (b.permute_cycles or stored)
            if b.permute_cycles:
                ring = max(ring, b.permute_cycles + stored)
        total += max(b.port_cycles, b.permute_cycles, queue_cycles, ring / slots,
                     b.words / hw.sram.banks)
    return total


def staged_cycles(src, dst, stage, hw, memory_cost, queues: int) -> float:
    """Cycles of a staged copy (pipeline_cycles; every block costed as the first, full one)."""
    n = src.shape[stage.axis]
    load, buf, held, store = block_views(src, dst, stage, 0, stage.block, 0)
    neighbour = None
    if n > stage.block:
        neighbour = block_views(src, dst, stage, stage.block,
                                min(stage.block, n - stage.block), 0)[3]
    if stage.permuted_bytes:
        out = dense(ONCHIP, 0, held.shape, held.dtype)
        # the permute reads the buffer and writes its block; the store reads that
        work = block_work([(load, buf)], store_pieces(out, store, neighbour), hw, memory_cost,
                          permute_cycles(held, out, hw), 2 * out.nbytes / hw.sram.bytes_per_cycle)
    else:
        work = block_work([(load, buf)], store_pieces(held, store, neighbour), hw, memory_cost)
    serialize = work.store_count == 1 and neighbour is not None and spans_overlap(store,
                                                                                  neighbour)
    return pipeline_cycles([work] * -(-n // stage.block), hw, queues, stage.slots, serialize)


def candidates(src: TensorView, budget: int):
    """Every staging of the copy from `src` within `budget` bytes of buffers: blocks along
    each dim, halved down to MIN_BLOCK_BYTES, each loaded in the source's layout, stored
    gathered or permuted first, through rings of each depth of SLOTS."""
    order = tuple(sorted(range(len(src.shape)), key=lambda i: -abs(src.strides[i])))
    for axis, n in enumerate(src.shape):
        if n <= 1 and len(src.shape) > 1:
            continue
        # buffer bytes per entry of the axis (repeated dims are held once)
        per = src.itemsize * math.prod(m for i, m in enumerate(src.shape)
                                       if i != axis and src.strides[i] != 0)
        block = n
        while True:
            size = per * (block if src.strides[axis] else 1)
            blocks = -(-n // block)
            permuted = src.itemsize * math.prod(m for i, m in enumerate(src.shape)
                                                if i != axis) * block
            for slots, permute in itertools.product(SLOTS, (0, permuted)):
                stage = Stage(axis, block, order, size, permute, slots)
                if stage.working_set <= budget and blocks <= MAX_BLOCKS \
                        and slots <= max(2, blocks):
                    yield stage
            if block == 1 or size <= MIN_BLOCK_BYTES:
                break
            block = -(-block // 2)


def plan(src: TensorView, dst: TensorView, hw, memory_cost, budget: int,
         queues: int) -> Stage | None:
    """The cheapest staging of the copy within `budget` bytes of buffers, its blocks on
    `queues` DMA queues, or None when it does not beat the direct copy by STAGE_MARGIN (or
    nothing fits)."""
    if not src.count or not (src.mem or dst.mem):
        return None
    if src.burst_bytes() <= src.nbytes * 1.25 and dst.burst_bytes() <= dst.nbytes * 1.25 \
            and 0 not in src.strides:
        return None               # both sides stream whole bursts, and nothing is read twice
    best, best_cost = None, dma_cycles(src, dst, hw, memory_cost) * (1 - STAGE_MARGIN)
    for stage in candidates(src, budget):
        cost = staged_cycles(src, dst, stage, hw, memory_cost, queues)
        if cost < best_cost:
            best, best_cost = stage, cost
    return best
