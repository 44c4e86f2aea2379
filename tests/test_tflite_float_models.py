"""The float TFLite models of tests/data/tflite/ against TFLite's reference kernels (their
ref-output-0.npy): the float-edged ones (float32 QUANTIZE into an int8 network, DEQUANTIZE out)
equal bit for bit on every preset with floating point; the integer-only edge-256 refuses them
and the float32 ones in one line naming the first float operator."""
import json
from pathlib import Path

import numpy as np
import pytest

from npu_sim import api
from npu_sim.cli import main

DATA = Path(__file__).parent / "data" / "tflite"
FLOAT_EDGED = ["image_example1", "autoencoder_example"]
FLOAT32 = ["image_example1_float32", "autoencoder_example_float32"]
FLOAT_PRESETS = ["default", "large-8k"]     # the presets with PRO-FP


def _run(model, preset):
    info = json.loads((DATA / model / "info.json").read_text())
    x = np.load(DATA / model / "input-0.npy")
    result = api.run(DATA / model / "model.tflite", preset, inputs={info["inputs"][0]["name"]: x})
    assert [b.name for b in result.program.inputs] == [i["name"] for i in info["inputs"]]
    got = result.outputs[info["outputs"][0]["name"]]
    ref = np.load(DATA / model / "ref-output-0.npy")
    assert got.dtype == ref.dtype == np.float32 and got.shape == ref.shape
    assert result.report.cycles > 0 and result.report.energy_uj["total"] > 0
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
@pytest.mark.parametrize("model", FLOAT_EDGED + FLOAT32)
def test_integer_only_preset_refuses_in_one_line(model, capsys):
    assert main(["run", str(DATA / model / "model.tflite"), "--config", "edge-256",
                 "--timing-only"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "tfl0_" in err and "fp32" in err and "PRO-FP" in err, err
