"""Command emission with automatic synchronisation.

The emitter tracks, per memory, which command last wrote and which commands have read each byte
range since. A new command waits for the last writer of what it reads (RAW) and for the last
writer and readers of what it writes (WAW, WAR). Because each engine runs in order, only the
latest command per engine needs to be waited for.
"""
from __future__ import annotations

import bisect
import dataclasses

from npu_sim.isa.commands import ONCHIP, Compute, DmaCopy, DmaFill, TensorView


class _Segments:
    """Disjoint [lo, hi) segments of one memory with their writer and readers by engine."""

    def __init__(self):
        self.starts: list[int] = []
        self.items: list[list] = []          # [lo, hi, writer, {engine: reader}]

    def _split(self, pos: int):
        i = bisect.bisect_right(self.starts, pos) - 1
        if i >= 0:
            lo, hi, w, r = self.items[i]
            if lo < pos < hi:
                self.items[i] = [lo, pos, w, r]
                self.items.insert(i + 1, [pos, hi, w, dict(r)])
                self.starts.insert(i + 1, pos)

    def overlapping(self, lo: int, hi: int):
        i = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        while i < len(self.items) and self.items[i][0] < hi:
            if self.items[i][1] > lo:
                yield self.items[i]
            i += 1

    def read(self, lo, hi, engine, cmd_id):
        self._split(lo)
        self._split(hi)
        covered = lo
        for seg in list(self.overlapping(lo, hi)):
            if seg[0] > covered:
                self._insert([covered, seg[0], None, {engine: cmd_id}])
            seg[3][engine] = cmd_id
            covered = seg[1]
        if covered < hi:
            self._insert([covered, hi, None, {engine: cmd_id}])

    def write(self, lo, hi, cmd_id):
        self._split(lo)
        self._split(hi)
        i = bisect.bisect_left(self.starts, lo)
        j = bisect.bisect_left(self.starts, hi)
        del self.starts[i:j]
        del self.items[i:j]
        self.starts.insert(i, lo)
        self.items.insert(i, [lo, hi, cmd_id, {}])

    def _insert(self, seg):
        i = bisect.bisect_left(self.starts, seg[0])
        self.starts.insert(i, seg[0])
        self.items.insert(i, seg)


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
        self.engine_of: dict[int, str] = {}
        self.memories: dict[int, _Segments] = {}
        self.layer = -1
        self.prefetching = False        # copies emitted now stage data for later steps
        self._prefetches: set[int] = set()

    def _deps(self, reads: list[TensorView], writes: list[TensorView]) -> tuple[int, ...]:
        latest: dict[str, int] = {}

        def need(cmd_id):
            if cmd_id is not None:
                eng = self.engine_of[cmd_id]
                latest[eng] = max(latest.get(eng, -1), cmd_id)

        for v, is_write in [(v, False) for v in reads] + [(v, True) for v in writes]:
            lo, hi = v.footprint()
            if hi <= lo:
                continue
            for seg in self.memories.setdefault(v.mem, _Segments()).overlapping(lo, hi):
                need(seg[2])
                if is_write:
                    for reader in seg[3].values():
                        need(reader)
        return tuple(sorted(latest.values()))

    def _record(self, cmd, reads, writes):
        self.engine_of[cmd.id] = cmd.engine
        for v in reads:
            lo, hi = v.footprint()
            if hi > lo:
                self.memories.setdefault(v.mem, _Segments()).read(lo, hi, cmd.engine, cmd.id)
        for v in writes:
            lo, hi = v.footprint()
            if hi > lo:
                self.memories.setdefault(v.mem, _Segments()).write(lo, hi, cmd.id)
        self.commands.append(cmd)
        return cmd.id

    def copy(self, src: TensorView, dst: TensorView, channel: int) -> int:
        cmd = DmaCopy(id=len(self.commands), deps=self._deps([src], [dst]), layer=self.layer,
                      channel=channel, src=src, dst=dst)
        if self.prefetching:
            self._prefetches.add(cmd.id)
        return self._record(cmd, [src], [dst])

    def fill(self, dst: TensorView, value: int, channel: int) -> int:
        cmd = DmaFill(id=len(self.commands), deps=self._deps([], [dst]), layer=self.layer,
                      channel=channel, dst=dst, value=int(value))
        return self._record(cmd, [], [dst])

    def compute(self, unit: str, op: str, inputs: dict, outputs: dict, attrs: dict) -> int:
        reads, writes = list(inputs.values()), list(outputs.values())
        cmd = Compute(id=len(self.commands), deps=self._deps(reads, writes), layer=self.layer,
                      unit=unit, op=op, inputs=dict(inputs), outputs=dict(outputs),
                      attrs=dict(attrs))
        return self._record(cmd, reads, writes)


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
    for i in order:
        cmd = emitter.commands[i]
        reads, writes = _views(cmd)
        out._record(dataclasses.replace(cmd, id=len(out.commands), deps=out._deps(reads, writes)),
                    reads, writes)
    return out
