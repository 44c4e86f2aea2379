"""The NNAPI device: models, validation (INVALID_ARGUMENT), getSupportedOperations,
Capabilities, preferences, execution errors, priorities and the CTS sample."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from npu_sim.nnapi import (FLT_MAX, UINT64_MAX, Device, ErrorStatus, ExecutionPreference,
                          MeasureTiming, ModelBuilder, OperandType, Priority, Request,
                          model_from_dict)
from npu_sim.nnapi import cts
from npu_sim.compiler.frontends import nnapi as fe
from npu_sim.isa.errors import ModelError

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "nnapi-cts" / "sample.jsonl"
FLOAT16 = DATA / "nnapi-cts" / "float16.jsonl"
FLOAT16_RELAXED = DATA / "nnapi-cts" / "relaxed.jsonl"


@pytest.fixture(scope="module")
def device():
    return Device("default")


def _cases():
    return {c["name"]: c for _, c in cts.read_cases(str(SAMPLE))}


def test_cts_sample_every_case_that_runs_passes(device):
    results = [cts.run_case(c, str(SAMPLE), device) for c in _cases().values()]
    status = {r["case"]: r for r in results}
    assert not [r for r in results if r["status"] in ("fail", "invalid")]
    assert status["conv_quant8"]["status"] == "pass" and status["conv_quant8"]["exact"]
    for v in ("conv_quant8_all_tensors_as_inputs", "conv_quant8_all_inputs_as_internal"):
        assert status[v]["status"] == "pass"            # run-time weights; placeholder ADDs
    assert status["l2_normalization_v1_2_dim4_axis3_quant8"]["status"] == "unsupported"
    assert status["sub_v1_2_float16_none"]["status"] == "pass"
    for v in ("add", "softmax_float_1", "dequantize", "quantize_quant8", "less_simple"):
        assert status[v]["status"] == "pass"            # float32 (the default has PRO-FP)
    assert status["depthwise_conv2d_invalid_filter_dims_nhwc_quant8"]["status"] == "expected-failure"
    assert status["strided_slice_invalid_output_dims"]["status"] == "expected-failure"
    assert sum(r["status"] == "pass" for r in results) >= 50


def test_cts_float16_cases_run_in_fp16(device):
    """One CTS case per lowered float16 operation (tests/data/nnapi-cts/float16.jsonl): each passes
    on default (fp16 MAC modes and vector ops); the integer-only edge-256 refuses each."""
    cases = [c for _, c in cts.read_cases(str(FLOAT16))]
    results = [cts.run_case(c, str(FLOAT16), device) for c in cases]
    assert [r["case"] for r in results if r["status"] != "pass"] == []
    assert sum(r["exact"] for r in results) >= len(results) // 2
    edge = Device("edge-256")
    for c in cases[:3]:
        r = cts.run_case(c, str(FLOAT16), edge)
        assert r["status"] == "unsupported" and "fp16" in r["message"], r


def test_relaxed_float32_computes_in_fp16(device):
    """relaxComputationFloat32toFloat16: default has no fp32 MAC mode, so the plain float32
    conv is refused and its relaxed twin runs in fp16 (within the harness's fp16 tolerance),
    CAST from and to the caller's float32 at the edges."""
    plain, relaxed = (c for _, c in cts.read_cases(str(FLOAT16_RELAXED)))
    assert relaxed["isRelaxed"] and not plain.get("isRelaxed")
    assert cts.run_case(plain, "plain", device)["status"] == "unsupported"
    assert cts.run_case(relaxed, "relaxed", device)["status"] == "pass"
    graph = fe.lower_model(model_from_dict(relaxed), "relaxed", relax_to_fp16=True)
    assert {graph.tensors[n].dtype for n in graph.inputs + graph.outputs} == {"fp32"}
    assert {t.dtype for t in graph.tensors.values()} >= {"fp16", "fp32"}
    assert "fp16" not in {t.dtype for t in fe.lower_model(model_from_dict(relaxed)).tensors.values()}


def test_cts_judges_by_the_accuracy_criteria(device):
    case = json.loads(json.dumps(_cases()["conv_quant8"]))
    out = case["main"]["operands"][case["main"]["outputIndexes"][0]]
    out["data"][0] += 1                                 # off by one: within atol 1
    r = cts.run_case(case, "x", device)
    assert r["status"] == "pass" and not r["exact"]
    out["data"][0] += 1                                 # off by two: a failure
    assert cts.run_case(case, "x", device)["status"] == "fail"


def _conv_model(kind="TENSOR_QUANT8_ASYMM", extra_l2=False):
    b = ModelBuilder("conv")
    zp = 3 if kind == "TENSOR_QUANT8_ASYMM" else -125
    x = b.input(kind, (1, 8, 8, 4), 0.5, zp)
    w = b.operand(kind, (8, 3, 3, 4), 0.25, zp, np.arange(288).reshape(8, 3, 3, 4) % 50 + zp)
    bias = b.operand("TENSOR_INT32", (8,), 0.125, 0, np.arange(8) * 7)
    y = b.operand(kind, (1, 8, 8, 8), 4.0, zp)
    b.op("CONV_2D", [x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1)], [y])
    if extra_l2:
        z = b.operand(kind, (1, 8, 8, 8), 1 / 128, 128 if kind == "TENSOR_QUANT8_ASYMM" else 0)
        b.op("L2_NORMALIZATION", [y], [z])
        y = z
    b.output(y)
    return b.model()


def test_uint8_and_signed_models_agree(device):
    rng = np.random.default_rng(1)
    q = rng.integers(0, 256, (1, 8, 8, 4))
    outs = {}
    for kind, shift in (("TENSOR_QUANT8_ASYMM", 0), ("TENSOR_QUANT8_ASYMM_SIGNED", 128)):
        status, prepared = device.prepareModel(_conv_model(kind))
        assert status == ErrorStatus.NONE
        status, shapes, _, got = prepared.execute(Request([q - shift]))
        assert status == ErrorStatus.NONE and shapes[0].dimensions == (1, 8, 8, 8)
        outs[kind] = got[0].astype(np.int64) + shift
    assert np.array_equal(outs["TENSOR_QUANT8_ASYMM"], outs["TENSOR_QUANT8_ASYMM_SIGNED"])
    assert outs["TENSOR_QUANT8_ASYMM"].min() >= 0


def test_supported_operations_per_operation(device):
    status, verdicts = device.getSupportedOperations(_conv_model(extra_l2=True))
    assert status == ErrorStatus.NONE and verdicts == [True, False]
    reasons = device.supported_operations(_conv_model(extra_l2=True))
    assert "L2_NORMALIZATION" in reasons[1][1]


def test_invalid_models_are_invalid_argument(device):
    case = json.loads(json.dumps(_cases()["conv_quant8"]))
    case["main"]["operations"][0]["inputs"] = case["main"]["operations"][0]["inputs"][:6]
    status, _ = device.getSupportedOperations(model_from_dict(case))
    assert status == ErrorStatus.INVALID_ARGUMENT
    for bad, rule in (({"type": "NO_SUCH_OP"}, "unknown OperationType"),
                      ({"inputs": [0, 99]}, "names operand 99")):
        c = json.loads(json.dumps(_cases()["conv_quant8"]))
        c["main"]["operations"][0].update(bad)
        with pytest.raises(ModelError, match=rule):
            model_from_dict(c)


def test_capabilities(device):
    status, caps = device.getCapabilities()
    assert status == ErrorStatus.NONE
    types = [p.type for p in caps.operandPerformance]
    assert types == sorted(types) and OperandType.TENSOR_QUANT8_ASYMM in types
    perf = {p.type: p.info for p in caps.operandPerformance}
    assert perf[OperandType.FLOAT16] == perf[OperandType.TENSOR_FLOAT16]   # scalars carry it
    assert perf[OperandType.TENSOR_FLOAT16].execTime < perf[OperandType.TENSOR_FLOAT32].execTime
    for control in (caps.ifPerformance, caps.whilePerformance):     # measured workloads
        assert 0 < control.execTime < FLT_MAX and 0 < control.powerUsage < FLT_MAX
    assert caps.relaxedFloat32toFloat16PerformanceTensor == perf[OperandType.TENSOR_FLOAT16]
    _, big = Device("large-8k").getCapabilities()                 # relaxed: fp16 there too
    big_perf = {p.type: p.info for p in big.operandPerformance}
    assert big.relaxedFloat32toFloat16PerformanceScalar == big_perf[OperandType.TENSOR_FLOAT16]
    _, edge = Device("edge-256").getCapabilities()                # integer-only: no float
    assert not {OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16} & \
        {p.type for p in edge.operandPerformance}
    assert edge.relaxedFloat32toFloat16PerformanceScalar.execTime == FLT_MAX
    assert edge.ifPerformance.execTime == edge.whilePerformance.execTime == FLT_MAX  # no EXT-CONTROLFLOW
    q8 = {p.type: p.info for p in caps.operandPerformance}[OperandType.TENSOR_QUANT8_ASYMM]
    assert 0 < q8.execTime < 1 and 0 < q8.powerUsage < 1
    d = caps.to_dict()
    assert set(d) == {"relaxedFloat32toFloat16PerformanceScalar",
                      "relaxedFloat32toFloat16PerformanceTensor", "operandPerformance",
                      "ifPerformance", "whilePerformance"}
    assert set(d["operandPerformance"][0]) == {"type", "info"}


def test_preferences_change_the_schedule(device):
    model = _conv_model()
    prepared = {p: device.prepareModel(model, p)[1] for p in ExecutionPreference}
    low, fast = prepared[ExecutionPreference.LOW_POWER], prepared[ExecutionPreference.FAST_SINGLE_ANSWER]
    sustained = prepared[ExecutionPreference.SUSTAINED_SPEED]
    assert low.schedule.point == "low_power" and fast.schedule.point == "nominal"
    assert low.schedule.energy_uj < fast.schedule.energy_uj
    assert fast.schedule.seconds < low.schedule.seconds
    assert sustained.pair.seconds_per_execution < fast.schedule.seconds


def test_execute_errors_timing_and_deadline(device):
    _, prepared = device.prepareModel(_conv_model())
    x = np.zeros((1, 8, 8, 4), np.uint8)
    assert prepared.execute(Request([x[..., :2]]))[0] == ErrorStatus.INVALID_ARGUMENT
    assert prepared.execute(Request([None]))[0] == ErrorStatus.INVALID_ARGUMENT
    assert prepared.execute(Request([x.astype(np.int32) + 300]))[0] == ErrorStatus.INVALID_ARGUMENT
    status, shapes, _, _ = prepared.execute(Request([x], [100]))
    assert status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert shapes[0].dimensions == (1, 8, 8, 8) and not shapes[0].isSufficient
    status, _, timing, _ = prepared.execute(Request([x]), MeasureTiming.NO)
    assert status == ErrorStatus.NONE and timing.timeOnDevice == UINT64_MAX
    status, _, timing, _ = prepared.execute(Request([x]), MeasureTiming.YES)
    assert 0 < timing.timeOnDevice < timing.timeInDriver < UINT64_MAX
    status = prepared.execute(Request([x]), MeasureTiming.YES, deadline_us=timing.timeInDriver / 2)[0]
    assert status == ErrorStatus.MISSED_DEADLINE_TRANSIENT


def test_priority_orders_concurrent_executions(device):
    from npu_sim.nnapi.capabilities import conv_block
    model = conv_block()
    low = device.prepareModel(model, priority=Priority.LOW)[1]
    high = device.prepareModel(model, priority=Priority.HIGH)[1]
    x = np.zeros((1, 28, 28, 32), np.uint8)
    r = device.execute_concurrent([(low, Request([x]), MeasureTiming.YES),
                                   (high, Request([x]), MeasureTiming.YES)])
    assert r[1][2].timeInDriver < r[0][2].timeInDriver          # HIGH ran first
    assert r[0][2].timeInDriver >= r[0][2].timeOnDevice + r[1][2].timeOnDevice


def test_tflite_model_through_the_device_matches_the_tflite_frontend():
    pytest.importorskip("tflite")
    from npu_sim.nnapi.cli import load_model
    d = DATA / "tflite" / "tflite_micro_speech"
    x = np.load(d / "input-0.npy")
    model = load_model(str(d / "model.tflite"))
    dev = Device("edge-256")
    assert all(v for v, _ in dev.supported_operations(model))
    status, shapes, _, outs = dev.prepareModel(model)[1].execute(Request([x]))
    assert status == ErrorStatus.NONE
    assert np.array_equal(outs[0], np.load(d / "ref-output-0.npy"))


def test_tflite_quantize_and_dequantize_map_to_nnapi(capsys):
    """A float-in, float-out int8 model: QUANTIZE and DEQUANTIZE at its edges get a verdict
    each, and the device's output is TFLite's."""
    pytest.importorskip("tflite")
    from npu_sim.cli import main
    from npu_sim.nnapi.cli import load_model
    d = DATA / "tflite" / "autoencoder_example"
    assert main(["supported-ops", str(d / "model.tflite")]) == 0
    out = capsys.readouterr().out
    assert "#0   QUANTIZE                     supported" in out
    assert "#8   DEQUANTIZE                   supported" in out and "9 of 9 operations" in out
    _, prepared = Device("default").prepareModel(load_model(str(d / "model.tflite")),
                                                 ExecutionPreference.LOW_POWER)
    status, _, _, outs = prepared.execute(Request([np.load(d / "input-0.npy")]))
    assert status == ErrorStatus.NONE
    assert np.array_equal(outs[0], np.load(d / "ref-output-0.npy"))


def test_tflite_requantize_is_dequantize_then_quantize():
    """NNAPI quantizes floats only: an int8 -> int8 QUANTIZE maps as the delegate's two."""
    pytest.importorskip("tflite")
    from tflite_support import Model, reference
    from npu_sim.compiler.frontends.nnapi.from_tflite import model_from_tflite
    m = Model()
    m.op("QUANTIZE", [m.input((1, 256), 0.5, 0)], [m.output((1, 256), 0.25, 3)])
    buf = m.serialize()
    model = model_from_tflite(buf)
    assert [op.type.name for op in model.main.operations] == ["DEQUANTIZE", "QUANTIZE"]
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    status, _, _, outs = Device("default").prepareModel(model)[1].execute(Request([x]))
    assert status == ErrorStatus.NONE
    assert np.array_equal(outs[0], np.clip(2 * x.astype(int) + 3, -128, 127))
    assert np.array_equal(outs[0], reference(buf, {"in0": x})["out0"])


def _multiply_by_quantized_multiplier(acc: int, real: float) -> int:
    """gemmlowp's two roundings, in Python integers: QuantizeMultiplier, then
    SaturatingRoundingDoublingHighMul and RoundingDivideByPOT."""
    frac, exp = math.frexp(real)
    q = int(math.floor(frac * (1 << 31) + 0.5))
    if q == 1 << 31:
        q, exp = q // 2, exp + 1
    x = acc << max(exp, 0)
    ab = x * q
    high = (ab + (1 << 30 if ab >= 0 else 1 - (1 << 30)))
    high = high >> 31 if high >= 0 else -((-high) >> 31)
    right = max(-exp, 0)
    mask = (1 << right) - 1
    return (high >> right) + ((high & mask) > (mask >> 1) + (high < 0))


def test_fully_connected_rounds_twice_as_nnapis_reference():
    """NNAPI's reference FullyConnected (AOSP common/operations) requantizes with
    MultiplyByQuantizedMultiplier, two roundings; the TFLite frontend follows TFLite's reference
    kernel, which rounds once (test_tflite_ops). 4,096 outputs, where the two differ in a few."""
    pytest.importorskip("tflite")
    from tflite_support import Model, options, reference
    from npu_sim.compiler.frontends.nnapi.from_tflite import model_from_tflite
    rng = np.random.default_rng(17)
    weights, bias = rng.integers(-127, 128, (64, 256)), rng.integers(-2000, 2000, 64)
    m = Model()
    x = m.input((64, 256), 0.05, 3)
    w = m.const(weights, np.int8, scale=0.01, zp=0)
    b = m.const(bias, np.int32, scale=0.05 * 0.01, zp=0)
    m.op("FULLY_CONNECTED", [x, w, b], [m.output((64, 64), 0.128, -5)],
         options("FullyConnectedOptions"), "FullyConnectedOptions")
    buf = m.serialize()
    feed = rng.integers(-128, 128, (64, 256)).astype(np.int8)
    status, _, _, outs = Device("default").prepareModel(model_from_tflite(buf))[1].execute(
        Request([feed]))
    assert status == ErrorStatus.NONE
    real = float(np.float32(0.05)) * float(np.float32(0.01)) / float(np.float32(0.128))
    acc = (feed.astype(np.int64) - 3) @ weights.T + bias
    twice = np.clip(np.array([[_multiply_by_quantized_multiplier(int(a), real) for a in row]
                              for row in acc]) - 5, -128, 127)
    assert np.array_equal(outs[0], twice)
    assert not np.array_equal(twice, reference(buf, {"in0": feed})["out0"])   # it tells them apart


def test_run_preference_on_a_cts_file_names_what_works(capsys):
    from npu_sim.cli import main
    assert main(["run", str(SAMPLE), "--preference", "LOW_POWER"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"npu-sim: input error: {SAMPLE}: a CTS file; --preference takes one model: "
                   "a .tflite, or a case's line saved as a .json file"]


@pytest.mark.parametrize("text, why", [
    ("{not json", "not a JSON NNAPI case"),
    ('{"name": "x", "main": {"operands": [], "operations": [{"type": 1234, "inputs": [], '
     '"outputs": []}], "inputIndexes": [], "outputIndexes": []}}', "unknown OperationType"),
    ('{"name": "x", "main": {"operands": [], "operations": [], "inputIndexes": [3], '
     '"outputIndexes": []}}', "inputIndexes names operand 3"),
])
def test_cli_bad_cases_one_line_exit_2(tmp_path, capsys, text, why):
    from npu_sim.cli import main
    p = tmp_path / "case.json"
    p.write_text(text)
    assert main(["supported-ops", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0]
    bad = tmp_path / "cases.jsonl"
    bad.write_text(text + "\n")
    if "JSON" in why:
        assert main(["nnapi-cts", str(bad)]) == 2


def test_cli_cts_json_and_table(tmp_path, capsys):
    from npu_sim.cli import main
    r = tmp_path / "r.json"
    assert main(["nnapi-cts", str(SAMPLE), "--json", str(r)]) == 0
    rows = json.loads(r.read_text())
    assert len(rows) == len(_cases()) and set(rows[0]) == {"case", "file", "status", "message"}
    assert "CONV_2D" in capsys.readouterr().out


def test_sustained_speed_runs_back_to_back_pairs(device):
    model = _conv_model()
    _, sustained = device.prepareModel(model, ExecutionPreference.SUSTAINED_SPEED)
    _, fast = device.prepareModel(model, ExecutionPreference.FAST_SINGLE_ANSWER)
    rng = np.random.default_rng(3)
    xs = [rng.integers(0, 256, (1, 8, 8, 4)).astype(np.uint8) for _ in range(2)]
    r = device.execute_concurrent([(sustained, Request([x]), MeasureTiming.YES) for x in xs])
    for x, (status, _, _, outs) in zip(xs, r):
        assert status == ErrorStatus.NONE
        assert np.array_equal(outs[0], fast.execute(Request([x]))[3][0])


def _reshape_with_shape_input():
    b = ModelBuilder("reshape")
    x = b.input("TENSOR_QUANT8_ASYMM", (2, 6), 0.5, 7)
    shape = b.input("TENSOR_INT32", (2,))
    y = b.operand("TENSOR_QUANT8_ASYMM", (3, 4), 0.5, 7)
    b.op("RESHAPE", [x, shape], [y])
    b.output(y)
    return b.model()


def test_shape_parameters_given_at_run_time(device):
    model = _reshape_with_shape_input()
    assert device.getSupportedOperations(model) == (ErrorStatus.NONE, [True])
    _, prepared = device.prepareModel(model)
    x = np.arange(12, dtype=np.uint8).reshape(2, 6)
    status, _, _, outs = prepared.execute(Request([x, np.array([3, -1])]))
    assert status == ErrorStatus.NONE and np.array_equal(outs[0], x.reshape(3, 4))
    # a shape that disagrees with the declared output is the request's INVALID_ARGUMENT
    assert prepared.execute(Request([x, np.array([4, 3])]))[0] == ErrorStatus.INVALID_ARGUMENT


def test_gather_indices_from_the_request_are_bounded(device):
    b = ModelBuilder("gather")
    x = b.input("TENSOR_QUANT8_ASYMM", (5, 3), 1.0, 0)
    idx = b.input("TENSOR_INT32", (4,))
    y = b.operand("TENSOR_QUANT8_ASYMM", (4, 3), 1.0, 0)
    b.op("GATHER", [x, b.i32(0), idx], [y])
    b.output(y)
    _, prepared = device.prepareModel(b.model())
    x = np.arange(15, dtype=np.uint8).reshape(5, 3)
    status, _, _, outs = prepared.execute(Request([x, np.array([4, 0, 2, 2])]))
    assert status == ErrorStatus.NONE and np.array_equal(outs[0], x[[4, 0, 2, 2]])
    assert prepared.execute(Request([x, np.array([5, 0, 0, 0])]))[0] == ErrorStatus.INVALID_ARGUMENT


@pytest.mark.parametrize("name", ["EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS",
                                  "LESS_EQUAL"])
def test_quantized_comparisons_as_aosp_compares_floats(device, name):
    """Inputs of unrelated scales compare as float32 (q - zp) * scale do, rounding included."""
    b = ModelBuilder(name.lower())
    x = b.input("TENSOR_QUANT8_ASYMM", (256,), 1.64771, 127)
    y = b.input("TENSOR_QUANT8_ASYMM", (256,), 1.49725, 112)
    z = b.operand("TENSOR_BOOL8", (256,))
    b.op(name, [x, y], [z])
    b.output(z)
    _, prepared = device.prepareModel(b.model())
    rng = np.random.default_rng(5)
    a = np.arange(256, dtype=np.uint8)
    c = rng.permutation(256).astype(np.uint8)
    status, _, _, outs = prepared.execute(Request([a, c]))
    fa = (a.astype(np.float32) - 127) * np.float32(1.64771)
    fc = (c.astype(np.float32) - 112) * np.float32(1.49725)
    ref = {"EQUAL": fa == fc, "NOT_EQUAL": fa != fc, "GREATER": fa > fc, "GREATER_EQUAL": fa >= fc,
           "LESS": fa < fc, "LESS_EQUAL": fa <= fc}[name]
    assert status == ErrorStatus.NONE and np.array_equal(outs[0], ref)


def test_float32_convolutions_with_explicit_padding():
    """Float32 CONV_2D / DEPTHWISE_CONV_2D with asymmetric explicit padding and dilation, NHWC
    and NCHW, on large-8k (the preset with an fp32 MAC mode; `default` reports them unsupported)."""
    path = DATA / "nnapi-cts" / "float_conv_explicit_padding.jsonl"
    device = Device("large-8k")
    results = [cts.run_case(c, str(path), device) for _, c in cts.read_cases(str(path))]
    assert len(results) == 3 and all(r["status"] == "pass" for r in results), results
