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

NPU_KINDS = {"mac", "vector", "dma"}
ON_CHIP_READERS = NPU_KINDS | {"alias"}      # a reshape reads nothing: its readers decide


@dataclass
class Location:
    mem: int
    addr: int


class Placement:
    def __init__(self, graph: Graph, steps: list[Step], memories: list[str], weights_mem: str,
                 fm_mem: str, onchip_size: int, resident_size: int, memory_sizes: dict):
        self.graph = graph
        self.memories = memories
        self.weights_id = memories.index(weights_mem) + 1
        self.fm_id = memories.index(fm_mem) + 1
        self.alias: dict[str, str] = {}
        for step in steps:
            if step.kind == "alias":
                src = step.main.inputs[0]
                self.alias[step.output] = self.alias.get(src, src)
        self.virtual, origin, computed = _view_moves(graph, steps, self.alias)
        self.onchip_size = onchip_size
        self.resident_size = resident_size
        self.staged: dict[str, int] = {}      # constant -> address of its on-chip copy
        # first constant of a pack -> (its copy's address on chip, bytes): the pack's
        # constants lie together with the weights and on chip, so one copy stages them all
        # (stage_pack, pack_home)
        self.packs: dict[str, tuple[int, int]] = {}
        self.pack_of: dict[str, str] = {}     # constant -> the first of its pack
        self.prefixes: dict[str, tuple[int, int]] = {}   # constant -> (address, leading rows)
        refused: set[str] = set()
        while True:
            self.written = {s: w for s, w in _written_moves(graph, steps, self.alias,
                                                            self.virtual, onchip_size).items()
                            if s not in refused}
            self._place_all(steps, memory_sizes)
            # A compute step reads a view in place only on chip: from external memory each
            # tile's load would gather short runs (a transposed K from DRAM, a burst a byte).
            # The views of a tensor that did not stay on chip become moves again.
            off = {origin[r] for r in computed
                   if getattr(self.loc.get(origin[r]), "mem", None) != ONCHIP}
            spilled = {s for s, (t, _, _) in self.written.items() if self.loc[t].mem != ONCHIP}
            refused |= spilled
            if not off and not spilled:
                break
            dropped = {r for r in computed if origin[r] in off}
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
            busy = sorted((a, align(a + s)) for a, s, f, l in self._resident.placed if f <= i <= l)
            cursor = 0
            for lo, hi in busy + [(self.onchip_size, self.onchip_size)]:
                if lo - cursor > size:
                    top, size = cursor, lo - cursor
                cursor = max(cursor, hi)
            self.workspaces[i] = (top, size)

    def stage(self, name: str, first: int, last: int, limit: int, rows: int | None = None) -> bool:
        """Reserve on-chip room for a copy of constant `name` (or of its first `rows` rows)
        over steps [first, last], ending at or below address `limit`; False when it does not
        fit. Readers see a whole copy in place of the constant; a prefix through
        staged_box()."""
        size = self._staged_bytes(name, rows)
        addr = self._resident.place(size, first, last, limit)
        if addr is None:
            return False
        self._views.clear()
        if rows is None:
            self.staged[name] = addr
        else:
            self.prefixes[name] = (addr, rows)
        self._raise_floors(first, last, align(addr + size))
        return True

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
        addr = self._resident.place(sum(sizes), first, last, limit)
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

    def pack_home(self, lead: str) -> TensorView:
        """The bytes of the pack `lead` begins with the weights (a later pack moves them)."""
        return dense(self.weights_id, self.loc[lead].addr, (self.packs[lead][1],), "int8")

    def can_stage(self, name: str, first: int, last: int, limit: int,
                  rows: int | None = None) -> bool:
        """Whether stage() with these arguments would succeed (nothing is reserved)."""
        return self._resident.find(self._staged_bytes(name, rows), first, last, limit) is not None

    def _staged_bytes(self, name: str, rows: int | None) -> int:
        t = self.graph.tensors[name]
        return t.nbytes if rows is None else t.nbytes // t.shape[0] * rows

    def staged_copy(self, name: str) -> TensorView | None:
        """The on-chip copy of a staged constant or prefix (whole rows), or None."""
        t = self.graph.tensors[name]
        if name in self.staged:
            return dense(ONCHIP, self.staged[name], t.shape, t.dtype)
        if name in self.prefixes:
            addr, rows = self.prefixes[name]
            return dense(ONCHIP, addr, (rows,) + tuple(t.shape[1:]), t.dtype)
        return None

    def staged_box(self, name: str, box, dtype: str) -> TensorView | None:
        """The on-chip copy of `box` of a constant whose leading rows are staged, when the box
        lies in them and spans every other dim; else None."""
        root = self.root(name)
        if root not in self.prefixes:
            return None
        (start, count), shape = box[0], self.graph.tensors[root].shape
        if start + count > self.prefixes[root][1] or any(
                b != (0, n) for b, n in zip(box[1:], shape[1:])):
            return None
        copy = self.staged_copy(root)
        return TensorView(ONCHIP, copy.addr + start * copy.strides[0],
                          tuple(n for _, n in box), copy.strides, dtype)

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
        view = _moved(self.view(src), op, self.graph)
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


# Data-movement steps that are views of their input: their result need not exist when only
# other data-movement steps read it, which then read the composed view (one DMA, not two), or
# when MAC and vector steps read it from a tensor they produce among themselves (on chip),
# whose commands then take the strided view as their operand, as the array's and the vector
# unit's address generators step through any strides (the heads' q, k and v of a QKV GEMM).
VIEW_MOVES = frozenset({"SLICE", "TRANSPOSE"})
VIEW_READERS = frozenset({"SLICE", "TRANSPOSE", "CONCAT", "PAD", "TILE", "REVERSE"})
COMPUTE_KINDS = frozenset({"mac", "vector"})
# Bytes of the shortest contiguous run a compute step reads in place: the banks serve whole
# words (npu_sim.cost charges a compute view's runs by the word, as a DMA's), so a gather of
# shorter runs (a transposed K, one byte a word) stays a move, done once, instead of every
# tile that reads it paying a word a byte; a head's rows of q or v (16-64 B) read in place.
MIN_COMPUTE_RUN = 16


def _moved(src: TensorView, op, graph: Graph) -> TensorView:
    """The view `op` (a VIEW_MOVES operator) makes of `src`."""
    if op.op == "TRANSPOSE":
        perms = op.attrs["perms"]
        return TensorView(src.mem, src.addr, tuple(src.shape[i] for i in perms),
                          tuple(src.strides[i] for i in perms), src.dtype)
    start = [int(v) for v in np.asarray(graph.const(op.inputs[1])).reshape(-1)]
    shape = graph.tensors[op.outputs[0]].shape
    return TensorView(src.mem, src.addr + sum(a * s for a, s in zip(start, src.strides)),
                      tuple(shape), src.strides, src.dtype)


def reshape_view(view: TensorView, shape) -> TensorView | None:
    """`view` with the same elements in row-major order as `shape`, by strides alone (the runs
    of dims merged or split must be contiguous in one another); None when it takes a copy."""
    old = [(n, s) for n, s in zip(view.shape, view.strides) if n != 1]
    new = [n for n in shape if n != 1]
    strides, i = [], 0
    for n in new:
        if i >= len(old):
            return None
        size, run = old[i][0], [old[i]]
        i += 1
        while size < n and i < len(old):   # merge: each dim must step over the next's extent
            if run[-1][1] != old[i][1] * old[i][0]:
                return None
            size *= old[i][0]
            run.append(old[i])
            i += 1
        if size == n:
            strides.append(run[-1][1])
            continue
        if size > n and len(run) == 1 and size % n == 0:    # split one dim
            inner = size // n
            strides.append(run[0][1] * inner)
            old.insert(i, (inner, run[0][1]))
            continue
        return None
    if i != len(old):
        return None
    full, step = [], view.itemsize          # a dim of one takes the stride of a dense layout
    for n in reversed(shape):
        step = strides.pop() if n != 1 else step
        full.append(step)
        step *= n
    return TensorView(view.mem, view.addr, tuple(shape), tuple(reversed(full)), view.dtype)


def _view_moves(graph: Graph, steps, alias: dict[str, str]) -> tuple[dict, dict, set]:
    """Results of VIEW_MOVES steps read only by data-movement steps among VIEW_READERS, or
    only by MAC and vector steps when the move's (composed) source is made by one of them,
    directly or through reshapes a strided view can express: (result -> (source, operator),
    result -> the stored tensor it is a view of, the results compute steps read)."""
    pinned = {alias.get(n, n) for n in graph.inputs + graph.outputs}
    readers: dict[str, list] = {}
    names: dict[str, set] = {}
    made_by: dict[str, str] = {}
    for step in (s for s in steps if s.kind != "alias"):    # a reshape's readers decide
        made_by[step.output] = step.kind
        for name in step.inputs:
            readers.setdefault(alias.get(name, name), []).append(step)
            names.setdefault(alias.get(name, name), set()).add(name)
    out, probes, origin = {}, {}, {}      # result -> its view of a dense origin, that origin
    computed_views = set()
    for step in steps:
        op = step.main
        if step.kind != "dma" or op.op not in VIEW_MOVES or op.is_variable_access \
                or step.output in pinned or not readers.get(step.output):
            continue
        src = alias.get(op.inputs[0], op.inputs[0])
        base = origin.get(src, src)
        moves = all(r.kind == "dma" and r.main.op in VIEW_READERS and not r.main.is_variable_access
                    for r in readers[step.output])
        computed = all(r.kind in COMPUTE_KINDS for r in readers[step.output]) and \
            made_by.get(base) in COMPUTE_KINDS and base not in pinned
        if not (moves or computed):
            continue
        t = graph.tensors[step.output]
        shape = graph.tensors[op.inputs[0]].shape
        probe = dense(0, 0, shape, t.dtype) if src not in probes else \
            reshape_view(probes[src], shape)
        if probe is None:
            continue
        probe = _moved(probe, op, graph)
        if not moves and probe.contiguous_run() < MIN_COMPUTE_RUN:
            continue
        if all(reshape_view(probe, graph.tensors[n].shape) is not None
               for n in names[step.output] if n != step.output):
            out[step.output] = (op.inputs[0], op)
            probes[step.output], origin[step.output] = probe, base
            if not moves:
                computed_views.add(step.output)
    return out, origin, computed_views


# Data-movement steps whose whole input a MAC or vector step makes for them alone: that step
# writes each element where the move would put it (its output address generator steps
# through the strides), and the move emits nothing (the heads' outputs transposed or
# concatenated back into tokens x channels).
FILLED_MOVES = frozenset({"TRANSPOSE", "CONCAT"})


def _written_moves(graph: Graph, steps, alias: dict[str, str], virtual: dict[str, tuple],
                   onchip_size: int) -> dict[str, tuple]:
    """Tensors made by a MAC or vector step and read only by one TRANSPOSE or CONCAT (directly
    or through view moves), which places each of their elements once: tensor -> (the move's
    result, element offset, element strides) of the strided view it is written as. Only
    moves whose result fits the on-chip buffer, where it must stay, are considered (working
    out the places takes a few integers per element)."""
    made_by = {s.output: s.kind for s in steps if s.kind != "alias"}
    readers: dict[str, set] = {}
    for i, step in enumerate(steps):
        if step.kind == "alias" or step.output in virtual:
            continue
        for name in step.inputs:
            r = alias.get(name, name)
            while r in virtual:
                r = alias.get(virtual[r][0], virtual[r][0])
            readers.setdefault(r, set()).add(i)
    pinned = {alias.get(n, n) for n in graph.inputs + graph.outputs}
    out = {}
    for i, step in enumerate(steps):
        op = step.main
        if step.kind != "dma" or op.op not in FILLED_MOVES or op.is_variable_access \
                or step.output in pinned or step.output in virtual \
                or graph.tensors[step.output].nbytes > onchip_size:
            continue
        views = [_origin_view(graph, alias, virtual, n) for n in op.inputs]
        source = views[0][0]
        if any(v is None or v[0] != source for v in views) or readers.get(source) != {i} \
                or made_by.get(source) not in COMPUTE_KINDS or source in pinned:
            continue
        placed = _written_view(graph.tensors[source].shape, graph.tensors[step.output].shape,
                               op, [v for _, v in views])
        if placed is not None and _run(placed[1], graph.tensors[source].shape,
                                       itemsize(graph.tensors[source].dtype)) >= MIN_COMPUTE_RUN:
            out[source] = (step.output, *placed)
    return out


def _origin_view(graph: Graph, alias, virtual, name: str):
    """(stored tensor, element view of it) that `name` is, through reshapes and view moves;
    None when a reshape takes a copy."""
    root = alias.get(name, name)
    if root in virtual:
        src, op = virtual[root]
        inner = _origin_view(graph, alias, virtual, src)
        if inner is None:
            return None
        base, view = inner[0], _moved(inner[1], op, graph)
    else:
        base, view = root, dense(0, 0, graph.tensors[root].shape, "int8")
    view = reshape_view(view, graph.tensors[name].shape)
    return None if view is None else (base, view)


def _written_view(shape, out_shape, op, views) -> tuple[int, tuple] | None:
    """(offset, strides) in elements of the move's output at which each element of a source
    of `shape` lands, when the move (TRANSPOSE or CONCAT of element views of the source) puts
    every source element once and the places form one strided view; else None."""
    size = int(np.prod(shape, dtype=np.int64))
    if int(np.prod(out_shape, dtype=np.int64)) != size or any(
            st < 0 for v in views for st in v.strides):
        return None
    index = np.arange(size, dtype=np.int64)

    def gather(v):
        return np.lib.stride_tricks.as_strided(index[v.addr:], v.shape,
                                               [st * index.itemsize for st in v.strides])
    if op.op == "TRANSPOSE":
        placed = gather(_moved(views[0], op, None))
    else:
        placed, offset, axis = np.empty(out_shape, np.int64), 0, op.attrs["axis"]
        for v in views:
            box = tuple(slice(offset, offset + n) if d == axis else slice(None)
                        for d, n in enumerate(v.shape))
            placed[box] = gather(v)
            offset += v.shape[axis]
    where = np.full(size, -1, np.int64)
    where[placed.ravel()] = np.arange(size, dtype=np.int64)
    if (where < 0).any():
        return None                     # some element is placed twice, another never
    where = where.reshape(shape)
    strides = tuple(int(np.take(where, 1, axis=d).flat[0] - where.flat[0]) if n > 1 else 0
                    for d, n in enumerate(shape))
    expected = np.full(shape, where.flat[0], np.int64)
    for d, (n, st) in enumerate(zip(shape, strides)):
        expected += (np.arange(n, dtype=np.int64) * st).reshape(
            [n if i == d else 1 for i in range(len(shape))])
    if not np.array_equal(where, expected):
        return None
    return int(where.flat[0]), strides


def _run(strides, shape, itemsize: int) -> int:
    """Bytes of the innermost contiguous run of a view with these element strides."""
    return TensorView(0, 0, tuple(shape), tuple(st * itemsize for st in strides),
                      "int8").contiguous_run() * itemsize
