"""Schedule optimisations pay where they should: weight prefetch (compiler/prefetch.py),
cascading (compiler/cascade.py) and whole-row weight tiles (compiler/tiling.py), each compared
with the same compiler without it, and staged weight prefixes stay bit-exact."""
import json
from pathlib import Path

import numpy as np
import pytest

from npu_sim.compiler import driver as compiler_driver
from npu_sim.compiler import placement as compiler_placement
from npu_sim.compiler import view_moves as compiler_view_moves
from npu_sim.compiler import prefetch as compiler_prefetch
from npu_sim.compiler import tiling as compiler_tiling
from npu_sim.compiler.emit import Emitter
from npu_sim.compiler.placement import Placement
from npu_sim.compiler.view_moves import reshape_view
from npu_sim.compiler.loader import load_bytes
from npu_sim.isa.commands import ONCHIP, DmaCopy, TensorView, dense
from npu_sim.isa.errors import DoesNotFitError
from npu_sim import api, zoo
from ops_sim_support import const, conv_attr, mac_stage, rand, scalar
from oracle import DType, GraphBuilder, run_reference


def _compile(tosa: bytes, cfg):
    return api.compile_model(load_bytes(tosa, "net.tosa"), cfg)


def _timing(program, cfg):
    return api.simulate(program, cfg, timing_only=True).report


@pytest.fixture(scope="module")
def ds_cnn():
    return zoo.build("ds_cnn", channels=32)[0]


def test_prefetch_loads_weights_during_earlier_layers(ds_cnn, monkeypatch):
    cfg = api.load_config("default")
    program = _compile(ds_cnn, cfg)
    first_compute = {}
    for cmd in program.commands:
        if not isinstance(cmd, DmaCopy):
            first_compute.setdefault(cmd.layer, cmd.id)
    early = {cmd.layer for cmd in program.commands if isinstance(cmd, DmaCopy)
             and cmd.dst.mem == ONCHIP and cmd.src.mem != ONCHIP
             and cmd.layer > 0 and cmd.id < first_compute[cmd.layer - 1]}
    assert early, "no layer's weights are queued before the previous layer computes"
    monkeypatch.setattr(compiler_driver, "plan_prefetch", lambda *args: {})
    assert _timing(program, cfg).cycles < _timing(_compile(ds_cnn, cfg), cfg).cycles


def test_cascade_keeps_the_expanded_tensor_off_chip_memory(monkeypatch):
    # 48 KiB: the expanded tensors do not fit beside their neighbours, so each one's round
    # trip through DRAM is what the cascade saves (at 64 KiB it saves 4% of the reads and
    # the two schedules tie within 0.1%)
    tosa, _ = zoo.build("mobilenet_v2", width=0.35, resolution=64, num_classes=16)
    cfg = api.load_config("default").with_overrides({"sram.size": "48 KiB"})
    cascaded = _timing(_compile(tosa, cfg), cfg)
    monkeypatch.setattr(compiler_driver, "fuse_producers", lambda graph, steps, *room: steps)
    separate = _timing(_compile(tosa, cfg), cfg)
    assert cascaded.bytes_moved["dram"]["read"] < separate.bytes_moved["dram"]["read"]
    assert cascaded.cycles < separate.cycles
    assert cascaded.total_macs == separate.total_macs


def test_staged_weight_prefixes_are_bit_exact(monkeypatch):
    """On a 16 KiB buffer most weights are too large to stage whole: their leading output
    channels are staged instead, and the layers read those boxes from the copy."""
    staged = []
    real = Placement.stage

    def recording(placement, name, *args, rows=None, **kwargs):
        done = real(placement, name, *args, rows=rows, **kwargs)
        if done and rows is not None:
            staged.append(name)
        return done

    monkeypatch.setattr(Placement, "stage", recording)
    tosa, meta = zoo.build("mobilenet_v2", width=0.35, resolution=64, num_classes=16)
    cfg = api.load_config("default").with_overrides({"sram.size": "16 KiB"})
    program = _compile(tosa, cfg)
    assert len(staged) >= 5
    name, shape = meta["input"]["name"], meta["input"]["shape"]
    x = np.random.default_rng(3).integers(-128, 128, shape, dtype=np.int8)
    expected = run_reference(tosa, {name: x}, meta["output_names"])
    outputs = api.simulate(program, cfg, {name: x}).outputs
    for out in meta["output_names"]:
        assert np.array_equal(outputs[out], expected[out])


def test_prefix_parts_stage_more_of_a_load_bound_layer(monkeypatch):
    """MobileNetV2's classifier (1000 rows of weights, loads far longer than its compute) does
    not fit beside the weights staged for the layers before it: its first boxes are staged
    where room allows, and further parts where and when the constants read before it free
    room. Bit-exact, and faster than with the first part alone (both with the first part
    the one best run, not the runs of test_a_prefix_read_last_is_staged_...)."""
    monkeypatch.setattr(compiler_prefetch, "_fills_earlier", lambda *args: False)
    parts = {}
    real = Placement.stage

    def recording(placement, name, *args, rows=None, row0=0):
        done = real(placement, name, *args, rows=rows, row0=row0)
        if done and rows is not None:
            parts.setdefault(name, []).append((row0, rows))
        return done

    monkeypatch.setattr(Placement, "stage", recording)
    tosa, meta = zoo.build("mobilenet_v2", width=0.35, resolution=96, num_classes=1000)
    cfg = api.load_config("default")
    program = _compile(tosa, cfg)
    assert len(parts["classifier_weight_ohwi"]) >= 2
    name, shape = meta["input"]["name"], meta["input"]["shape"]
    x = np.random.default_rng(4).integers(-128, 128, shape, dtype=np.int8)
    expected = run_reference(tosa, {name: x}, meta["output_names"])
    outputs = api.simulate(program, cfg, {name: x}).outputs
    assert all(np.array_equal(outputs[out], expected[out]) for out in meta["output_names"])
    best = compiler_prefetch._best_prefix
    monkeypatch.setattr(compiler_prefetch, "_best_prefix", lambda *args, spare=None, **kw:
                        None if spare is not None else best(*args, **kw))
    assert _timing(program, cfg).cycles < _timing(_compile(tosa, cfg), cfg).cycles


def test_weights_whose_load_is_not_hidden_stream_to_their_reader(monkeypatch):
    """The transformer's QKV weights are staged during its first layer norm, which hides
    little of their load: they come in box by box, the QKV layer keeps the tiles of 64 output
    channels it had before they were staged, and its first tile computes while later boxes
    load. Bit-exact, and faster than one tile waiting for all of them."""
    cfg = api.load_config("default")
    tosa, meta = zoo.build("transformer")
    program = _compile(tosa, cfg)
    layer = next(i for i, row in enumerate(program.layers) if row.name == "layer0_attn_qkv_rescale")
    tiles = [c for c in program.commands if getattr(c, "unit", "") == "mac" and c.layer == layer]
    boxes = [c for c in program.commands if isinstance(c, DmaCopy) and c.layer == layer
             and c.dst.mem == ONCHIP and c.dst.shape[1:] == (1, 1, 64)]
    assert len(tiles) == 3 and len(boxes) == 3
    name, shape = meta["input"]["name"], meta["input"]["shape"]
    x = np.random.default_rng(5).integers(-128, 128, shape, dtype=np.int8)
    result = api.simulate(program, cfg, {name: x})
    expected = run_reference(tosa, {name: x}, meta["output_names"])
    assert all(np.array_equal(result.outputs[out], expected[out]) for out in meta["output_names"])
    assert result.sim.start[tiles[0].id] < result.sim.end[boxes[-1].id]
    plan = compiler_driver.plan_prefetch

    def staged_whole(graph, steps, placement, lowering):
        preloads = plan(graph, steps, placement, lowering)
        placement.streamed.clear()
        return preloads

    monkeypatch.setattr(compiler_driver, "plan_prefetch", staged_whole)
    whole = _compile(tosa, cfg)
    assert len([c for c in whole.commands if getattr(c, "unit", "") == "mac"
                and c.layer == layer]) == 1
    assert result.report.cycles < _timing(whole, cfg).cycles


def test_a_graph_input_several_layers_read_is_loaded_once(monkeypatch):
    """The transformer's input is read by its first layer norm's two steps and by the residual
    add after the attention. It is copied on chip once, before the first step (which loads it
    whole anyway), on the activations' queue, and all of them read the copy: bit-exact, and
    faster than each loading it from DRAM."""
    cfg = api.load_config("default")
    tosa, meta = zoo.build("transformer")
    name, shape = meta["input"]["name"], meta["input"]["shape"]

    def loads_of_input(program):
        home = next(b.view for b in program.inputs if b.name == name)
        return [c for c in program.commands if isinstance(c, DmaCopy) and c.src.mem == home.mem
                and home.addr <= c.src.addr < home.addr + home.nbytes]

    program = _compile(tosa, cfg)
    once = loads_of_input(program)
    assert len(once) == 1 and once[0].channel == 0 and once[0].dst.mem == ONCHIP
    x = np.random.default_rng(6).integers(-128, 128, shape, dtype=np.int8)
    result = api.simulate(program, cfg, {name: x})
    expected = run_reference(tosa, {name: x}, meta["output_names"])
    assert all(np.array_equal(result.outputs[out], expected[out]) for out in meta["output_names"])
    can_stage = Placement.can_stage
    monkeypatch.setattr(Placement, "can_stage", lambda placement, tensor, *args, **kw:
                        tensor != name and can_stage(placement, tensor, *args, **kw))
    each = _compile(tosa, cfg)
    assert len(loads_of_input(each)) >= 3
    assert result.report.cycles < _timing(each, cfg).cycles


def test_a_prefix_read_last_is_staged_where_room_frees_step_by_step(monkeypatch):
    """The classifier, read last, fits only a box or two beside the weights staged for the
    layers before it until they are read. Staged run by run, each run at the earliest step
    with room for it, its load keeps DRAM busy over those layers, where the one run that
    hides the most on its own starts late and holds that room. Bit-exact, and faster."""
    starts = {}
    real = Placement.stage

    def recording(placement, name, first, *args, rows=None, row0=0):
        done = real(placement, name, first, *args, rows=rows, row0=row0)
        if done and rows is not None:
            starts.setdefault(name, []).append(first)
        return done

    monkeypatch.setattr(Placement, "stage", recording)
    tosa, meta = zoo.build("mobilenet_v2", width=0.35, resolution=96, num_classes=1000)
    cfg = api.load_config("default")
    program = _compile(tosa, cfg)
    run_by_run = sorted(starts.pop("classifier_weight_ohwi"))
    name, shape = meta["input"]["name"], meta["input"]["shape"]
    x = np.random.default_rng(5).integers(-128, 128, shape, dtype=np.int8)
    expected = run_reference(tosa, {name: x}, meta["output_names"])
    outputs = api.simulate(program, cfg, {name: x}).outputs
    assert all(np.array_equal(outputs[out], expected[out]) for out in meta["output_names"])
    monkeypatch.setattr(compiler_prefetch, "_fills_earlier", lambda *args: False)
    one_run = _compile(tosa, cfg)
    one_run_starts = sorted(starts.pop("classifier_weight_ohwi"))
    assert run_by_run[0] < one_run_starts[0] and len(run_by_run) > len(one_run_starts)
    assert _timing(program, cfg).cycles < _timing(one_run, cfg).cycles


def test_narrow_weight_columns_give_way_to_whole_rows(monkeypatch):
    """A classifier MATMUL's weights [1, C, W] tiled by columns alone move 8-byte runs in
    32-byte bursts from flash: the search goes on to split the reduction and reads whole rows."""
    rng = np.random.default_rng(11)
    a = rng.integers(-128, 128, (1, 1, 512), dtype=np.int8)
    b = rng.integers(-128, 128, (1, 512, 1000), dtype=np.int8)
    g = GraphBuilder()
    ai = g.tensor(a.shape, DType.INT8, a)
    out = g.output((1, 1, 1000), DType.INT32)
    g.op("MATMUL", [ai, const(g, b, DType.INT8), scalar(g, 3, DType.INT8),
                    scalar(g, -2, DType.INT8)], [out])
    tosa = g.serialize()
    cfg = api.load_config("edge-256")
    program = _compile(tosa, cfg)
    loads = [c.src for c in program.commands if isinstance(c, DmaCopy) and c.src.mem != ONCHIP
             and c.src.nbytes >= 1024]
    assert loads and all(v.burst_bytes() <= 1.25 * v.nbytes for v in loads)
    expected = np.einsum("nhc,ncw->nhw", a.astype(np.int64) - 3, b.astype(np.int64) + 2)
    assert np.array_equal(api.simulate(program, cfg, {g.input_names[0]: a}).outputs[out],
                          expected)
    # the padding rule, and the room-bound search that now also reaches the reduction's
    # splits, each find them; neither: narrow columns
    monkeypatch.setattr(compiler_tiling, "PADDING_SHARE", float("inf"))
    monkeypatch.setattr(compiler_tiling, "ROOM_GAIN", float("inf"))
    assert _timing(program, cfg).cycles < 0.6 * _timing(_compile(tosa, cfg), cfg).cycles



def test_fill_bound_tiles_give_way_to_a_split_reduction(monkeypatch):
    """A transformer's FFN on edge-256's 48 KiB buffer, whose 1024-term rows tiled by rows
    alone leave a few rows per tile, each paying the array's preload and fill: the search goes
    on to split the reduction (partial sums on chip), bit-exact and far faster."""
    data, meta = zoo.build("transformer", tokens=64, d_model=256, heads=4, d_ff=1024, layers=1)
    cfg = api.load_config("edge-256")
    program = _compile(data, cfg)
    name = meta["input"]["name"]
    x = np.random.default_rng(5).integers(-128, 128, meta["input"]["shape"]).astype(np.int8)
    expected = run_reference(data, {name: x}, meta["output_names"])
    got = api.simulate(program, cfg, {name: x}).outputs
    assert all(np.array_equal(got[n], expected[n]) for n in meta["output_names"])
    # the fill rule, and the room-bound search that now also reaches the reduction's
    # splits, each find them; neither: tiles of a few rows
    monkeypatch.setattr(compiler_tiling, "TILE_WASTE", float("inf"))
    monkeypatch.setattr(compiler_tiling, "ROOM_GAIN", float("inf"))
    assert _timing(program, cfg).cycles < 0.5 * _timing(_compile(data, cfg), cfg).cycles


DATA = Path(__file__).parent / "data"
ATTN_BLOCK = DATA / "attn_block" / "model.tosa"
MHA_BLOCK = DATA / "mha_block" / "model.tosa"


def test_loads_run_ahead_of_earlier_layers_stores_and_moves(monkeypatch):
    """ExecuTorch's nn.MultiheadAttention block is 46 small dependent layers: each one's
    input and constants load from DRAM while earlier layers still compute, instead of
    queueing behind their stores, on-chip moves and the weights staged for later layers
    (compiler/emit.py HoistingEmitter); the order stays hazard-free (the suite checks every
    run) and bit-exact. Its small constants are left to each step's own loads here (no
    packs), as hoisting is what moves those."""
    monkeypatch.setattr(compiler_prefetch, "_packs", lambda *args: [])
    cfg = api.load_config("default")
    program = api.compile_model(MHA_BLOCK, cfg, use_cache=False)
    first_compute = {}
    for cmd in program.commands:
        if not isinstance(cmd, DmaCopy):
            first_compute.setdefault(cmd.layer, cmd.id)
    ahead = {cmd.layer for cmd in program.commands if isinstance(cmd, DmaCopy)
             and cmd.src.mem != ONCHIP and cmd.layer - 1 in first_compute
             and cmd.id < first_compute[cmd.layer - 1]}
    assert len(ahead) >= 5
    hoisted = _timing(program, cfg).cycles
    monkeypatch.setattr(compiler_driver, "HoistingEmitter", Emitter)
    in_order = _timing(api.compile_model(MHA_BLOCK, cfg, use_cache=False), cfg).cycles
    assert hoisted < 0.8 * in_order


def test_small_constants_load_in_packs(monkeypatch):
    """The attention block's layer norm reads eight constants of 1-256 bytes: staged as one
    pack (laid out together in DRAM and on chip), they cost one DMA's setup instead of eight
    in a row, and the first layer's weights queue behind one descriptor; bit-exact."""
    cfg = api.load_config("default")
    packed = api.compile_model(ATTN_BLOCK, cfg, use_cache=False)
    monkeypatch.setattr(compiler_prefetch, "_packs", lambda *args: [])
    separate = api.compile_model(ATTN_BLOCK, cfg, use_cache=False)

    def loads_before_the_array(program):
        first_mac = next(c.id for c in program.commands if getattr(c, "unit", "") == "mac")
        return [c for c in program.commands[:first_mac]
                if isinstance(c, DmaCopy) and c.src.mem != ONCHIP and c.engine == "dma1"]

    assert len(loads_before_the_array(packed)) <= len(loads_before_the_array(separate)) - 6
    assert _timing(packed, cfg).cycles < _timing(separate, cfg).cycles
    desc = json.loads((DATA / "attn_block" / "desc.json").read_text())
    x = np.load(DATA / "attn_block" / desc["ifm_file"][0])
    out = api.simulate(packed, cfg, {desc["ifm_name"][0]: x}).outputs[desc["ofm_name"][0]]
    assert np.array_equal(out, np.load(DATA / "attn_block" / desc["ofm_file"][0]))


def test_a_pack_takes_one_setup_of_constants_read_before_their_own_setups_end():
    setup = 32
    readers = {"a": [0], "b": [1, 4], "c": [2], "w": [3], "d": [5], "e": [6], "f": [7]}
    load = {"a": 8, "b": 8, "c": 8, "w": 200, "d": 20, "e": 4, "f": 4}
    spent = [10, 10, 10, 500, 10, 10, 10, 10]        # each step's compute, by its plan
    roots = list(readers)
    # a, b, c together (w's load is longer than a setup: its own); d is read 530 cycles
    # after a, long after its own setup, and would overflow the pack; d, e and f fit one
    assert compiler_prefetch._packs(roots, readers, load, setup, spent) == [
        ["a", "b", "c"], ["d", "e", "f"]]
    # a pack must replace two loads at least
    assert compiler_prefetch._packs(["a", "w"], readers, load, setup, spent) == []


@pytest.mark.parametrize("config", ["default", "edge-256", "large-8k"])
@pytest.mark.parametrize("network", ["attn_block", "transformer"])
def test_attention_schedules_never_beat_the_attainable_bound(network, config):
    cfg = api.load_config(config)
    if network == "attn_block":
        program = api.compile_model(ATTN_BLOCK, cfg, use_cache=False)
    else:
        program = _compile(zoo.build("transformer")[0], cfg)
    report = _timing(program, cfg)
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"]


def test_layer_norm_steps_between_mac_layers_are_tiled_by_rows(monkeypatch):
    """Not only the vector steps next to a MAC layer: those chained to them through other
    vector steps (the final layer norm's last step, fed by its reductions) are tiled by rows
    too, so their loads and stores overlap their compute. (The first layer norm's steps load
    the network's input when it is not staged on chip, as here.)"""
    cfg = api.load_config("default")
    can_stage = Placement.can_stage
    monkeypatch.setattr(Placement, "can_stage", lambda placement, tensor, *args, **kw:
                        tensor != "input" and can_stage(placement, tensor, *args, **kw))
    program = _compile(zoo.build("transformer")[0], cfg)
    tiles = {layer.name: layer.tiles for layer in program.layers}
    assert tiles["layer0_ln1_center_i32"] > 1 and tiles["final_ln_rescale"] > 1


def test_reshape_view_matches_numpy():
    """A reshape of a strided (transposed) view by strides alone reads the elements numpy's
    reshape of the same array gives; where it returns None a copy would be needed."""
    rng = np.random.default_rng(7)
    exact = 0
    for _ in range(400):
        shape = tuple(int(n) for n in rng.integers(1, 5, size=rng.integers(1, 5)))
        full = dense(0, 0, shape, "int8")
        perm = rng.permutation(len(shape))
        view = TensorView(0, 0, tuple(shape[p] for p in perm),
                          tuple(full.strides[p] for p in perm), "int8")
        base = np.arange(full.nbytes, dtype=np.int8)
        want = np.lib.stride_tricks.as_strided(base, view.shape, view.strides)
        new, n = [], want.size
        while n > 1:
            k = int(rng.choice([d for d in range(2, n + 1) if n % d == 0]))
            new.append(k)
            n //= k
        new.insert(int(rng.integers(0, len(new) + 1)), 1)
        got = reshape_view(view, tuple(new))
        if got is not None:
            assert np.array_equal(np.lib.stride_tricks.as_strided(base, got.shape, got.strides),
                                  want.reshape(new))
            exact += 1
    assert exact > 200


def test_view_moves_read_by_moves_are_composed_into_their_readers(monkeypatch):
    """The attention block's TRANSPOSEs are read only by SLICEs, the transformer's q/k/v SLICEs
    only by TRANSPOSEs (through reshapes): each pair is one view, the first step emits nothing.
    Where the composed view is of a tensor MAC steps make on chip and MAC steps read it (q and
    v of each head, rows of 16-32 B), they read it in place and the second emits nothing
    either; a transposed K (a byte a run) is still moved. The run is faster (bit-exactness:
    test_models)."""
    cfg = api.load_config("default")
    program = api.compile_model(ATTN_BLOCK, cfg, use_cache=False)
    names = {layer.name for layer in program.layers}
    assert not names & {"tosa_transpose_default", "tosa_slice_default", "tosa_slice_default_2"}
    assert "tosa_slice_default_1" in names
    tosa = zoo.build("transformer")[0]
    transformer = _compile(tosa, cfg)
    names = {layer.name for layer in transformer.layers}
    assert not names & {"layer0_attn_q", "layer0_attn_q_t", "layer0_attn_v_t"}
    assert "layer0_attn_k_t" in names
    composed = _timing(program, cfg).cycles, _timing(transformer, cfg).cycles
    monkeypatch.setattr(compiler_view_moves, "MIN_COMPUTE_RUN", 1 << 30)
    moved = (_timing(api.compile_model(ATTN_BLOCK, cfg, use_cache=False), cfg).cycles,
             _timing(_compile(tosa, cfg), cfg).cycles)
    assert all(c < m for c, m in zip(composed, moved))
    monkeypatch.setattr(compiler_placement, "view_moves",
                        lambda graph, steps, alias: ({}, {}, set()))
    apart = (_timing(api.compile_model(ATTN_BLOCK, cfg, use_cache=False), cfg).cycles,
             _timing(_compile(tosa, cfg), cfg).cycles)
    assert all(m < a for m, a in zip(moved, apart))


def test_views_of_a_tensor_stored_off_chip_are_moved():
    """A MAC step reads a view of a tensor stored in DRAM (BERT's QKV output on default) in
    place only when its copy could not stay on chip either: each tile would gather its rows
    from DRAM, so a view the resident share holds is moved on chip and the matmuls read the
    copy. The transformer's QKV
    output stays on chip in 16 KiB, not in 4 KiB."""
    tosa = zoo.build("transformer")[0]
    moves = {}
    for size in ("4 KiB", "16 KiB"):
        program = _compile(tosa, api.load_config("default").with_overrides({"sram.size": size}))
        moves[size] = {layer.name for layer in program.layers} & {
            f"layer0_attn_{n}_t" for n in "qkv"}
    assert moves == {"4 KiB": {f"layer0_attn_{n}_t" for n in "qkv"},
                     "16 KiB": {"layer0_attn_k_t"}}


def test_an_elementwise_graph_is_one_vector_program():
    """TFLite's int8 softmax computes 1 / sum with Newton-Raphson steps whose intermediates
    each feed several later operators: the chain holds the whole graph of them (every reader
    inside it), so they run as one vector-unit program instead of one command each."""
    model = Path(__file__).parent / "data" / "tflite" / "audio_example1" / "model.tflite"
    cfg = api.load_config("large-8k")
    program = api.compile_model(model, cfg, use_cache=False)
    longest = max(program.layers, key=lambda layer: len(layer.ops) if layer.unit == "vector" else 0)
    assert len(longest.ops) > 16 and longest.ops.count("MUL") >= 6


def test_residual_adds_write_over_their_input_when_memory_is_short(monkeypatch):
    """The 9 KB maps live across each ResNet-50 residual add (its conv cascaded into it, so
    that conv's output is never stored) need 18 KiB of feature-map memory, more than 17 KiB;
    the add's output written over the input it reads last fits (15.75 KiB), bit-exact.
    (ResNet-50-224 on edge-256's 2 MiB system SRAM is the same case at 802 KB a map.)"""
    tosa, meta = zoo.build("resnet", depth=50, resolution=48, width=16, num_classes=10)
    cfg = api.load_config("edge-256").with_overrides(
        {"memories.system_sram.size": "17 KiB", "sram.size": "16 KiB"})
    program = _compile(tosa, cfg)
    assert program.memory_sizes[program.memories.index("system_sram") + 1] <= 17 * 1024
    name = meta["input"]["name"]
    x = np.random.default_rng(2).integers(-128, 128, meta["input"]["shape"]).astype(np.int8)
    expected = run_reference(tosa, {name: x}, meta["output_names"])
    got = api.simulate(program, cfg, {name: x}).outputs
    assert all(np.array_equal(got[n], expected[n]) for n in meta["output_names"])
    monkeypatch.setattr(Placement, "_in_place", lambda self, *args: {})
    with pytest.raises(DoesNotFitError, match="does not fit in system_sram"):
        _compile(tosa, cfg)


def test_tiles_of_whole_array_folds_are_candidates():
    """768 output channels halve to 24, three quarters of a 32-column fold: whole folds (32,
    64, 96, ...) are searched too (BERT-base's FFN on default tiles in 32 channels)."""
    space = compiler_tiling.TileSpace(dims={"oc": 768, "ic": 3072}, levels={"oc": 0, "ic": 1},
                                      orders=[("oc", "ic")], inputs=[], output=None,
                                      folds={"oc": 32})
    sizes = compiler_tiling._sizes(space, "oc")
    assert {768, 384, 192, 96, 64, 32, 24} <= set(sizes) and sizes == sorted(sizes, reverse=True)
    assert compiler_tiling._sizes(space, "ic")[:3] == [3072, 1536, 768]


@pytest.mark.parametrize("config", ["default", "edge-256"])
def test_the_first_layer_computes_while_the_input_transpose_moves(config):
    """ExecuTorch's small CNN starts with an NCHW -> NHWC TRANSPOSE, a data-movement step
    whose block copies hold both DMA queues: the first conv's weights are staged ahead of
    them (compiler/driver.py), so the conv computes on the first bands moved instead of
    waiting behind the whole transpose for its weights; never below the bound."""
    cfg = api.load_config(config)
    program = api.compile_model(DATA / "small_cnn" / "model.tosa", cfg, use_cache=False)
    transpose_ids = [cmd.id for cmd in program.commands if cmd.layer == 0]
    weights = [cmd.id for cmd in program.commands if isinstance(cmd, DmaCopy)
               and cmd.layer == 1 and cmd.src.mem != ONCHIP]
    assert weights and max(weights) < max(transpose_ids)
    report = _timing(program, cfg)
    transpose, conv = report.layers[0], report.layers[1]
    assert transpose.ops == ["TRANSPOSE"] and conv.ops[0] == "CONV2D"
    assert conv.compute_start < transpose.end
    assert report.cycles >= report.roofline["attainable"]["cycles"]


def test_the_layer_after_a_layout_op_is_tiled_in_rows():
    """ExecuTorch's MobileNetV2 moves its 128x128 NCHW input to NHWC in blocks of rows; its
    first conv fits the buffer whole, but is tiled by rows (compiler/driver.py _handoffs) so
    that it computes on the first blocks while the rest are moved."""
    cfg = api.load_config("default")
    program = api.compile_model(DATA / "mbv2_050_128" / "model.tosa", cfg, use_cache=False)
    report = _timing(program, cfg)
    transpose, conv = report.layers[0], report.layers[1]
    assert transpose.ops == ["TRANSPOSE"] and conv.ops[0] == "CONV2D"
    assert conv.tiles > 1 and conv.compute_start < transpose.end
    assert report.cycles >= report.roofline["attainable"]["cycles"]


def test_staged_transpose_leaves_the_flash_queue_to_weights():
    """On edge-256 the weights live in flash, which small_cnn's input TRANSPOSE (system SRAM
    and the buffer) never touches: its staged blocks keep off the constants' queue, so the
    next layers' weights stream from flash while it moves. On default both are in DRAM, and
    the blocks, which the vector unit reorders into their place on chip (no DMA stores
    them), are loaded on the feature maps' queue: the weights' queue stays free for them
    (on the constants' queue too, small_cnn at 8 GB/s ran 3% slower)."""
    model = Path(__file__).parent / "data" / "small_cnn" / "model.tosa"
    queues = {}
    for name in ("edge-256", "default"):
        program = api.compile_model(model, api.load_config(name))
        queues[name] = {c.channel for c in program.commands
                        if isinstance(c, DmaCopy) and c.layer == 0}
        assert program.layers[0].ops == ["TRANSPOSE"]
        assert not [c for c in program.commands if isinstance(c, DmaCopy) and c.layer == 0
                    and c.src.mem == c.dst.mem == ONCHIP]
    assert queues == {"edge-256": {0}, "default": {0}}


def test_weights_too_large_for_the_buffer_stream_once():
    """ResNet-50's layer2_0_conv2 on edge-256: 147 KB of 3x3 weights in flash, a 401 KB input
    in system SRAM, a 48 KiB buffer. Tiles of one output row and all 128 channels would spill
    partial sums; the search must not judge its tiles against that spilling whole layer
    (which made 2-channel tiles reloading every weight per output row, 28x the flash bytes,
    look no worse), but against the whole layer's spill-free array cycles: the reduction is
    split and each weight crosses flash about once."""
    rng = np.random.default_rng(77)
    g = GraphBuilder()
    x = g.tensor((1, 56, 56, 128), DType.INT8, rand(rng, DType.INT8, (1, 56, 56, 128)))
    w = const(g, rand(rng, DType.INT8, (128, 3, 3, 128)), DType.INT8)
    acc = g.intermediate((1, 28, 28, 128), DType.INT32)
    g.op("CONV2D", [x, w, const(g, np.zeros(128, np.int32), DType.INT32),
                    scalar(g, 0, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr((1, 0, 1, 0), (2, 2), (1, 1)))
    mac_stage(g, rng, acc, np.array([9 * 128 * 128 * 128]), (1, 28, 28, 128), mode="clamp")
    program = _compile(g.serialize(), api.load_config("edge-256"))
    flash = program.memories.index("flash") + 1
    moved = sum(c.src.nbytes for c in program.commands
                if isinstance(c, DmaCopy) and c.src.mem == flash)
    assert moved <= 1.1 * (128 * 9 * 128 + 128 * 12), moved
