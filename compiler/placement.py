"""Where every tensor lives: on chip (resident), in the feature-map memory, or with the weights.

Intermediates stay on chip from producer to last consumer when their producer and all consumers
are NPU steps and first-fit placement over their lifetime succeeds within the resident share of
the buffer. Each step's tiles use the rest: everything above the resident tensors alive during
that step, so a step with few live tensors gets a large workspace.

Constants live with the weights; compiler/prefetch.py may also stage a copy of one on chip
some steps before its use (`stage`), or one copy of several small ones laid out together in
both places (`stage_pack`), and then their readers see the copy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npu_sim.isa.commands import ONCHIP, TensorView, dense, make_view
from npu_sim.isa.errors import DoesNotFitError

from .allocate import IntervalAllocator, align
from .ir import Graph, itemsize
from .steps import Step
from .view_moves import (moved_view, reads_in_place_off_chip, reshape_view, view_moves,
                         written_moves)

NPU_KINDS = {"mac", "vector", "dma"}
ON_CHIP_READERS = NPU_KINDS | {"alias"}      # a reshape reads nothing: its readers decide


@dataclass
class Location:
    mem: int
    addr: int


class Placement:
    def __init__(self, graph: Graph, steps: list[Step], memories: list[str], weights_mem: str,
                 fm_mem: str, onchip_size: int, resident_size: int, memory_sizes: dict,
                 pipelined: frozenset[str] = frozenset()):
        self.graph, self.steps = graph, steps
        self.pipelined = pipelined      # tensors of pipelined copies (compiler/batch_split.py)
        self.memories = memories
        self.weights_id = memories.index(weights_mem) + 1
        self.fm_id = memories.index(fm_mem) + 1
        self.alias: dict[str, str] = {}
        for step in steps:
            if step.kind == "alias":
                src = step.main.inputs[0]
                self.alias[step.output] = self.alias.get(src, src)
        self.virtual, origin, computed = view_moves(graph, steps, self.alias)
        self.onchip_size = onchip_size
        self.resident_size = resident_size
        self.staged: dict[str, int] = {}      # constant -> address of its on-chip copy
        # first constant of a pack -> (its copy's address on chip, bytes): the pack's
        # constants lie together with the weights and on chip, so one copy stages them all
        # (stage_pack, pack_home)
        self.packs: dict[str, tuple[int, int]] = {}
        self.pack_of: dict[str, str] = {}     # constant -> the first of its pack
        # constant -> its staged parts (address, first row, rows): its leading rows, staged
        # in runs of whole rows that may each have their own room and time
        self.prefixes: dict[str, list[tuple[int, int, int]]] = {}
        # constant -> (rows of each box its reader loads, that reader's plan before
        # prefetch): staged whole but copied box by box, its reader keeping those tiles
        self.streamed: dict[str, tuple] = {}
        # (constant, box) -> a copy of that box of it in the feature-map memory, which its
        # reader loads instead (compiler/buffering.py)
        self.buffered: dict[tuple[str, tuple], TensorView] = {}
        refused: set[str] = set()
        while True:
            self.written = {s: w for s, w in written_moves(graph, steps, self.alias,
                                                            self.virtual, onchip_size).items()
                            if s not in refused}
            self._place_all(steps, memory_sizes)
            # From external memory each tile's load of a view gathers its runs: the views
            # of a tensor that did not stay on chip become moves again unless their runs
            # are long (a transposed K from DRAM would pay a burst a byte).
            dropped = {r for r in computed
                       if getattr(self.loc.get(origin[r]), "mem", None) != ONCHIP
                       and not reads_in_place_off_chip(graph, self.alias, self.virtual, r,
                                                       resident_size)}
            spilled = {s for s, (t, _, _) in self.written.items() if self.loc[t].mem != ONCHIP}
            refused |= spilled
            if not dropped and not spilled:
                break
            for r in list(self.virtual):      # in step order: views of those views too
                if r in dropped or self.root(self.virtual[r][0]) in dropped:
                    dropped.add(r)
                    del self.virtual[r]
            computed -= dropped
        self.workspaces: list[tuple[int, int]] = []
        self._update_workspaces(len(steps))
        self._views: dict[tuple, TensorView] = {}    # view() of whole tensors, until stage()

    def _place_all(self, steps, memory_sizes):
        self.loc: dict[str, Location] = {}
        try:
            self._place(steps, memory_sizes, in_place=False)
        except DoesNotFitError:
            # Too many feature maps live at once: write chains' outputs over the inputs they
            # read last, which needs less memory at the peak (ResNet-50's residual adds).
            self.loc = {}
            self._place(steps, memory_sizes, in_place=True)

    def _update_workspaces(self, n_steps: int):
        """Each step tiles in whatever the resident tensors alive during it leave free."""
        self.workspaces = []
        for i in range(n_steps):
            top = align(max((a + s for a, s, f, l in self._resident.placed if f <= i <= l),
                            default=0))
            self.workspaces.append((top, self.onchip_size - top))

    def widen_workspaces(self):
        """Once everything resident is placed: a step whose largest free stretch of the buffer
        lies below a tensor living through it (the gap a dead intermediate left) tiles there
        instead of above them all."""
        for i, (top, size) in enumerate(self.workspaces):
            start, length = _longest_free(self._busy(i), self.onchip_size)
            if length > size:
                self.workspaces[i] = (start, length)

    def stage(self, name: str, first: int, last: int, limit: int, rows: int | None = None,
              row0: int = 0) -> bool:
        """Reserve on-chip room for a copy of constant `name` (or of its `rows` rows from
        `row0`, a part of its prefix) over steps [first, last], ending at or below address
        `limit`; False when it does not fit. Readers see a whole copy in place of the
        constant; a prefix through staged_box()."""
        size = self._staged_bytes(name, rows)
        addr, first, last = self._stage_room(size, first, last, limit)
        if addr is None:
            return False
        self._views.clear()
        if rows is None:
            self.staged[name] = addr
        else:
            self.prefixes.setdefault(name, []).append((addr, row0, rows))
        self._raise_floors(first, last, align(addr + size))
        return True

    def _stage_room(self, size: int, first: int, last: int, limit: int):
        """(address, first, last) of a staged copy's room over steps [first, last], or
        (None, ...). Where the step before or after on the other engine may run alongside its
        readers, the room is kept over that step too when it lies below that step's tile
        buffers anyway: there that step's writes would have to wait for the readers (a vector
        step's constants overwritten by the conv output whose rows it hands over)."""
        resident, aligned = self._resident, align(max(size, 1))
        addr = resident.find(size, first, last, limit)
        if addr is None:
            return None, first, last
        lo, hi = _overlap_start(self.steps, first), _overlap_end(self.steps, last)
        if (lo, hi) != (first, last):
            wide = resident.find(size, lo, hi, limit)
            if wide is not None and all(self._costs_no_room(j, wide, addr if first <= j <= last
                                                            else None, aligned)
                                        for j in range(lo, hi + 1)):
                addr, first, last = wide, lo, hi
        resident.take(addr, size, first, last)
        return addr, first, last

    def _costs_no_room(self, step: int, wide: int, narrow: int | None, size: int) -> bool:
        """Whether `size` bytes at `wide` during `step` leave its tile buffers as much room
        as at `narrow` (None: not there at all): below its floor, and its longest free
        stretch (where widen_workspaces() may move them) as long."""
        floor = self.workspaces[step][0]
        if wide + size > (floor if narrow is None else max(floor, narrow + size)):
            return False
        busy, mine = self._busy(step), [] if narrow is None else [(narrow, size)]
        return _longest_free(busy + [(wide, size)], self.onchip_size)[1] >= _longest_free(
            busy + mine, self.onchip_size)[1]

    def _busy(self, step: int) -> list[tuple[int, int]]:
        """(address, bytes) of the on-chip room taken during `step`."""
        return [(a, s) for a, s, f, l in self._resident.placed if f <= step <= l]

    def _raise_floors(self, first: int, last: int, end: int):
        """A new on-chip copy ending at `end` can only raise those steps' workspace floors."""
        for i in range(first, last + 1):
            top = max(self.workspaces[i][0], end)
            self.workspaces[i] = (top, self.onchip_size - top)

    def stage_pack(self, names: list[str], first: int, last: int, limit: int) -> bool:
        """Lay constants `names` out together, in this order, where the first of them lay
        with the weights (the others keep their order), and reserve one on-chip copy of them
        over steps [first, last], ending at or below `limit`; False when it does not fit."""
        sizes = [align(max(self.graph.tensors[n].nbytes, 1)) for n in names]
        addr, first, last = self._stage_room(sum(sizes), first, last, limit)
        if addr is None:
            return False
        self._views.clear()
        order = [n for _, n in sorted((loc.addr, n) for n, loc in self.loc.items() if
                                      loc.mem == self.weights_id and self.graph.tensors[n].is_const)]
        at = next(i for i, n in enumerate(order) if n in names)
        rest = [n for n in order if n not in names]
        cursor = 0
        for name in rest[:at] + names + rest[at:]:
            self.loc[name] = Location(self.weights_id, cursor)
            cursor = align(cursor + max(self.graph.tensors[name].nbytes, 1))
        for name in names:
            self.staged[name] = addr + self.loc[name].addr - self.loc[names[0]].addr
            self.pack_of[name] = names[0]
        self.packs[names[0]] = (addr, sum(sizes))
        self._raise_floors(first, last, align(addr + sum(sizes)))
        return True

    def buffer(self, name: str, boxes, first: int, last: int) -> bool:
        """Reserve room in the feature-map memory over steps [first, last] for dense copies
        of `boxes` of constant `name`, laid out one after another; False when it does not
        fit beside the feature maps living then."""
        t = self.graph.tensors[name]
        sizes = [align(itemsize(t.dtype) * int(np.prod([n for _, n in box]))) for box in boxes]
        addr = self._fm.place(sum(sizes), first, last)
        if addr is None:
            return False
        for box, size in zip(boxes, sizes):
            self.buffered[name, box] = dense(self.fm_id, addr, [n for _, n in box], t.dtype)
            addr += size
        self.fm_bytes = self._fm.high_water
        return True

    def pack_home(self, lead: str) -> TensorView:
        """The bytes of the pack `lead` begins with the weights (a later pack moves them)."""
        return dense(self.weights_id, self.loc[lead].addr, (self.packs[lead][1],), "int8")

    def mark(self) -> tuple:
        """The state undo() returns to: stage() calls of prefix parts after it are undone."""
        return (len(self._resident.placed), self._resident.high_water, list(self.workspaces),
                {name: len(parts) for name, parts in self.prefixes.items()})

    def undo(self, mark: tuple) -> None:
        placed, high_water, workspaces, parts = mark
        del self._resident.placed[placed:]
        self._resident.high_water, self.workspaces = high_water, workspaces
        for name in list(self.prefixes):
            if name in parts:
                del self.prefixes[name][parts[name]:]
            else:
                del self.prefixes[name]
        self._views.clear()

    def can_stage(self, name: str, first: int, last: int, limit: int,
                  rows: int | None = None) -> bool:
        """Whether stage() with these arguments would succeed (nothing is reserved)."""
        return self._resident.find(self._staged_bytes(name, rows), first, last, limit) is not None

    def _staged_bytes(self, name: str, rows: int | None) -> int:
        t = self.graph.tensors[name]
        return t.nbytes if rows is None else t.nbytes // t.shape[0] * rows

    def staged_copy(self, name: str, part: int | None = None) -> TensorView | None:
        """The on-chip copy of a staged constant, or of part `part` of its prefix (whole
        rows), or None."""
        t = self.graph.tensors[name]
        if part is not None:
            addr, _, rows = self.prefixes[name][part]
            return dense(ONCHIP, addr, (rows,) + tuple(t.shape[1:]), t.dtype)
        if name in self.staged:
            return dense(ONCHIP, self.staged[name], t.shape, t.dtype)
        return None

    def staged_box(self, name: str, box, dtype: str) -> TensorView | None:
        """The on-chip copy of `box` of a constant whose leading rows are staged, when the box
        lies in one of their parts and spans every other dim; else None."""
        root = self.root(name)
        if root not in self.prefixes:
            return None
        (start, count), shape = box[0], self.graph.tensors[root].shape
        if any(b != (0, n) for b, n in zip(box[1:], shape[1:])):
            return None
        for part, (_, row0, rows) in enumerate(self.prefixes[root]):
            if row0 <= start and start + count <= row0 + rows:
                copy = self.staged_copy(root, part)
                return TensorView(ONCHIP, copy.addr + (start - row0) * copy.strides[0],
                                  tuple(n for _, n in box), copy.strides, dtype)
        return None

    def root(self, name: str) -> str:
        return self.alias.get(name, name)

    def _place(self, steps, memory_sizes, in_place: bool):
        g = self.graph
        producer_kind, last_use, consumer_kinds, first_def = {}, {}, {}, {}
        for i, step in enumerate(steps):
            for name in step.inputs:
                r = self.root(name)
                while True:         # reading a view move's result reads its source
                    last_use[r] = i
                    consumer_kinds.setdefault(r, set()).add(step.kind)
                    if r not in self.virtual:
                        break
                    r = self.root(self.virtual[r][0])
            r = self.root(step.output)
            r = self.written[r][0] if r in self.written else r   # made where it is moved to
            if step.kind != "alias" and r not in self.virtual:
                producer_kind.setdefault(r, step.kind)
                first_def.setdefault(r, i)
        self._produced = set(first_def)
        _overlapped(steps, last_use, self.pipelined)
        end = len(steps)
        pinned = {self.root(n) for n in g.inputs + g.outputs}
        for n in g.outputs:
            last_use[self.root(n)] = end
        resident = self._resident = IntervalAllocator(self.resident_size)
        weights_cursor = 0
        for name, t in g.tensors.items():
            if t.is_const and self.root(name) == name and (name in last_use or name in g.outputs):
                self.loc[name] = Location(self.weights_id, weights_cursor)
                weights_cursor = align(weights_cursor + max(t.nbytes, 1))
        self.weights_bytes = weights_cursor
        weights_mem, fm_mem = self.memories[self.weights_id - 1], self.memories[self.fm_id - 1]
        if weights_cursor > memory_sizes[weights_mem]:
            raise DoesNotFitError(f"the constants ({weights_cursor:,} B) do not fit in {weights_mem} "
                                  f"({memory_sizes[weights_mem]:,} B); raise memories.{weights_mem}.size")
        # Feature maps share the memory with the weights when the config says so.
        fm_base = weights_cursor if self.fm_id == self.weights_id else 0
        fm = IntervalAllocator(memory_sizes[fm_mem] - fm_base, fm_base)
        # Variables keep their state from run to run: storage of their own, never reused.
        self.variables = [n for n, t in g.tensors.items() if t.variable]
        for name in self.variables:
            addr = fm.place(g.tensors[name].nbytes, -1, end)
            if addr is None:
                raise DoesNotFitError(f"variable '{name}' does not fit in {fm_mem} ({fm.capacity:,} B "
                                      f"free); raise memories.{fm_mem}.size")
            self.loc[name] = Location(self.fm_id, addr)
        # With in_place, an elementwise chain's output written over an input it reads last
        # shares its feature-map buffer (on chip each keeps its own).
        share = self._in_place(steps, last_use, pinned) if in_place else {}
        span: dict[str, tuple[int, int]] = {}
        for out, src in share.items():
            lo, hi = span.get(src, (first_def.get(src, -1), last_use.get(src, -1)))
            span[src] = (min(lo, first_def[out]), max(hi, last_use.get(out, first_def[out])))
        shared: dict[str, Location] = {}
        # Largest first (as in TFLite's arena planner): first-fit over lifetimes then leaves
        # fewer gaps too small for the tensors that come later.
        order = [n for n in g.inputs] + [self.root(s.output) for s in steps if s.kind != "alias"]
        order.sort(key=lambda n: -g.tensors[n].nbytes)
        for name in order:
            if name in self.loc or name in self.virtual or name in self.written:
                continue
            t = g.tensors[name]
            first = first_def.get(name, -1)
            last = last_use.get(name, first)
            kinds = consumer_kinds.get(name, set())
            if name not in pinned and producer_kind.get(name) in NPU_KINDS and kinds <= ON_CHIP_READERS:
                addr = resident.place(t.nbytes, first, last)
                if addr is not None:
                    self.loc[name] = Location(ONCHIP, addr)
                    continue
            group = share.get(name, name)
            if group in shared:
                self.loc[name] = shared[group]
                continue
            first, last = span.get(group, (first, last))
            addr = fm.place(t.nbytes, first, last)
            if addr is None:
                raise DoesNotFitError(
                    f"tensor '{name}' ({t.nbytes:,} B) does not fit in {fm_mem} ({fm.capacity:,} B "
                    f"free) next to the other live feature maps; raise memories.{fm_mem}.size")
            self.loc[name] = Location(self.fm_id, addr)
            if group in span:
                shared[group] = self.loc[name]
        self.fm_bytes = fm.high_water
        self._fm = fm

    @staticmethod
    def _shared_root(share: dict[str, str], name: str) -> str:
        while name in share:
            name = share[name]
        return name

    def _in_place(self, steps, last_use, pinned) -> dict[str, str]:
        """Outputs of elementwise chains written over an input they read for the last time
        (same shape and element size): each tile reads its box of the input before its store
        writes the same box of the output, and no other tile reads it, so the values are the
        same and the pair takes one buffer, not two (a residual add's output over one of its
        inputs). Output -> the input it overwrites."""
        g, share = self.graph, {}
        for i, step in enumerate(steps):
            if step.kind != "vector" or not step.chain or step.output in pinned \
                    or step.output in self.written:      # stored in its move's result
                continue
            out = g.tensors[step.output]
            # Not over a cascaded conv's input: its boxes reach into other tiles' (a halo),
            # and each channel slice of the chain reads them again.
            # Compared by root, so an alias of that input (a RESHAPE) counts as the input.
            fed = {self.root(n) for n in step.producer.inputs} if step.producer else set()
            for name in dict.fromkeys(n for n in step.inputs if self.root(n) not in fed):
                t = g.tensors[name]
                if (self.root(name) == name and name not in pinned and not t.is_const
                        and not t.variable and last_use.get(name) == i and t.shape == out.shape
                        and t.nbytes == out.nbytes and name in self._produced):
                    share[step.output] = name
                    break
        for out in list(share):                  # chains of pairs share one buffer
            share[out] = self._shared_root(share, out)
        return share

    def on_chip(self, name: str) -> bool:
        loc = self.find(name)
        return loc is not None and loc.mem == ONCHIP

    def location(self, name: str) -> Location:
        """Where readers find the tensor: its on-chip copy when it is staged."""
        loc = self.find(name)
        if loc is None:
            raise KeyError(name)
        return loc

    def find(self, name: str) -> Location | None:
        """location(), or None for a tensor stored nowhere (a cascaded intermediate); a view
        move's result is found where its source is."""
        root = self.root(name)
        while root in self.virtual:
            root = self.root(self.virtual[root][0])
        if root in self.written:
            root = self.written[root][0]
        if root in self.staged:
            return Location(ONCHIP, self.staged[root])
        return self.loc.get(root)

    def home(self, name: str) -> TensorView:
        """The whole tensor where it is stored (a staged constant's source)."""
        t = self.graph.tensors[name]
        loc = self.loc[self.root(name)]
        return dense(loc.mem, loc.addr, t.shape, t.dtype)

    def view(self, name: str, box=None, dtype: str | None = None) -> TensorView:
        full = self._views.get((name, dtype))
        if full is None:
            t = self.graph.tensors[name]
            if self.root(name) in self.virtual:
                v = self._move_view(name)
                full = TensorView(v.mem, v.addr, v.shape, v.strides, dtype or t.dtype)
            elif name in self.written:
                target, offset, strides = self.written[name]
                v, size = self.view(target), itemsize(t.dtype)
                full = TensorView(v.mem, v.addr + offset * size, t.shape,
                                  tuple(st * size for st in strides), dtype or t.dtype)
            else:
                loc = self.location(name)
                full = dense(loc.mem, loc.addr, t.shape, dtype or t.dtype)
            self._views[name, dtype] = full
        if box is None:
            return full
        addr, shape = full.addr, []
        for (start, n), stride in zip(box, full.strides):
            addr += start * stride
            shape.append(n)
        return make_view((full.mem, addr, tuple(shape), full.strides, full.dtype))

    def _move_view(self, name: str) -> TensorView:
        """The strided view of its source that a view move's result (or a reshape of it) is."""
        root = self.root(name)
        src, op = self.virtual[root]
        view = moved_view(self.view(src), op, self.graph)
        return view if root == name else reshape_view(view, self.graph.tensors[name].shape)

    def const_segments(self):
        """(mem, addr, bytes) of every constant placed in the weights memory; a pack's as one
        segment (one copy reads them all)."""
        packs = {lead: bytearray(size) for lead, (_, size) in self.packs.items()}
        for name, loc in self.loc.items():
            t = self.graph.tensors[name]
            if t.is_const:
                data = np.ascontiguousarray(t.data, dtype=t.data.dtype)
                if t.dtype == "bool":
                    data = data.astype(np.uint8)
                lead = self.pack_of.get(name)
                if lead is None:
                    yield loc.mem, loc.addr, data.tobytes()
                    continue
                at = loc.addr - self.loc[lead].addr
                packs[lead][at:at + data.nbytes] = data.tobytes()
        for lead, data in packs.items():
            yield self.weights_id, self.loc[lead].addr, bytes(data)


def _longest_free(busy: list[tuple[int, int]], size: int) -> tuple[int, int]:
    """(start, bytes) of the first longest stretch of [0, size) that none of the (address,
    bytes) `busy` covers."""
    start = length = cursor = 0
    for a, s in sorted(busy) + [(size, 0)]:
        if a - cursor > length:
            start, length = cursor, a - cursor
        cursor = max(cursor, align(a + s))
    return start, length


def _overlap_end(steps, i: int) -> int:
    """The last step that may run while step `i` does: the next one where it computes on the
    other engine (its tiles start on the rows step `i` finishes, or on data of their own), so
    what step `i` reads keeps its room through it; else `i` itself."""
    if i < len(steps) - 1 and {steps[i].kind, steps[i + 1].kind} == {"mac", "vector"}:
        return i + 1
    return i


def _overlap_start(steps, i: int) -> int:
    """The first step that may still run while step `i` does (_overlap_end()'s converse)."""
    return i - 1 if i > 0 and _overlap_end(steps, i - 1) == i else i


def _overlapped(steps, last_use: dict, pipelined) -> None:
    """Keep each tensor of a pipeline that the array or the vector unit reads last alive up
    to the step before that engine's next one: the other engine's steps in between run
    meanwhile, and one of them writing over the tensor would have to wait for the reader."""
    following, after = {}, [len(steps)] * len(steps)
    for i in range(len(steps) - 1, -1, -1):
        after[i] = following.get(steps[i].kind, len(steps))
        following[steps[i].kind] = i
    for name, i in last_use.items():
        if name in pipelined and 0 <= i < len(steps) and steps[i].kind in ("mac", "vector") \
                and after[i] < len(steps):
            last_use[name] = after[i] - 1
