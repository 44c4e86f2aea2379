"""Design-space exploration: sweep files, evaluation, local vs Dask execution, resume, Pareto, CLI."""
import json
from pathlib import Path

import pytest
import yaml

from npu_sim.isa.errors import ConfigError
from npu_sim.cli import main
from npu_sim.dse import (aggregate, evaluate_point, load_sweep, pareto_front, run_sweep,
                         sweep_from_dict)
from npu_sim.config import load_config
from npu_sim.dse.evaluate import point_key
from npu_sim.dse.pareto import best
from npu_sim.dse.runner import RESULTS_FILE, read_results
from npu_sim.dse.sweep import Constraint

REPO = Path(__file__).resolve().parents[1]
SMALL = str(REPO / "tests" / "data" / "small_cnn" / "model.tosa")
METRICS = ("status", "error", "cycles", "latency_ms", "energy_uj", "power_mw", "area_mm2", "edp",
           "throughput_per_mm2", "mac_utilization", "network", "overrides", "design")


def small_sweep(**changes) -> dict:
    data = {
        "name": "small",
        "base": "edge-256",
        "networks": [SMALL, "zoo:transformer"],
        "axes": {
            # 4 KiB of system SRAM cannot hold small_cnn's 6,912-B input
            "memories.system_sram.size": ["4 KiB", "256 KiB", "2 MiB"],
            "mac_array.rows,mac_array.cols": [[16, 16], [8, 32]],
        },
        "fixed": {"dma.channels": 2},
        "objectives": {"latency_ms": "min", "area_mm2": "min"},
        "constraints": ["power_mw <= 100"],
    }
    data.update(changes)
    return data


def dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False)  # axis order matters


def same(rows_a, rows_b):
    a = {r["key"]: {m: r.get(m) for m in METRICS} for r in rows_a}
    b = {r["key"]: {m: r.get(m) for m in METRICS} for r in rows_b}
    assert a == b


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    return run_sweep(sweep_from_dict(small_sweep(), "small.yaml", REPO), out, jobs=2, progress=False)


# --- evaluation and failures -------------------------------------------------------------------

def test_evaluate_point_api():
    row = evaluate_point("edge-256", {"sram.size": "32 KiB"}, "zoo:ds_cnn")
    assert row["status"] == "ok" and row["error"] is None
    assert row["cycles"] > 0 and row["latency_ms"] == pytest.approx(row["cycles"] / 500e3)
    assert row["edp"] == pytest.approx(row["energy_uj"] * row["latency_ms"])
    assert row["area"]["total"] == row["area_mm2"] == pytest.approx(sum(v for k, v in row["area"].items() if k != "total"))
    assert row["throughput_per_mm2"] == pytest.approx(1e3 / row["latency_ms"] / row["area_mm2"])
    json.dumps(row)  # a results-file line


@pytest.mark.parametrize("overrides, network, kind", [
    ({"memories.system_sram.size": "4 KiB"}, SMALL, "does not fit"),
    ({"mac_array.dataflow": "diagonal"}, SMALL, "config error"),
    ({"sram.size": "1000 B"}, SMALL, "config error"),
])
def test_bad_points_are_infeasible_with_reason(overrides, network, kind):
    row = evaluate_point("edge-256", overrides, network)
    assert row["status"] == "infeasible" and row["error"].startswith(kind) and row["latency_ms"] is None


def test_a_network_is_validated_once_per_tosa_target(monkeypatch):
    """Points compile copies of one loaded graph: validation runs once for each TOSA target
    the designs have, and its refusal stays each point's reason."""
    import npu_sim.compiler.validate as validation
    from npu_sim.dse import evaluate
    calls = []
    real = validation.validate

    def counted(graph, *target):
        calls.append(target)
        return real(graph, *target)

    monkeypatch.setattr(validation, "validate", counted)
    monkeypatch.setattr(evaluate, "_VALIDATION", {})
    rows = [evaluate_point("edge-256", overrides, "zoo:ds_cnn") for overrides in (
        {"sram.size": "32 KiB"}, {"sram.size": "64 KiB"}, {"tosa.level": "none"})]
    assert [r["status"] for r in rows] == ["ok"] * 3
    assert [level for _, _, level in calls] == ["8K", "none"]
    fp16 = [evaluate_point("edge-256", {"sram.size": size}, "zoo:transformer?dtype=fp16")
            for size in ("32 KiB", "64 KiB")]
    assert len(calls) == 3
    assert fp16[0]["status"] == fp16[1]["status"] == "infeasible"
    assert fp16[0]["error"] == fp16[1]["error"] and "needs profile PRO-FP" in fp16[1]["error"]


def test_failing_points_do_not_stop_the_sweep(local_run):
    bad = [r for r in local_run.rows if r["status"] != "ok"]
    assert len(local_run.rows) == 12 and len(local_run.designs) == 6
    assert {(r["network"], r["overrides"]["memories.system_sram.size"]) for r in bad} == \
        {("model.tosa", "4 KiB")}
    assert all("does not fit" in r["error"] for r in bad)
    infeasible = [d for d in local_run.designs if d["status"] != "ok"]
    assert len(infeasible) == 2 and all("does not fit" in d["error"] for d in infeasible)
    on_disk = read_results(local_run.results_path)
    assert set(on_disk) == {r["key"] for r in local_run.rows}


def test_aggregate_over_networks(local_run):
    d = local_run.designs[-1]
    rows = [r for r in local_run.rows if r["design"] == d["design"]]
    assert len(rows) == 2
    assert d["latency_ms"] == pytest.approx(sum(r["latency_ms"] for r in rows))
    assert d["energy_uj"] == pytest.approx(sum(r["energy_uj"] for r in rows))
    assert d["power_mw"] == max(r["power_mw"] for r in rows)
    assert d["area_mm2"] == rows[0]["area_mm2"] == rows[1]["area_mm2"]


# --- execution: local processes and Dask give the same rows -----------------------------------

def test_dask_local_cluster_gives_identical_results(local_run, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        result = run_sweep(sweep_from_dict(small_sweep(), "small.yaml", REPO), tmp_path,
                           scheduler=cluster.scheduler_address, progress=False)
    same(result.rows, local_run.rows)
    assert [d["labels"] for d in result.designs] == [d["labels"] for d in local_run.designs]


def test_resume_evaluates_only_missing_points(local_run, tmp_path):
    lines = local_run.results_path.read_text().splitlines()
    path = tmp_path / RESULTS_FILE
    path.write_text("\n".join(lines[:5]) + "\n" + lines[5][:40])  # killed while writing row 6
    kept = {json.loads(line)["key"] for line in lines[:5]}
    result = run_sweep(sweep_from_dict(small_sweep(), "small.yaml", REPO), tmp_path, jobs=2, resume=True,
                       progress=False)
    assert set(result.evaluated) == {r["key"] for r in local_run.rows} - kept
    same(result.rows, local_run.rows)
    assert all(json.loads(line) for line in path.read_text().splitlines())  # the torn line is gone
    again = run_sweep(sweep_from_dict(small_sweep(), "small.yaml", REPO), tmp_path, resume=True, progress=False)
    assert again.evaluated == []


def test_resume_retries_errors(local_run, tmp_path):
    rows = [json.loads(line) for line in local_run.results_path.read_text().splitlines()]
    rows[0] = {**rows[0], "status": "error", "error": "RuntimeError: worker lost"}
    (tmp_path / RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_sweep(sweep_from_dict(small_sweep(), "small.yaml", REPO), tmp_path, jobs=1, resume=True,
                       progress=False)
    assert result.evaluated == [rows[0]["key"]]
    same(result.rows, local_run.rows)


def test_point_key_covers_base_network_and_overrides():
    edge = load_config("edge-256")
    key = point_key(edge, "net", {"sram.size": "8 KiB"})
    assert key == point_key(load_config("edge-256"), "net", {"sram.size": "8 KiB"})
    assert key != point_key(edge.with_overrides({"clock_mhz": 400}), "net", {"sram.size": "8 KiB"})
    assert key != point_key(edge, "other", {"sram.size": "8 KiB"})
    assert key != point_key(edge, "net", {"sram.size": "16 KiB"})


# --- Pareto -----------------------------------------------------------------------------------

def test_pareto_front_on_known_points():
    pts = [dict(name=n, latency_ms=l, area_mm2=a, status="ok") for n, l, a in [
        ("a", 1.0, 5.0), ("b", 2.0, 3.0), ("c", 3.0, 1.0), ("d", 2.5, 3.5),  # d: dominated by b
        ("e", 3.0, 1.0), ("f", 4.0, 1.0), ("g", 0.5, 9.0)]]                   # e ties c; f dominated
    pts.append(dict(name="x", latency_ms=0.1, area_mm2=0.1, status="infeasible"))
    front = pareto_front(pts, {"latency_ms": "min", "area_mm2": "min"})
    assert [p["name"] for p in front] == ["g", "a", "b", "c", "e"]
    assert [p["name"] for p in pareto_front(pts, ["latency_ms"])] == ["g"]
    limited = pareto_front(pts, ["latency_ms", "area_mm2"], [Constraint("area_mm2", "<=", 4)])
    assert [p["name"] for p in limited] == ["b", "c", "e"]
    thr = [dict(name=n, throughput_per_mm2=t, area_mm2=a) for n, t, a in [("p", 10, 2), ("q", 5, 1), ("r", 4, 2)]]
    assert [p["name"] for p in pareto_front(thr, {"throughput_per_mm2": "max", "area_mm2": "min"})] == ["p", "q"]
    assert best(pts, "area_mm2", [Constraint("latency_ms", "<=", 2.0)])["name"] == "b"


def test_aggregate_marks_design_infeasible():
    ok = dict(design="d", overrides={}, network="n1", status="ok", error=None, cycles=1, latency_ms=1.0,
              energy_uj=2.0, power_mw=3.0, area_mm2=1.0, mac_utilization=0.5)
    bad = {**ok, "network": "n2", "status": "infeasible", "error": "does not fit: x"}
    assert aggregate([ok, bad])["status"] == "infeasible" and aggregate([ok, bad])["latency_ms"] is None
    assert aggregate([ok])["edp"] == 2.0 and aggregate([ok])["throughput_per_mm2"] == 1000.0


# --- strategies --------------------------------------------------------------------------------

def test_random_and_nsga2_respect_budget_and_seed(tmp_path):
    axes = {"sram.size": ["4 KiB", "8 KiB", "16 KiB", "32 KiB"], "vector_unit.lanes": [8, 16, 32],
            "mac_array.dataflow": ["weight_stationary", "output_stationary"]}
    rnd = sweep_from_dict(small_sweep(networks=[SMALL], axes=axes, strategy={"kind": "random", "budget": 5, "seed": 3}))
    r1 = run_sweep(rnd, tmp_path / "r1", jobs=2, progress=False)
    r2 = run_sweep(rnd, tmp_path / "r2", jobs=2, progress=False)
    assert len(r1.designs) == 5 and [d["labels"] for d in r1.designs] == [d["labels"] for d in r2.designs]
    nsga = sweep_from_dict(small_sweep(networks=[SMALL], axes=axes,
                                       strategy={"kind": "nsga2", "budget": 8, "population": 4, "seed": 1}))
    n1 = run_sweep(nsga, tmp_path / "n1", jobs=2, progress=False)
    assert 1 <= len(n1.designs) <= 8 and len(n1.evaluated) == len(n1.designs)
    n2 = run_sweep(nsga, tmp_path / "n1", jobs=2, resume=True, progress=False)  # replays from the file
    assert n2.evaluated == [] and [d["labels"] for d in n2.designs] == [d["labels"] for d in n1.designs]


# --- sweep files -------------------------------------------------------------------------------

@pytest.mark.parametrize("change, expected", [
    ({"colour": 1}, "colour: unknown key"),
    ({"base": "edge-512"}, "base: edge-512: unknown preset"),
    ({"networks": []}, "networks: expected a non-empty list"),
    ({"axes": {"sram.sise": [1]}}, "axes.sram.sise: not a key of the base config"),
    ({"axes": {"sram.size": []}}, "axes.sram.size: expected a non-empty list"),
    ({"axes": {"mac_array.rows,mac_array.cols": [[16, 16], [8]]}}, "axes.mac_array.rows,mac_array.cols[1]"),
    ({"fixed": {"memories.system_sram.size": 1}}, "fixed.memories.system_sram.size: key set twice"),
    ({"objectives": {"speed": "min"}}, "objectives.speed: expected one of"),
    ({"constraints": ["power_mw < lots"]}, "constraints[0]: expected 'METRIC OP NUMBER'"),
    ({"strategy": {"kind": "random"}}, "strategy.budget: the random strategy needs a budget"),
    ({"strategy": "annealing"}, "strategy.kind: expected one of: grid, random, nsga2"),
])
def test_sweep_file_errors_name_file_and_key(tmp_path, change, expected):
    path = tmp_path / "sweep.yaml"
    path.write_text(dump(small_sweep(**change)))
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert str(path) in str(info.value) and expected in str(info.value), str(info.value)


def test_sweep_paths_relative_to_the_file_and_zoo_args(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "net.tosa").write_bytes(Path(SMALL).read_bytes())
    path = tmp_path / "s.yaml"
    path.write_text(dump(small_sweep(networks=["m/net.tosa", "zoo:ds_cnn?channels=32"])))
    sweep = load_sweep(path)
    assert sweep.networks[0] == str(tmp_path / "m" / "net.tosa") and sweep.grid_size == 6
    assert sweep.overrides((2, 1)) == {"dma.channels": 2, "memories.system_sram.size": "2 MiB",
                                       "mac_array.rows": 8, "mac_array.cols": 32}
    assert evaluate_point("edge-256", {}, "zoo:ds_cnn?channels=32")["status"] == "ok"


# --- command line and the shipped example -------------------------------------------------------

def test_cli_writes_front_plots_and_report(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(dump(small_sweep(networks=[SMALL], axes={"sram.size": ["2 KiB", "8 KiB", "32 KiB"]})))
    out = tmp_path / "out"
    assert main(["dse", str(path), "-j", "2", "-o", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "Pareto front over latency_ms (min), area_mm2 (min)" in text and "cheapest" in text
    for name in ("results.jsonl", "designs.csv", "pareto.csv", "pareto.md", "report.md",
                 "plots/latency_vs_area.png", "plots/latency_vs_area.svg", "plots/energy_vs_latency.png",
                 "plots/effect_sram_size.svg"):
        assert (out / name).stat().st_size > 0, name
    assert "plots/latency_vs_area.png" in (out / "report.md").read_text()
    assert main(["dse", str(path), "-o", str(out), "-q", "--resume", "--no-plots"]) == 0
    assert "simulated 0 points this run" in capsys.readouterr().out


def test_cli_user_errors_exit_2(tmp_path, capsys):
    assert main(["dse", str(tmp_path / "missing.yaml")]) == 2
    assert "sweep file not found" in capsys.readouterr().err
    path = tmp_path / "s.yaml"
    path.write_text(dump(small_sweep(networks=["zoo:nonet"])))
    assert main(["dse", str(path), "-o", str(tmp_path / "o"), "-q"]) == 2
    assert "zoo:nonet: cannot build zoo network" in capsys.readouterr().err


def test_example_sweep_runs_on_a_reduced_budget(tmp_path):
    sweep = load_sweep(REPO / "examples" / "sweep-edge.yaml")
    assert sweep.grid_size >= 100 and len(sweep.networks) == 3
    sweep.strategy, sweep.budget, sweep.networks = "random", 3, ["zoo:ds_cnn", "zoo:transformer"]
    result = run_sweep(sweep, tmp_path, jobs=2, progress=False)
    assert len(result.designs) == 3 and all(d["status"] == "ok" for d in result.designs)


def test_points_compile_copies_of_one_loaded_graph():
    """Workers parse a network once and compile a copy per point: compiling must leave the
    loaded graph as it was, so every point starts from the same graph."""
    from npu_sim.compiler.loader import load_model
    from npu_sim.isa.encoding import encode
    from npu_sim import api

    graph = load_model(SMALL)
    before = ([(o.op, list(o.inputs), dict(o.attrs)) for o in graph.operators],
              sorted(graph.tensors))
    small = load_config("edge-256").with_overrides({"sram.size": "16 KiB"})
    first = encode(api.compile_model(graph.copy(), small))
    api.compile_model(graph.copy(), load_config("default"))
    assert encode(api.compile_model(graph.copy(), small)) == first
    assert ([(o.op, list(o.inputs), dict(o.attrs)) for o in graph.operators],
            sorted(graph.tensors)) == before
