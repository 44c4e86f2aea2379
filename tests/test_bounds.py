"""The attainable bound's stream model against hand-worked cases."""
import pytest

from npu_sim.bounds import stream_cycles


@pytest.mark.parametrize("compute,needed,capacity,cycles", [
    ([100, 50], [0, 0], 1, 150),               # nothing to load: compute alone
    ([0], [160], 1000, 10),                    # a pure transfer: bytes / bandwidth
    ([100], [800], 10_000, 100),               # loads hide under the compute
    ([100], [3200], 10_000, 200),              # the memory is the bottleneck
    # The second layer's 3200 B take 200 cycles; with room, they start under the first
    # layer's compute, so the run ends when they are in.
    ([100, 100], [0, 3200], 10_000, 200),
    # With 800 B of room, 800 B arrive during the first layer, the other 2400 B after it.
    ([100, 100], [0, 3200], 800, 250),
    # A transfer, a compute-only layer, a heavy layer: 400 B of the last layer's 3200 B arrive
    # under the middle layer's compute (all the room there is), the other 2800 B after it.
    ([0, 100, 100], [1600, 0, 3200], 400, 100 + 100 + 175),
])
def test_stream_cycles(compute, needed, capacity, cycles):
    assert stream_cycles(compute, needed, 16, capacity) == pytest.approx(cycles)


def test_more_room_never_costs():
    compute, needed = [50, 0, 120, 10, 300, 5], [900, 100, 0, 4000, 200, 2500]
    times = [stream_cycles(compute, needed, 16, cap) for cap in (64, 256, 1024, 4096, 10**6)]
    assert times == sorted(times, reverse=True)
    assert times[0] > times[-1]


def test_attainable_counts_array_mapping_and_first_latency():
    from npu_sim.isa.program import Layer
    from npu_sim import api
    from npu_sim.bounds import attainable

    cfg = api.load_config("default")           # 32x32 weight-stationary, DRAM 16 B/cycle
    # 64 outputs x 32 channels x 16 terms: 32 cycles at peak, but 16 terms fill half the
    # rows, so the array streams 64, after a 32-cycle weight preload, with a 62-cycle skew.
    conv = Layer("conv", ["CONV2D"], "mac", macs=64 * 32 * 16, min_bytes={"dram": 3200},
                 array_problems=[["gemm", 64, 32, 16, "int8"]])
    reach = attainable([conv], cfg)
    assert reach["terms"]["compute"] == 32 + 64 + 62
    # 3200 B take 200 cycles, after a DMA setup and DRAM's latency.
    latency = cfg.dma.setup_cycles + cfg.memory_latency_cycles("dram")
    assert reach == {"cycles": 200 + latency, "bound_by": "dram",
                     "terms": {"compute": 158, "dram": 200 + latency}}
    # A layer with nothing to load computes from the start.
    first = Layer("pad", ["CONV2D"], "mac", array_problems=[["gemm", 320, 32, 32, "int16"]])
    # int16 x int8 streams twice: 32 + 2 * 320 + 62, then the conv's 158
    assert attainable([first, conv], cfg)["terms"]["dram"] == 32 + 2 * 320 + 62 + 158


def _partial_readers(kind: str):
    """Graphs whose steps read only part of a graph input, or read it twice."""
    import numpy as np
    import tosa_serializer as ts
    from oracle import DType, GraphBuilder
    from ops_sim_support import _attr, clamp_attr, rand, shape_const

    g = GraphBuilder()
    x = rand(np.random.default_rng(7), DType.INT8, (1, 64, 64, 32))
    xi = g.tensor(x.shape, DType.INT8, x)
    if kind == "slice":         # 512 of the input's 131,072 bytes
        sl = g.intermediate((1, 4, 4, 32), DType.INT8)
        g.op("SLICE", [xi, shape_const(g, (0, 8, 8, 0)), shape_const(g, (1, 4, 4, 32))], [sl])
        g.op("CLAMP", [sl], [g.output((1, 4, 4, 32), DType.INT8)], clamp_attr(DType.INT8, -9, 9))
    elif kind == "strided":     # a 1x1 window every 3 pixels: 22 x 22 of the 64 x 64
        g.op("MAX_POOL2D", [xi], [g.output((1, 22, 22, 32), DType.INT8)],
             _attr("MaxPool2dAttribute", [1, 1], [3, 3], [0, 0, 0, 0],
                   ts.NanPropagationMode.PROPAGATE))
    else:                       # two readers of one input: it need cross the port only once
        for lo in (-9, -5):
            g.op("CLAMP", [xi], [g.output(x.shape, DType.INT8)], clamp_attr(DType.INT8, lo, 9))
    return g


@pytest.mark.parametrize("kind", ["slice", "strided", "twice"])
@pytest.mark.parametrize("config", ["default", "edge-256", "large-8k"])
def test_steps_reading_part_of_an_input_are_never_faster_than_the_bound(kind, config):
    # The bound charges an input's bytes a step must read (a slice's, a strided window's
    # taps), once across its readers; charging the whole input to each reader exceeded
    # schedules that read only the slice (default: 245 cycles against a bound of 8,224).
    from npu_sim import api
    from npu_sim.compiler.loader import load_bytes

    cfg = api.load_config(config)
    program = api.compile_model(load_bytes(_partial_readers(kind).serialize(), "p.tosa"), cfg)
    report = api.simulate(program, cfg, timing_only=True).report
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"]



def test_weights_buffered_apart_run_further_ahead_than_the_on_chip_buffer():
    """On edge-256 the compiler parks flash weights in system SRAM ahead of their readers
    (compiler/buffering.py), here more than the 48 KiB on-chip buffer holds: a bound letting
    flash run only the on-chip buffer ahead would not hold for such schedules, so the
    feature maps' memory counts as room too (and only where the weights live elsewhere)."""
    from npu_sim import api, zoo
    from npu_sim.bounds import lookahead
    from npu_sim.compiler.loader import load_bytes
    from npu_sim.isa.commands import DmaCopy

    cfg = api.load_config("edge-256")
    tosa = zoo.build("transformer", tokens=64, d_model=256, heads=4, d_ff=1024, layers=2)[0]
    program = api.compile_model(load_bytes(tosa, "t.tosa"), cfg)
    flash, sram = (program.memories.index(m) + 1 for m in ("flash", "system_sram"))
    parked = sum(c.dst.nbytes for c in program.commands if isinstance(c, DmaCopy)
                 and c.src.mem == flash and c.dst.mem == sram)
    assert parked > cfg.sram.size
    assert lookahead(cfg, "flash") == cfg.sram.size + cfg.memories["system_sram"].size
    assert lookahead(cfg, "system_sram") == cfg.sram.size
    default = api.load_config("default")
    assert lookahead(default, "dram") == default.sram.size
    report = api.simulate(program, cfg, timing_only=True).report
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"]


def test_a_layer_without_array_work_hands_its_bytes_to_the_next_array_layer():
    """A vector layer's 3,200 input bytes need not all arrive before the conv after it starts:
    the vector unit passes its rows on as they come (row handoffs), so the conv takes them
    evenly over its compute. At 16 B/cycle they bind it at 200 cycles, not the 200 + 158 of
    loading them first and computing after."""
    from npu_sim import api
    from npu_sim.bounds import attainable
    from npu_sim.isa.program import Layer

    cfg = api.load_config("default")
    quantize = Layer("quantize", ["RESCALE"], "vector", min_bytes={"dram": 3200})
    conv = Layer("conv", ["CONV2D"], "mac", macs=64 * 32 * 16,
                 array_problems=[["gemm", 64, 32, 16, "int8"]])
    assert attainable([quantize, conv], cfg)["terms"] == {"compute": 158, "dram": 200}


def test_a_tflite_quantize_streamed_under_the_first_conv_is_never_faster_than_the_bound():
    # image_example1's float input (36 KB) is quantized tile by tile under its first conv
    # (7,138 cycles on default); a bound making the conv wait for the whole input had said
    # 7,735.
    from pathlib import Path

    from npu_sim import api

    cfg = api.load_config("default")
    model = Path(__file__).parent / "data" / "tflite" / "image_example1" / "model.tflite"
    report = api.simulate(api.compile_model(str(model), cfg), cfg, timing_only=True).report
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"]


def test_per_tensor_parameters_are_not_counted_as_memory_traffic():
    """A per-tensor RESCALE's multiplier, shift and zero points travel in its command. Counted
    as flash bytes they had put both bounds above flash-bound runs (the ExecuTorch attention
    block on edge-256 at 10 GHz: 251,744 cycles against a bound of 252,100)."""
    from pathlib import Path

    from npu_sim import api

    cfg = api.load_config("edge-256").with_overrides({
        "clock_mhz": 10000, "memories.flash.latency_ns": 0, "dma.setup_cycles": 0})
    model = Path(__file__).parent / "data" / "attn_block" / "model.tosa"
    report = api.simulate(api.compile_model(str(model), cfg), cfg, timing_only=True).report
    assert report.roofline["min_bytes"]["flash"] <= report.bytes_moved["flash"]["read"]
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"]
