"""Command emission with automatic synchronisation.

The emitter tracks, per memory, which command last wrote and which commands have read each byte
range since. A new command waits for the last writer of what it reads (RAW) and for the last
writer and readers of what it writes (WAW, WAR). Because each engine runs in order, only the
latest command per engine needs to be waited for.

A HoistingEmitter also moves each step's loads ahead in their DMA queue as they are emitted
(see HoistingEmitter), and synchronises the program in that order. A tile's store can be held
(hold_store) behind the next commands of its queue that can start before it can.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right

from npu_sim.isa.commands import ITEMSIZE, ONCHIP, Compute, DmaCopy, DmaFill, TensorView


class _Ranges:
    """Disjoint [lo, hi) ranges of one memory, each holding a command id: the last writer of
    those bytes, or the last reader on one engine since they were written. Assigning a range
    replaces whatever it covers, so the ranges stay as coarse as the accesses."""

    def __init__(self):
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.ids: list[int] = []

    def swap(self, lo: int, hi: int, cmd_id: int | None) -> list[int]:
        """Bytes [lo, hi) now hold cmd_id (None: nothing); returns the ids they held."""
        starts, ends, ids = self.starts, self.ends, self.ids
        a = bisect_right(ends, lo)
        b = bisect_left(starts, hi, a)
        if a == b:
            if cmd_id is not None:
                starts.insert(a, lo)
                ends.insert(a, hi)
                ids.insert(a, cmd_id)
            return []
        old = ids[a:b]
        first, last = starts[a], ends[b - 1]
        if b == a + 1 and cmd_id is not None and first >= lo and last <= hi:
            starts[a], ends[a], ids[a] = lo, hi, cmd_id      # one range, covered: replaced
            return old
        new_s, new_e, new_i = [], [], []
        if first < lo:                              # the part of the first range before lo
            new_s.append(first)
            new_e.append(lo)
            new_i.append(old[0])
        if cmd_id is not None:
            new_s.append(lo)
            new_e.append(hi)
            new_i.append(cmd_id)
        if last > hi:                               # the part of the last range after hi
            new_s.append(hi)
            new_e.append(last)
            new_i.append(old[-1])
        starts[a:b], ends[a:b], ids[a:b] = new_s, new_e, new_i
        return old


    def keep_later(self, lo: int, hi: int, cmd_id: int, rank: list[int]):
        """Bytes [lo, hi) now hold cmd_id, except those held by a command after it in program
        order (`rank`: command id -> its place)."""
        starts, ends, ids = self.starts, self.ends, self.ids
        a = bisect_right(ends, lo)
        b = bisect_left(starts, hi, a)
        mine = rank[cmd_id]
        new_s, new_e, new_i = [], [], []

        def put(s, e, i):
            if new_i and new_i[-1] == i and new_e[-1] == s:
                new_e[-1] = e
            else:
                new_s.append(s)
                new_e.append(e)
                new_i.append(i)
        if a < b and starts[a] < lo:
            put(starts[a], lo, ids[a])
        cursor = lo
        for j in range(a, b):
            s, e, i = max(starts[j], lo), min(ends[j], hi), ids[j]
            if cursor < s:
                put(cursor, s, cmd_id)
            put(s, e, i if rank[i] > mine else cmd_id)
            cursor = e
        if cursor < hi:
            put(cursor, hi, cmd_id)
        if a < b and ends[b - 1] > hi:
            put(hi, ends[b - 1], ids[b - 1])
        starts[a:b], ends[a:b], ids[a:b] = new_s, new_e, new_i


class _Memory:
    """What the emitter knows of one memory: per byte its last writer, and per engine its
    last reader since that write."""

    def __init__(self):
        self.writers = _Ranges()
        self.readers: dict[str, _Ranges] = {}


class CommandLimit(Exception):
    """The program would pass the emitter's limit of commands (the driver names the layer)."""


class Emitter:
    hoist = False           # HoistingEmitter: loads placed ahead in their queue

    def __init__(self, limit: int | None = None):
        self.limit = limit              # raise CommandLimit rather than emit more commands
        self.commands = []
        self.engine_of: list[str] = []          # command id -> its engine
        self.rank: list[int] = []               # command id -> its place in program order
        self.memories: dict[int, _Memory] = {}
        self.layer = -1
        self.prefetching = False        # copies emitted now stage data for later steps
        self.behind: int | None = None  # a command those copies also wait for
        self._top = -1                          # the latest place taken
        self._footprints: dict[TensorView, tuple] = {}  # view -> (mem, lo, hi), () if empty
        self._last_load: dict[int, float] = {}  # DMA queue -> key of its latest load
        self._own: dict[tuple[int, int], float] = {}   # (queue, layer) -> key of its latest command
        self._engines: dict[int, str] = {}      # DMA channel -> its engine's name
        self._held = None                       # a store not yet queued: (src, dst, channel)
        self._root = -1                         # the compute whose output it stores
        self._engine = ""                       # that compute's engine
        self._waiting: set[int] = set()         # commands since that wait for that compute
        self._waiting_queues: set[int] = set()  # DMA queues holding one of them

    def _sync(self, reads, writes, engine: str, queue: int | None = None,
              load: bool = False) -> tuple[int, ...]:
        """The dependencies of the next command (on `engine`, DMA `queue`; `load`: one to place
        ahead) reading and writing these views, recorded as its accesses: the latest
        conflicting command of each engine."""
        if self.limit is not None and len(self.engine_of) >= self.limit:
            raise CommandLimit
        return self._access(self._spans(reads), self._spans(writes), engine, queue, load)

    def _spans(self, views) -> list[tuple[int, int, int]]:
        """(mem, lo, hi) of each view's footprint(), overlapping ranges as one (a stage
        table's columns)."""
        known = self._footprints
        mine = []
        for view in views:
            span = known.get(view)
            if span is None:
                mem, lo, shape, strides, dtype = view       # footprint(), inlined
                span = ()
                if 0 not in shape:
                    hi = lo + ITEMSIZE[dtype]
                    for d, st in zip(shape, strides):
                        if st > 0:
                            hi += (d - 1) * st
                        else:
                            lo += (d - 1) * st
                    span = (mem, lo, hi)
                known[view] = span
            if span:
                mine.append(span)
        if len(mine) < 2:
            return mine
        mine.sort()
        merged = [mine[0]]
        for span in mine[1:]:
            last = merged[-1]
            if span[0] == last[0] and span[1] <= last[2]:
                if span[2] > last[2]:
                    merged[-1] = (last[0], last[1], span[2])
            else:
                merged.append(span)
        return merged

    def _access(self, reads, writes, engine: str, queue: int | None,
                load: bool) -> tuple[int, ...]:
        """_sync() of a command's byte ranges (mem, lo, hi), reads first: a read looks up the
        last writer of its bytes, a write looks up and replaces their last writer and readers
        in one pass; then the command is placed and its reads recorded. So what a command
        finds is always an earlier command, never itself."""
        cmd_id = len(self.engine_of)
        self.engine_of.append(engine)
        memories = self.memories
        ids: list[int] = []
        read = []
        for mem, lo, hi in reads:
            m = memories.get(mem)
            if m is None:
                m = memories[mem] = _Memory()
            w = m.writers
            a = bisect_right(w.ends, lo)                # the ids its bytes [lo, hi) hold
            ids += w.ids[a:bisect_left(w.starts, hi, a)]
            read.append((m, lo, hi))
        for mem, lo, hi in writes:
            m = memories.get(mem)
            if m is None:
                m = memories[mem] = _Memory()
            ids += m.writers.swap(lo, hi, cmd_id)
            for readers in m.readers.values():
                ends = readers.ends             # a quick miss: no reader's range meets [lo, hi)
                a = bisect_right(ends, lo)
                if a < len(ends) and readers.starts[a] < hi:
                    ids += readers.swap(lo, hi, None)
        if self._held is not None and self._waits(ids, queue):
            self._waiting.add(cmd_id)
            if queue is not None:
                self._waiting_queues.add(queue)
        rank = self._place(cmd_id, ids, queue, load)
        ahead = rank < self._top
        if not ahead:
            self._top = rank
        for m, lo, hi in read:
            readers = m.readers.get(engine)
            if readers is None:
                readers = m.readers[engine] = _Ranges()
            if ahead:               # readers it passes keep their bytes
                readers.keep_later(lo, hi, cmd_id, self.rank)
            else:
                readers.swap(lo, hi, cmd_id)
        if len(ids) < 2:
            return tuple(ids)
        latest: dict[str, int] = {}
        engine_of, order = self.engine_of, self.rank
        for i in ids:
            e = engine_of[i]
            j = latest.get(e)
            if j is None or order[j] < order[i]:
                latest[e] = i
        if len(latest) == 2:                    # (most commands: cheaper than sorted())
            a, b = latest.values()
            return (a, b) if order[a] < order[b] else (b, a)
        if len(latest) == 1:
            return tuple(latest.values())
        return tuple(sorted(latest.values(), key=order.__getitem__))

    def _place(self, cmd_id: int, ids: list[int], queue: int | None, load: bool) -> int:
        """The command's place in program order (HoistingEmitter's rule for a load; else
        last), recorded in self.rank."""
        if load:
            key = max(ids) + 0.5 if ids else -0.5        # (conditionals: cheaper than max())
            last, own = self._last_load.get(queue, -1.0), self._own.get((queue, self.layer), -1.0)
            if last > key:
                key = last
            if own > key:
                key = own
            self._last_load[queue] = key
            rank = round(2 * key) * 2 ** 32 + cmd_id      # keys are halves: by key, then id
        else:
            key = cmd_id
            rank = cmd_id * 2 ** 33 + cmd_id
        if queue is not None:
            self._own[queue, self.layer] = key
        self.rank.append(rank)
        return rank

    def _dma_engine(self, channel: int) -> str:
        """The engine name of a DMA channel, one string per channel: the emitter's maps are
        keyed by it, and a key seen before is found by identity, without comparing."""
        name = self._engines.get(channel)
        if name is None:
            name = self._engines[channel] = f"dma{channel}"
        return name

    def hold_store(self, src: TensorView, dst: TensorView, channel: int, compute: int):
        """Queue the store of `compute`'s output behind the next commands of its DMA queue
        that can start before that compute ends, and moves within the buffer: it goes in just
        ahead of the first other one that cannot (release() places it at the latest). The
        commands emitted meanwhile must not touch its bytes (the lowering releases it before
        the compute that reuses its buffer)."""
        self.release()
        self._held, self._root, self._engine = (src, dst, channel), compute, self.engine_of[compute]
        self._waiting, self._waiting_queues = {compute}, set()

    def release(self):
        """Queue the held store, if any, now."""
        if self._held is not None:
            held, self._held = self._held, None
            self.copy(*held)

    @staticmethod
    def _overtakes(src: TensorView, dst: TensorView) -> bool:
        """Whether a copy goes ahead of a held store even when it waits for the store's
        compute: a move within the buffer (a tile's halo rows from the last tile's) holds no
        external port and takes a few cycles, and the next tile's compute waits for it."""
        return src.mem == ONCHIP and dst.mem == ONCHIP

    def _waits(self, ids, queue) -> bool:
        """Whether a command finding these ids, in this DMA queue, starts only after the held
        store's compute ends: it waits for that compute, for a later command of its engine, or
        for a command that does, or is queued behind one."""
        if queue in self._waiting_queues:
            return True
        root, waiting, engine_of, engine = self._root, self._waiting, self.engine_of, self._engine
        for i in ids:                           # (a loop: cheaper than any() over a generator)
            if i in waiting or (i > root and engine_of[i] == engine):
                return True
        return False

    def _found(self, reads, writes) -> list[int]:
        """The ids _access() would find for these byte ranges, nothing recorded."""
        ids: list[int] = []
        memories = self.memories
        for spans, readers_too in ((reads, False), (writes, True)):
            for mem, lo, hi in spans:
                m = memories.get(mem)
                if m is None:
                    continue
                w = m.writers
                a = bisect_right(w.ends, lo)
                ids += w.ids[a:bisect_left(w.starts, hi, a)]
                if readers_too:
                    for r in m.readers.values():
                        a = bisect_right(r.ends, lo)
                        ids += r.ids[a:bisect_left(r.starts, hi, a)]
        return ids

    def copy(self, src: TensorView, dst: TensorView, channel: int) -> int:
        known = self._footprints            # _sync() of one view each, a known span inlined
        span = known.get(src)
        reads = self._spans((src,)) if span is None else [span] if span else []
        span = known.get(dst)
        writes = self._spans((dst,)) if span is None else [span] if span else []
        if (self._held is not None and channel == self._held[2]
                and not self._overtakes(src, dst)
                and self._waits(self._found(reads, writes), channel)):
            self.release()              # a command that waits anyway goes behind the store
        cmd_id = len(self.commands)
        load = self.hoist and not self.prefetching and src.mem != ONCHIP and dst.mem == ONCHIP
        if self.limit is not None and cmd_id >= self.limit:
            raise CommandLimit
        deps = self._access(reads, writes, self._dma_engine(channel), channel, load)
        if self.prefetching and self.behind is not None:
            deps = self._with(deps, self.behind)
        self.commands.append(DmaCopy(id=cmd_id, deps=deps, layer=self.layer, channel=channel,
                                     src=src, dst=dst))
        return cmd_id

    def _with(self, deps: tuple[int, ...], other: int) -> tuple[int, ...]:
        """`deps` and command `other`, unless a later command of its engine is among them."""
        engine, rank = self.engine_of[other], self.rank
        if any(self.engine_of[d] == engine and rank[d] >= rank[other] for d in deps):
            return deps
        return tuple(sorted(deps + (other,), key=rank.__getitem__))

    def fill(self, dst: TensorView, value: int, channel: int) -> int:
        cmd_id = len(self.commands)
        deps = self._sync((), (dst,), self._dma_engine(channel), channel)
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

    def in_program_order(self) -> list:
        """The commands in program order, numbered by it (their dependencies too); the emitter
        keeps that order, so a second call returns the same list."""
        order = sorted(range(len(self.commands)), key=self.rank.__getitem__)
        if all(i == p for p, i in enumerate(order)):
            return self.commands
        place = [0] * len(order)
        for p, i in enumerate(order):
            place[i] = p
        out, renumber = [], place.__getitem__
        for p, i in enumerate(order):
            cmd = self.commands[i]
            cmd.id, cmd.deps = p, tuple(map(renumber, cmd.deps))
            out.append(cmd)
        self.commands, self.rank = out, list(range(len(out)))
        return out


class HoistingEmitter(Emitter):
    """An emitter that moves each step's loads ahead in their DMA queue as they are emitted.

    A DMA queue runs in program order, so a load of a step's input from external memory that
    was emitted behind a store or an on-chip move waiting for compute, or behind weights
    staged for later layers, waits for them although its own data and buffer are ready. Each
    such load goes to just after the last command it conflicts with (nothing in between
    touches its bytes, so every value is the same), never ahead of an earlier load of its
    queue (loads keep their order) nor of its own step's commands (a step's tiles keep their
    pipeline: loads one tile ahead of compute and its stores). Staged weight copies keep their
    places. The dependencies are those of the program in that order: the commands a load
    passes conflict with none of its bytes, so what they found stays true, and on the bytes it
    reads it becomes the latest reader only where none of them read since."""

    hoist = True
