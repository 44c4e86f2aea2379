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
