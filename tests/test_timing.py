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


# MobileNet on edge-256 streams its weights from flash, so flash bandwidth and the array's
# ports must show; the DMA and vector unit are not the bottleneck there and need only be monotone.
RESOURCES = [
    ("memories.flash.bandwidth_gbps", [0.25, 0.5, 1.0, 4.0], True),
    ("memories.system_sram.bandwidth_gbps", [1, 2, 4, 16], True),
    ("dma.bytes_per_cycle", [2, 4, 16, 32], True),
    ("sram.bytes_per_cycle", [4, 16, 64], True),
    ("mac_array.ports.activations", [8, 16, 32, 64], True),
    ("mac_array.ports.weights", [4, 16, 64], True),
    ("mac_array.ports.outputs", [8, 32, 128], True),
    ("mac_array.output_stage", [4, 16, 64], True),
    ("mac_array.accumulators", [64, 256, 1024], False),
    ("vector_unit.lanes", [4, 16, 64], False),
]
# A program recompiled for more of a resource may take this much longer: the tiler's estimate
# is not the simulator (contention, burst order), so a plan it prefers can lose a little.
# Which cases reach it: the arrays below (16x64 +1.08%, 16x32 +0.80%: weight buffering's
# estimates stage and buffer the last layers' weights differently per array); the resource
# steps below are monotone but one: mac_array.ports.outputs 8 -> 32 B/cycle at +0.05%, where
# the program is bound by flash and the port matters only below 8 B/cycle (32 -> 128 had
# reached +0.4%, once).
RECOMPILED_TOLERANCE = 0.015


@pytest.fixture(scope="module")
def edge_program(edge):
    return api.compile_model(MODEL, edge)


def _sim(program, cfg):
    return api.simulate(program, cfg, timing_only=True).report.cycles


@pytest.mark.parametrize("key,values,matters", RESOURCES)
def test_same_program_never_costs_cycles_on_more_resources(edge, edge_program, key, values,
                                                           matters):
    cycles = [_sim(edge_program, edge.with_overrides({key: v})) for v in values]
    assert cycles == sorted(cycles, reverse=True), f"{key}: {list(zip(values, cycles))}"
    if matters:
        assert cycles[0] > cycles[-1], f"{key} had no effect: {cycles}"


@pytest.mark.parametrize("key,values", [
    ("memories.flash.bandwidth_gbps", [0.25, 1.0, 4.0]), ("dma.bytes_per_cycle", [2, 16]),
    ("mac_array.ports.activations", [8, 32, 64]), ("mac_array.ports.outputs", [2, 32, 128]),
    ("sram.size", ["32 KiB", "64 KiB", "128 KiB", "512 KiB"]), ("vector_unit.lanes", [4, 64])])
def test_recompiled_for_more_resources_costs_at_most_the_tolerance(edge, key, values):
    cycles = [_cycles(edge.with_overrides({key: v})).cycles for v in values]
    for less, more in zip(cycles, cycles[1:]):
        assert more <= less * (1 + RECOMPILED_TOLERANCE), f"{key}: {list(zip(values, cycles))}"
    assert cycles[-1] < cycles[0], f"{key} had no effect: {cycles}"


def test_clock_saves_time_not_cycles(edge, edge_program):
    values = [250, 500, 1000]
    seconds = [_sim(edge_program, edge.with_overrides({"clock_mhz": v})) / v for v in values]
    assert seconds == sorted(seconds, reverse=True), list(zip(values, seconds))


# A larger array is not more of a resource for every layer: its fill, drain and preload grow
# with rows and columns, and MobileNet-0.5's 8- and 16-channel layers fill part of it (edge-256
# measured: 16 columns 2.44M cycles, 64 columns 2.57M). What the compiler owes is to plan for
# the array it is given: never slower than a program tiled for another shape, beyond the
# tolerance of the tiler's estimate (at 16x64 the two programs trade layers and the own one
# is 1.08% slower: 2,185,575 vs 2,162,324).
@pytest.mark.parametrize("shape", [(16, 8), (16, 32), (16, 64), (32, 16)])
def test_planning_for_the_configured_array_beats_a_program_tiled_for_another(edge, edge_program,
                                                                            shape):
    cfg = edge.with_overrides({"mac_array.rows": shape[0], "mac_array.cols": shape[1]})
    assert _cycles(cfg).cycles <= _sim(edge_program, cfg) * (1 + RECOMPILED_TOLERANCE)


@pytest.mark.parametrize("config,overrides", [
    ("default", {}), ("edge-256", {}), ("large-8k", {}),
    ("default", {"sram.size": "64 KiB"}), ("edge-256", {"sram.size": "24 KiB"}),
    ("default", {"mac_array.dataflow": "output_stationary"}),
    ("edge-256", {"mac_array.dataflow": "input_stationary", "mac_array.fold_overlap": False}),
    ("edge-256", {"sram.interleave": "12 KiB", "mac_array.ports.activations": 8})])
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
