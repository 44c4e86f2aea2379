"""Lower each step to commands: tiled MAC/vector operations, DMA data movement, host fallback."""
from __future__ import annotations

import dataclasses

from npu_sim.isa.commands import ONCHIP, TensorView, dense, make_view
from npu_sim.isa.errors import DoesNotFitError
from npu_sim.isa.opcodes import OPCODES

from .allocate import align
from .assembly import block_parts, box_view, plan as plan_assembly
from .buffering import Buffered, latency_buffer, third_buffer
from .cascade import cascade_space
from .lowering import DMA_MOVES, TILE_SPACES, Context
from .placement import Placement
from .staging import (block_views, dma_cycles, permute_cycles, permute_operands,
                      plan as plan_staging, split_queues, store_pieces)
from .steps import Step
from .tiling import (exact_plan, iterate_tiles, minimum_working_set, plan_tiles, row_dim,
                     within_buffer)

PRELOAD_CHUNK_BYTES = 16 * 1024
PRELOAD_CHUNK_CYCLES = 1024       # four simulator bursts: ports are shared at that granularity


class Lowering:
    def __init__(self, graph, placement: Placement, emitter, hardware,
                 cost_per_byte, tile_overhead: float, memory_cost=lambda mem: 0.0,
                 handoffs: set[str] = frozenset(), room_slack: float = 1.25, port_cost=None,
                 searches: Lowering | None = None):
        self.g, self.p, self.em = graph, placement, emitter
        self.channels = hardware.dma.channels
        self.hw = hardware
        self._workspace = (0, 0)      # a data-movement step's room for staging buffers
        self._probe: list[int] | None = None    # staging_need(): buffer bytes, nothing emitted
        self.ctx = Context(graph, placement.on_chip, cost_per_byte, hardware,
                           lambda name: getattr(placement.find(name), "mem", 0))
        if searches:
            self.ctx.share_costs(searches.ctx)
        self.tile_overhead = tile_overhead
        self.memory_cost = memory_cost
        # cycles per byte of a memory's port alone, the DMA's own rate apart: what a copy
        # within one memory pays twice (compiler/staging.dma_cycles)
        self.port_cost = port_cost or memory_cost
        # Tile searches, keyed by what they depend on (shapes, where operands live, budget),
        # so a lowering of the same graph's steps placed anew reuses those of `searches`.
        self._plans: dict[tuple, object] = searches._plans if searches else {}
        self._candidates: dict[tuple, dict] = \
            searches._candidates if searches else {}  # per space: its search levels' plans
        self._boxes: dict[tuple, dict] = \
            searches._boxes if searches else {}       # per steps' shape: their tiles' box sizes
        self._deep_plans: dict[tuple, object] = {}    # (plan key, staging) -> _deepened()
        # Outputs of steps that hand data to or from a step on the other compute engine.
        self.handoffs = handoffs
        self.room_slack = room_slack
        self._step = 0                                # steps lowered so far
        self._output = ""                             # the output of the step being lowered
        self._moves = 0                               # data-movement steps lowered so far
        self._used: list[tuple[int, int, int]] = []   # (step, lo, hi) of recent steps' buffers
        self._stage_columns: dict[tuple, dict] = {}   # _expand_stage() by stage view

    def plan(self, step: Step, budget: int):
        """(space, opcode, attrs, plan) of a tiled step given `budget` bytes of workspace; the
        plan is None when not even the smallest tile fits."""
        build = cascade_space if step.producer else TILE_SPACES.lookup(step.main.op, step.main.describe())
        space, opcode, attrs = build(step, self.ctx)
        stream = row_dim(space) if step.output in self.handoffs else ""
        if stream:
            space = dataclasses.replace(space, stream=stream, levels={**space.levels, stream: 0})
        # Steps of one shape (repeated blocks) share their search: its boxes and compute
        # cycles, and its plans where their operands live alike.
        kind = (_shape_of(self.g, step), stream)
        shape = kind + (tuple((o.on_chip, o.cost_per_byte, o.lane)
                              for o in space.inputs + [space.output]),)
        key = shape + (budget,)
        if key not in self._plans:
            self._plans[key] = plan_tiles(space, budget, self.tile_overhead,
                                          self._candidates.setdefault(shape, {}),
                                          self._boxes.setdefault(kind, {}), self.room_slack)
        # the third buffer's test counts the loads of this placement's staging
        roots = [self.p.root(o.tensor) for o in space.inputs]
        streamed = [r for r, o in zip(roots, space.inputs) if o.on_chip and r in self.p.streamed]
        deep = (key, tuple(tuple(self.p.prefixes.get(r, ())) for r in roots), tuple(streamed))
        if deep not in self._deep_plans:
            plan = self._plans[key]
            if plan is not None and streamed:
                # Its constants come in box by box (prefetch.py): it keeps the tiles it had
                # before they were staged, so each tile waits for its own boxes only.
                before = self.p.streamed[streamed[0]][1]
                kept = exact_plan(space, before.sizes, before.order, self.tile_overhead,
                                  self._boxes.setdefault(kind, {}))
                plan = kept if kept.working_set <= budget else plan
            self._deep_plans[deep] = self._deepened(space, plan, budget)
        return space, opcode, attrs, self._deep_plans[deep]

    def _deepened(self, space, plan, budget: int):
        """`plan` with a third buffer, where the budget has room for it, for the weights
        buffering may serve in part from a faster memory (buffering.third_buffer), else for a
        feature-map input whose loads wait out the memory's latency (latency_buffer)."""
        role = third_buffer(space, plan, self.p, self.memory_cost, self.channels) or \
            latency_buffer(space, plan, self.p, self.hw)
        if role is None:
            return plan
        size = plan.working_set + align(plan.buffer_bytes[role])
        if size > budget:
            return plan
        return dataclasses.replace(plan, buffers={**plan.buffers, role: 3}, working_set=size)

    def preload(self, items: list[tuple[str, int | Buffered | None]]):
        """Copy staged constants (or part `part` of a prefix) from their homes to their
        on-chip copies, `items` (name, part) queued together on the constants' queue, which
        brings them in the order their readers need them. A copy goes in chunks of whole rows
        (at least PRELOAD_CHUNK_BYTES, about PRELOAD_CHUNK_CYCLES of transfer each) so a long
        copy shares the memory port with the loads of the steps it overlaps; a streamed
        constant's in its reader's boxes, the constants of one reader taking turns so its
        first tile waits for the first box of each."""
        self.em.prefetching = True
        try:
            boxes = []
            for name, part in items:
                if isinstance(part, Buffered):
                    self._buffer(name, part)
                else:
                    boxes.append(list(self._preload_boxes(name, part)))
            # a graph input (prefetch.py) on the activations' queue, beside the weights'
            queue = self._channel("const" if self.g.tensors[items[0][0]].is_const else "act")
            for k in range(max(map(len, boxes), default=0)):
                for own in boxes:
                    for src, dst in own[k] if k < len(own) else ():
                        self.em.copy(src, dst, queue)
        finally:
            self.em.prefetching = False

    def _preload_boxes(self, name: str, part: int | None):
        """The chunks, (src, dst) each, of a staged constant's copy: in one list per box of
        its reader's for a streamed constant, else in one list."""
        if name in self.p.packs:                     # one copy of the whole pack
            addr, size = self.p.packs[name]
            yield [(self.p.pack_home(name), dense(ONCHIP, addr, (size,), "int8"))]
            return
        dst = self.p.staged_copy(name, part)
        src = self.p.home(name)
        if part is not None:
            src = _rows(src, 0, self.p.prefixes[name][part][1], dst.shape[0])
        if not src.shape:
            yield [(src, dst)]
            return
        rows = src.shape[0]
        cost = self.memory_cost(src.mem)
        chunk = max(PRELOAD_CHUNK_BYTES, PRELOAD_CHUNK_CYCLES / cost if cost else 0)
        per = max(1, int(chunk * rows // max(src.nbytes, 1)))
        box = rows
        if part is None and name in self.p.streamed:
            # chunks of whole boxes of its reader, or of equal shares of one box
            box = self.p.streamed[name][0]
            per = -(-box // -(-box // per))
        for start in range(0, rows, box):
            end = min(start + box, rows)
            yield [(_rows(src, 0, first, min(per, end - first)),
                    _rows(dst, 0, first, min(per, end - first)))
                   for first in range(start, end, per)]

    def _buffer(self, name: str, part: Buffered):
        """Copy boxes of a constant into their room in the feature-map memory (see
        _buffer_chunks())."""
        chunks = [(self.em.layer, c) for c in self._buffer_chunks(name, part)]
        self._ride(chunks, len(chunks), 0)

    def _buffer_chunks(self, name: str, part: Buffered):
        """(src, dst) of each chunk of a buffered constant's boxes: whole rows of a box, at
        most `part.chunk` bytes unless one row is more."""
        home = self.p.home(name)
        for box in part.boxes:
            src, dst = box_view(home, box), self.p.buffered[name, box]
            rows = max(1, part.chunk * dst.shape[0] // dst.nbytes)
            for first in range(0, dst.shape[0], rows):
                count = min(rows, dst.shape[0] - first)
                yield _rows(src, 0, first, count), _rows(dst, 0, first, count)

    # DMA queues by role: activations, constants and stores stream on separate channels
    # when there are enough, so a store never blocks the next tile's prefetch.
    def _channel(self, role: str) -> int:
        """role: "store", "const" (weights and tables) or "act" (feature-map loads)."""
        if role == "store":
            return 2 % self.channels if self.channels > 2 else 0
        return (1 % self.channels) if role == "const" else 0

    def _spare_queues(self) -> list[int]:
        """The queues no role takes: a fourth channel and beyond."""
        return list(range(3, self.channels))

    def lower(self, step: Step, workspace: tuple[int, int], riders=()) -> tuple[int, frozenset | None]:
        """Emit the commands of one step: (its tiles, the tensors its tiles read through memory,
        None where it reads all of its inputs there). Its tile buffers go in `workspace`
        (base, size). `riders`, (layer, constant, Buffered) of plan_buffering(), are copied
        among its tiles (a tiled step's only)."""
        self._step += 1
        self._output = step.output
        if step.kind in ("mac", "vector"):
            return self._tiled(step, workspace, riders)
        if step.kind == "dma":
            self._workspace = workspace
            self._data_movement(step)
        elif step.kind == "host":
            self._host(step)
        return 1, None

    def _buffers_at(self, base: int, size: int, need: int) -> int:
        """Where in the workspace [base, base + size) a step puts `need` bytes of buffers: of
        its ends and the edges of recent steps' buffers, the place whose latest overlapping
        user is the oldest. A step's loads wait for the last reader of the bytes they
        overwrite, so buffers apart from the previous steps' let them start while those
        steps still compute (a run of small steps loads ahead instead of one at a time)."""
        hi = base + size - need
        spots = {base, hi} | {align(e) for _, _, e in self._used} | {
            (s - need) // 16 * 16 for _, s, _ in self._used}
        best, addr = None, base
        for spot in sorted(a for a in spots if base <= a <= hi):
            last = max((k for k, s, e in self._used if s < spot + need and spot < e), default=-1)
            if best is None or last < best:
                best, addr = last, spot
        self._used = self._used[-15:] + [(self._step, addr, addr + need)]
        return addr

    def _ride(self, chunks: list, upto: int, sent: int) -> int:
        """Emit the chunk copies [sent, upto) of buffered boxes, (layer, _buffer_chunks()
        item) each: a rider's are in its reader's layer, whose bytes and energy they are.
        Returns upto."""
        own, queue = self.em.layer, self._channel("const")
        self.em.prefetching = True
        try:
            for layer, (src, dst) in chunks[sent:upto]:
                self.em.layer = layer
                self.em.copy(src, dst, queue)
        finally:
            self.em.layer, self.em.prefetching = own, False
        return max(sent, upto)

    def _tiled(self, step: Step, workspace: tuple[int, int], riders=()) -> tuple[int, frozenset]:
        ws_base, ws_size = workspace
        space, opcode, attrs, plan = self.plan(step, ws_size)
        if plan is None:
            raise DoesNotFitError(
                f"{step.main.describe()}: the smallest tile needs {minimum_working_set(space)} B of "
                f"working space but only {ws_size} B of the {self.p.onchip_size} B on-chip buffer "
                "are free during it; use a config with a larger sram.size")
        cursor = self._buffers_at(ws_base, ws_size, plan.working_set)
        addr = {}
        for role, count in plan.buffers.items():
            size = align(plan.buffer_bytes[role])
            addr[role] = [cursor + i * size for i in range(count)]
            cursor += count * size
        acc_addr = cursor
        unit = "mac" if step.kind == "mac" else "vector"
        out = space.output
        red = space.reduction
        current, loads, stores, pending = {}, {}, [0], None

        feeds = {role for o in space.inputs if o.produce for role in o.produce.operands.values()}
        # riders: an even share of their chunks after each tile's loads
        chunks = [(layer, c) for layer, name, part in riders
                  for c in self._buffer_chunks(name, part)]
        sent = 0

        def emit(tile, views):
            inputs = self._expand_stage({r: v for r, v in views.items() if r not in feeds},
                                        attrs)
            first = last = True
            if red and plan.counts.get(red, 1) > 1:
                k0, kn = tile[red]
                first, last = k0 == 0, k0 + kn == space.dims[red]
            box = out.box(tile)
            shape = tuple([n for _, n in box])
            if not (first and last):          # partial sums in the accumulator buffer
                acc = within_buffer(
                    dense(ONCHIP, acc_addr, shape, attrs.get("acc_dtype", out.dtype)),
                    plan.acc_bytes, step.output, "the accumulators")
            if not first:
                inputs["acc_in"] = acc
            if not last:
                outputs = {"acc_out" if unit == "mac" else "out": acc}
            elif out.on_chip:
                outputs = {out.role: self.p.view(out.tensor, box)}
            else:
                bufs = addr[out.role]
                outputs = {out.role: within_buffer(
                    dense(ONCHIP, bufs[stores[0] % len(bufs)], shape, out.dtype),
                    plan.buffer_bytes[out.role], step.output, out.role)}
            cmd = self.em.compute(unit, opcode, inputs, outputs, {**attrs, **space.attrs(tile)})
            if last and not out.on_chip:
                self.em.hold_store(outputs[out.role], self.p.view(out.tensor, box),
                                   self._channel("store"), cmd)
                stores[0] += 1

        for t, tile in enumerate(iterate_tiles(plan, space.dims), 1):
            views = {}
            for opnd in space.inputs:
                box = opnd.box(tile)
                staged = None if opnd.on_chip else self.p.staged_box(opnd.tensor, box,
                                                                     opnd.dtype)
                if opnd.on_chip or staged is not None:
                    views[opnd.role] = staged or self.p.view(opnd.tensor, box, opnd.dtype)
                    continue
                if opnd.role not in current or current[opnd.role][0] != box:
                    k = loads.get(opnd.role, 0)
                    bufs = addr[opnd.role]
                    dst = within_buffer(
                        dense(ONCHIP, bufs[k % len(bufs)], [n for _, n in box], opnd.dtype),
                        plan.buffer_bytes[opnd.role], step.output, opnd.role)
                    self._load(opnd, box, dst, current.get(opnd.role), views)
                    loads[opnd.role] = k + 1
                    current[opnd.role] = (box, dst)
                views[opnd.role] = current[opnd.role][1]
            if chunks:
                sent = self._ride(chunks, len(chunks) * t // plan.n_tiles, sent)
            # A DMA queue runs in order: the store of the tile before last goes after those of
            # this tile's loads that can start before its compute ends (hold_store()).
            self.em.release()
            if pending is not None:       # prefetch: this tile's loads go before the last compute
                emit(*pending)
            pending = (tile, views)
        if chunks:                        # any the tiles' shares left
            self._ride(chunks, len(chunks), sent)
        self.em.release()                 # no loads follow in this step
        emit(*pending)
        self.em.release()
        # per-tensor parameters travel in the commands, not through memory
        return plan.n_tiles, frozenset(o.tensor for o in space.inputs)

    def _load(self, opnd, box, dst: TensorView, previous, views: dict):
        """Bring a box of an operand into dst: loaded from memory, or computed on chip when the
        operand is produced (from `views`, the tile's other operands). When the previous box
        overlaps it along one dimension (the halo of consecutive row tiles), the overlap is
        copied on chip from the previous buffer and only the new part is loaded or computed."""
        if opnd.produce:
            fetch = self._producer(opnd, views, dst, box)
        else:
            kind = "const" if self.g.tensors[opnd.tensor].is_const else "act"
            channel = self._channel(kind)

            def fetch(part, axis, first, count):
                src = self.p.buffered.get((opnd.tensor, tuple(map(tuple, part))))
                queue = channel
                if src is None or src.dtype != opnd.dtype:
                    src = self.p.view(opnd.tensor, part, opnd.dtype)
                else:           # from the feature maps' memory, on their queue (as buffering
                    queue = self._channel("act")     # counts it): the weights' stays free
                self.em.copy(src, dst if axis is None else _rows(dst, axis, first, count), queue)
        overlap = _overlap(previous[0], box) if previous is not None else None
        if overlap is None:
            fetch(box, None, 0, 0)
            return
        axis, lo, hi = overlap                      # rows [lo, hi) are already on chip
        prev_box, prev_view = previous
        start = box[axis][0]
        self.em.copy(_rows(prev_view, axis, lo - prev_box[axis][0], hi - lo),
                     _rows(dst, axis, lo - start, hi - lo), self._channel("act"))
        end = start + box[axis][1]
        if hi < end:
            fetch(box[:axis] + ((hi, end - hi),) + box[axis + 1:], axis, hi - start, end - hi)

    def _producer(self, opnd, views: dict, dst: TensorView, box):
        """fetch() of a produced operand: one command computes the part of dst (a box of the
        tile's `box`) from the tile's views of the producer's operands, its data input cut
        to the rows or columns that part reads."""
        prod = opnd.produce
        spec = OPCODES[prod.opcode]         # a conv on the array, or a vector-unit program

        def fetch(part, axis, first, count):
            inputs = {name: views[role] for name, role in prod.operands.items()}
            out = dst
            src, pad = prod.source(part)
            if axis is not None:
                whole = prod.source(box)[0]
                inputs[prod.data] = _rows(inputs[prod.data], axis,
                                          src[axis][0] - whole[axis][0], src[axis][1])
                out = _rows(dst, axis, first, count)
            attrs = {**prod.attrs, "pad": pad} if "pad" in spec.attrs else prod.attrs
            if prod.box_attrs is not None:
                attrs = {**attrs, **prod.box_attrs(part)}
            self.em.compute(spec.unit, prod.opcode, self._expand_stage(inputs, attrs),
                            {spec.outputs[0]: out}, attrs)
        return fetch

    def _expand_stage(self, inputs: dict, attrs: dict) -> dict:
        """A MAC command's operands with its stage table split into the bias, multiplier and
        shift columns the output stage reads (multiplier and shift only for a 32-bit-scale
        rescale); the columns of a stage view are kept, as tiles share them."""
        if "stage" not in inputs:
            return inputs
        out = dict(inputs)
        stage = out.pop("stage")
        key = (stage, "scale32" in attrs)
        columns = self._stage_columns.get(key)
        if columns is None:
            row = stage.strides[0]
            columns = self._stage_columns[key] = {
                name: TensorView(stage.mem, stage.addr + i * stage.itemsize, (stage.shape[0],),
                                 (row,), stage.dtype)
                for i, name in enumerate(("bias", "multiplier", "shift")) if i == 0 or key[1]}
        out.update(columns)
        return out

    def _data_movement(self, step: Step):
        if self._probe is None:
            self._moves += 1
        DMA_MOVES.lookup(step.main.op, step.main.describe())(self, step)

    def _move_channel(self) -> int:
        """The queue of a data-movement step's unstaged copies: the activations' queue, and in
        turn with it the queues no role takes (a fourth channel and beyond), so independent
        moves (the SLICEs of q, k and v) run side by side instead of one after another."""
        queues = [self._channel("act")] + self._spare_queues()
        return queues[self._moves % len(queues)]

    def staging_need(self, step: Step, budget: int) -> int:
        """Bytes of workspace a data-movement step's staged copies use (nothing is emitted)."""
        self._probe, self._workspace = [0], (0, budget)
        try:
            self._data_movement(step)
            return self._probe[0]
        finally:
            self._probe = None

    def copy(self, src: TensorView, dst: TensorView):
        """A whole-tensor move of a data-movement step, on the activations' DMA queue, or staged
        block by block through the step's workspace when that moves fewer wasted bursts
        (compiler/staging.py)."""
        if not (src.mem or dst.mem) and permute_cycles(src, dst, self.hw) < dma_cycles(
                src, dst, self.hw, self.port_cost):
            # On chip, a gather of short runs (K's transpose for attention scores: one-byte
            # runs) costs the DMA a bank access per run; the vector unit moves a word per lane.
            if self._probe is None:
                block, first, strides = permute_operands(src)
                self.em.compute("vector", "permute", {"in0": block}, {"out": dst},
                                {"base": first, "strides": strides})
            return
        base, size = self._workspace
        queues = self._block_queues((src.mem, dst.mem))
        stage = plan_staging(src, dst, self.hw, self.port_cost, size, len(queues))
        if self._probe is not None:
            self._probe[0] = max(self._probe[0], stage.working_set if stage else 0)
            return
        if stage is None:
            self.em.copy(src, dst, self._move_channel())
            return
        base = self._buffers_at(base, size, stage.working_set)
        ring = [base + k * align(stage.buffer_bytes) for k in range(stage.slots)]
        after = ring[-1] + align(stage.buffer_bytes)
        permuted = [after + k * align(stage.permuted_bytes) for k in range(stage.slots)]
        n = src.shape[stage.axis]
        blocks = [block_views(src, dst, stage, start, min(stage.block, n - start),
                              ring[k % stage.slots])
                  for k, start in enumerate(range(0, n, stage.block))]
        for block in blocks:
            within_buffer(block[1], stage.buffer_bytes, self._output, "a staged block")

        def load(k: int, queue: int):
            self.em.copy(*blocks[k][:2], queue)

        def finish(k: int, queue: int):
            held, store = blocks[k][2:]
            if stage.permuted_bytes:        # the vector unit reorders the block word by word
                block, first, strides = permute_operands(held)
                if store.mem == ONCHIP:     # into its place: no copy of the reordered block
                    self.em.compute("vector", "permute", {"in0": block}, {"out": store},
                                    {"base": first, "strides": strides})
                    return
                held = within_buffer(dense(ONCHIP, permuted[k % stage.slots], held.shape,
                                           held.dtype), stage.permuted_bytes, self._output,
                                     "a reordered block")
                self.em.compute("vector", "permute", {"in0": block}, {"out": held},
                                {"base": first, "strides": strides})
            neighbour = blocks[k + 1 if k + 1 < len(blocks) else k - 1][3] \
                if len(blocks) > 1 else None
            for piece in store_pieces(held, store, neighbour):
                self.em.copy(*piece, queue)

        # a block the vector unit reorders into its place on chip is stored by no DMA
        self._ring(len(blocks), stage.slots, queues, load, finish,
                   stored=not (stage.permuted_bytes and dst.mem == ONCHIP))

    def _ring(self, blocks: int, slots: int, queues: list[int], fill, finish,
              stored: bool = True):
        """Emit a staged or assembled move's blocks through a ring of `slots` buffers:
        `fill(k, queue)` fills block k's buffer on the loads' queues, `slots - 1` blocks ahead
        of `finish(k, queue)` (its permute and store) on the stores' queues, since block k's
        buffer is free once block k - slots has been read out of it. Blocks not `stored` by a
        DMA are loaded on the stores' queues (the feature maps'), leaving the others to the
        constants."""
        loads, stores = split_queues(queues)
        if not stored:
            loads = stores
        ahead = slots - 1
        for k in range(min(ahead, blocks)):
            fill(k, loads[k % len(loads)])
        for k in range(blocks):
            if k + ahead < blocks:
                fill(k + ahead, loads[(k + ahead) % len(loads)])
            finish(k, stores[k % len(stores)])

    def _block_queues(self, mems) -> list[int]:
        """The DMA queues a staged or assembled move's blocks take in turn: every queue; but
        where the constants live in a memory the move does not touch (edge-256's flash), not
        the constants' queue, which then streams the next layers' weights meanwhile."""
        queues = list(range(self.channels))
        if self.p.weights_id not in mems and self.channels > 1:
            queues.remove(self._channel("const"))
        return queues

    def assemble(self, dst: TensorView, parts):
        """The parts of a data-movement step's output (a source view or a fill word, each with
        its box of `dst`): each written directly, or assembled block by block in the step's
        workspace and stored in long runs when that costs less (compiler/assembly.py)."""
        base, size = self._workspace
        queues = self._block_queues({dst.mem} | {s.mem for s, _ in parts
                                                 if isinstance(s, TensorView)})
        plan = plan_assembly(dst, parts, self.hw, self.port_cost, size, len(queues))
        if plan is None:
            for source, box in parts:
                if isinstance(source, TensorView):
                    self.copy(source, box_view(dst, box))
                else:
                    self.fill(box_view(dst, box), source)
            return
        if self._probe is not None:
            self._probe[0] = max(self._probe[0], plan.working_set)
            return
        base = self._buffers_at(base, size, plan.working_set)
        ring = [base + k * align(plan.buffer_bytes) for k in range(plan.slots)]
        n = dst.shape[plan.axis]
        blocks = [block_parts(dst, parts, plan.axis, start, min(plan.block, n - start),
                              ring[k % plan.slots])
                  for k, start in enumerate(range(0, n, plan.block))]
        for block in blocks:
            within_buffer(block[0], plan.buffer_bytes, self._output, "an assembled block")

        def put_together(k: int, queue: int):
            for source, piece in blocks[k][2]:
                if isinstance(source, TensorView):
                    self.em.copy(source, piece, queue)
                else:
                    self.em.fill(piece, source, queue)

        def store(k: int, queue: int):
            self.em.copy(*blocks[k][:2], queue)

        self._ring(len(blocks), plan.slots, queues, put_together, store)

    def fill(self, dst: TensorView, value: int):
        if self._probe is None:
            self.em.fill(dst, value, self._channel("act"))

    def _host(self, step: Step):
        op = step.main
        inputs = {f"in{i}": self.p.view(n) for i, n in enumerate(op.inputs)}
        outputs = {f"out{i}": self.p.view(n) for i, n in enumerate(op.outputs)}
        attrs = {"tosa_op": op.op}
        for k, v in op.attrs.items():
            attrs[k] = list(v) if isinstance(v, tuple) else v
        self.em.compute("host", "host", inputs, outputs, attrs)


def _shape_of(graph, step: Step) -> tuple:
    """What a step's tile space is built from: its operators and their attributes (those
    given as constant shape operands too: a RESIZE's scale, offset and border decide the
    input box each tile samples; zero points and shifts do not), each tensor's shape, type
    and whether it is a constant, and which of them are the same tensor (numbered in order
    of first use; a chain reading one tensor twice has one operand)."""
    number: dict[str, int] = {}
    out = [step.kind]

    def tensor(name):
        t = graph.tensors[name]
        return number.setdefault(name, len(number)), t.shape, t.dtype, t.is_const, t.variable

    def value(name):
        t = graph.tensors[name]
        return tuple(t.data.reshape(-1).tolist()) if t.dtype == "shape" and t.data is not None \
            else None

    def walk(s):
        for op in [s.main, s.rescale, s.clamp] + list(s.chain):
            if op is None:
                out.append(None)
                continue
            out.append((op.op, tuple((k, _frozen(v)) for k, v in sorted(op.attrs.items())),
                        tuple(map(tensor, op.inputs)), tuple(map(tensor, op.outputs)),
                        tuple(map(value, op.inputs))))
        out.append(s.producer is not None)
        if s.producer is not None:
            walk(s.producer)
    walk(step)
    out.append(tensor(step.output))
    return tuple(out)


def _frozen(value):
    """An attribute's value as a key: lists as tuples; what is neither hashable nor a list
    by its identity (so it matches only itself)."""
    if isinstance(value, (list, tuple)):
        return tuple(map(_frozen, value))
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    return value


def _rows(view: TensorView, axis: int, first: int, count: int) -> TensorView:
    """`count` entries of `view` along `axis` from `first`."""
    return make_view((view.mem, view.addr + first * view.strides[axis],
                      view.shape[:axis] + (count,) + view.shape[axis + 1:], view.strides,
                      view.dtype))


def _overlap(prev, box):
    """(axis, lo, hi) when two boxes differ only along one axis, the new one starting inside the
    old one and extending it; None otherwise."""
    axis = None
    for i, (a, b) in enumerate(zip(prev, box)):
        if a != b:
            if axis is not None:
                return None
            axis = i
    if axis is None:
        return None
    (p0, pn), (b0, bn) = prev[axis], box[axis]
    if not (p0 < b0 < p0 + pn <= b0 + bn):
        return None
    return axis, b0, p0 + pn
