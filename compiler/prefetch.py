"""Weight prefetch: stage constants on chip some steps before the step that reads them.

Without it a step's weights stream in with its own tiles, so the external memory idles while
compute-bound steps run and the array idles while weight-heavy steps load. A staged constant is
copied on chip right after an earlier step's commands, on the constants' DMA queue, into room
that no step in between needs: every step keeps at least the working set of the tile plan it
had without prefetch (so no step tiles worse), and a reading step keeps its plan minus the
buffers the copy replaces. Constants are taken in the order they are first read, each staged as
early as it fits, so the queue carries them in the order the array needs them. A constant read
in boxes of whole leading rows (a weight tensor's output-channel slices) that is too large to
stage whole, or fits only too late to hide its load, gets its first boxes staged instead: as
many as the steps before its reader leave the memory idle long enough to load, by their tile
plans' estimates (compute time less transfer time, less what earlier preloads booked). One
staged whole whose load those steps do not hide is streamed (`Placement.streamed`): copied
box by box, its reader keeping the tiles of those boxes it had before, so each tile waits for
its own boxes only and the array works behind the copy (a transformer's first FC layer, which
waited for all of its weights). Once
the other constants and the packs have their room, a prefix whose reader's loads still outlast
its compute gets its next boxes too, in further parts, each staged where and when the room left
allows (room freed by constants read earlier, a gap between feature maps): its reader would
wait for each of those boxes. A prefix of the constants read last may instead be staged run by
run from the start, each run at the earliest step with room for it, where that hides clearly
more by the estimates than the one best run (`_fills_earlier`).
Constants too small to be worth a DMA descriptor's setup each are staged in packs (`_packs`):
laid out together, so one copy brings several in.
A graph input that several steps read is staged like a constant (it is in its memory from the
start and never written), on the activations' queue, so they read one copy instead of each
loading it (a transformer's input: its first layer norm and the residual add after the
attention). Read first by the first step, it is copied before that step, where that step would
load it whole in any case.
"""
from __future__ import annotations

import math

from .ir import Graph
from .placement import Placement
from .steps import Step
from .tiling import operand_tiles

TILED = ("mac", "vector")
# How much more a prefix staged run by run must hide, by the tile plans' estimates, than the
# one best run: each run is a descriptor more, and where the memory is busy the estimates of
# idle time are rough (MobileNetV2-224 on default at 8 GB/s: 15% more by them, 2% slower).
CLEARLY_MORE = 1.25


def plan_prefetch(graph: Graph, steps: list[Step], placement: Placement,
                  lowering) -> dict[int, list[tuple[str, int, int | None]]]:
    """Stage what fits; returns step index -> (constant, first reading step, part of its
    prefix or None) to preload after that step."""
    n = len(steps)
    onchip = placement.onchip_size
    need = [0] * n               # bytes of workspace each step must keep
    replaced: dict[tuple[int, str], int] = {}   # (step, constant) -> bytes of its tile buffers
    reads: dict[tuple[int, str], tuple] = {}    # (step, constant) -> (operand, plan, space)
    idle = [0.0] * n             # estimated cycles each step leaves the memories idle
    spent = [0.0] * n            # estimated compute cycles of each step (its tile plan's)
    load: dict[str, float] = {}  # constant -> estimated cycles to load it
    # A graph input is in its memory from the start and read only, as a constant is: one
    # that several steps read is staged too, so they do not each load it again.
    inputs = {placement.root(n) for n in graph.inputs
              if not graph.tensors[placement.root(n)].variable}
    for i, step in enumerate(steps):
        if step.kind == "dma":                  # room for its staged copies' buffers
            need[i] = lowering.staging_need(step, placement.workspaces[i][1])
        if step.kind not in TILED:
            continue
        space, _, _, plan = lowering.plan(step, placement.workspaces[i][1])
        if plan is None:
            need[i] = onchip                    # reported when the step is lowered
            continue
        need[i] = plan.working_set
        idle[i] = max(plan.cost - plan.transfer, 0.0)
        spent[i] = plan.compute
        for opnd in space.inputs:
            root = placement.root(opnd.tensor)
            if opnd.role in plan.buffers and (graph.tensors[root].is_const or root in inputs):
                key = (i, root)
                replaced[key] = replaced.get(key, 0) + (plan.buffers[opnd.role]
                                                        * plan.buffer_bytes[opnd.role])
                reads[key] = (opnd, plan, space)
                load[key[1]] = graph.tensors[key[1]].nbytes * opnd.cost_per_byte
    readers: dict[str, list[int]] = {}
    for i, step in enumerate(steps):
        if step.kind == "alias":                # a view: its readers read the tensor
            continue
        for name in step.inputs:
            root = placement.root(name)
            if (graph.tensors[root].is_const or root in inputs) and \
                    i not in readers.get(root, []):
                readers.setdefault(root, []).append(i)
    outputs = {placement.root(n) for n in graph.outputs}
    # Only what every reader loads through its tile buffers (per-tensor parameters are
    # immediates in the commands, and other engines read constants where they live).
    roots = [root for root, users in sorted(readers.items(), key=lambda item: item[1][0])
             if root not in outputs and all((u, root) in replaced for u in users)
             and (root not in inputs or len(users) > 1)]
    preloads: dict[int, list[tuple[str, int, int | None]]] = {}
    prefixed = []                # (constant, reader, rows per box, rows staged, run by run)
    packs = _packs([r for r in roots if r not in inputs], readers, load,
                   lowering.hw.dma.setup_cycles, spent)
    last_read = max((readers[root][0] for root in roots if root not in inputs), default=0)
    packed = {root for group in packs for root in group}
    for root in roots:
        if root in packed:
            continue
        users = readers[root]
        first, last = users[0], users[-1]
        cycles = load.get(root, 0.0)
        ceiling = [onchip - need[j] + replaced.get((j, root), 0) for j in range(n)]
        start = _earliest(first, lambda s: placement.can_stage(
            root, s, last, min(ceiling[s:last + 1])))
        if start is None and first == 0 and root in inputs and \
                _one_box(*reads[first, root]) and \
                placement.can_stage(root, 0, last, min(ceiling[:last + 1])):
            start = -1       # copied before the first step, which would load it whole anyway
        # A whole copy is worth the load time the idle steps before the reader can hide; when
        # it only fits too late for that, the first boxes staged earlier may hide more.
        whole = 0.0 if start is None else min(cycles, sum(idle[max(start, 0):first]))
        prefix, keep = None, [onchip - need[j] for j in range(n)]   # a prefix replaces nothing
        granule = _row_granule(*reads[first, root]) if len(users) == 1 and whole < cycles else 0
        earliest = False
        if granule:
            # Run by run only for the constants read last: runs staged early hold room over
            # more steps, which a prefix read later could have used (BERT-base's attention
            # output weights so staged, its FFN's get less: 0.9% slower).
            earliest = first == last_read and _fills_earlier(placement, root, first, granule,
                                                            keep, idle, cycles)
            prefix = _best_prefix(placement, root, first, granule, 0, keep, idle, cycles,
                                  earliest=earliest)
        if prefix is not None and prefix[2] > whole:
            staged = _stage_run(placement, root, first, granule, 0, prefix, keep, idle, cycles,
                                preloads)
            if staged is not None:
                prefixed.append((root, first, granule, staged, earliest))
        elif start is not None:
            placement.stage(root, max(start, 0), last, min(ceiling[max(start, 0):last + 1]))
            if granule and granule < graph.tensors[root].shape[0]:
                placement.streamed[root] = (granule, reads[first, root][1])
            for u in users:
                need[u] -= replaced.get((u, root), 0)
            preloads.setdefault(start, []).append((root, first, None))
            book_idle(idle, max(start, 0), first, cycles)
    for group in packs:          # in the room the others leave, which they need not share
        _stage_pack(placement, group, readers, replaced, need, onchip, preloads)
    # Then each prefix's next boxes, in runs where and when the room the others leave allows
    # (a dead constant's, a gap between feature maps), while by its reader's tile plan the
    # loads of the rest of it outlast the reader's compute: the reader waits for those.
    keep = [onchip - need[j] for j in range(n)]
    for root, first, granule, row0, earliest in prefixed:
        plan, rows = reads[first, root][1], graph.tensors[root].shape[0]
        while True:
            run = None
            if earliest:          # first the runs idle time hides, as _fills_earlier() did
                run = _best_prefix(placement, root, first, granule, row0, keep, idle,
                                   load[root], earliest=True)
            if run is None:
                left = load[root] * (rows - row0) / rows     # cycles to load the rest
                spare = min(plan.transfer - (load[root] - left), left) - plan.compute
                run = _best_prefix(placement, root, first, granule, row0, keep, idle,
                                   load[root], spare=spare)
            if run is not None:
                row0 = _stage_run(placement, root, first, granule, row0, run, keep, idle,
                                  load[root], preloads)
            if run is None or row0 is None:
                break
    for staged in preloads.values():          # a queue carries them in the order they are read
        staged.sort(key=lambda item: item[1])
    return preloads


def _packs(roots: list[str], readers: dict, load: dict, setup: int,
           spent: list[float]) -> list[list[str]]:
    """The constants to stage in packs: those whose loads are shorter than a DMA descriptor's
    setup (a layer norm's scalars and vectors, a softmax's tables, small biases), laid out
    together with the weights and on chip so that one copy loads them all. A queue of such
    loads pays a setup each, one after another, and delays the loads behind it (the first
    layer's weights); a pack pays one, but its first reader waits for all of it. So a pack
    takes, in the order they are first read, at most one setup's worth of transfer, and only
    constants read before their own setups would have come in: their first readers start, by
    the tile plans' estimates of compute, within as many setups of the pack's first reader
    as the pack holds constants. A pack must replace at least two loads."""
    at, clock = [], 0.0                       # estimated start of each step, one after another
    for cycles in spent:
        at.append(clock)
        clock += cycles
    packs: list[list[str]] = []
    group: list[str] = []
    cycles = 0.0
    for root in roots + [None]:
        c = load.get(root, 0.0)
        if root is not None and c > setup:
            continue
        if group and (root is None or cycles + c > setup or
                      at[readers[root][0]] - at[readers[group[0]][0]] >= len(group) * setup):
            if sum(len(readers[r]) for r in group) >= 2:
                packs.append(group)
            group, cycles = [], 0.0
        if root is not None:
            group.append(root)
            cycles += c
    return packs


def _stage_pack(placement: Placement, group: list[str], readers: dict, replaced: dict,
                need: list[int], onchip: int, preloads: dict) -> None:
    """Stage a pack from the start to its last reader, if it fits: its copy then waits in
    its queue only for the loads ahead of it, not for earlier steps to free its room."""
    first = min(readers[r][0] for r in group)
    last = max(readers[r][-1] for r in group)
    limit = min(onchip - need[j] + sum(replaced.get((j, r), 0) for r in group)
                for j in range(last + 1))
    if placement.stage_pack(group, 0, last, limit):
        for r in group:
            for u in readers[r]:
                need[u] -= replaced.get((u, r), 0)
        # with the weights staged from the start (before the first step if it reads them)
        preloads.setdefault(-1 if first == 0 else 0, []).append((group[0], first, None))


def _stage_run(placement: Placement, root: str, reader: int, granule: int, row0: int,
               run: tuple[int, int, float], keep: list[int], idle: list[float], load: float,
               preloads: dict) -> int | None:
    """Stage `run` (start, boxes, _) of a constant's boxes from row `row0` as the next part
    of its prefix, to preload after step start; returns the row after it, or None when the
    room _best_prefix found is not there after all (then nothing is staged)."""
    start, count, _ = run
    rows = count * granule
    if not placement.stage(root, start, reader, min(keep[start:reader + 1]), rows=rows,
                           row0=row0):
        return None
    book_idle(idle, start, reader, load * rows / placement.graph.tensors[root].shape[0])
    preloads.setdefault(start, []).append((root, reader, len(placement.prefixes[root]) - 1))
    return row0 + rows


def _fills_earlier(placement: Placement, root: str, reader: int, granule: int,
                   keep: list[int], idle: list[float], load: float) -> bool:
    """Whether a prefix staged run after run, each at the earliest step with room for it,
    hides more of its load in idle time than the one run that hides the most. Where room
    frees step by step (the constants of the layers between consumed), that one run starts
    late and holds the room that earlier, smaller runs would have loaded over idle time
    before it (the classifier of a MobileNet, read last, larger than the buffer). Both are
    tried on the placement and undone."""
    hidden = []
    for earliest in (False, True):
        mark, trial_idle, total, row0 = placement.mark(), idle[:], 0.0, 0
        while row0 is not None:
            run = _best_prefix(placement, root, reader, granule, row0, keep, trial_idle, load,
                               earliest=earliest)
            if run is None:
                break
            total += run[2]
            row0 = _stage_run(placement, root, reader, granule, row0, run, keep, trial_idle,
                              load, {})
            if not earliest:
                break
        placement.undo(mark)
        hidden.append(total)
    return hidden[1] > hidden[0] * CLEARLY_MORE


def book_idle(idle: list[float], start: int, end: int, cycles: float):
    """Book `cycles` of transfer into the idle time of steps [start, end), earliest first."""
    for j in range(start, end):
        take = min(idle[j], cycles)
        idle[j] -= take
        cycles -= take


def _row_granule(opnd, plan, space) -> int:
    """Rows per box when the reader loads the constant in boxes of whole leading rows (the
    output-channel slices of a weight tensor), else 0: then a staged prefix serves its first
    boxes."""
    if not opnd.shape:
        return 0
    rows = []
    for tile in operand_tiles(space, plan.sizes, opnd):
        box = opnd.box(tile)
        if len(box) != len(opnd.shape) or any(b != (0, n) for b, n in zip(box[1:], opnd.shape[1:])):
            return 0
        rows.append(box[0])
    granule = max(count for _, count in rows)
    return granule if granule and all(start % granule == 0 for start, _ in rows) else 0


def _one_box(opnd, plan, space) -> bool:
    """Whether a reader's tiles all load the same box of an operand."""
    return len({tuple(opnd.box(tile)) for tile in operand_tiles(space, plan.sizes, opnd)}) == 1


def _earliest(end: int, fits) -> int | None:
    """The earliest start in [0, end) for which fits(start) holds, or None. A later start
    spans fewer steps under a looser limit, so fits() is monotone and a bisection finds it."""
    if end <= 0 or not fits(end - 1):
        return None
    lo, hi = 0, end - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _best_prefix(placement: Placement, root: str, reader: int, granule: int, row0: int,
                 ceiling: list[int], idle: list[float], load: float,
                 spare: float | None = None,
                 earliest: bool = False) -> tuple[int, int, float] | None:
    """(start, boxes, cycles it hides) of the run of whole boxes from row `row0` of a
    constant that the idle time before its reader can best load: for each start, the largest
    run short of the tensor's end that fits there, worth as many cycles as the steps from
    there to the reader leave the memory idle. The best start, among equals the latest (it
    holds the room for the shortest time); None if no run fits or none would hide any.
    With `spare`, the cycles by which the reader's loads of the rest of the constant outlast
    its compute: at most that many cycles' boxes, and those even where no idle time hides
    them, as the reader would wait for them (a staged box comes in on the constants' queue,
    ahead of the reader's loads, once its room is free). With `earliest`, the earliest start
    whose run hides any cycles instead of the best."""
    rows = placement.graph.tensors[root].shape[0]
    boxes = -(-(rows - row0) // granule)
    per_box = load * granule / rows              # cycles to load one box
    if per_box <= 0:
        return None
    most = boxes - 1 if spare is None else min(boxes - 1, int(spare // per_box))
    if most <= 0:
        return None

    def fits(start, k):
        return placement.can_stage(root, start, reader, min(ceiling[start:reader + 1]),
                                   rows=k * granule)

    best, k, ahead = None, most, 0.0
    for start in range(reader - 1, -1, -1):      # a larger lead fits no larger a prefix
        ahead += idle[start]
        lo = 0
        while lo < k:
            mid = (lo + k + 1) // 2
            lo, k = (mid, k) if fits(start, mid) else (lo, mid - 1)
        if k == 0:
            break
        value = min(k * per_box, ahead)
        if best is None or value > best[2] or (earliest and value > 0):
            # Without `spare`, no more boxes than the idle time can bring in: the rest would
            # only hold room.
            best = (start, k if spare is not None else min(k, math.ceil(ahead / per_box)),
                    value)
    if best is None or (spare is None and best[2] <= 0):
        return None
    return best
