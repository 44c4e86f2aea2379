"""Bad sweep inputs end in one clear error: zoo arguments out of bounds, absurd -j, a tiny
timeout_s, a corrupt results.jsonl on --resume, a network file that does not load."""
import json
import os
import signal
from concurrent.futures import Executor, Future
from pathlib import Path

import pytest
import yaml

from npu_sim import zoo
from npu_sim.cli import main
from npu_sim.config import load_config
from npu_sim.dse import evaluate as evaluate_mod
from npu_sim.dse import evaluate_point, run_sweep, sweep_from_dict
from npu_sim.dse import runner as runner_mod
from npu_sim.dse.runner import RESULTS_FILE, read_results
from npu_sim.isa.errors import ConfigError, InputError, ModelError

REPO = Path(__file__).resolve().parents[1]
NET = "zoo:ds_cnn?channels=8"
TFLITE = REPO / "tests" / "data" / "tflite" / "audio_example1" / "model.tflite"


class InlineExecutor(Executor):
    """Runs each task at submit, in the calling (main) thread."""

    def __init__(self, max_workers=None):
        self.max_workers = max_workers

    def submit(self, fn, *args, **kwargs):
        future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def _data(**extra) -> dict:
    return {"name": "inputs", "base": "edge-256", "networks": [NET], "axes": {"sram.size": ["32 KiB", "64 KiB"]},
            "objectives": {"latency_ms": "min"}, **extra}


def _cli(tmp_path, capsys, data: dict, *args) -> tuple[int, list[str]]:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    code = main(["dse", str(path), "-q", "--no-plots", "-o", str(tmp_path / "out"), *args])
    return code, capsys.readouterr().err.splitlines()


# --- 1. zoo arguments ---------------------------------------------------------------------------

@pytest.mark.parametrize("spec, expected", [
    ("zoo:transformer?tokens=1000000", "tokens: expected an integer from 1 to 8,192, got 1000000"),
    ("zoo:mobilenet_v2?resolution=100000", "resolution: expected an integer from 1 to 8,192"),
    ("zoo:mobilenet_v2?num_classes=1000000000", "num_classes: expected an integer from 1 to 100,000"),
    ("zoo:mobilenet_v2?width=1e9", "width: expected a number from 0.01 to 4.0, got 1000000000.0"),
    ("zoo:mobilenet_v2?width=nan", "width: expected a number from 0.01 to 4.0, got nan"),
    ("zoo:resnet?width=0.5", "width: expected an integer"),
    ("zoo:resnet?depth=19", "depth: expected one of 10, 18, 34, 50, 101, got 19"),
    ("zoo:ds_cnn?channels=abc", "channels: expected an integer from 1 to 8,192, got 'abc'"),
    ("zoo:ds_cnn?bogus=1", "ds_cnn takes no argument 'bogus'"),
    ("zoo:transformer?layers=0", "layers: expected an integer from 1 to 128"),
    # each argument in range, the network too large: the calibration pass or the weights
    ("zoo:transformer?tokens=4096", "too large to build: about 4.0 GiB of float64 calibration activations"),
    ("zoo:ds_cnn?channels=8192", "GiB of float64 weights (at most 512 MiB); lower channels or num_classes"),
])
def test_zoo_arguments_are_bounded_in_the_sweep_file(spec, expected):
    with pytest.raises(ConfigError) as info:
        sweep_from_dict(_data(networks=[NET, spec]), "s.yaml")
    message = str(info.value)
    assert message.startswith(f"s.yaml: networks[1]: {spec}: cannot build zoo network ("), message
    assert expected in message, message


def test_zoo_bounds_hold_for_every_caller():
    with pytest.raises(ValueError, match="tokens: expected an integer"):
        zoo.transformer_encoder(tokens=10**6)           # the builder functions too
    with pytest.raises(ValueError, match="resolution"):
        zoo.spec("mobilenet_v2", resolution=True)
    with pytest.raises(ValueError, match="channels: expected an integer"):
        zoo.build("ds_cnn", channels=10 ** 400)        # beyond any float: no OverflowError
    row = evaluate_point("edge-256", {}, "zoo:transformer?tokens=1000000")
    assert row["status"] == "error" and "tokens: expected an integer" in row["error"]
    for name, args in [("transformer", dict(tokens=128, d_model=768, heads=12, d_ff=3072)),  # BERT-base layer
                       ("resnet", dict(depth=50, resolution=224)), ("mobilenet_v2", dict(n_calib=None))]:
        zoo.spec(name, **args)                          # real networks stay in bounds


def test_cli_zoo_error_is_one_line(tmp_path, capsys):
    code, err = _cli(tmp_path, capsys, _data(networks=["zoo:resnet?resolution=100000"]))
    assert code == 2 and len(err) == 1 and err[0].startswith("npu-sim: config error: ")
    assert "zoo:resnet?resolution=100000" in err[0] and "resolution: expected" in err[0]


# --- 2. worker processes ------------------------------------------------------------------------

@pytest.mark.parametrize("jobs", ["100000", "0", "-3"])
def test_absurd_jobs_are_refused(tmp_path, capsys, jobs):
    code, err = _cli(tmp_path, capsys, _data(), "-j", jobs)
    assert code == 2 and err == [f"npu-sim: config error: -j {jobs}: expected 1 to 512 worker processes"]


def test_workers_are_capped_at_the_number_of_points(tmp_path, monkeypatch):
    pools = []
    monkeypatch.setattr(runner_mod, "ProcessPoolExecutor", lambda max_workers: pools.append(max_workers)
                        or InlineExecutor(max_workers))
    result = run_sweep(sweep_from_dict(_data(), "s.yaml"), tmp_path, jobs=500, progress=False)
    assert pools == [2] and [r["status"] for r in result.rows] == ["ok", "ok"]


# --- 3. timeouts --------------------------------------------------------------------------------

def test_tiny_timeout_is_refused():
    with pytest.raises(ConfigError, match=r"timeout_s: expected 0.01 s to 604,800 s \(a week\), got 1e-09"):
        sweep_from_dict(_data(timeout_s=1e-9), "s.yaml")


@pytest.mark.parametrize("when", ["armed", "disarmed"])
def test_an_alarm_at_either_edge_of_a_point(monkeypatch, when):
    """The alarm fires as soon as it is set (a timeout shorter than the time to enter the point),
    or as it is cancelled (the point just finished): timed out, or the row; never an exception."""
    setitimer = evaluate_mod.signal.setitimer

    def racing(which, seconds):
        setitimer(which, seconds)
        if (seconds > 0) == (when == "armed"):
            os.kill(os.getpid(), signal.SIGALRM)

    base = load_config("edge-256")
    key = evaluate_mod.point_key(base, evaluate_mod.network_id(NET), {})
    monkeypatch.setattr(evaluate_mod.signal, "setitimer", racing)
    row = evaluate_mod.evaluate_task(base, {}, NET, key, timeout_s=30)
    assert row["status"] == ("error" if when == "armed" else "ok")
    if when == "armed":
        assert row["error"] == "timeout: still simulating after timeout_s = 30 s"


# --- 4. --resume --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def good_rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("good")
    run_sweep(sweep_from_dict(_data(), "s.yaml"), out, executor=InlineExecutor(), progress=False)
    return (out / RESULTS_FILE).read_text().splitlines()


@pytest.mark.parametrize("change, expected", [
    ({"key": [1]}, "key: expected a point key, got [1]"),
    ({"latency_ms": None}, "latency_ms: expected a number from 0 to 1e+18, got None"),
    ({"latency_ms": "abc"}, "latency_ms: expected a number from 0 to 1e+18, got 'abc'"),
    ({"latency_ms": float("nan")}, "latency_ms: expected a number from 0 to 1e+18, got nan"),
    ({"area_mm2": -1e308}, "area_mm2: expected a number from 0 to 1e+18 or null, got -1e+308"),
    ({"cycles": 1.5}, "cycles: expected a number"),
    ({"status": "bogus"}, "status: expected ok, infeasible or error, got 'bogus'"),
    ({"overrides": "x"}, "overrides: expected a mapping, got 'x'"),
    ("[" * 100_000 + "]" * 100_000, "not a JSON row (nested too deep)"),
    ("42", "expected a JSON object, got int"),
    ('{"key": "abc", "status": "ok", ', "not a JSON row (Expecting property name"),
])
def test_resume_refuses_a_bad_row_naming_file_and_line(tmp_path, good_rows, change, expected):
    bad = change if isinstance(change, str) else json.dumps({**json.loads(good_rows[1]), **change})
    path = tmp_path / RESULTS_FILE
    path.write_text("\n".join([good_rows[0], bad, *good_rows[1:]]) + "\n")
    with pytest.raises(InputError) as info:
        read_results(path)
    assert str(info.value).startswith(f"{path}: line 2: {expected}"), str(info.value)


def test_rows_a_sweep_writes_resume_and_error_rows_are_retried(tmp_path, good_rows):
    lost = {"key": json.loads(good_rows[0])["key"], "status": "error", "error": "RuntimeError: worker lost"}
    (tmp_path / RESULTS_FILE).write_text("\n".join([*good_rows, json.dumps(lost)]) + "\n\n")
    assert set(read_results(tmp_path / RESULTS_FILE)) == {json.loads(x)["key"] for x in good_rows}
    result = run_sweep(sweep_from_dict(_data(), "s.yaml"), tmp_path, resume=True, executor=InlineExecutor(),
                       progress=False)
    assert result.evaluated == [lost["key"]]


def test_cli_resume_with_a_corrupt_row_is_one_line(tmp_path, capsys, good_rows):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / RESULTS_FILE).write_text(good_rows[0].replace('"latency_ms": ', '"latency_ms": -') + "\n")
    code, err = _cli(tmp_path, capsys, _data(), "--resume", "-j", "1")
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"npu-sim: input error: {tmp_path / 'out' / RESULTS_FILE}: line 1: latency_ms: ")


# --- 5. networks that do not load ---------------------------------------------------------------

@pytest.mark.parametrize("name, content, expected", [
    ("trunc.tflite", TFLITE.read_bytes()[:5000], "corrupt TFLite flatbuffer"),
    ("net.yaml", b"base: edge-256\n", "not a TOSA flatbuffer"),
])
def test_a_network_that_does_not_load_is_refused_before_sweeping(tmp_path, capsys, name, content, expected):
    (tmp_path / name).write_bytes(content)
    sweep = sweep_from_dict(_data(networks=[NET, name]), "s.yaml", tmp_path)
    with pytest.raises(ModelError, match=expected):
        run_sweep(sweep, tmp_path / "api", executor=InlineExecutor(), progress=False)
    assert not (tmp_path / "api").exists()          # refused before any point ran
    code, err = _cli(tmp_path, capsys, _data(networks=[str(tmp_path / name)]))
    assert code == 2 and len(err) == 1 and err[0].startswith(f"npu-sim: model error: {tmp_path / name}: ")
