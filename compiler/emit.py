"""Command emission with automatic synchronisation.

The emitter tracks, per memory, which command last wrote and which commands have read each byte
range since. A new command waits for the last writer of what it reads (RAW) and for the last
writer and readers of what it writes (WAW, WAR). Because each engine runs in order, only the
latest command per engine needs to be waited for.
"""
from __future__ import annotations

from bisect import bisect_right

from npu_sim.isa.commands import ITEMSIZE, ONCHIP, Compute, DmaCopy, DmaFill, TensorView


class _Segments:
    """Disjoint [lo, hi) segments of one memory with their writer and readers by engine."""

    def __init__(self):
        self.starts: list[int] = []
        self.items: list[list] = []          # [lo, hi, writer, {engine: reader}]

    def _split(self, pos: int) -> int:
        """Split the segment holding `pos` inside it; the index of the first segment starting
        at or after pos."""
        starts, items = self.starts, self.items
        i = bisect_right(starts, pos) - 1
        if i >= 0:
            seg = items[i]
            if pos < seg[1]:
                if seg[0] < pos:
                    items.insert(i + 1, [pos, seg[1], seg[2], dict(seg[3])])
                    starts.insert(i + 1, pos)
                    seg[1] = pos
                    return i + 1
                return i
        return i + 1

    def _exact(self, lo: int, hi: int) -> int:
        """The index of the segment [lo, hi) itself, or -1 (most accesses reuse a buffer)."""
        i = bisect_right(self.starts, lo) - 1
        return i if i >= 0 and self.starts[i] == lo and self.items[i][1] == hi else -1

    def read(self, lo, hi, engine, cmd_id):
        i = self._exact(lo, hi)
        if i >= 0:
            self.items[i][3][engine] = cmd_id
            return
        i = self._split(lo)
        self._split(hi)
        starts, items = self.starts, self.items
        covered = lo
        while i < len(items) and starts[i] < hi:
            seg = items[i]
            if seg[0] > covered:
                items.insert(i, [covered, seg[0], None, {engine: cmd_id}])
                starts.insert(i, covered)
                i += 1
            seg[3][engine] = cmd_id
            covered = seg[1]
            i += 1
        if covered < hi:
            items.insert(i, [covered, hi, None, {engine: cmd_id}])
            starts.insert(i, covered)

    def write(self, lo, hi, cmd_id):
        i = self._exact(lo, hi)
        if i >= 0:
            self.items[i] = [lo, hi, cmd_id, {}]
            return
        i = self._split(lo)
        j = self._split(hi)
        self.starts[i:j] = [lo]
        self.items[i:j] = [[lo, hi, cmd_id, {}]]


def _views(cmd) -> tuple[list[TensorView], list[TensorView]]:
    """(reads, writes) of a command."""
    if isinstance(cmd, DmaCopy):
        return [cmd.src], [cmd.dst]
    if isinstance(cmd, DmaFill):
        return [], [cmd.dst]
    return list(cmd.inputs.values()), list(cmd.outputs.values())


class Emitter:
    def __init__(self):
        self.commands = []
        self.engine_of: list[str] = []          # command id -> its engine
        self.memories: dict[int, _Segments] = {}
        self.layer = -1
        self.prefetching = False        # copies emitted now stage data for later steps
        self._prefetches: set[int] = set()

    def _sync(self, reads, writes, engine: str) -> tuple[int, ...]:
        """The dependencies of the next command (on `engine`) reading and writing these views,
        recorded as its accesses: the latest conflicting command of each engine. (The
        segment walk of _Segments.collect is inlined: this runs for every operand of every
        command, twice over with hoist_loads.)"""
        cmd_id = len(self.commands)
        memories = self.memories
        ids: set[int] = set()
        spans = []
        for views, is_write in ((reads, False), (writes, True)):
            for v in views:
                mem, lo, shape, strides, dtype = v      # its footprint(), inlined
                if 0 in shape:
                    continue
                hi = lo + ITEMSIZE[dtype]
                for d, st in zip(shape, strides):
                    if st > 0:
                        hi += (d - 1) * st
                    else:
                        lo += (d - 1) * st
                segs = memories.get(mem)
                if segs is None:
                    segs = memories[mem] = _Segments()
                items = segs.items
                i = bisect_right(segs.starts, lo) - 1
                if i < 0:
                    i = 0
                n = len(items)
                while i < n:
                    seg = items[i]
                    if seg[0] >= hi:
                        break
                    if seg[1] > lo:
                        if seg[2] is not None:
                            ids.add(seg[2])
                        if is_write and seg[3]:
                            ids.update(seg[3].values())
                    i += 1
                spans.append((segs, lo, hi, is_write))
        for segs, lo, hi, is_write in spans:
            if is_write:
                segs.write(lo, hi, cmd_id)
            else:
                segs.read(lo, hi, engine, cmd_id)
        self.engine_of.append(engine)
        if not ids:
            return ()
        latest: dict[str, int] = {}
        engine_of = self.engine_of
        for i in ids:
            e = engine_of[i]
            if latest.get(e, -1) < i:
                latest[e] = i
        return tuple(sorted(latest.values()))

    def copy(self, src: TensorView, dst: TensorView, channel: int) -> int:
        cmd_id = len(self.commands)
        deps = self._sync((src,), (dst,), f"dma{channel}")
        if self.prefetching:
            self._prefetches.add(cmd_id)
        self.commands.append(DmaCopy(id=cmd_id, deps=deps, layer=self.layer, channel=channel,
                                     src=src, dst=dst))
        return cmd_id

    def fill(self, dst: TensorView, value: int, channel: int) -> int:
        cmd_id = len(self.commands)
        deps = self._sync((), (dst,), f"dma{channel}")
        self.commands.append(DmaFill(id=cmd_id, deps=deps, layer=self.layer, channel=channel,
                                     dst=dst, value=int(value)))
        return cmd_id

    def compute(self, unit: str, op: str, inputs: dict, outputs: dict, attrs: dict) -> int:
        cmd_id = len(self.commands)
        deps = self._sync(inputs.values(), outputs.values(), unit)
        self.commands.append(Compute(id=cmd_id, deps=deps, layer=self.layer, unit=unit, op=op,
                                     inputs=dict(inputs), outputs=dict(outputs),
                                     attrs=dict(attrs)))
        return cmd_id


def hoist_loads(emitter: Emitter) -> Emitter:
    """The program with each step's loads moved ahead in their DMA queue, re-synchronised.

    A DMA queue runs in program order, so a load of a step's input from external memory that
    was emitted behind a store or an on-chip move waiting for compute, or behind weights
    staged for later layers, waits for them although its own data and buffer are ready. Each
    such load moves to just after the last command it conflicts with (the latest of its
    dependencies: nothing in between touches its bytes, so every value is the same), never
    ahead of an earlier load of its queue (loads keep their order) nor of its own step's
    commands (a step's tiles keep their pipeline: loads one tile ahead of compute and its
    stores). Staged weight copies keep their places. The dependencies are then derived again
    for the new order."""
    keys: list[float] = []
    last_load: dict[int, float] = {}
    own: dict[tuple[int, int], float] = {}    # (queue, layer) -> key of its latest command
    for cmd in emitter.commands:
        key = float(cmd.id)
        queue = getattr(cmd, "channel", None)
        if isinstance(cmd, DmaCopy) and cmd.src.mem != ONCHIP and cmd.dst.mem == ONCHIP \
                and cmd.id not in emitter._prefetches:
            key = max(max(cmd.deps, default=-1) + 0.5, last_load.get(queue, -1.0),
                      own.get((queue, cmd.layer), -1.0))
            last_load[queue] = key
        if queue is not None:
            own[queue, cmd.layer] = key
        keys.append(key)
    order = sorted(range(len(keys)), key=lambda i: (keys[i], i))
    if order == list(range(len(order))):
        return emitter
    out = Emitter()
    for i in order:             # the commands are the old emitter's, renumbered in place
        cmd = emitter.commands[i]
        reads, writes = _views(cmd)
        cmd.deps = out._sync(reads, writes, cmd.engine)
        cmd.id = len(out.commands)
        out.commands.append(cmd)
    return out
