"""Per-layer cycles of the embedded MobileNetV2-224 on every preset, against traces/.

After an intended timing change: python -m npu_sim.golden --update (see README).
"""
import json
from pathlib import Path

import pytest

from npu_sim import golden

TRACES = Path(__file__).resolve().parent.parent / "traces"


@pytest.mark.parametrize("config", golden.PRESETS)
def test_cycles_match_the_golden_summary(config):
    path = golden.golden_path(config, TRACES)
    assert path.exists(), f"{path} is missing: python -m npu_sim.golden --update"
    diff = golden.compare(json.loads(path.read_text()), golden.summary(config))
    assert not diff, ("cycles changed against " + str(path) + ":\n" + "\n".join(diff)
                      + "\nif intended, regenerate with: python -m npu_sim.golden --update")


def test_diff_names_layer_expected_got_and_delta():
    layers = [{"index": i, "name": f"l{i}", "ops": "CONV2D", "start": 100 * i,
               "end": 100 * i + 100, "cycles": 100} for i in range(3)]
    expected = {"model": "m", "config": "c", "totals": {"cycles": 300}, "layers": layers}
    assert golden.compare(expected, json.loads(json.dumps(expected))) == []
    got = json.loads(json.dumps(expected))
    got["layers"][1]["cycles"] = 125
    got["layers"][2]["name"] = "renamed"
    got["layers"].append({**layers[0], "index": 3, "name": "extra"})
    got["totals"]["cycles"] = 325
    diff = golden.compare(expected, got)
    assert diff[0] == "m on c: total cycles 300 -> 325 (+8.3%)"
    assert "expected" in diff[1] and "got" in diff[1] and "delta" in diff[1]
    row = next(line for line in diff if " l1 " in line).split()
    assert row == ["1", "l1", "100", "125", "+25.0%"]
    assert any("is now renamed" in line for line in diff)
    assert any("extra" in line and "added" in line for line in diff)


def test_golden_files_round_trip(tmp_path):
    data = {"model": "m", "config": "c", "clock_mhz": 1.0, "totals": {"cycles": 5},
            "layers": [{"index": 0, "name": "a", "ops": "ADD", "start": 0, "end": 5,
                        "cycles": 5}]}
    text = golden.dumps(data)
    assert json.loads(text) == data
    assert text.splitlines()[-3].strip() == json.dumps(data["layers"][0])   # a layer a line
