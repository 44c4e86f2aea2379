"""Command emission with automatic synchronisation.

The emitter tracks, per memory, which command last wrote and which commands have read each byte
range since. A new command waits for the last writer of what it reads (RAW) and for the last
writer and readers of what it writes (WAW, WAR). Because each engine runs in order, only the
latest command per engine needs to be waited for.
"""
from __future__ import annotations

import bisect

from npu_sim.isa.commands import Compute, DmaCopy, DmaFill, TensorView


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


class Emitter:
    def __init__(self):
        self.commands = []
        self.engine_of: dict[int, str] = {}
        self.memories: dict[int, _Segments] = {}
        self.layer = -1

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
