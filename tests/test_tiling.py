"""The tiling search's shortcuts give what the plain computation gives: boxes computed per
operand over its own dims (compiler/tiling.py) equal box_sizes() over the tiles themselves, on
networks whose layers cover the tile-space families (convolutions, depthwise with a cascaded
producer, pooling, matmuls, elementwise chains, reductions). And the search's estimate and
reach: transfers of different lanes overlap, and a search the room binds goes a level on."""
from pathlib import Path

import numpy as np
import pytest

from npu_sim import api, zoo
from npu_sim.compiler import tiling
from npu_sim.compiler.loader import load_bytes
from ops_sim_support import int8_conv, mac_stage, rand
from oracle import DType, GraphBuilder

DATA = Path(__file__).parent / "data"


def _graphs():
    yield "ds_cnn", zoo.build("ds_cnn", channels=32)[0]
    yield "transformer", zoo.build("transformer")[0]
    yield "et_small_cnn", (DATA / "small_cnn" / "model.tosa").read_bytes()


@pytest.mark.parametrize("name,tosa", list(_graphs()), ids=lambda v: v if isinstance(v, str) else "")
def test_boxes_per_operand_equal_boxes_of_every_tile(name, tosa, monkeypatch):
    checked = {"sample": 0, "all": 0}
    sampled, every = tiling._sampled_boxes, tiling._all_boxes

    def check_sampled(space, sizes, memo):
        got = sampled(space, sizes, memo)
        assert got == tiling.box_sizes(space, tiling._sample_tiles(space, sizes)), sizes
        checked["sample"] += 1
        return got

    def check_all(space, sizes, memo):
        got = every(space, sizes, memo)
        plan = tiling.TilePlan(sizes, tuple(space.dims), {}, {}, {}, 0, 0, 0.0)
        assert got == tiling.box_sizes(space, tiling.iterate_tiles(plan, space.dims)), sizes
        checked["all"] += 1
        return got

    monkeypatch.setattr(tiling, "_sampled_boxes", check_sampled)
    monkeypatch.setattr(tiling, "_all_boxes", check_all)
    api.compile_model(load_bytes(tosa, f"{name}.tosa"), api.load_config("edge-256"))
    assert checked["sample"] > 10 and checked["all"] > 3


def _space(lanes):
    """One loop over 64 rows of an input (1 cycle a byte) beside a 32-byte table (4 cycles a
    byte) loaded once, from the lanes given."""
    def operand(role, depends, box, n, cost, lane):
        return tiling.Operand(role, role, "int8", depends, box, 1, cost_per_byte=cost,
                              shape=(n,), lane=lane)
    return tiling.TileSpace(
        dims={"m": 64}, levels={"m": 0}, orders=[("m",)],
        inputs=[operand("x", ("m",), lambda t: (t["m"],), 64, 1.0, lanes[0]),
                operand("w", (), lambda t: ((0, 32),), 32, 4.0, lanes[1])],
        output=tiling.Operand("y", "y", "int8", ("m",), lambda t: (t["m"],), 1, on_chip=True))


def test_transfers_of_different_lanes_overlap():
    """Operands from different memories on their own DMA queues (edge-256's weights from
    flash, feature maps from system SRAM) move in parallel: the estimate takes the busier
    lane; from one memory they take turns."""
    assert tiling.evaluate(_space((1, 2)), {"m": 64}, ("m",), 0).transfer == 128
    assert tiling.evaluate(_space((1, 1)), {"m": 64}, ("m",), 0).transfer == 64 + 128


def _reduction_space():
    """64 output rows, each summing 256 terms of an input (1 cycle a byte) into an output
    stored to memory."""
    return tiling.TileSpace(
        dims={"m": 64, "k": 256}, levels={"m": 0, "k": 0}, orders=[("m", "k")],
        inputs=[tiling.Operand("x", "x", "int8", ("m", "k"), lambda t: (t["m"], t["k"]), 1,
                               cost_per_byte=1.0, shape=(64, 256))],
        output=tiling.Operand("y", "y", "int8", ("m",), lambda t: (t["m"],), 1,
                              cost_per_byte=1.0, shape=(64,)),
        reduction="k")


def test_a_split_reduction_stores_its_output_tiles_from_one_buffer():
    """Output tiles a reduction loop apart need one buffer between them: its store has the
    next tile's partial sums to finish in. Tiles one after another take two."""
    space = _reduction_space()
    split = tiling.evaluate(space, {"m": 16, "k": 64}, ("m", "k"), 0)
    whole = tiling.evaluate(space, {"m": 16, "k": 256}, ("m", "k"), 0)
    assert (split.buffers["y"], whole.buffers["y"]) == (1, 2)
    assert split.working_set == 2 * 16 * 64 + 16 * 4 + 16      # inputs, sums, one output


def test_a_step_whose_operands_are_all_on_chip_needs_no_room():
    """A step reading and writing only tensors resident on chip (a ResNet's downsample conv
    of a staged input with staged weights) tiles in no room at all: weight buffering may
    take the rest of the buffer around it. Its smallest tiles, which split the reduction,
    would need an accumulator; the whole step does not."""
    space = _reduction_space()
    for opnd in space.inputs + [space.output]:
        opnd.on_chip = True
    assert tiling.minimum_working_set(space) > 0
    plan = tiling.plan_tiles(space, 0)
    assert plan is not None and plan.working_set == 0
    # the configuration a sweep found refused at 48 KiB, though it fits in 8 KiB
    tosa = zoo.build("resnet", depth=18, resolution=64)[0]
    cfg = api.load_config("edge-256").with_overrides({"vector_unit.lanes": 1})
    api.compile_model(load_bytes(tosa, "net.tosa"), cfg, use_cache=False)


def test_split_reductions_are_bit_exact_with_one_output_buffer():
    """A 1x1 conv of 2048 input channels on a 16 KiB buffer sums each output tile over
    several tiles of the reduction: its stores all leave the one output buffer, and the
    results are the reference model's."""
    from npu_sim.isa.commands import DmaCopy
    rng = np.random.default_rng(5)
    g = GraphBuilder()
    x = g.tensor((1, 8, 8, 2048), DType.INT8, rand(rng, DType.INT8, (1, 8, 8, 2048)))
    acc = int8_conv(g, rng, x, 2048, (1, 8, 8, 64), (1, 1))
    out = mac_stage(g, rng, acc, np.array([2048 * 128 * 128]), (1, 8, 8, 64), mode="clamp")
    cfg = api.load_config("default").with_overrides({"sram.size": "16 KiB"})
    program = api.compile_model(load_bytes(g.serialize(), "conv.tosa"), cfg)
    partial = [c for c in program.commands if "acc_out" in getattr(c, "outputs", {})]
    stores = {c.src.addr for c in program.commands
              if isinstance(c, DmaCopy) and c.src.mem == 0 and c.dst.mem != 0}
    assert partial and len(stores) == 1
    got = api.simulate(program, cfg, {g.input_names[0]: g.input_values[g.input_names[0]]},
                       check_hazards=True)
    assert np.array_equal(got.outputs[out], g.run()[out])


def test_a_room_bound_search_splits_rows_in_columns(monkeypatch):
    """A 1x1 conv of 1024 input channels on edge-256 (ResNet-50's layer3): beside tiles of a
    whole row there is room for weight slices of 8 channels, half the array's columns, each
    reading the whole input again; plans of wider slices do not fit. The search goes on to
    split the rows in columns, where 16-channel slices fit: bit-exact and faster."""
    rng = np.random.default_rng(13)
    g = GraphBuilder()
    x = g.tensor((1, 14, 14, 1024), DType.INT8, rand(rng, DType.INT8, (1, 14, 14, 1024)))
    acc = int8_conv(g, rng, x, 1024, (1, 14, 14, 256), (1, 1))
    out = mac_stage(g, rng, acc, np.array([1024 * 128 * 128]), (1, 14, 14, 256), mode="clamp")
    tosa, cfg = g.serialize(), api.load_config("edge-256")
    program = api.compile_model(load_bytes(tosa, "conv.tosa"), cfg)
    got = api.simulate(program, cfg, {g.input_names[0]: g.input_values[g.input_names[0]]})
    assert np.array_equal(got.outputs[out], g.run()[out])
    monkeypatch.setattr(tiling, "ROOM_GAIN", float("inf"))
    rows = api.compile_model(load_bytes(tosa, "conv.tosa"), cfg)
    timing = [api.simulate(p, cfg, timing_only=True).report.cycles for p in (program, rows)]
    assert timing[0] < 0.7 * timing[1], timing


@pytest.mark.parametrize("name,tosa", [(n, t) for n, t in _graphs() if n != "et_small_cnn"],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_steps_of_one_shape_share_their_search(name, tosa, monkeypatch):
    """Repeated blocks (DS-CNN's depthwise-separable layers, the transformer's layers) share
    their search's boxes and plans (compiler/lower.py _shape_of); the program is the one each
    step's own search gives."""
    from npu_sim.compiler import lower
    from npu_sim.isa.encoding import encode
    cfg = api.load_config("edge-256")
    shapes = []
    shape_of = lower._shape_of

    def record(graph, step):
        shapes.append(shape_of(graph, step))
        return shapes[-1]
    monkeypatch.setattr(lower, "_shape_of", record)
    shared = encode(api.compile_model(load_bytes(tosa, f"{name}.tosa"), cfg))
    assert len(set(shapes)) < len(set(map(id, shapes))) and len(set(shapes)) > 1
    # each step its own search (a chain and the chain with a conv cascaded into it, tried
    # by compiler/cascade.py, are two)
    monkeypatch.setattr(lower, "_shape_of",
                        lambda graph, step: (step.output, step.producer is not None))
    assert encode(api.compile_model(load_bytes(tosa, f"{name}.tosa"), cfg)) == shared


def test_a_chain_reading_one_tensor_twice_is_its_own_shape():
    """x + x has one operand, x + y two: steps of equal shapes and types whose tensors alias
    differently are not of one shape."""
    from npu_sim.compiler import lower
    from npu_sim.compiler.ir import Graph, Operator, Tensor
    from npu_sim.compiler.steps import Step
    tensors = {n: Tensor(n, (1, 8), "int32") for n in "xyzw"}
    g = Graph(tensors, [], ["x", "y"], ["z", "w"])
    twice = Operator("ADD", ["x", "x"], ["z"])
    pair = Operator("ADD", ["x", "y"], ["w"])
    same = lower._shape_of(g, Step("vector", twice, chain=[twice]))
    assert same != lower._shape_of(g, Step("vector", pair, chain=[pair]))
    assert same == lower._shape_of(g, Step("vector", Operator("ADD", ["y", "y"], ["w"]),
                                           chain=[Operator("ADD", ["y", "y"], ["w"])]))


def _plain_plan(space, sizes, order, tile_overhead, boxes, work):
    """The search's estimate of one plan, written out plainly in Python (the formula of
    tiling._evaluate, one plan at a time): the oracle of the array version."""
    counts = {d: -(-n // sizes[d]) for d, n in space.dims.items()}
    in_bytes, out_bytes, burst = boxes
    n_tiles = int(np.prod(list(counts.values())))
    splits = counts.get(space.reduction, 1)
    acc_bytes = 0
    if space.reduction and splits > 1:
        acc_bytes = -(-(out_bytes // space.output.itemsize * space.acc_itemsize) // 16) * 16
    compute = n_tiles * work
    lanes = sorted({o.lane for o in space.inputs + [space.output] if not o.on_chip})
    busy = [0.0] * len(lanes)
    prefix, n = {}, 1
    for d in order:
        n *= counts[d]
        prefix[d] = n
    working, padding = acc_bytes, 0.0
    for o in space.inputs:
        if o.on_chip:
            continue
        split = [d for d in reversed(order) if d in o.depends and counts[d] > 1]
        loads = prefix[split[0]] if split else 1
        working += (2 if loads > 1 else 1) * in_bytes[o.role]
        moved = loads * in_bytes[o.role] * o.cost_per_byte
        busy[lanes.index(o.lane)] += moved * burst[o.role]
        padding += moved * (burst[o.role] - 1)
    if not space.output.on_chip:
        n_out = n_tiles // splits
        working += (2 if n_out > 1 else 1) * out_bytes
        busy[lanes.index(space.output.lane)] += n_out * out_bytes * space.output.cost_per_byte \
            * burst["<out>"]
        padding += n_out * out_bytes * space.output.cost_per_byte * (burst["<out>"] - 1)
    cost = max(busy) if busy else 0.0
    if cost > compute:
        time = cost + compute / n_tiles + n_tiles * tile_overhead
    else:
        time = compute + cost / n_tiles + n_tiles * tile_overhead
    if space.stream:
        time += compute / counts[space.stream]
    return working, time, cost, padding, n_tiles


@pytest.mark.parametrize("name,tosa", list(_graphs()), ids=lambda v: v if isinstance(v, str) else "")
def test_array_estimates_are_the_plain_formula(name, tosa, monkeypatch):
    """The search costs a level's plans as arrays (tiling._evaluate); every plan of every
    level searched on edge-256 has, bit for bit, the working set, time, transfer, padding
    and tile count of the formula computed one plan at a time."""
    checked = [0]
    candidates = tiling._candidates

    def check(space, level, tile_overhead, boxes, least=None):
        plans = candidates(space, level, tile_overhead, boxes, least)
        for j in range(len(plans.cost)):
            plan = plans.plan(j)
            key = tuple(plan.sizes.values())
            got = (plan.working_set, plan.cost, plan.transfer, plan.padding, plan.n_tiles)
            assert got == _plain_plan(space, plan.sizes, plan.order, tile_overhead,
                                      *boxes[key]), (plan.sizes, plan.order)
            checked[0] += 1
        return plans

    monkeypatch.setattr(tiling, "_candidates", check)
    api.compile_model(load_bytes(tosa, f"{name}.tosa"), api.load_config("edge-256"))
    assert checked[0] > 50


def test_more_room_still_splits_a_reduction_where_that_is_faster():
    """micro_speech's FC layer (4 channels x 4,000 terms) on default. With a 12 KiB buffer
    there is room for one channel's whole reduction, and the search had stopped at those
    tiles of one array column: 16,634 cycles against the 4,860 of the reduction in 8 parts
    that an 11 KiB buffer chose. The reduction's splits are searched too: bit-exact, and more
    room no longer costs."""
    from pathlib import Path

    data = Path(__file__).parent / "data" / "tflite" / "tflite_micro_speech"
    x = {"input_1_int8": np.load(data / "input-0.npy")}
    fc = {}
    for size in ("11 KiB", "12 KiB"):
        cfg = api.load_config("default").with_overrides({"sram.size": size})
        result = api.simulate(api.compile_model(str(data / "model.tflite"), cfg), cfg, x)
        assert np.array_equal(result.outputs["Identity_int8"], np.load(data / "ref-output-0.npy"))
        fc[size] = next(row.cycles for row in result.report.layers if row.macs == 16_000)
    assert fc["12 KiB"] <= fc["11 KiB"], fc
