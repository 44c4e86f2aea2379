"""Model zoo: builders emit valid, deterministic, non-degenerate int8 TOSA 1.0 graphs."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest
from tosa.Op import Op
from tosa.RescaleAttribute import RescaleAttribute
from tosa.RoundingMode import RoundingMode
from tosa.TosaGraph import TosaGraph

from npu_sim import zoo
from npu_sim.zoo.quant import choose_qparams, quantize_multiplier
from oracle import reference_binary

REFMODEL = shutil.which(reference_binary())
needs_refmodel = pytest.mark.skipif(REFMODEL is None, reason="tosa_reference_model not found")
OP_NAMES = {v: k for k, v in vars(Op).items() if not k.startswith("_")}
ROUNDING = {v: k for k, v in vars(RoundingMode).items() if not k.startswith("_")}

# small variants: (network, kwargs, float-model correlation floor)
SMALL = {
    "mobilenet_v2": (dict(width=0.35, resolution=64, num_classes=32), 0.85),
    "resnet": (dict(depth=18, resolution=32, width=8, num_classes=32), 0.95),
    "transformer": (dict(tokens=16, d_model=64, heads=2, d_ff=128, layers=2), 0.99),
    "ds_cnn": (dict(), 0.99),
}

DEFAULT_HISTOGRAM = {"CONST": 546, "RESCALE": 83, "CONV2D": 36, "DEPTHWISE_CONV2D": 17,
                     "ADD": 10, "AVG_POOL2D": 1, "CONST_SHAPE": 1, "RESHAPE": 1}


def graph_info(data: bytes):
    g = TosaGraph.GetRootAsTosaGraph(data, 0)
    blk = g.Regions(0).Blocks(0)
    ops = [blk.Operators(i) for i in range(blk.OperatorsLength())]
    hist = Counter(OP_NAMES[o.Op()] for o in ops)
    rounding = Counter()
    for o in ops:
        if OP_NAMES[o.Op()] == "RESCALE":
            a = RescaleAttribute()
            a.Init(o.Attribute().Bytes, o.Attribute().Pos)
            assert a.Scale32()
            rounding[ROUNDING[a.RoundingMode()]] += 1
    v = g.Version()
    return {"version": (v._Major(), v._Minor(), v._Patch(), v._Draft()), "hist": hist,
            "rounding": rounding,
            "inputs": [blk.Inputs(i).decode() for i in range(blk.InputsLength())],
            "outputs": [blk.Outputs(i).decode() for i in range(blk.OutputsLength())]}


def run_refmodel(tmp_path, model_file, in_name, x, out_name):
    np.save(tmp_path / "in.npy", x)
    r = subprocess.run([REFMODEL, "--tosa_file", str(model_file), "--ifm_name", in_name,
                        "--ifm_file", str(tmp_path / "in.npy"), "--ofm_name", out_name,
                        "--ofm_file", str(tmp_path / "out.npy")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return np.load(tmp_path / "out.npy")


def seeded_input(shape, seed=1234):
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


@pytest.fixture(scope="module", params=sorted(SMALL))
def small_build(request):
    name = request.param
    kwargs, floor = SMALL[name]
    spec = zoo.spec(name, **kwargs)
    fctx = spec.calibrate()
    data, meta = spec.emit(fctx)
    return name, kwargs, floor, spec, fctx, data, meta


def test_quantize_multiplier_matches_tflite():
    assert quantize_multiplier(1.0) == (1 << 30, 30)
    assert quantize_multiplier(0.5) == (1 << 30, 31)
    assert quantize_multiplier(2.0**19) == (1 << 30, 11)  # the ADD input rescale
    m, s = quantize_multiplier(0.0012345)
    assert 1 << 30 <= m < 1 << 31 and 2 <= s <= 62
    assert abs(m * 2.0**-s / 0.0012345 - 1) < 2**-30
    assert quantize_multiplier(2.0**-70)[1] == 62
    q = choose_qparams(0.0, 6.0)  # ReLU6 folded into the output range
    assert q.zp == -128 and abs(q.scale - 6 / 255) < 1e-7


def test_small_graph_structure(small_build):
    name, _, _, _, _, data, meta = small_build
    info = graph_info(data)
    assert info["version"] == (1, 0, 0, False)
    assert info["inputs"] == [meta["input"]["name"]]
    assert info["outputs"] == meta["output_names"]
    assert dict(info["hist"]) == meta["op_histogram"]
    assert meta["macs"] > 0
    required = {
        "mobilenet_v2": {"CONV2D", "DEPTHWISE_CONV2D", "RESCALE", "ADD", "AVG_POOL2D", "RESHAPE"},
        "resnet": {"CONV2D", "MAX_POOL2D", "ADD", "AVG_POOL2D", "MATMUL", "SLICE"},
        "transformer": {"MATMUL", "TABLE", "REDUCE_SUM", "REDUCE_MAX", "RESCALE", "MUL", "ADD",
                        "SUB", "RESHAPE", "TRANSPOSE", "SLICE", "CONCAT", "CONV2D"},
        "ds_cnn": {"CONV2D", "DEPTHWISE_CONV2D", "AVG_POOL2D"},
    }[name]
    assert required <= set(info["hist"]), required - set(info["hist"])
    # ExecuTorch-style SINGLE_ROUND; resnet adds/FC and ds_cnn (TFLite origin) DOUBLE_ROUND
    modes = {"mobilenet_v2": {"SINGLE_ROUND"}, "transformer": {"SINGLE_ROUND"},
             "resnet": {"SINGLE_ROUND", "DOUBLE_ROUND"}, "ds_cnn": {"SINGLE_ROUND", "DOUBLE_ROUND"}}
    assert set(info["rounding"]) == modes[name]


def test_small_deterministic(small_build):
    name, kwargs, _, _, _, data, _ = small_build
    again, _ = zoo.build(name, **kwargs)
    assert again == data
    other, _ = zoo.build(name, **{**kwargs, "seed": 1})
    assert other != data


@needs_refmodel
def test_small_runs_in_refmodel(small_build, tmp_path):
    name, _, floor, spec, fctx, data, meta = small_build
    (tmp_path / "m.tosa").write_bytes(data)
    x = seeded_input(meta["input"]["shape"])
    y = run_refmodel(tmp_path, tmp_path / "m.tosa", meta["input"]["name"], x,
                     meta["output_names"][0])
    out = meta["outputs"][0]
    assert y.dtype == np.int8 and list(y.shape) == out["shape"]
    assert len(np.unique(y)) >= 8, "degenerate output"
    assert np.mean((y == -128) | (y == 127)) < 0.1, "output mostly saturated"
    assert int(y.max()) - int(y.min()) >= 64, "output uses too little of the int8 range"
    # the int8 graph tracks its float model
    yq = (y.astype(np.float64) - out["zero_point"]) * out["scale"]
    yf = np.asarray(spec.float_forward(fctx, x)).reshape(yq.shape)
    assert np.corrcoef(yq.ravel(), yf.ravel())[0, 1] > floor


def test_build_dispatch():
    assert set(zoo.NETWORKS) == {"mobilenet_v2", "resnet", "transformer", "ds_cnn"}
    with pytest.raises(ValueError):
        zoo.build("alexnet")


def test_default_model_file():
    path = zoo.default_model_path()
    assert path.is_file() and path.name == "mobilenet_v2_224.tosa"
    info = graph_info(path.read_bytes())
    assert info["version"] == (1, 0, 0, False)
    assert dict(info["hist"]) == DEFAULT_HISTOGRAM
    assert zoo.default_model_info() == {"input_name": "input", "input_shape": [1, 224, 224, 3],
                                        "output_name": "classifier_reshape",
                                        "output_shape": [1, 1000]}


@needs_refmodel
def test_default_model_runs_in_refmodel(tmp_path):
    x = seeded_input([1, 224, 224, 3])
    y = run_refmodel(tmp_path, zoo.default_model_path(), "input", x, "classifier_reshape")
    assert y.shape == (1, 1000) and y.dtype == np.int8
    assert len(np.unique(y)) >= 64


@needs_refmodel
def test_bottleneck_resnet(tmp_path):
    """ResNet-50's bottleneck blocks (1x1 reduce, 3x3, 1x1 expand 4x; a projection where the
    shape changes): 1 + 16 x 3 + 4 convolutions, bit-exact in npu-sim, tracking its float
    model."""
    from npu_sim import api

    spec = zoo.spec("resnet", depth=50, resolution=32, width=8, num_classes=16)
    fctx = spec.calibrate()
    data, meta = spec.emit(fctx)
    assert graph_info(data)["hist"]["CONV2D"] == 53
    (tmp_path / "m.tosa").write_bytes(data)
    x = seeded_input(meta["input"]["shape"])
    name, out_name = meta["input"]["name"], meta["output_names"][0]
    y = run_refmodel(tmp_path, tmp_path / "m.tosa", name, x, out_name)
    got = api.run(tmp_path / "m.tosa", "default", inputs={name: x}).outputs[out_name]
    assert np.array_equal(got, y)
    out = meta["outputs"][0]
    yq = (y.astype(np.float64) - out["zero_point"]) * out["scale"]
    yf = np.asarray(spec.float_forward(fctx, x)).reshape(yq.shape)
    assert np.corrcoef(yq.ravel(), yf.ravel())[0, 1] > 0.85     # 50 int8 layers at width 8
