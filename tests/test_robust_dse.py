"""Sweeps under faults: a hard kill then --resume, a torn last line, a hanging point, a Dask
worker that dies mid-sweep."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Executor, Future
from pathlib import Path

import pytest
import yaml

from npu_sim.dse import load_sweep, run_sweep, sweep_from_dict
from npu_sim.dse import evaluate as evaluate_mod
from npu_sim.dse.runner import RESULTS_FILE
from npu_sim.isa.errors import ConfigError

NET = "zoo:ds_cnn?channels=8"
SIZES = ["32 KiB", "48 KiB", "64 KiB", "96 KiB", "128 KiB", "192 KiB", "256 KiB", "512 KiB"]


def _sweep(tmp_path, **extra) -> Path:
    data = {"name": "faults", "base": "edge-256", "networks": [NET],
            "axes": {"sram.size": SIZES, "vector_unit.lanes": [8, 16]},
            "objectives": {"latency_ms": "min"}, **extra}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class InlineExecutor(Executor):
    """Runs each task at submit, in the calling (main) thread."""

    def submit(self, fn, *args, **kwargs):
        future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future


def test_sigkill_then_resume_neither_loses_nor_repeats(tmp_path):
    path, out = _sweep(tmp_path), tmp_path / "out"
    results = out / RESULTS_FILE
    proc = subprocess.Popen([sys.executable, "-m", "npu_sim", "dse", str(path), "-j", "1", "-q", "--no-plots",
                             "-o", str(out)], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "NPU_SIM_CHECK_HAZARDS": "0"})
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if results.exists() and len(results.read_bytes().splitlines()) >= 3:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)         # the CLI and its worker processes, mid-sweep
    proc.wait()
    before = _rows(results)                     # complete rows only: appends are one write each
    assert 3 <= len(before) < len(SIZES) * 2
    result = run_sweep(load_sweep(path), out, jobs=1, resume=True, progress=False)
    after = _rows(results)
    keys = [r["key"] for r in after]
    assert len(keys) == len(set(keys)) == len(SIZES) * 2          # every point once
    assert after[:len(before)] == before                           # nothing rewritten
    assert not {r["key"] for r in before} & set(result.evaluated)  # nothing repeated
    assert all(r["status"] == "ok" for r in after)


def test_torn_last_line_is_dropped_and_its_point_rerun(tmp_path):
    path, out = _sweep(tmp_path, axes={"sram.size": SIZES[:3]}), tmp_path / "out"
    run_sweep(load_sweep(path), out, executor=InlineExecutor(), progress=False)
    results = out / RESULTS_FILE
    lines = results.read_text().splitlines()
    torn = lines[-1][: len(lines[-1]) // 2]
    results.write_text("\n".join(lines[:-1]) + "\n" + torn)        # killed mid-write
    result = run_sweep(load_sweep(path), out, resume=True, executor=InlineExecutor(), progress=False)
    after = _rows(results)                                           # every line parses
    assert [r["key"] for r in after] == [json.loads(x)["key"] for x in lines]
    assert result.evaluated == [json.loads(lines[-1])["key"]]


def _hang(*args, **kwargs):
    while True:
        time.sleep(0.01)


def test_hanging_point_is_stopped_by_the_timeout(tmp_path, monkeypatch):
    path, out = _sweep(tmp_path, axes={"sram.size": SIZES[:2]}, timeout_s=0.5), tmp_path / "out"
    monkeypatch.setattr(evaluate_mod.api, "simulate", _hang)
    t0 = time.perf_counter()
    result = run_sweep(load_sweep(path), out, executor=InlineExecutor(), progress=False)
    assert time.perf_counter() - t0 < 10
    rows = _rows(out / RESULTS_FILE)
    assert [r["status"] for r in rows] == ["error", "error"]
    assert all("timeout" in r["error"] and "timeout_s = 0.5" in r["error"] for r in rows)
    assert all(r["status"] == "error" for r in result.rows)


def test_timeout_outside_the_main_thread_kills_a_forked_child(monkeypatch):
    """Dask runs tasks in threads, where no alarm can interrupt them."""
    monkeypatch.setattr(evaluate_mod.api, "simulate", _hang)
    box = {}
    t = threading.Thread(target=lambda: box.update(row=evaluate_mod.evaluate_task(
        "edge-256", {}, NET, "k", timeout_s=0.5)))
    t0 = time.perf_counter()
    t.start()
    t.join(20)
    assert time.perf_counter() - t0 < 10
    assert box["row"]["status"] == "error" and "timeout" in box["row"]["error"]


def test_points_within_the_timeout_run_normally(tmp_path):
    path, out = _sweep(tmp_path, axes={"sram.size": SIZES[:2]}, timeout_s=60), tmp_path / "out"
    result = run_sweep(load_sweep(path), out, executor=InlineExecutor(), progress=False)
    assert [r["status"] for r in result.rows] == ["ok", "ok"]


@pytest.mark.parametrize("change, key", [
    ({"timeout_s": -1}, "timeout_s"), ({"timeout_s": 1e9}, "timeout_s"),
    ({"strategy": {"kind": "random", "budget": 10**9}}, "strategy.budget"),
    ({"strategy": {"kind": "nsga2", "budget": 4, "population": 10**6}}, "strategy.population"),
    ({"strategy": {"kind": "random", "budget": 4, "seed": 2**40}}, "strategy.seed"),
    ({"axes": {f"mac_array.rows,mac_array.cols": [[8, 8]] * 2, "sram.size": SIZES * 100,
               "vector_unit.lanes": list(range(1, 1001)), "dma.channels": [1, 2] * 10}}, "axes"),
    # a fixed figure no design could take is the sweep's error, not every point's reason
    ({"fixed": {"mac_array.rows": -4}}, "fixed: .*mac_array.rows: expected a positive integer"),
    ({"axes": {"mac_array.rows": [16, -1]}}, r"axes.mac_array.rows\[1\]: .*positive integer"),
])
def test_sweep_bounds(change, key):
    data = {"base": "edge-256", "networks": [NET], "axes": {"sram.size": SIZES}, **change}
    with pytest.raises(ConfigError, match=key):
        sweep_from_dict(data, "s.yaml")


def test_dask_worker_killed_mid_sweep_has_its_points_retried(tmp_path):
    distributed = pytest.importorskip("distributed")
    path, out = _sweep(tmp_path), tmp_path / "out"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        box = {}
        t = threading.Thread(target=lambda: box.update(result=run_sweep(
            load_sweep(path), out, executor=client.get_executor(pure=False), progress=False)))
        t.start()
        results = out / RESULTS_FILE
        deadline = time.time() + 120
        while time.time() < deadline and not (results.exists() and results.read_text().count("\n") >= 1):
            time.sleep(0.01)
        os.kill(next(iter(pids.values())), signal.SIGKILL)   # its tasks in flight are lost
        t.join(180)
    rows = _rows(results)
    assert len({r["key"] for r in rows}) == len(rows) == len(SIZES) * 2
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows if r["status"] != "ok"]
