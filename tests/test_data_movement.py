"""Layout operators at the memory's rate (issue 13, item 2): a move between tensors in external
memory costs about what its bytes cost, never less (bench/data_movement.py measures more
layouts on every preset)."""
import numpy as np
import pytest

from npu_sim import api
from npu_sim.compiler.loader import load_bytes
from oracle import DType, GraphBuilder
from ops_sim_support import _attr, cfg, rand, scalar, shape_const  # noqa: F401 (cfg: fixture)

SHAPE = (1, 24, 24, 64)


def _move(kind: str) -> GraphBuilder:
    """One layout operator from a graph input to a graph output, both in external memory."""
    g = GraphBuilder()
    x = g.tensor(SHAPE, DType.INT8, rand(np.random.default_rng(11), DType.INT8, SHAPE))
    if kind == "transpose_rows":     # rows and columns swap: 64-byte runs either side
        g.op("TRANSPOSE", [x], [g.output(SHAPE, DType.INT8)],
             _attr("TransposeAttribute", [0, 2, 1, 3]))
    elif kind == "transpose_channels":   # NHWC -> NCHW: a byte gather
        g.op("TRANSPOSE", [x], [g.output((1, 64, 24, 24), DType.INT8)],
             _attr("TransposeAttribute", [0, 3, 1, 2]))
    elif kind == "slice":
        size = (1, 12, 24, 64)
        g.op("SLICE", [x, shape_const(g, (0, 6, 0, 0)), shape_const(g, size)],
             [g.output(size, DType.INT8)])
    elif kind == "concat":
        y = g.tensor(SHAPE, DType.INT8, rand(np.random.default_rng(12), DType.INT8, SHAPE))
        g.op("CONCAT", [x, y], [g.output((1, 48, 24, 64), DType.INT8)],
             _attr("ConcatAttribute", 1))
    elif kind == "tile":             # the input read once, written twice
        g.op("TILE", [x, shape_const(g, (1, 2, 1, 1))], [g.output((1, 48, 24, 64), DType.INT8)])
    elif kind == "pad":              # a spatial border: only it is filled
        pad_value = scalar(g, 0, DType.INT8)
        g.op("PAD", [x, shape_const(g, (0, 0, 1, 1, 1, 1, 0, 0)), pad_value],
             [g.output((1, 26, 26, 64), DType.INT8)])
    elif kind == "reverse_rows":
        g.op("REVERSE", [x], [g.output(SHAPE, DType.INT8)], _attr("ReverseAttribute", 1))
    else:                            # reverse the channels: a byte gather
        g.op("REVERSE", [x], [g.output(SHAPE, DType.INT8)], _attr("ReverseAttribute", 3))
    return g


def _run(kind: str, config: str):
    cfg = api.load_config(config)
    program = api.compile_model(load_bytes(_move(kind).serialize(), "m.tosa"), cfg)
    return program, api.simulate(program, cfg, timing_only=True).report


KINDS = ["transpose_rows", "transpose_channels", "slice", "concat", "tile", "pad",
         "reverse_rows", "reverse_channels"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("config", ["default", "edge-256", "large-8k"])
def test_moves_are_never_faster_than_the_bound(kind, config):
    # A DMA within one external memory reads and writes each byte through its port: charging
    # the larger side alone ran these in half their bound on default and edge-256.
    _, report = _run(kind, config)
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"]


@pytest.mark.parametrize("kind", KINDS)
def test_moves_run_at_the_memory_rate(kind):
    # default: DRAM at 16 B/cycle, so every move is bound by its bytes there; a byte gather
    # (NHWC -> NCHW, a reversal of the channels) is staged and reordered by the vector unit
    # in whole words, a spatial PAD fills only its border, TILE reads its input once. What is
    # left above the bound is a command's setup and DRAM latency or two (132 cycles each).
    program, report = _run(kind, "default")
    assert report.cycles <= 1.08 * report.roofline["attainable"]["cycles"], kind
    permutes = [c for c in program.commands if getattr(c, "op", "") == "permute"]
    assert bool(permutes) == kind.endswith("channels")


def _gather(kind: str, dtype) -> GraphBuilder:
    """Moves whose direct copy gathers elements: the staged blocks are permuted on chip."""
    shape = (1, 10, 12, 24)
    g = GraphBuilder()
    x = g.tensor(shape, dtype, rand(np.random.default_rng(21), dtype, shape))
    if kind == "transpose":
        g.op("TRANSPOSE", [x], [g.output((1, 24, 10, 12), dtype)],
             _attr("TransposeAttribute", [0, 3, 1, 2]))
    elif kind == "reverse":
        g.op("REVERSE", [x], [g.output(shape, dtype)], _attr("ReverseAttribute", 3))
    else:                               # repeats of the innermost dim: stride 0 in the block
        g.op("TILE", [x, shape_const(g, (1, 1, 1, 3))], [g.output((1, 10, 12, 72), dtype)])
    return g


@pytest.mark.parametrize("dtype", [DType.INT8, DType.INT16])
@pytest.mark.parametrize("kind", ["transpose", "reverse", "tile"])
def test_permuted_blocks_are_bit_exact(kind, dtype, cfg):
    from ops_sim_support import check

    program = check(_gather(kind, dtype), cfg)
    if cfg == "default" and kind != "tile" and dtype == DType.INT8:   # a byte per bank word
        assert any(getattr(c, "op", "") == "permute" for c in program.commands)


def test_a_permute_reading_outside_its_block_is_refused():
    from npu_sim.ops.data_layout import permute

    block = np.arange(12, dtype=np.int8)
    out = np.zeros((3, 4), np.int8)
    permute({"in0": block}, {"base": 0, "strides": [1, 3]}, out)
    assert np.array_equal(out, block.reshape(4, 3).T)
    permute({"in0": block}, {"base": 11, "strides": [-1, -3]}, out)     # both reversed
    assert np.array_equal(out, block[::-1].reshape(4, 3).T)
    with pytest.raises(IndexError):
        permute({"in0": block}, {"base": 1, "strides": [1, 3]}, out)


def _narrow(kind: str) -> GraphBuilder:
    """Parts of an output each written in 3-byte runs: a CONCAT of 3-channel maps along the
    channels, a PAD of 3 channels to 4."""
    shape = (1, 20, 24, 3)
    g = GraphBuilder()
    x = g.tensor(shape, DType.INT8, rand(np.random.default_rng(31), DType.INT8, shape))
    if kind == "concat":
        y = g.tensor(shape, DType.INT8, rand(np.random.default_rng(32), DType.INT8, shape))
        g.op("CONCAT", [x, y], [g.output((1, 20, 24, 6), DType.INT8)], _attr("ConcatAttribute", 3))
    else:
        g.op("PAD", [x, shape_const(g, (0, 0, 0, 0, 0, 0, 0, 1)), scalar(g, 5, DType.INT8)],
             [g.output((1, 20, 24, 4), DType.INT8)])
    return g


@pytest.mark.parametrize("kind", ["concat", "pad"])
def test_narrow_parts_are_assembled_on_chip(kind, cfg, monkeypatch):
    from npu_sim.compiler import lower
    from npu_sim.isa.commands import DmaCopy, DmaFill
    from ops_sim_support import check, get_config

    program = check(_narrow(kind), cfg)             # bit-exact on 1 MiB, 4 KiB and 2 KiB
    if cfg != "default":
        return
    # every write to DRAM is a block stored whole from the buffer, none a 3-byte run
    writes = [c for c in program.commands if isinstance(c, (DmaCopy, DmaFill)) and c.dst.mem]
    assert writes and all(c.dst.contiguous_run() >= 32 for c in writes)
    cycles = api.simulate(program, get_config(cfg), timing_only=True).report.cycles
    monkeypatch.setattr(lower, "plan_assembly", lambda *a: None)
    direct = api.compile_model(load_bytes(_narrow(kind).serialize()), get_config(cfg))
    assert 2 * cycles < api.simulate(direct, get_config(cfg), timing_only=True).report.cycles


def _cropped_downsample() -> GraphBuilder:
    """A conv's 16x16 map cropped to 15x15 (TOSA's exact output size for a 1x1 stride-2
    conv on an even map needs the last row and column gone, so frontends emit a SLICE),
    then that conv: ResNet's projection shortcut."""
    from ops_sim_support import int8_conv, mac_stage
    rng = np.random.default_rng(13)
    g = GraphBuilder()
    x = g.tensor((1, 16, 16, 32), DType.INT8, rand(rng, DType.INT8, (1, 16, 16, 32)))
    acc = int8_conv(g, rng, x, 32, (1, 16, 16, 64), (3, 3), pad=(1, 1, 1, 1))
    mid = mac_stage(g, rng, acc, np.array([9 * 32 * 128 * 128]), (1, 16, 16, 64),
                    mode="rescale", output=False)
    crop = g.intermediate((1, 15, 15, 64), DType.INT8)
    g.op("SLICE", [mid, shape_const(g, (0, 0, 0, 0)), shape_const(g, (1, 15, 15, 64))], [crop])
    acc = int8_conv(g, rng, crop, 64, (1, 8, 8, 16), (1, 1), stride=(2, 2))
    mac_stage(g, rng, acc, np.array([64 * 128 * 128]), (1, 8, 8, 16), mode="rescale")
    return g


def test_a_crop_too_large_to_stay_on_chip_is_read_in_place(monkeypatch):
    """On a 4 KiB buffer the 14 KB crop goes to DRAM either way: copying it there reads its
    960-byte rows, writes them and reads them back, so the strided conv reads the rows in
    place instead (the SLICE emits nothing), bit-exact and faster."""
    from npu_sim.compiler import placement
    from ops_sim_support import check, get_config

    cfg = get_config("4KiB")
    program = check(_cropped_downsample(), "4KiB")
    assert [list(layer.ops) for layer in program.layers] == [["CONV2D", "RESCALE"]] * 2
    cycles = api.simulate(program, cfg, timing_only=True).report.cycles
    monkeypatch.setattr(placement, "reads_in_place_off_chip", lambda *a: False)
    moved = api.compile_model(load_bytes(_cropped_downsample().serialize()), cfg)
    assert [layer.ops[0] for layer in moved.layers] == ["CONV2D", "SLICE", "CONV2D"]
    assert cycles < api.simulate(moved, cfg, timing_only=True).report.cycles


@pytest.mark.parametrize("config, overrides", [
    ("large-8k", {}),                           # four queues: loads on two, stores on two
    ("default", {"dma.channels": 1}),           # one queue: loads and stores in turn
    ("default", {"dma.channels": 3})])
@pytest.mark.parametrize("slots", [3, 4])
@pytest.mark.parametrize("kind", ["staged", "assembled"])
def test_a_deeper_ring_of_buffers_is_bit_exact(kind, config, overrides, slots, monkeypatch):
    from npu_sim.compiler import assembly, staging

    monkeypatch.setattr(staging, "SLOTS", (slots,))
    monkeypatch.setattr(assembly, "SLOTS", (slots,))
    # an NHWC -> NCHW transpose staged through permutes; 16-channel maps joined on chip
    if kind == "staged":
        g = _move("transpose_channels")
    else:
        g = GraphBuilder()
        x, y = (g.tensor((1, 56, 56, 16), DType.INT8,
                         rand(np.random.default_rng(seed), DType.INT8, (1, 56, 56, 16)))
                for seed in (13, 14))
        g.op("CONCAT", [x, y], [g.output((1, 56, 56, 32), DType.INT8)], _attr("ConcatAttribute", 3))
    cfg = api.load_config(config).with_overrides(overrides)
    program = api.compile_model(load_bytes(g.serialize(), "m.tosa"), cfg)
    stores = {c.src.addr for c in program.commands
              if getattr(c, "src", None) is not None and c.dst.mem and not c.src.mem}
    if kind == "assembled":                     # the blocks take every buffer of the ring
        assert len(stores) == slots
    else:                                       # ... and every permuted buffer
        permutes = [c for c in program.commands if getattr(c, "op", "") == "permute"]
        assert permutes and len({c.outputs["out"].addr for c in permutes}) == slots
        assert len({c.dst.addr for c in program.commands
                    if getattr(c, "src", None) is not None and c.src.mem and not c.dst.mem}) \
            == len(stores) == slots
    out = api.simulate(program, cfg, inputs=g.input_values).outputs
    ref = g.run()
    assert all(np.array_equal(out[name], ref[name]) for name in ref)


def test_an_image_transpose_keeps_hbm_busy():
    # ExecuTorch's NCHW input to NHWC on large-8k: a DMA channel moves 128 B/cycle of HBM's
    # 200, so the blocks' loads and stores must overlap on several queues, loads running
    # ahead by a ring of buffers (two buffers and one queue per block in turn: 1.52x)
    g = GraphBuilder()
    x = g.tensor((1, 3, 224, 224), DType.INT8)
    g.op("TRANSPOSE", [x], [g.output((1, 224, 224, 3), DType.INT8)],
         _attr("TransposeAttribute", [0, 2, 3, 1]))
    cfg = api.load_config("large-8k")
    program = api.compile_model(load_bytes(g.serialize(), "m.tosa"), cfg)
    report = api.simulate(program, cfg, timing_only=True).report
    assert report.roofline["attainable"]["cycles"] <= report.cycles \
        <= 1.25 * report.roofline["attainable"]["cycles"]


def _picked_and_fastest(graph, config, monkeypatch, planner_name, candidates):
    """(cycles of the planner's pick, of the fastest of every plan it could pick and of
    none): each compiled with that plan forced, and simulated."""
    from npu_sim.compiler import lower

    cfg = api.load_config(config)
    calls = []
    planner = getattr(lower, planner_name)

    def recording(*args):
        calls.append(args)
        return planner(*args)

    def cycles() -> int:
        return api.simulate(api.compile_model(graph, cfg), cfg, timing_only=True).report.cycles

    monkeypatch.setattr(lower, planner_name, recording)
    picked = cycles()
    runs = []
    for plan in [None, *candidates(calls[-1])]:
        monkeypatch.setattr(lower, planner_name, lambda *args, plan=plan: plan)
        runs.append(cycles())
    return picked, min(runs)


@pytest.mark.parametrize("config", ["default", "edge-256", "large-8k"])
@pytest.mark.parametrize("kind", ["transpose_channels", "reverse_channels"])
def test_the_planner_picks_a_staging_the_machine_runs_near_the_fastest(kind, config,
                                                                      monkeypatch):
    # The planner's estimate (compiler/staging.py) against the machine: every staging it
    # could pick, and the direct copy, compiled and simulated; its pick within 12% of the
    # fastest (on bench/data_movement.py's moves: 1.10x at worst, 1.007x on average).
    from npu_sim.compiler import staging

    graph = load_bytes(_move(kind).serialize(), "m.tosa")
    picked, fastest = _picked_and_fastest(
        graph, config, monkeypatch, "plan_staging",
        lambda call: staging.candidates(call[0], call[4]))      # (src, dst, hw, cost, budget, q)
    assert picked <= 1.12 * fastest, (picked, fastest)


@pytest.mark.parametrize("config", ["default", "large-8k"])
@pytest.mark.parametrize("channels", [3, 16])
def test_the_planner_picks_an_assembly_the_machine_runs_near_the_fastest(channels, config,
                                                                        monkeypatch):
    # The same for a CONCAT of narrow maps along the channels, assembled on chip or not:
    # within 15% (over 3-32 channels, 14-56 pixels square and the three presets: 1.12x at
    # worst, 1.012x on average)
    from npu_sim.compiler import assembly

    shape = (1, 28, 28, channels)
    g = GraphBuilder()
    x, y = (g.tensor(shape, DType.INT8) for _ in range(2))
    g.op("CONCAT", [x, y], [g.output((1, 28, 28, 2 * channels), DType.INT8)],
         _attr("ConcatAttribute", 3))
    picked, fastest = _picked_and_fastest(
        load_bytes(g.serialize(), "m.tosa"), config, monkeypatch, "plan_assembly",
        lambda call: assembly.candidates(call[0], call[4]))     # (dst, parts, hw, cost, budget, q)
    assert picked <= 1.15 * fastest, (picked, fastest)


def test_tiles_stores_are_cut_by_repeat_so_blocks_store_side_by_side():
    # TILE of the rows on large-8k: each staged block is stored to both repeats, one span
    # enclosing the next block's, so whole stores would run one at a time (1.39x as a direct
    # copy reading its input twice); cut by repeat, the blocks' stores part (1.09x)
    g = GraphBuilder()
    shape = (1, 56, 56, 64)
    x = g.tensor(shape, DType.INT8, rand(np.random.default_rng(41), DType.INT8, shape))
    g.op("TILE", [x, shape_const(g, (1, 2, 1, 1))], [g.output((1, 112, 56, 64), DType.INT8)])
    cfg = api.load_config("large-8k")
    program = api.compile_model(load_bytes(g.serialize(), "m.tosa"), cfg)
    stores = [c for c in program.commands if getattr(c, "src", None) is not None
              and c.dst.mem and not c.src.mem]
    assert len(stores) > 2 and all(c.dst.contiguous_run() == c.dst.nbytes for c in stores)
    report = api.simulate(program, cfg, timing_only=True).report
    assert report.cycles <= 1.15 * report.roofline["attainable"]["cycles"]
    out = api.simulate(program, cfg, inputs=g.input_values).outputs
    ref = g.run()
    assert all(np.array_equal(out[name], ref[name]) for name in ref)
