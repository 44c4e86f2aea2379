"""The float TFLite models of tests/data/tflite/ against TFLite's reference kernels (their
ref-output-0.npy): the float-edged ones (float32 QUANTIZE into an int8 network, DEQUANTIZE out)
equal bit for bit on every preset with floating point, the float32 ones within 1e-5 of the
output range on every preset whose MAC array has an fp32 mode; the integer-only edge-256 refuses
them all in one line naming the first float operator, and the presets without fp32 MACs refuse
the float32 ones in one line."""
import json
from pathlib import Path

import numpy as np
import pytest

from npu_sim import api
from npu_sim.cli import main

DATA = Path(__file__).parent / "data" / "tflite"
FLOAT_EDGED = ["image_example1", "autoencoder_example"]
FLOAT32 = ["image_example1_float32", "autoencoder_example_float32"]
FLOAT_PRESETS = ["default", "large-8k"]     # the presets with PRO-FP and TFLite's int8 rounding
FP32_PRESETS = ["large-8k"]                  # the MAC arrays with an fp32 x fp32 mode


def _run(model, preset):
    info = json.loads((DATA / model / "info.json").read_text())
    x = np.load(DATA / model / "input-0.npy")
    result = api.run(DATA / model / "model.tflite", preset, inputs={info["inputs"][0]["name"]: x})
    assert [b.name for b in result.program.inputs] == [i["name"] for i in info["inputs"]]
    got = result.outputs[info["outputs"][0]["name"]]
    ref = np.load(DATA / model / "ref-output-0.npy")
    assert got.dtype == ref.dtype == np.float32 and got.shape == ref.shape
    report = result.report      # no schedule beats its bounds, on real frontend graphs too
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"] > 0
    assert report.energy_uj["total"] > 0
    return got, ref


@pytest.mark.parametrize("preset", FLOAT_PRESETS)
@pytest.mark.parametrize("model", FLOAT_EDGED)
def test_float_edged_model_is_bit_exact(model, preset):
    got, ref = _run(model, preset)
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("model", FLOAT_EDGED + FLOAT32)
def test_integer_only_preset_refuses_in_one_line(model, capsys):
    assert main(["run", str(DATA / model / "model.tflite"), "--config", "edge-256",
                 "--timing-only"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "tfl0_" in err and "fp32" in err and "PRO-FP" in err, err


@pytest.mark.parametrize("preset", FP32_PRESETS)
@pytest.mark.parametrize("model", FLOAT32)
def test_float32_model_within_1e_5_of_its_range(model, preset):
    got, ref = _run(model, preset)
    assert np.abs(got.astype(np.float64) - ref).max() <= 1e-5 * np.ptp(ref)


@pytest.mark.parametrize("preset", ["default", "tpu-v4-core"])
def test_float32_convolutions_refused_without_fp32_macs(preset, capsys):
    """default and tpu-v4-core have fp16/bf16 MAC modes but no fp32 one: one line, exit 2."""
    assert main(["run", str(DATA / "autoencoder_example_float32" / "model.tflite"), "--config",
                 preset, "--timing-only"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "fp32 x fp32" in err, err
