"""Weight buffering (compiler/buffering.py): on edge-256, boxes of a weight-heavy layer's
weights are copied from flash straight into free system SRAM while the layer norms and the
softmax before it leave flash idle; its loads of them then come from system SRAM. Compared
with the same compiler without it, bit-exact and faster."""
from pathlib import Path

import numpy as np

from npu_sim import api, zoo
from npu_sim.compiler import buffering
from npu_sim.compiler import driver as compiler_driver
from npu_sim.compiler import lower as lower_module
from npu_sim.compiler.lower import Lowering
from npu_sim.compiler.placement import Placement
from npu_sim.compiler.loader import load_bytes
from npu_sim.isa.commands import DmaCopy
from oracle import DType, GraphBuilder, run_reference


def test_weights_buffered_in_system_sram_during_flash_idle_steps(monkeypatch):
    cfg = api.load_config("edge-256")
    tosa = zoo.build("transformer", tokens=32, d_model=256, heads=4, d_ff=1024, layers=1)[0]
    program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    flash, sram = (program.memories.index(m) + 1 for m in ("flash", "system_sram"))
    copies = [c for c in program.commands if isinstance(c, DmaCopy)]
    staged = {c.dst.addr for c in copies if c.src.mem == flash and c.dst.mem == sram
              and c.channel == 1}        # flash -> system SRAM, on the weights' queue
    assert staged
    # the reader (a MAC layer) loads those copies from system SRAM, on the feature maps'
    # queue: the weights' queue stays free for flash
    mac_layers = {i for i, layer in enumerate(program.layers) if layer.unit == "mac"}
    reads = [c for c in copies if c.src.mem == sram and c.src.addr in staged
             and c.layer in mac_layers]
    assert reads and all(c.channel == 0 for c in reads)
    buffered, inputs = _exact(tosa, program, cfg, seed=1)
    monkeypatch.setattr(compiler_driver, "plan_buffering", lambda *args: {})
    plain = api.simulate(api.compile_model(load_bytes(tosa, "net.tosa"), cfg), cfg, inputs)
    assert buffered.report.cycles < plain.report.cycles
    for name, value in buffered.outputs.items():
        np.testing.assert_array_equal(value, plain.outputs[name])


def _exact(tosa, program, cfg, seed):
    """The program's run on random inputs (hazards checked), its outputs the reference
    model's; (the run, the inputs)."""
    inputs = api.random_inputs(program, seed=seed)
    run = api.simulate(program, cfg, inputs, check_hazards=True)
    names = [b.name for b in program.outputs]
    expected = run_reference(tosa, inputs, names)
    for name in names:
        np.testing.assert_array_equal(run.outputs[name], expected[name])
    return run, inputs


def _mobilenet_on_edge():
    tosa = zoo.build("mobilenet_v2", width=0.35, resolution=96, num_classes=200)[0]
    return tosa, api.load_config("edge-256")


def _loads_weights(placement, lowering, step, j) -> bool:
    """Step `j` loads an operand from the weights memory (flash) itself."""
    space, _, _, plan = lowering.plan(step, placement.workspaces[j][1])
    return any(opnd.role in plan.buffers
               and getattr(placement.find(opnd.tensor), "mem", 0) == placement.weights_id
               for opnd in space.inputs)


def test_weights_ride_among_the_tiles_of_steps_leaving_flash_idle(monkeypatch):
    """A MobileNetV2's early layers load few weights and leave flash idle one step at a time:
    boxes of later layers' weights are copied to system SRAM among such a step's own tiles
    (between computes of that layer), bit-exact and faster than without."""
    tosa, cfg = _mobilenet_on_edge()
    program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    flash, sram = (program.memories.index(m) + 1 for m in ("flash", "system_sram"))
    computes = [c for c in program.commands if not isinstance(c, DmaCopy)]
    position = {c.id: k for k, c in enumerate(program.commands)}
    hosts = set()
    for copy in program.commands:
        if not (isinstance(copy, DmaCopy) and copy.src.mem == flash and copy.dst.mem == sram):
            continue
        before = [c for c in computes if position[c.id] < position[copy.id]]
        after = [c for c in computes if position[c.id] > position[copy.id]]
        if before and after and before[-1].layer == after[0].layer != copy.layer:
            hosts.add(before[-1].layer)
    loading = {c.layer for c in program.commands if isinstance(c, DmaCopy)
               and c.src.mem == flash and c.dst.mem == 0}
    assert hosts & loading
    buffered, _ = _exact(tosa, program, cfg, seed=2)
    # riders in steps that load no weights, and in steps whose own loads leave flash idle
    planned = buffering.plan_buffering
    kinds = set()

    def spy(graph, steps, placement, lowering, *rest):
        riders = planned(graph, steps, placement, lowering, *rest)
        kinds.update(_loads_weights(placement, lowering, steps[j], j) for j in riders)
        return riders
    monkeypatch.setattr(compiler_driver, "plan_buffering", spy)
    api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    assert kinds == {False, True}
    monkeypatch.setattr(buffering._Riders, "ride", lambda *args: None)
    plain = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    assert api.simulate(plain, cfg, timing_only=True).report.cycles > buffered.report.cycles


def test_buffered_chunks_copy_whole_rows_and_skip_staged_rows(monkeypatch):
    """Every chunk copies whole rows of its box, within its size, and a constant whose leading
    rows are staged on chip is buffered, all but those rows."""
    tosa, cfg = _mobilenet_on_edge()
    chunks, buffered, placements = [], [], []
    real_chunks, real_buffer = Lowering._buffer_chunks, Placement.buffer

    def spy_chunks(self, name, part):
        for src, piece in real_chunks(self, name, part):
            chunks.append((piece.nbytes, part.chunk, src.shape[1:] == piece.shape[1:]))
            yield src, piece

    def spy_buffer(self, name, boxes, first, last):
        placements.append(self)
        buffered.extend((name, box) for box in boxes)
        return real_buffer(self, name, boxes, first, last)
    monkeypatch.setattr(Lowering, "_buffer_chunks", spy_chunks)
    monkeypatch.setattr(Placement, "buffer", spy_buffer)
    api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    assert chunks and all(nbytes <= chunk and rows for nbytes, chunk, rows in chunks)
    assert any(nbytes > 1024 for nbytes, _, _ in chunks)
    placement = placements[0]
    staged = [(name, box) for name, box in buffered if name in placement.prefixes]
    assert staged
    for name, box in staged:
        dtype = placement.graph.tensors[name].dtype
        assert placement.staged_box(name, box, dtype) is None


def test_one_dma_queue_gives_riders_only_the_steps_that_load_no_weights(monkeypatch):
    """With one DMA queue for everything, copies riding among a step's tiles wait behind all
    its transfers, not only its weights': no step that loads weights carries them, and the
    steps that do are given only their compute beyond their transfers."""
    tosa, cfg = _mobilenet_on_edge()
    cfg = cfg.with_overrides({"dma.channels": 1})
    planned, hosts = buffering.plan_buffering, []

    def spy(graph, steps, placement, lowering, *rest):
        riders = planned(graph, steps, placement, lowering, *rest)
        hosts.extend(_loads_weights(placement, lowering, steps[j], j) for j in riders)
        return riders
    monkeypatch.setattr(compiler_driver, "plan_buffering", spy)
    program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    assert hosts and not any(hosts)
    _exact(tosa, program, cfg, seed=3)


def test_readers_bound_by_their_feature_maps_are_not_buffered(monkeypatch):
    """On a 20 KiB buffer BERT-base's FC layers read their activations again for every weight
    slice: their feature-map lane, not flash, is the busiest, and a weight box moved to
    system SRAM would only add to it (6% slower when they were buffered). Buffering never
    makes such a graph slower than leaving every weight in flash."""
    tosa = zoo.build("transformer", tokens=128, d_model=768, heads=12, d_ff=3072, layers=1)[0]
    cfg = api.load_config("edge-256").with_overrides({"sram.size": "20 KiB"})
    buffered = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    monkeypatch.setattr(compiler_driver, "plan_buffering", lambda *args: {})
    plain = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    cycles = [api.simulate(p, cfg, timing_only=True).report.cycles for p in (buffered, plain)]
    assert cycles[0] <= cycles[1]


def test_weights_served_from_two_memories_stream_through_three_buffers(monkeypatch):
    """A weight-bound layer whose boxes come partly from system SRAM alternates slow and fast
    loads: with two tile buffers flash waits for the tile that frees one after each fast box.
    Such a layer takes a third buffer for its weights (buffering.third_buffer): its loads
    from flash and from system SRAM go to three buffers on chip, bit-exact and faster than
    with two."""
    cfg = api.load_config("edge-256")
    tosa = zoo.build("transformer", tokens=64, d_model=256, heads=4, d_ff=1024, layers=1)[0]
    loads = {}                          # weights tensor -> {(from system SRAM, on-chip address)}
    real_tiled, real_load = Lowering._tiled, Lowering._load
    deep = set()                        # weights lowered with three buffers

    def spy_tiled(self, step, workspace, riders=()):
        space, _, _, plan = self.plan(step, workspace[1])
        deep.update(o.tensor for o in space.inputs if plan.buffers.get(o.role) == 3)
        return real_tiled(self, step, workspace, riders)

    def spy_load(self, opnd, box, dst, previous, views):
        if opnd.tensor in deep and not opnd.produce:
            fast = (opnd.tensor, tuple(map(tuple, box))) in self.p.buffered
            loads.setdefault(opnd.tensor, set()).add((fast, dst.addr))
        return real_load(self, opnd, box, dst, previous, views)
    monkeypatch.setattr(Lowering, "_tiled", spy_tiled)
    monkeypatch.setattr(Lowering, "_load", spy_load)
    program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    mixed = [{addr for _, addr in seen} for seen in loads.values()
             if {fast for fast, _ in seen} == {True, False}]
    assert mixed and all(len(addrs) == 3 for addrs in mixed), mixed
    run, _ = _exact(tosa, program, cfg, seed=2)
    monkeypatch.setattr(Lowering, "_deepened", lambda self, space, plan, budget: plan)
    double = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    assert run.report.cycles < api.simulate(double, cfg, timing_only=True).report.cycles


def test_the_planner_lists_the_loads_the_lowering_emits(monkeypatch):
    """What plan_buffering() weighs, each weight box a step loads and how often, is what the
    lowering loads: a box of staged rows is read where it is staged (MobileNetV2's stage
    tables with a staged first slab), loads nothing and leaves the tile buffer's box in place;
    counted as loads, they had made a step that loads almost nothing from flash look busy
    with it, so no copies rode in it."""
    tosa, cfg = _mobilenet_on_edge()
    real_tiled, real_load = Lowering._tiled, Lowering._load
    listed, loaded, prefixed = {}, {}, []

    def spy_tiled(self, step, workspace, riders=()):
        space, _, _, plan = self.plan(step, workspace[1])
        for opnd in space.inputs:
            if not opnd.on_chip and opnd.role in plan.buffers and not opnd.produce and \
                    self.g.tensors[opnd.tensor].is_const:
                boxes = buffering._boxes(space, plan, opnd, self.p)
                listed[step.output, opnd.tensor] = {b: c for b, (_, c) in boxes.items()}
                if opnd.tensor in self.p.prefixes:
                    prefixed.append(opnd.tensor)
        return real_tiled(self, step, workspace, riders)

    def spy_load(self, opnd, box, dst, previous, views):
        if self.g.tensors[opnd.tensor].is_const and not opnd.produce:
            key = (self.em.layer, opnd.tensor)
            counts = loaded.setdefault(key, {})
            counts[tuple(map(tuple, box))] = counts.get(tuple(map(tuple, box)), 0) + 1
        return real_load(self, opnd, box, dst, previous, views)
    monkeypatch.setattr(Lowering, "_tiled", spy_tiled)
    monkeypatch.setattr(Lowering, "_load", spy_load)
    program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    layers = {layer.name: i for i, layer in enumerate(program.layers)}
    assert prefixed
    for (output, tensor), boxes in listed.items():
        assert loaded.get((layers[output], tensor), {}) == {b: c for b, c in boxes.items()}, \
            (output, tensor)


def test_copies_ride_beside_the_weight_loads_of_compute_bound_steps(monkeypatch):
    """A ResNet's 3x3 convs on edge-256 load their weights from flash and compute longer than
    they transfer: copies of later layers' weights may ride in the compute beyond the
    transfers (RIDE_COMPUTE of it), bit-exact, and the run is faster than with copies kept to
    the transfers' share."""
    tosa = zoo.build("resnet", depth=18, resolution=64)[0]
    cfg = api.load_config("edge-256")
    program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    run, _ = _exact(tosa, program, cfg, seed=6)
    monkeypatch.setattr(buffering, "RIDE_COMPUTE", 0.0)
    beside = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    assert run.report.cycles < 0.997 * api.simulate(beside, cfg, timing_only=True).report.cycles


class _Room:
    """A feature-map memory with room for `boxes` boxes at most, whatever the steps."""

    def __init__(self, boxes: int):
        self.boxes, self.calls = boxes, []

    def buffer(self, name, boxes, first, last):
        self.calls.append(len(boxes))
        return len(boxes) <= self.boxes


def test_a_rider_takes_what_the_feature_maps_leave_room_for():
    """Where the feature maps leave room for fewer boxes than a step's idle time copies, the
    step takes the first of them that fit (halving), and the rest stay chosen, in order, for
    the steps after it."""
    boxes = {((k, 1),): [1024, 1] for k in range(8)}
    chosen = list(boxes)
    room = _Room(3)
    riders = buffering._Riders(room, [1e9], 1.0)
    riders.ride(0, "w", 5, boxes, chosen, buffering.CHUNK)
    assert room.calls == [8, 4, 2]
    (name, reader, part), = riders.copies[0]
    assert (name, reader, part.boxes) == ("w", 5, tuple(list(boxes)[:2]))
    assert chosen == list(boxes)[2:]
    assert riders.idle[0] == 1e9 - 2 * 1024
    riders.ride(0, "w", 5, boxes, chosen, buffering.CHUNK)      # six left: three fit
    assert room.calls[3:] == [6, 3] and riders.copies[0][1][2].boxes == tuple(list(boxes)[2:5])
    nothing = buffering._Riders(_Room(0), [1e9], 1.0)
    nothing.ride(0, "w", 5, boxes, chosen, buffering.CHUNK)
    assert not nothing.copies and chosen == list(boxes)[5:] and nothing.idle == [1e9]


class _Staging:
    """A placement's staging as buffering._boxes reads it: which leading rows are staged."""

    def __init__(self):
        self.prefixes = {}

    def root(self, name):
        return name

    def staged_box(self, name, box, dtype):
        (start, count), staged = box[0], self.prefixes.get(name, ())
        return any(row0 <= start and start + count <= row0 + rows
                   for _, row0, rows in staged) or None


def test_listed_boxes_follow_what_is_staged():
    """The boxes a plan loads are kept with it, by what is staged of the operand: once rows
    are staged (prefetch runs after the first plans are listed) their boxes drop out."""
    from npu_sim.compiler import tiling
    weights = tiling.Operand("w", "w", "int8", ("m",), lambda t: (t["m"], (0, 8)), 1,
                             cost_per_byte=8.0, shape=(64, 8))
    space = tiling.TileSpace(
        dims={"m": 64}, levels={"m": 0}, orders=[("m",)], inputs=[weights],
        output=tiling.Operand("y", "y", "int8", ("m",), lambda t: (t["m"],), 1, on_chip=True))
    plan = tiling.evaluate(space, {"m": 16}, ("m",), 0)
    staging = _Staging()
    assert len(buffering._boxes(space, plan, weights, staging)) == 4
    staging.prefixes["w"] = [(0, 0, 32)]
    assert [box[0] for box in buffering._boxes(space, plan, weights, staging)] == \
        [(32, 16), (48, 16)]


def test_loads_that_wait_out_the_memory_latency_stream_through_three_buffers(monkeypatch):
    """image_example1's QUANTIZE of its float input on default is DRAM-bound: with two tile
    buffers each load, issued once the tile two back frees its buffer, waits out the DMA
    setup and DRAM's latency beyond the load before. The input takes a third buffer
    (buffering.latency_buffer): the same outputs, fewer cycles."""
    cfg = api.load_config("default")
    model = str(Path(__file__).parent / "data" / "tflite" / "image_example1" / "model.tflite")
    deep = set()
    real_tiled = Lowering._tiled

    def spy_tiled(self, step, workspace, riders=()):
        space, _, _, plan = self.plan(step, workspace[1])
        deep.update(o.tensor for o in space.inputs if plan.buffers.get(o.role) == 3)
        return real_tiled(self, step, workspace, riders)
    monkeypatch.setattr(Lowering, "_tiled", spy_tiled)
    program = api.compile_model(model, cfg, use_cache=False)
    assert [b.name for b in program.inputs] == sorted(deep)
    inputs = api.random_inputs(program, seed=3)
    three = api.simulate(program, cfg, inputs, check_hazards=True)
    monkeypatch.setattr(lower_module, "latency_buffer", lambda *args: None)
    two = api.simulate(api.compile_model(model, cfg, use_cache=False), cfg, inputs,
                       check_hazards=True)
    for name, value in two.outputs.items():
        np.testing.assert_array_equal(three.outputs[name], value)
    assert three.report.cycles < two.report.cycles


def test_a_scalar_constant_read_from_flash_is_buffered_as_one_row():
    """edge-256 keeps constants in flash: a rank-0 constant of a SUB is a box of no dims,
    which a buffered copy takes whole (its chunk had read the box's first dim, and the
    compile failed). Bit-exact with the reference model."""
    g = GraphBuilder()
    x = g.tensor([], DType.INT32, np.array(1234567, np.int32))
    c = g.tensor([], DType.INT32, np.array(-7654321, np.int32), is_const=True)
    out = g.output([], DType.INT32)
    g.op("SUB", [x, c], [out])
    cfg = api.load_config("edge-256")
    program = api.compile_model(load_bytes(g.serialize(), "scalar.tosa"), cfg)
    got = api.simulate(program, cfg, g.input_values).outputs[out]
    np.testing.assert_array_equal(got, g.run()[out])
