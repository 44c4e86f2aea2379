"""Timing must be deterministic and respond to the hardware as hardware would."""
from pathlib import Path

import pytest

from npu_sim import api

MODEL = Path(__file__).parent / "data" / "mbv2_050_128" / "model.tosa"


def _cycles(cfg):
    return api.run(MODEL, cfg, timing_only=True).report


@pytest.fixture(scope="module")
def edge():
    return api.load_config("edge-256")


def test_deterministic(edge):
    assert _cycles(edge).cycles == _cycles(edge).cycles


# MobileNet on edge-256 streams its weights from flash, so flash bandwidth and the MAC array
# must show; the DMA and vector unit are not the bottleneck there and need only be monotone.
@pytest.mark.parametrize("key,values,matters", [
    ("mac_array.cols", [8, 16, 32, 64], True),
    ("mac_array.rows", [8, 16, 32], True),
    ("memories.flash.bandwidth_gbps", [0.25, 0.5, 1.0, 4.0], True),
    ("memories.system_sram.bandwidth_gbps", [1, 2, 4, 16], True),
    ("dma.bytes_per_cycle", [2, 4, 16, 32], True),
    ("sram.size", ["32 KiB", "64 KiB", "128 KiB", "512 KiB"], True),   # tiles, residency, prefetch
    ("vector_unit.lanes", [4, 16, 64], False),
    ("clock_mhz", [250, 500, 1000], False),
])
def test_more_resources_never_cost_cycles(edge, key, values, matters):
    cycles = [_cycles(edge.with_overrides({key: v})).cycles for v in values]
    if key == "clock_mhz":       # a faster clock costs cycles against memory but saves time
        seconds = [c / v for c, v in zip(cycles, values)]
        assert seconds == sorted(seconds, reverse=True), f"{key}: {list(zip(values, seconds))}"
        return
    assert cycles == sorted(cycles, reverse=True), f"{key}: {list(zip(values, cycles))}"
    if matters:
        assert cycles[0] > cycles[-1], f"{key} had no effect: {cycles}"


@pytest.mark.parametrize("config,overrides", [
    ("default", {}), ("edge-256", {}), ("large-8k", {}),
    ("default", {"sram.size": "64 KiB"}), ("edge-256", {"sram.size": "24 KiB"})])
def test_never_faster_than_the_bounds(config, overrides):
    report = _cycles(api.load_config(config).with_overrides(overrides))
    reach = report.roofline["attainable"]
    assert report.cycles >= reach["cycles"] >= report.roofline["cycles"]
    # MobileNet's 8- and 16-channel layers leave weight-stationary rows idle: the array
    # mapping must show in the compute term.
    assert reach["terms"]["compute"] > report.roofline["terms"]["compute"]
    for row in report.layers:
        assert row.span >= row.roofline_cycles or row.unit == "host", row.name
    assert sum(row.cycles for row in report.layers) == report.cycles


def test_timing_only_matches_full_run(edge):
    full = api.run(MODEL, edge).report
    assert full.cycles == _cycles(edge).cycles
    assert full.energy_uj["total"] == pytest.approx(_cycles(edge).energy_uj["total"])
