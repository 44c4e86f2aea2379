"""The zoo's float networks (MobileNetV2 and the transformer encoder in fp16 and bf16): the
builders emit deterministic PRO-FP graphs of the same network as the int8 builders, which
Arm's reference model runs in precise mode to the float64 model's values."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from npu_sim import zoo
import fp_check

SMALL = {
    "mobilenet_v2": dict(width=0.35, resolution=32, num_classes=16),
    "transformer": dict(tokens=8, d_model=32, heads=2, d_ff=64, layers=1),
}
NUMPY = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}
# |precise reference - float64 model| / range of the model's output. In precise mode only the
# constants are rounded to the graph's type: fp32 graphs are the model itself; fp16 (11
# significant bits) and bf16 (8) weights perturb the random-init MobileNetV2's 52 layers
# enough to move its output by a few (fp16) or tens (bf16) of percent of its range.
CLOSE = {"fp32": 1e-6, "fp16": 0.05, "bf16": 0.4}
INT_OPS = {"RESCALE", "TABLE", "INTDIV"}


@pytest.fixture(scope="module", params=[(n, d) for n in SMALL for d in NUMPY],
                ids=lambda p: f"{p[0]}-{p[1]}")
def float_net(request):
    name, dtype = request.param
    spec = zoo.spec(name, dtype=dtype, **SMALL[name])
    fctx = spec.calibrate()
    data, meta = spec.emit_float(fctx)
    return name, dtype, spec, fctx, data, meta


def test_graph_is_float_and_deterministic(float_net):
    name, dtype, spec, _, data, meta = float_net
    assert data == zoo.build(name, dtype=dtype, **SMALL[name])[0]
    assert not INT_OPS & set(meta["op_histogram"])
    assert meta["input"]["dtype"] == meta["outputs"][0]["dtype"] == dtype.upper()
    wanted = {"mobilenet_v2": {"CONV2D", "DEPTHWISE_CONV2D", "CLAMP", "ADD", "AVG_POOL2D"},
              "transformer": {"CONV2D", "MATMUL", "ERF", "RSQRT", "EXP", "RECIPROCAL"}}
    assert wanted[name] <= set(meta["op_histogram"])
    assert ("CAST" in meta["op_histogram"]) == (name == "transformer" and dtype != "fp32")
    assert meta["macs"] == zoo.build(name, **SMALL[name])[1]["macs"]   # the int8 network's


def test_reference_model_computes_the_float_model(float_net):
    _, dtype, spec, fctx, data, meta = float_net
    x = np.random.default_rng(1).uniform(-1, 1, spec.input_shape).astype(NUMPY[dtype])
    ref, _ = fp_check.reference(data, {"input": x}, meta["output_names"], bounds=False)
    want = spec.float_reference(fctx, x.astype(np.float64))
    got = ref[meta["output_names"][0]].reshape(want.shape)
    assert np.abs(got - want).max() <= CLOSE[dtype] * np.ptp(want)


def test_unsupported_float_network_is_refused():
    with pytest.raises(ValueError, match="float"):
        zoo.build("resnet", dtype="fp16", depth=10, resolution=32, width=8, num_classes=8)


def test_checker_judges_each_operator():
    """The per-operator check (fp_check) on values the reference model computes in its
    ordinary (fp32-internal) mode: all compliant; a MUL result 1% off is not."""
    spec = zoo.spec("transformer", dtype="fp16", **SMALL["transformer"])
    e = spec.float_graph(spec.calibrate()).e
    x = np.random.default_rng(2).uniform(-1, 1, spec.input_shape).astype(np.float16)
    graph = fp_check.graph_with_every_output(e)
    values = fp_check.run_reference(graph, {"input": x}, e.outputs)
    values["input"] = x
    rows = fp_check.check_operators(e, values)
    assert len(rows) > 40 and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]
    mul = next(r["output"] for r in rows if r["op"] == "MUL")
    values[mul] = (values[mul] * np.float16(1.01)).astype(np.float16)
    bad = {r["output"]: r["ok"] for r in fp_check.check_operators(e, values)}
    assert not bad[mul]


@pytest.mark.parametrize("name,dtype,preset", [
    ("mobilenet_v2", "fp16", "default"), ("mobilenet_v2", "bf16", "large-8k"),
    ("transformer", "fp16", "large-8k"), ("transformer", "bf16", "default")])
def test_simulated_network_is_compliant_operator_by_operator(name, dtype, preset):
    """The network end to end on the simulator, with cycles and energy per layer; every float
    operator's result within the spec's bounds of the precise reference model on the
    simulator's own inputs (from a run of the same graph with every result an output, whose
    network output is the same)."""
    from npu_sim import api
    spec = zoo.spec(name, dtype=dtype, **SMALL[name])
    fctx = spec.calibrate()
    data, meta = spec.emit_float(fctx)
    x = np.random.default_rng(3).uniform(-1, 1, spec.input_shape).astype(NUMPY[dtype])
    result = api.run(api.load_graph(data, f"{name}.tosa"), preset, inputs={"input": x})
    rep = result.report
    assert rep.cycles > 0 and rep.energy_uj["total"] > 0 and rep.total_macs == meta["macs"]
    assert len(rep.layers) > 3 and sum(r.energy_uj for r in rep.layers) > 0
    e = spec.float_graph(fctx).e
    values = api.run(api.load_graph(fp_check.graph_with_every_output(e), "all.tosa"), preset,
                     inputs={"input": x}).outputs
    out = meta["output_names"][0]
    assert np.array_equal(values[out], result.outputs[out])
    values["input"] = x
    rows = fp_check.check_operators(e, values)
    assert len(rows) == len(e.records)
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad[:5]
