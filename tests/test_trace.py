"""The cycle trace (Chrome/Perfetto JSON) and the terminal timeline of a run."""
import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from npu_sim import api
from npu_sim.timeline import render_timeline
from npu_sim.trace import COARSE_BINS, _write, write_trace

SMALL = Path(__file__).parent / "data" / "small_cnn" / "model.tosa"


@pytest.fixture(scope="module")
def run():
    cfg = api.load_config("default")
    program = api.compile_model(api.default_model(), cfg)
    return program, cfg, api.simulate(program, cfg, timing_only=True)


@pytest.fixture(scope="module")
def trace(run, tmp_path_factory):
    program, cfg, res = run
    path = tmp_path_factory.mktemp("trace") / "mbv2.json"
    size = write_trace(path, program, cfg, res.sim, res.report)
    return json.loads(path.read_text()), size, path


def _events(trace, ph):
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


def test_one_track_per_present_engine_and_one_slice_per_command(run, trace):
    program, cfg, res = run
    t, _, _ = trace
    threads = {e["tid"]: e["args"]["name"] for e in _events(t, "M") if e["name"] == "thread_name"}
    layer_rows = [n for n in threads.values() if n.startswith("layers")]
    engines = [n for n in threads.values() if not n.startswith("layers")]
    assert sorted(engines) == sorted(res.sim.engines)
    assert engines[:2] == ["dma0", "dma1"]                          # data movement on top
    assert list(threads.values())[:len(layer_rows)] == layer_rows   # under the layer rows
    layers = [e for e in _events(t, "X") if e["cat"] == "layer"]
    assert sorted(e["args"]["layer"] for e in layers) == list(range(len(program.layers)))
    for tid in {e["tid"] for e in layers}:                          # rows never overlap
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in layers if e["tid"] == tid)
        assert all(b <= c + 1e-9 for (_, b), (c, _) in zip(spans, spans[1:]))
    slices = [e for e in _events(t, "X") if e["cat"] != "layer"]
    assert len(slices) == len(program.commands)
    for ev in slices:
        a, cmd = ev["args"], program.commands[ev["args"]["id"]]
        assert threads[ev["tid"]] == cmd.engine
        assert (a["start_cycle"], a["end_cycle"]) == (res.sim.start[cmd.id], res.sim.end[cmd.id])
        assert ev["ts"] == pytest.approx(a["start_cycle"] / cfg.clock_mhz, abs=1e-4)
        assert ev["dur"] == pytest.approx((a["end_cycle"] - a["start_cycle"]) / cfg.clock_mhz,
                                          abs=2e-4)
        assert a["layer_name"] == program.layers[cmd.layer].name and a["ops"]
        assert a["mem"] and all("[0x" in m for m in a["mem"]) and a["bytes"] > 0
        assert a["cycles"] == a["busy"] + a["stall"] and 0 <= a["port_wait"] <= a["stall"]
        assert a["tile"]["n"] < a["tile"]["of"]
    convs = [e["args"] for e in slices if e["name"] == "CONV2D"]
    assert all(a["macs"] > 0 for a in convs)
    # the image is loaded tile by tile: the tiles' origins walk down its rows
    lo, hi = program.inputs[0].view.footprint()
    rows = [e["args"]["tile"]["at"][1] for e in slices if e["name"] == "LOAD"
            and e["args"]["layer"] == 0 and lo <= program.commands[e["args"]["id"]].src.addr < hi]
    assert rows[0] == 0 and rows == sorted(rows) and rows[-1] > rows[0]


def test_one_flow_arrow_per_dependency(run, trace):
    program, _, _ = run
    t, _, _ = trace
    starts, ends = _events(t, "s"), _events(t, "f")
    assert len(starts) == len(ends) == sum(len(c.deps) for c in program.commands)
    assert {e["id"] for e in starts} == {e["id"] for e in ends}
    assert all(e["bp"] == "e" for e in ends)
    # each end of an arrow lies inside the slice of its command (so it binds to it)
    by_tid = {}
    for e in _events(t, "X"):
        by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for e in starts[:200] + ends[:200]:
        assert any(a < e["ts"] < b for a, b in by_tid[e["tid"]])


def test_counters_bandwidth_occupancy_and_utilization(run, trace):
    program, cfg, res = run
    t, _, _ = trace
    series = {}
    for e in _events(t, "C"):
        ((unit, v),) = e["args"].items()
        series.setdefault((e["name"], unit), []).append((e["ts"], v))
    assert set(series) == {("dram bandwidth", "GB/s"), ("onchip occupancy", "KiB"),
                           ("MAC utilization", "%")}
    peak = cfg.memories["dram"].bandwidth_gbps
    assert 0 < max(v for _, v in series[("dram bandwidth", "GB/s")]) <= peak
    occ = [v for _, v in series[("onchip occupancy", "KiB")]]
    assert 0 < max(occ) <= cfg.sram.size / 1024 and occ[-1] == 0
    # MAC utilization integrates back to the run's MACs
    util = series[("MAC utilization", "%")] + [(res.sim.cycles / cfg.clock_mhz, 0)]
    macs = sum(v / 100 * (t1 - t0) * cfg.clock_mhz * cfg.mac_array.macs_per_cycle
               for (t0, v), (t1, _) in zip(util, util[1:]))
    assert macs == pytest.approx(res.report.total_macs, rel=0.01)


def test_compact_streamed_and_small(run, trace):
    program, cfg, res = run
    _, size, path = trace
    text = path.read_text()
    assert size == len(text.encode()) < 20 * 2**20 and "\n  " not in text
    assert json.loads(text)["otherData"]["clock_mhz"] == cfg.clock_mhz

    class Recorder(io.StringIO):
        writes = 0

        def write(self, s):
            Recorder.writes += 1
            return super().write(s)
    f = Recorder()
    _write(f, program, cfg, res.sim, res.report, False)
    # one write per event: nothing accumulates the event list before writing it
    assert Recorder.writes >= len(json.loads(f.getvalue())["traceEvents"])


def test_coarse_trace_has_one_slice_per_layer_and_engine(run, tmp_path):
    program, cfg, res = run
    path = tmp_path / "coarse.json"
    write_trace(path, program, cfg, res.sim, res.report, coarse=True)
    t = json.loads(path.read_text())
    slices = [e for e in _events(t, "X") if e["cat"] != "layer"]
    per_track = Counter((e["tid"], e["args"]["layer"]) for e in slices)
    assert len(slices) < len(program.commands) / 2 and max(per_track.values()) <= 3
    assert sum(e["args"]["commands"] for e in slices) == len(program.commands)
    for tid in {e["tid"] for e in slices}:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices if e["tid"] == tid)
        assert all(b0 <= a1 + 1e-6 for (_, b0), (a1, _) in zip(spans, spans[1:]))
    assert len(_events(t, "s")) == len(_events(t, "f")) < len(slices) * 4
    counts = Counter(e["name"] for e in _events(t, "C"))
    assert set(counts.values()) == {COARSE_BINS}


def test_timeline_one_line_per_layer_within_width(run):
    report = run[2].report
    for columns, uni in ((80, True), (200, False), (40, True)):
        lines = render_timeline(report, columns, uni).splitlines()
        assert len(lines) == 3 + len(report.layers)
        assert all(len(line) < columns for line in lines)
        rows = lines[3:]
        full = "█" if uni else "#"
        assert all(any(ch in row for ch in full + "▌▐│|") for row in rows)
    rows = render_timeline(report, 120, False).splitlines()[3:]
    bar_starts = [row.index("#") for row in rows if "#" in row]
    assert bar_starts[0] < bar_starts[-1]               # later layers sit further right
    assert rows[0].split()[-1] == f"{report.layers[0].cycles:,}"


def test_host_engine_gets_its_own_track(tmp_path):
    from oracle import DType, GraphBuilder
    g = GraphBuilder()
    vals, idx = g.tensor((1, 4, 3), DType.INT8), g.tensor((1, 5), DType.INT32)
    g.op("GATHER", [vals, idx], [g.output((1, 5, 3), DType.INT8)])
    (tmp_path / "gather.tosa").write_bytes(g.serialize())
    cfg = api.load_config("default")
    program = api.compile_model(tmp_path / "gather.tosa", cfg)
    res = api.simulate(program, cfg, timing_only=True)
    write_trace(tmp_path / "t.json", program, cfg, res.sim, res.report)
    t = json.loads((tmp_path / "t.json").read_text())
    engines = [e["args"]["name"] for e in _events(t, "M") if e["name"] == "thread_name"
               and not e["args"]["name"].startswith("layers")]
    assert engines == ["host"]
    (cmd,) = [e for e in _events(t, "X") if e["cat"] == "host"]
    assert cmd["name"] == "GATHER" and all("dram[" in m for m in cmd["args"]["mem"])
    assert "1 column = " in render_timeline(res.report, 80)


def _cli(*args):
    return subprocess.run([sys.executable, "-I", "-m", "npu_sim", *map(str, args)],
                          capture_output=True, text=True)


def test_cli_trace_and_timeline(tmp_path):
    r = _cli("run", SMALL, "--config", "edge-256", "--timing-only", "--timeline",
             "--trace", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    assert "timeline:" in r.stdout and f"trace             {tmp_path / 't.json'}" in r.stdout
    assert _events(json.loads((tmp_path / "t.json").read_text()), "X")
    r = _cli("run", SMALL, "--config", "edge-256", "--timing-only", "--trace-coarse")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--trace" in r.stderr
    r = _cli("run", SMALL, "--config", "edge-256", "--timing-only",
             "--trace", tmp_path / "missing-dir" / "t.json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_timeline_shades_the_time_before_a_layer_computes(run):
    """Prefetched weights start a layer's span long before it computes: that part is shaded."""
    report = run[2].report
    early = [r for r in report.layers if r.compute_start > r.start]
    assert early and all(r.start <= r.compute_start <= r.end for r in report.layers)
    rows = render_timeline(report, 200, True).splitlines()[3:]
    assert any("░" in rows[r.index] for r in early)
