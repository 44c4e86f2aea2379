"""Tiling: split one step's iteration space into tiles whose working set fits the buffer.

Each operator family describes its iteration space as named dims and, for every operand, which
dims it depends on and which box of the tensor a tile needs. One search serves all families:
it tries tile sizes (halvings of each dim, widening the set of splittable dims level by level)
and loop orders, keeps those whose double-buffered working set fits (one output buffer where
the reduction splits), and picks the one that moves the fewest bytes (weighted by each
memory's bandwidth) with the fewest tiles.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from npu_sim.isa.commands import BURST_BYTES, TensorView
from npu_sim.isa.errors import DoesNotFitError
from npu_sim.isa.records import record

from .allocate import ALIGN, align

NEAR_BEST = 1.01
PADDING_SHARE = 0.25
TILE_WASTE = 4.0
ROOM_GAIN = 1.1
Box = tuple[tuple[int, int], ...]          # (start, size) per tensor dim
Tile = dict[str, tuple[int, int]]           # dim -> (start, size)


@dataclass
class Operand:
    role: str                                # kernel operand name, e.g. "ifm", "weights"
    tensor: str
    dtype: str
    depends: tuple[str, ...]                 # iteration dims whose tiling changes the box
    box: Callable[[Tile], Box]
    itemsize: int
    on_chip: bool = False                    # already resident in the buffer: no DMA, no space
    cost_per_byte: float = 0.0               # cycles per byte from its memory (for the search)
    shape: tuple[int, ...] = ()              # the whole tensor, for burst efficiency
    produce: Production | None = None        # computed on chip instead of loaded
    # The memory port and DMA queue its transfers take: operands of different lanes move in
    # parallel (edge-256's weights from flash on the constants' queue, its feature maps
    # from system SRAM on the other), those of one lane one after another.
    lane: int = 0


@record
class Production:
    """How a produced operand's boxes are computed: one command of `opcode`, whose kernel
    operands are the current views of other operands of the space (kernel name -> role);
    `source` maps a box of the produced tensor to the box of its data input (kernel operand
    `data`) it reads and the padding it sees there; `box_attrs` gives the attributes that
    depend on the box (a RESIZE's origins)."""
    opcode: str
    attrs: dict
    operands: dict[str, str]
    source: Callable[[Box], tuple[Box, tuple[int, ...]]]
    data: str = "ifm"
    box_attrs: Callable[[Box], dict] | None = None


@dataclass
class TileSpace:
    dims: dict[str, int]                     # dim -> full size
    levels: dict[str, int]                   # dim -> level at which the search may split it
    orders: list[tuple[str, ...]]            # candidate loop orders, outermost first
    inputs: list[Operand]
    output: Operand
    reduction: str = ""                      # dim whose split needs an accumulator buffer
    acc_itemsize: int = 4
    attrs: Callable[[Tile], dict] = lambda tile: {}
    work: Callable[[dict], float] = lambda sizes: 0.0   # compute cycles of one tile of `sizes`
    # work() with partial sums never spilling from the accumulators (the attainable bound's
    # figure): what the search judges its tiles' waste against, for the whole layer.
    floor: Callable[[dict], float] | None = None
    granule: dict[str, int] = field(default_factory=dict)   # dims split only in multiples
    # Dims the MAC array folds in units (its columns or rows): tiles of whole folds are
    # candidates too, as halvings alone leave partial folds (768 channels halve to 24 on a
    # 32-column array, each fold 3/4 full).
    folds: dict[str, int] = field(default_factory=dict)
    # A step on another engine reads or writes this one's output row by row: tiles along this
    # dim let the two overlap, and the first (or last) tile's compute is what stays exposed.
    stream: str = ""


@dataclass
class TilePlan:
    sizes: dict[str, int]
    order: tuple[str, ...]
    counts: dict[str, int]
    buffers: dict[str, int]                  # role -> buffers (1, 2; 3: Lowering._deepened)
    buffer_bytes: dict[str, int]             # role -> bytes of one buffer
    acc_bytes: int
    working_set: int
    cost: float                              # estimated cycles of the step
    transfer: float = 0.0                    # of which its busiest lane's transfers take
    padding: float = 0.0                     # of which bursts moving bytes no one needs take
    compute: float = 0.0                     # its tiles' compute cycles, one after another
    # what its users work out from it once (compiler/buffering.py: each operand's boxes)
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_tiles(self) -> int:
        return math.prod(self.counts.values())


def burst_factor(box: Box, shape: tuple[int, ...], itemsize: int) -> float:
    """How many bytes an external memory moves per useful byte of a box of a dense tensor:
    the contiguous run is the trailing full dims times the first partial one."""
    run = itemsize
    for (start, size), full in zip(reversed(box), reversed(shape)):
        run *= size
        if size != full:
            break
    if run <= 0:
        return 1.0
    return (-(-run // BURST_BYTES) * BURST_BYTES) / run


def box_bytes(box: Box, itemsize: int) -> int:
    """Bytes of a dense buffer holding the box, rounded up to the allocation alignment."""
    return align(math.prod(size for _, size in box) * itemsize)


def _halvings(size: int, granule: int = 1) -> list[int]:
    out, s = [], size
    while True:
        out.append(s)
        if s <= granule:
            break
        nxt = max(granule, -(-s // 2) // granule * granule) if granule > 1 else -(-s // 2)
        if nxt == s:
            break
        s = nxt
    return out


def _sizes(space: TileSpace, dim: str) -> list[int]:
    """Candidate tile sizes of a dim: its halvings and, for a dim the array folds, whole
    numbers of folds."""
    size, unit = space.dims[dim], space.folds.get(dim, 0)
    out = set(_halvings(size, space.granule.get(dim, 1)))
    if unit and size > unit:
        out |= {unit * h for h in _halvings(-(-size // unit)) if unit * h < size}
    return sorted(out, reverse=True)


def _sample_tiles(space: TileSpace, sizes: dict[str, int]) -> list[Tile]:
    """The first, a middle and the last tile: halo boxes of strided ops vary with the tile's
    position, so buffer sizes take the largest of these (the lowering checks every tile)."""
    first, middle, last = {}, {}, {}
    for d, full in space.dims.items():
        t = sizes[d]
        first[d] = (0, t)
        mid, end = full // 2 // t * t, full - t         # (conditionals: cheaper than min/max)
        if end < mid:
            mid = end if end > 0 else 0
        middle[d] = (mid, t if t <= full - mid else full - mid)
        end = (full - 1) // t * t
        last[d] = (end, full - end)
    return [first, middle, last]


def box_sizes(space: TileSpace, tiles) -> tuple[dict[str, int], int, dict[str, float]]:
    """Largest buffer bytes per input role and for the output over `tiles`, and the burst
    factor of each operand (role -> external bytes per useful byte): box_bytes() and
    burst_factor() of every box (the search's _operand_boxes() gives the same)."""
    tiles = list(tiles)
    parts = []
    for opnd in space.inputs + [space.output]:
        boxes = [opnd.box(tile) for tile in tiles]
        parts.append((max((box_bytes(b, opnd.itemsize) for b in boxes), default=0),
                      max([burst_factor(b, opnd.shape, opnd.itemsize) for b in boxes] + [1.0])))
    return _merge(space, parts)


def _merge(space: TileSpace, parts: list[tuple[int, float]]):
    """box_sizes() from each operand's (bytes, burst factor), inputs then the output."""
    sizes: dict[str, int] = {}
    factor: dict[str, float] = {}
    for opnd, (nbytes, burst) in zip(space.inputs, parts):
        role = opnd.role
        if nbytes > sizes.get(role, 0):
            sizes[role] = nbytes
        elif role not in sizes:
            sizes[role] = 0
        if burst > factor.get(role, 1.0):
            factor[role] = burst
        elif role not in factor:
            factor[role] = 1.0
    out, factor["<out>"] = parts[-1]
    return sizes, out, factor


def _operand_boxes(opnd: Operand, tiles) -> tuple[int, float]:
    """(largest buffer bytes, largest burst factor) of an operand's boxes over `tiles`:
    box_bytes() and burst_factor() in one pass over each box."""
    nbytes, factor = 0, 1.0
    itemsize, shape, box_of = opnd.itemsize, opnd.shape, opnd.box
    rank, backwards = len(shape), shape[::-1]
    for tile in tiles:
        box = box_of(tile)
        if len(box) != rank:                # (burst_factor() pairs the trailing dims only)
            nbytes = max(nbytes, box_bytes(box, itemsize))
            factor = max(factor, burst_factor(box, shape, itemsize))
            continue
        count = itemsize
        dims = zip(box[::-1], backwards)
        for (_, size), full in dims:
            count *= size
            if size != full:                # the run ends at the first partial dim
                run = count or -1
                for (_, size), _ in dims:
                    count *= size
                break
        else:
            run = count
        aligned = (count + ALIGN - 1) // ALIGN * ALIGN
        if aligned > nbytes:
            nbytes = aligned
        if run > 0:
            burst = (-(-run // BURST_BYTES) * BURST_BYTES) / run
            if burst > factor:
                factor = burst
    return nbytes, factor


# An operand's box depends on its `depends` dims alone, so the boxes of a plan's tiles are
# computed per operand over those dims and kept by their sizes, for the plans sharing them.

def _sampled_boxes(space: TileSpace, sizes: dict[str, int], memo: dict):
    """box_sizes() of the sample tiles of `sizes`."""
    samples, parts = None, []
    for i, opnd in enumerate(space.inputs + [space.output]):
        key = ("sample", i, tuple([sizes[d] for d in opnd.depends if d in sizes]))
        part = memo.get(key)
        if part is None:
            samples = samples or _sample_tiles(space, sizes)
            part = memo[key] = _operand_boxes(opnd, samples)
        parts.append(part)
    return _merge(space, parts)


def operand_tiles(space: TileSpace, sizes: dict[str, int], opnd: Operand):
    """Tiles of `sizes` giving every box of `opnd`: every combination of the tiles of the
    dims it depends on, the other dims at their first."""
    ranges = {d: [(s, sizes[d]) for s in range(0, full - sizes[d] + 1, sizes[d])]
              for d, full in space.dims.items()}
    for d, full in space.dims.items():          # a last, partial tile
        if full % sizes[d]:
            ranges[d].append((full - full % sizes[d], full % sizes[d]))
    first = {d: r[0] for d, r in ranges.items()}
    dims = [d for d in opnd.depends if d in ranges]
    for combo in itertools.product(*(ranges[d] for d in dims)):
        yield {**first, **dict(zip(dims, combo))}


def _all_boxes(space: TileSpace, sizes: dict[str, int], memo: dict | None):
    """box_sizes() of every tile of `sizes`: per operand, its operand_tiles()."""
    memo = {} if memo is None else memo
    parts = []
    for i, opnd in enumerate(space.inputs + [space.output]):
        key = ("all", i, tuple(sizes[d] for d in opnd.depends if d in space.dims))
        if key not in memo:
            memo[key] = _operand_boxes(opnd, operand_tiles(space, sizes, opnd))
        parts.append(memo[key])
    return _merge(space, parts)


def _order_positions(space: TileSpace, orders) -> list[tuple]:
    """Per order: (order, per input operand off chip its dims in the order, innermost first,
    as (position, dim)). An operand is loaded again whenever a split dim it depends on
    changes: once per iteration of the loops down to the innermost such dim."""
    out = []
    for order in orders:
        at = {d: i for i, d in enumerate(order)}
        out.append((tuple(order), [sorted(((at[d], d) for d in o.depends if d in at),
                                          reverse=True)
                                   for o in space.inputs if not o.on_chip]))
    return out


def _lanes(space: TileSpace) -> tuple[int, list[tuple[str, float, int]], int]:
    """(how many lanes the off-chip operands take, each off-chip input's (role, cycles per
    byte, lane among them), the output's lane)."""
    lanes = sorted({o.lane for o in space.inputs + [space.output] if not o.on_chip})
    return (len(lanes), [(o.role, o.cost_per_byte, lanes.index(o.lane))
                         for o in space.inputs if not o.on_chip],
            lanes.index(space.output.lane) if not space.output.on_chip else 0)


def evaluate(space: TileSpace, sizes: dict[str, int], order, tile_overhead: float,
             tiles=None, boxes=None) -> TilePlan:
    """The plan of tile `sizes` in loop `order`; `boxes`: box_sizes() of its tiles, when the
    caller evaluates several orders of the same sizes."""
    boxes = boxes or box_sizes(space, tiles or _sample_tiles(space, sizes))
    return _evaluate(space, [tuple(sizes[d] for d in space.dims)],
                     _order_positions(space, [order]), tile_overhead,
                     [(boxes, space.work(sizes))], _lanes(space)).plan(0)


class _Plans:
    """Plans of several tile sizes in several loop orders, as arrays over the plans (plan j:
    sizes j // len(orders) in order j % len(orders)): a search level's hundreds of plans are
    estimated in a few array operations, and only those a search picks become TilePlans."""

    def __init__(self, space: TileSpace, sizes: list[tuple], orders: list[tuple], parts: dict):
        self.space, self.sizes, self.orders, self.parts = space, sizes, orders, parts
        self.working_set = parts["working_set"].ravel()
        self.cost = parts["time"].ravel()
        self.padding = parts["padding"].ravel()
        self.n_tiles = np.repeat(parts["n_tiles"], len(orders))

    def plan(self, j: int) -> TilePlan:
        space, parts = self.space, self.parts
        s, o = divmod(j, len(self.orders))
        buffers = {role: int(count[s, o]) for role, count in parts["buffers"]}
        buffer_bytes = {role: int(nbytes[s]) for role, nbytes in parts["buffer_bytes"]}
        return TilePlan(dict(zip(space.dims, self.sizes[s])), self.orders[o],
                        dict(zip(space.dims, parts["counts"][s].tolist())), buffers,
                        buffer_bytes, int(parts["acc_bytes"][s]), int(self.working_set[j]),
                        float(self.cost[j]), float(parts["transfer"][s, o]),
                        float(self.padding[j]), float(parts["compute"][s]))


def _evaluate(space: TileSpace, sizes: list[tuple], orders, tile_overhead: float,
              boxes: list[tuple], lanes: tuple) -> _Plans:
    """evaluate() of each of `sizes` (tile sizes in the order of space.dims) in each of
    `orders` (_order_positions()), given the boxes of each and the compute cycles of one of
    its tiles, (box_sizes(), cycles), and the operands' _lanes()."""
    column = {d: i for i, d in enumerate(space.dims)}
    counts = -(-np.array(list(space.dims.values()), dtype=np.int64)
               // np.array(sizes, dtype=np.int64).reshape(len(sizes), len(column)))
    in_bytes = [b for b, _ in boxes]
    out_bytes = np.array([b[1] for b in in_bytes], dtype=np.int64)
    n_tiles = counts.prod(axis=1)
    reduction = column.get(space.reduction)
    splits = counts[:, reduction] if reduction is not None else 1
    acc_bytes = np.zeros(len(sizes), dtype=np.int64)
    if space.reduction:
        acc = out_bytes // space.output.itemsize * space.acc_itemsize
        acc_bytes = np.where(splits > 1, (acc + ALIGN - 1) // ALIGN * ALIGN, 0)
    compute = n_tiles * np.array([w for _, w in boxes], dtype=np.float64)
    out = space.output
    n_lanes, offchip, out_lane = lanes
    ins = [(role, np.array([b[0][role] for b in in_bytes], dtype=np.int64), per_byte,
            np.array([b[2][role] for b in in_bytes]), lane) for role, per_byte, lane in offchip]
    per_tile = n_tiles * tile_overhead
    streamed = compute / counts[:, column[space.stream]] if space.stream else None
    buffer_bytes = [(role, nbytes) for role, nbytes, _, _, _ in ins]
    if not out.on_chip:
        n_out = n_tiles // splits               # the output tiles: all but the reduction's
        buffer_bytes.append((out.role, out_bytes))
        # Split, the reduction is the innermost loop of every order, so consecutive output
        # tiles are a reduction loop apart: one buffer lets each store finish before the next
        # tile's results go there, and the room serves the inputs.
        out_count = np.where((n_out > 1) & (splits <= 1), 2, 1)
        burst = np.array([b[2]["<out>"] for b in in_bytes])
        out_cost = n_out * out_bytes * out.cost_per_byte * burst
        out_padding = n_out * out_bytes * out.cost_per_byte * (burst - 1)
    shape = (len(sizes), len(orders))
    working, time, transfer = np.empty(shape, np.int64), np.empty(shape), np.empty(shape)
    padding, buffers = np.zeros(shape), {role: np.empty(shape, np.int64) for role, *_ in ins}
    for o, (order, positions) in enumerate(orders):
        # iterations of the loops down to each position
        prefix = np.cumprod(counts[:, [column[d] for d in order]], axis=1)
        work_set = acc_bytes.copy()
        busy = np.zeros((len(sizes), n_lanes))          # transfer cycles per lane
        for (role, nbytes, per_byte, factor, lane), dims in zip(ins, positions):
            loads, found = np.ones(len(sizes), dtype=np.int64), np.zeros(len(sizes), bool)
            for i, d in dims:           # loaded again as the innermost split dim it reads
                split = ~found & (counts[:, column[d]] > 1)
                loads = np.where(split, prefix[:, i], loads)
                found |= split
            buffers[role][:, o] = np.where(loads > 1, 2, 1)
            work_set += buffers[role][:, o] * nbytes
            moved = loads * nbytes * per_byte
            busy[:, lane] += moved * factor
            padding[:, o] += moved * (factor - 1)
        if not out.on_chip:
            work_set += out_count * out_bytes
            busy[:, out_lane] += out_cost
            padding[:, o] += out_padding
        cost = busy.max(axis=1) if n_lanes else np.zeros(len(sizes))
        # Estimated time of a double-buffered pipeline: the slower of compute and transfer,
        # plus the part that cannot overlap (the first tile's loads, the last tile's compute
        # and store), plus a fixed cost per tile. One tile is fully serial; many tiles pay
        # per-tile overhead.
        time[:, o] = np.where(cost > compute, cost + compute / n_tiles + per_tile,
                              compute + cost / n_tiles + per_tile)
        if streamed is not None:
            time[:, o] += streamed
        working[:, o], transfer[:, o] = work_set, cost
    buffers = list(buffers.items())
    if not out.on_chip:
        buffers.append((out.role, np.repeat(out_count[:, None], len(orders), axis=1)))
    return _Plans(space, sizes, [order for order, _ in orders], {
        "counts": counts, "n_tiles": n_tiles, "acc_bytes": acc_bytes, "compute": compute,
        "working_set": working, "time": time, "transfer": transfer, "padding": padding,
        "buffers": buffers, "buffer_bytes": buffer_bytes})


def _candidates(space: TileSpace, level: int, tile_overhead: float, boxes: dict,
                least: dict | None = None) -> _Plans:
    """Every plan of one search level: the halvings of its splittable dims in every order.
    `boxes` caches box_sizes() by tile sizes, each operand's boxes by the sizes it depends on
    and a tile's compute cycles: they depend on the space's shapes only, not on where its
    operands live, so a search after prefetch staged some reuses them. `least`: dim -> the
    smallest size tried."""
    names = list(space.dims)
    splittable = [i for i, d in enumerate(names) if space.levels[d] <= level]
    least = least or {}
    options = [[n for n in _sizes(space, names[i]) if n >= least.get(names[i], 0)]
               for i in splittable]
    full = list(space.dims.values())
    sizes, known = [], []
    for combo in itertools.product(*options):
        values = full[:]
        for i, n in zip(splittable, combo):
            values[i] = n
        key = tuple(values)
        known_boxes = boxes.get(key)        # (box_sizes(), a tile's compute cycles)
        if known_boxes is None:
            tile = dict(zip(names, values))
            known_boxes = boxes[key] = (_sampled_boxes(space, tile, boxes), space.work(tile))
        sizes.append(key)
        known.append(known_boxes)
    return _evaluate(space, sizes, _order_positions(space, space.orders), tile_overhead, known,
                     _lanes(space))


def search(space: TileSpace, budget: int, tile_overhead: float = 64.0,
           candidates: dict | None = None, boxes: dict | None = None,
           room_slack: float = 1.25) -> TilePlan | None:
    """The cheapest plan whose working set fits `budget` bytes, or None. `candidates` keeps
    each level's plans for searches of the same space with other budgets; `boxes`, the box
    sizes of its tiles for searches of the same shapes (see _candidates)."""
    boxes = {} if boxes is None else boxes
    best = []                                  # per level searched, its choice
    whole = (space.floor or space.work)(space.dims)     # the layer as one tile
    least = None
    for level in range(max(space.levels.values(), default=0) + 1):
        key = level if least is None else (level, tuple(sorted(least.items())))
        if candidates is not None and key in candidates:
            plans = candidates[key]
        else:
            plans = _candidates(space, level, tile_overhead, boxes, least)
            if candidates is not None:
                candidates[key] = plans
        fitting = plans.working_set <= budget
        if fitting.any():
            # Within NEAR_BEST of the fastest, a small working set (buffer room is worth more
            # to weight prefetch than a percent of this step's time): the fewest tiles among
            # those within room_slack (config schedule.room_slack) of the smallest, as a little
            # more room for far fewer commands is cheap; the first of equals.
            near = fitting & (plans.cost <= plans.cost[fitting].min() * NEAR_BEST)
            small = plans.working_set[near].min()
            pool = np.flatnonzero(near & (plans.working_set <= small * room_slack))
            best.append(plans.plan(int(pool[np.lexsort((
                plans.cost[pool], plans.working_set[pool], plans.n_tiles[pool]))[0]])))
            # The preferred dims alone can leave boxes of runs shorter than a burst (a
            # MATMUL's weight columns): a plan that spends over PADDING_SHARE of its time
            # moving burst padding also tries the next level, which may take whole rows.
            # So does one whose tiles are too small for the array: when they compute in more
            # than TILE_WASTE times the whole layer's cycles (each paying the array's preload
            # and fill for a few rows), the next level's splits (the reduction's, partial sums
            # on chip) may give it tiles of all rows.
            # And one the room binds, when a plan of the level that does not fit would be
            # over ROOM_GAIN faster: the next level's splits (a row's columns, the batch) make
            # smaller boxes, so a plan close to it may fit (wider weight slices beside part
            # of a row: the input read again for fewer slices). As those splits are to make
            # room for larger tiles of this level's dims, the next level tries no smaller
            # ones than this level's choice has (a fraction of its plans). The reduction's
            # splits are searched whole: their partial sums make round trips of their own,
            # so they win only where estimated faster (a 4-channel FC layer of 4,000 terms
            # with room for one channel's whole reduction had taken 4 tiles of one column,
            # 3.4x slower than the reduction in 8 parts its smaller budgets chose).
            fine = best[-1].padding <= best[-1].cost * PADDING_SHARE and \
                best[-1].n_tiles * space.work(best[-1].sizes) <= TILE_WASTE * whole
            if not fine:
                least = None
            elif best[-1].cost > ROOM_GAIN * plans.cost.min():
                least = {d: best[-1].sizes[d] for d in space.dims if space.levels[d] <= level} \
                    if level + 1 < space.levels.get(space.reduction, math.inf) else None
            else:
                break
    if not best:
        return None
    fastest = min(p.cost for p in best)
    return next(p for p in best if p.cost <= fastest * NEAR_BEST)     # the shallowest


def row_axis(shape: tuple) -> int | None:
    """The tensor axis along which tiles stream a step's output (row_dim()): its rows, axis
    1, or a batched [N, H, W] output's N; None below rank 3."""
    if len(shape) < 3:
        return None
    return 0 if len(shape) == 3 and shape[0] > 1 else 1


def row_dim(space: TileSpace) -> str:
    """The dim whose tiles split the output along its rows (tensor axis 1), or ''. A batched
    [N, H, W] output (attention's heads) is split along N instead: a tile of whole heads is
    one contiguous run, so the step reading it waits for the tiles it reads, not for every
    tile whose strided span overlaps them (byte ranges are tracked by footprint)."""
    full = {d: (0, n) for d, n in space.dims.items()}
    rows = space.output.box(full)
    axis = row_axis(tuple(n for _, n in rows))
    if axis is None:
        return ""
    for d, n in space.dims.items():
        if n > 1 and space.output.box({**full, d: (0, 1)})[axis] != rows[axis]:
            return d
    return ""


def minimum_working_set(space: TileSpace) -> int:
    sizes = {d: (space.dims[d] if space.levels[d] > 99 else min(space.granule.get(d, 1),
                                                                   space.dims[d]))
             for d in space.dims}
    return min(evaluate(space, sizes, o, 0).working_set for o in space.orders)


def iterate_tiles(plan: TilePlan, dims: dict[str, int]):
    """Yield tiles in loop order (outermost first)."""
    ranges = []
    for d in plan.order:
        size = plan.sizes[d]
        ranges.append([(s, min(size, dims[d] - s)) for s in range(0, dims[d], size)])
    for combo in itertools.product(*ranges):
        yield dict(zip(plan.order, combo))


def window(start: int, count: int, stride: int, pad_before: int, extent: int, full: int):
    """Input rows for `count` outputs from `start` of a strided window op.

    Returns (box_start, box_size, pad_before, pad_after), the box clipped to [0, full).
    """
    first = start * stride - pad_before
    last = (start + count - 1) * stride - pad_before + extent - 1
    lo, hi = max(first, 0), min(last, full - 1)
    if hi < lo:                    # the window lies entirely in padding
        return 0, 0, last - first + 1, 0
    return lo, hi - lo + 1, lo - first, last - hi


MAX_TILES = 8_192      # per layer: beyond this a buffer is too small to be worth simulating, and
                       # compiling a few such layers would take minutes and gigabytes


def _too_many_tiles(space: TileSpace, plan: TilePlan, budget: int, candidates: dict | None):
    """Refuse a layer that only fits in more than MAX_TILES tiles, naming the room it needs."""
    need = min((int(level.working_set[level.n_tiles <= MAX_TILES].min())
                for level in (candidates or {}).values() if (level.n_tiles <= MAX_TILES).any()),
               default=0)
    room = f"tiles within the limit need {need:,} B of working space" if need else \
        "no tiling searched stays within the limit"
    raise DoesNotFitError(f"layer '{space.output.tensor}': {plan.n_tiles:,} tiles would be needed, at most "
                          f"{MAX_TILES:,} are simulated; {room}, {budget:,} B are free; use a config "
                          "with a larger sram.size")


def plan_tiles(space: TileSpace, budget: int, tile_overhead: float = 64.0,
               candidates: dict | None = None, boxes: dict | None = None,
               room_slack: float = 1.25) -> TilePlan | None:
    """search(), then size every buffer over all tiles; if a tile the samples missed needs
    more space, search again with a budget reduced by the shortfall. A budget of 0 still
    takes a plan whose operands are all on chip (it needs no room of its own)."""
    target = budget
    while target >= 0:
        plan = search(space, target, tile_overhead, candidates, boxes, room_slack)
        if plan is None:
            return None
        if plan.n_tiles > MAX_TILES:
            _too_many_tiles(space, plan, budget, candidates)
        exact = exact_plan(space, plan.sizes, plan.order, tile_overhead, boxes)
        if exact.working_set <= budget:
            return exact
        target -= exact.working_set - budget
    return None


def exact_plan(space: TileSpace, sizes: dict[str, int], order, tile_overhead: float,
               boxes: dict | None = None) -> TilePlan:
    """The plan of tile `sizes` in loop `order`, its buffers sized over all of its tiles
    (search() sizes them over a sample); `boxes` as for search()."""
    return evaluate(space, sizes, order, tile_overhead, boxes=_all_boxes(space, sizes, boxes))


def within_buffer(view: TensorView, room: int, layer: str, role: str) -> TensorView:
    """`view`, a tile's (or a staged block's) box in a buffer of `room` bytes; a box its plan
    did not size the buffer for is a compiler bug, which would otherwise overwrite the buffers
    beside it."""
    if view.nbytes > room:
        raise RuntimeError(f"compiler bug: layer '{layer}': a box of {role} takes "
                           f"{view.nbytes:,} B, its buffer {room:,} B (a plan that does not "
                           "match the step's tiles or blocks)")
    return view
