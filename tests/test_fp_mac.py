"""Float MAC operators and FFT on the simulated machine, judged by Arm's compliance checker.

Graphs are built with tosa-tools' serializer over seeded random data; npu-sim computes them
through its memories; the reference model (precise mode) gives the fp64 reference and the
bounds, and Arm's VerifierLibrary decides in DOT_PRODUCT mode (tests/fp_oracle.py). Neither
produces a value npu-sim reports.
"""
from __future__ import annotations

import importlib.util
import math
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import tosa_serializer as ts
from tosa_serializer import DType

import fp_oracle
from npu_sim import api
from npu_sim.config import config_from_dict, load_config
from npu_sim.isa.errors import ConfigError, UnsupportedError, ValidationError
from oracle import GraphBuilder

REPO = Path(__file__).resolve().parents[1]
DT = {"fp16": DType.FP16, "bf16": DType.BF16, "fp32": DType.FP32, "fp8e4m3": DType.FP8E4M3,
      "fp8e5m2": DType.FP8E5M2}
NP = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32,
      "fp8e4m3": ml_dtypes.float8_e4m3fn, "fp8e5m2": ml_dtypes.float8_e5m2}
# (in_t, acc_t) -> (out_t, config): every float row of the spec's MAC tables
MODES = {("fp16", "fp16"): ("fp16", "default"), ("fp16", "fp32"): ("fp16", "default"),
         ("bf16", "fp32"): ("bf16", "default"), ("fp32", "fp32"): ("fp32", "large-8k"),
         ("fp8e4m3", "fp16"): ("fp16", "large-8k"), ("fp8e5m2", "fp16"): ("fp16", "large-8k")}


def _rand(rng, shape, dtype):
    return rng.uniform(-1, 1, shape).astype(NP[dtype])


def _entry(out_dtype, shape, ks, s, in_dtype):
    """The DOT_PRODUCT compliance entry Arm's generator writes (tosa_build_gen.py)."""
    abs_bound = 2 * ks * (3 if in_dtype == "fp32" else 1)
    return {"mode": "DOT_PRODUCT", "data_type": out_dtype.upper(), "shape": list(shape),
            "dot_product_info": {"s": s, "ksb": ks, "abs_bound": abs_bound,
                                 "variance_error_bound": 4 * 0.4 * ks}}


def _graph(op, in_dtype, acc, shapes, rng):
    """(serialized graph, inputs, output name, output shape, K) for one MAC operator."""
    out_dtype = MODES[(in_dtype, acc)][0]
    g = GraphBuilder()
    zero = lambda: g.tensor([1], DT[in_dtype], np.zeros(1, NP[in_dtype]), is_const=True)  # noqa: E731
    a = ts.TosaSerializerAttribute()
    if op == "MATMUL":
        (n, h, c), w = shapes
        x, y = _rand(rng, (n, h, c), in_dtype), _rand(rng, (n, c, w), in_dtype)
        xi, yi = g.tensor(x.shape, DT[in_dtype], x), g.tensor(y.shape, DT[in_dtype], y)
        out_dtype = "fp32" if acc == "fp32" else out_dtype       # MATMUL's out_t is its acc_t
        o = g.output((n, h, w), DT[out_dtype])
        a.MatMulAttribute()
        g.op("MATMUL", [xi, yi, zero(), zero()], [o], a)
        return g.serialize(), {xi: x, yi: y}, o, out_dtype, (n, h, w), c
    xshape, wshape, oshape, attr, k = shapes
    x, w = _rand(rng, xshape, in_dtype), _rand(rng, wshape, in_dtype)
    b = _rand(rng, (oshape[-1],), out_dtype)
    xi = g.tensor(x.shape, DT[in_dtype], x)
    wi = g.tensor(w.shape, DT[in_dtype], w, is_const=True)
    bi = g.tensor(b.shape, DT[out_dtype], b, is_const=True)
    o = g.output(oshape, DT[out_dtype])
    getattr(a, {"CONV2D": "Conv2dAttribute", "CONV3D": "Conv3dAttribute",
                "DEPTHWISE_CONV2D": "DepthwiseConv2dAttribute",
                "TRANSPOSE_CONV2D": "TransposeConv2dAttribute"}[op])(*attr, False, DT[acc])
    g.op(op, [xi, wi, bi, zero(), zero()], [o], a)
    return g.serialize(), {xi: x}, o, out_dtype, oshape, k


SHAPES = {
    "CONV2D": [((1, 9, 8, 6), (5, 3, 3, 6), (1, 9, 8, 5), ([1, 1, 1, 1], [1, 1], [1, 1]), 54),
               ((2, 12, 7, 20), (12, 3, 2, 20), (2, 6, 6, 12), ([0, 1, 0, 0], [2, 1], [1, 1]), 120)],
    "DEPTHWISE_CONV2D": [((1, 8, 8, 4), (3, 3, 4, 2), (1, 8, 8, 8), ([1, 1, 1, 1], [1, 1], [1, 1]), 9)],
    "CONV3D": [((1, 4, 5, 5, 3), (4, 2, 3, 3, 3), (1, 3, 3, 3, 4),
                ([0, 0, 0, 0, 0, 0], [1, 1, 1], [1, 1, 1]), 54)],
    "TRANSPOSE_CONV2D": [((1, 4, 5, 6), (7, 3, 3, 6), (1, 9, 11, 7), ([0, 0, 0, 0], [2, 2]), 54)],
    "MATMUL": [((1, 20, 40), 12), ((2, 7, 130), 9)],
}
CASES = [(op, i, mode) for op, shapes in SHAPES.items() for i in range(len(shapes)) for mode in MODES]


def _run(tosa, inputs, config, tmp_path, name="m.tosa", **kw):
    path = tmp_path / name
    path.write_bytes(tosa)
    program = api.compile_model(path, config, use_cache=False)
    return api.simulate(program, config, inputs=inputs, **kw)


def _judge(tosa, inputs, o, out_dtype, oshape, k, result, s, in_dtype):
    entry = _entry(out_dtype, oshape, k, s, in_dtype)
    ref, bnd = fp_oracle.reference(tosa, inputs, {o: out_dtype}, {o: entry}, True)[o]
    return fp_oracle.verdict(o, entry, result, ref, bnd)


@pytest.mark.parametrize("op,index,mode", CASES, ids=lambda v: "x".join(v) if isinstance(v, tuple) else str(v))
def test_float_mac_operators_are_compliant(op, index, mode, tmp_path):
    in_dtype, acc = mode
    rng = np.random.default_rng(zlib.crc32(f"{op}{index}{mode}".encode()))
    tosa, inputs, o, out_dtype, oshape, k = _graph(op, in_dtype, acc, SHAPES[op][index], rng)
    config = load_config(MODES[mode][1])
    result = _run(tosa, inputs, config, tmp_path)
    out = result.outputs[o]
    assert out.dtype == np.dtype(NP[out_dtype]) and out.shape == tuple(oshape)
    assert result.report.total_macs > 0 and result.report.energy_uj["mac_array"] > 0
    assert _judge(tosa, inputs, o, out_dtype, oshape, k, out, index % 6, in_dtype)


def test_the_checker_catches_a_biased_accumulator(tmp_path):
    """A datapath whose sums lean one way by 2^-8 of their value fails DOT_PRODUCT: the test
    above could fail."""
    rng = np.random.default_rng(5)
    tosa, inputs, o, out_dtype, oshape, k = _graph("CONV2D", "fp32", "fp32", SHAPES["CONV2D"][0], rng)
    out = _run(tosa, inputs, load_config("large-8k"), tmp_path).outputs[o]
    assert _judge(tosa, inputs, o, out_dtype, oshape, k, out, 1, "fp32")
    biased = (out.astype(np.float64) * (1 + 2.0 ** -8)).astype(np.float32)
    assert not _judge(tosa, inputs, o, out_dtype, oshape, k, biased, 1, "fp32")


def test_float_results_are_deterministic_across_runs_and_tilings(tmp_path):
    """Where only rows and channels are tiled, each output's sum is the same products in the
    same order, so the same bytes whatever the tiles or the array's shape. (A split reduction
    rounds its partial sums to fp32 between commands: its bytes may differ, within bounds.)"""
    rng = np.random.default_rng(11)
    shapes = ((1, 24, 20, 24), (32, 3, 3, 24), (1, 24, 20, 32), ([1, 1, 1, 1], [1, 1], [1, 1]), 216)
    tosa, inputs, o, *_ = _graph("CONV2D", "fp16", "fp32", shapes, rng)
    base = load_config("default")
    outs, commands = [], []
    for cfg in (base, base, base.with_overrides({"sram.size": "24 KiB"}),
                base.with_overrides({"mac_array.rows": 16, "mac_array.cols": 64})):
        r = _run(tosa, inputs, cfg, tmp_path)
        macs = [c for c in r.program.commands if getattr(c, "unit", "") == "mac"]
        assert not any("acc_out" in c.outputs for c in macs)      # the reduction stays whole
        outs.append(r.outputs[o].view(np.uint16))
        commands.append(len(macs))
    assert commands[2] > commands[0]                     # the small buffer really tiles
    for other in outs[1:]:
        np.testing.assert_array_equal(other, outs[0])


def test_a_split_reduction_keeps_fp32_partial_sums_and_stays_compliant(tmp_path):
    rng = np.random.default_rng(12)
    tosa, inputs, o, out_dtype, oshape, k = _graph("MATMUL", "bf16", "fp32", ((1, 16, 3000), 8), rng)
    cfg = load_config("default").with_overrides({"sram.size": "8 KiB"})
    r = _run(tosa, inputs, cfg, tmp_path)
    partial = [c for c in r.program.commands if getattr(c, "unit", "") == "mac" and "acc_out" in c.outputs]
    assert partial and all(c.outputs["acc_out"].dtype == "fp32" for c in partial)
    assert _judge(tosa, inputs, o, out_dtype, oshape, k, r.outputs[o], 2, "bf16")


@pytest.mark.parametrize("op", list(SHAPES))
def test_inf_and_nan_operands_give_ieee_results_quietly(op, tmp_path):
    """The suite's special-value tests feed inf and NaN: products like inf * w of both signs
    meet in one sum (inf - inf = NaN). The result is the reference model's NaN/inf pattern and
    no RuntimeWarning reaches the user's terminal (a depthwise one did)."""
    import warnings
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    tosa, inputs, o, out_dtype, oshape, k = _graph(op, "fp16", "fp32", SHAPES[op][0], rng)
    x = next(iter(inputs))
    special = inputs[x].copy()
    flat = special.reshape(-1)
    c = special.shape[-1]        # +-inf along the reduction and on one channel's neighbours
    flat[[0, 1, 2, c, c + 1, -1]] = [np.inf, -np.inf, np.nan, -np.inf, np.inf, np.inf]
    inputs = {**inputs, x: special}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _run(tosa, inputs, load_config("default"), tmp_path).outputs[o].astype(np.float64)
    ref, _ = fp_oracle.reference(tosa, inputs, {o: out_dtype}, {o: _entry(out_dtype, oshape, k, 0, "fp16")},
                                 False)[o]
    assert np.isnan(ref).any() and np.isinf(ref).any()        # the case is really special
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(np.where(np.isinf(ref), ref, 0), np.where(np.isinf(out), out, 0))


# ---- the precision table --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base() -> dict:
    return load_config("large-8k").to_dict()


@pytest.mark.parametrize("value,words", [
    (0.5, ["mac_array.precision.fp16xfp16", "expected a mapping {rate"]),
    ({"rate": 0.5}, ["mac_array.precision.fp16xfp16.acc", "missing"]),
    ({"rate": 0.5, "acc": "fp64"}, ["mac_array.precision.fp16xfp16.acc", "fp16, fp32"]),
    ({"rate": 2, "acc": "fp32"}, ["mac_array.precision.fp16xfp16.rate", "at most 1"]),
    ({"rate": 0.5, "acc": "fp32", "speed": 1}, ["mac_array.precision.fp16xfp16.speed", "unknown key"]),
])
def test_bad_float_precision_entries_are_one_line(base, value, words):
    data = dict(base, mac_array=dict(base["mac_array"],
                                     precision=dict(base["mac_array"]["precision"], fp16xfp16=value)))
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    assert "\n" not in str(info.value) and all(w in str(info.value) for w in words), str(info.value)


def test_bf16_cannot_accumulate_in_fp16_and_float_pairs_need_their_types(base):
    prec = dict(base["mac_array"]["precision"], bf16xbf16={"rate": 0.5, "acc": "fp16"})
    with pytest.raises(ConfigError, match=r"precision.bf16xbf16.acc: expected one of: fp32"):
        config_from_dict(dict(base, mac_array=dict(base["mac_array"], precision=prec)))
    cfg = load_config("edge-256").to_dict()
    cfg["mac_array"]["precision"]["fp16xfp16"] = {"rate": 0.5, "acc": "fp32"}
    with pytest.raises(ConfigError, match=r"fp16 is not in mac_array.dtypes"):
        config_from_dict(cfg)
    cfg["mac_array"]["dtypes"].append("fp16")
    with pytest.raises(ConfigError, match=r"fp16 needs PRO-FP in tosa.profiles"):
        config_from_dict(cfg)


def test_float_modes_round_trip_and_take_their_passes():
    cfg = load_config("default")
    assert config_from_dict(cfg.to_dict()) == cfg
    assert cfg.to_dict()["mac_array"]["precision"]["fp16xfp16"] == {"rate": 0.5, "acc": "fp32"}
    tweaked = cfg.with_overrides({"mac_array.precision.fp16xfp16.rate": 0.25})
    assert tweaked.mac_array.precision["fp16xfp16"] == 0.25


def test_fp32_macs_refused_where_the_array_has_none_and_fp16_sums_where_it_asks_fp32(tmp_path):
    rng = np.random.default_rng(3)
    tosa, inputs, *_ = _graph("CONV2D", "fp32", "fp32", SHAPES["CONV2D"][0], rng)
    (tmp_path / "f32.tosa").write_bytes(tosa)
    with pytest.raises(UnsupportedError, match=r"the MAC array has no fp32 x fp32"):
        api.compile_model(tmp_path / "f32.tosa", load_config("default"), use_cache=False)
    tosa, *_ = _graph("CONV2D", "fp16", "fp32", SHAPES["CONV2D"][0], rng)
    (tmp_path / "f16.tosa").write_bytes(tosa)
    narrow = load_config("default").with_overrides(
        {"mac_array.precision.fp16xfp16": {"rate": 1, "acc": "fp16"}})
    with pytest.raises(UnsupportedError, match=r"accumulates fp16xfp16 in fp32, the MAC array in fp16"):
        api.compile_model(tmp_path / "f16.tosa", narrow, use_cache=False)
    tosa, *_ = _graph("CONV2D", "fp16", "fp16", SHAPES["CONV2D"][0], rng)   # acc fp16: runs
    (tmp_path / "f16a.tosa").write_bytes(tosa)
    api.compile_model(tmp_path / "f16a.tosa", narrow, use_cache=False)


def test_float_macs_take_the_rate_and_energy_of_their_type(tmp_path):
    rng = np.random.default_rng(4)
    shapes = ((1, 16, 16, 32), (32, 1, 1, 32), (1, 16, 16, 32), ([0, 0, 0, 0], [1, 1], [1, 1]), 32)
    tosa, inputs, *_ = _graph("CONV2D", "fp16", "fp32", shapes, rng)
    cfg = load_config("default")
    half = _run(tosa, inputs, cfg, tmp_path, timing_only=True).report
    full = _run(tosa, inputs, cfg.with_overrides({"mac_array.precision.fp16xfp16.rate": 1}),
                tmp_path, timing_only=True).report
    # (the array's own time: the run may be bound by DRAM either way)
    assert half.engines["mac"]["busy_cycles"] > full.engines["mac"]["busy_cycles"]
    macs = 16 * 16 * 32 * 32
    assert math.isclose(half.energy_uj["mac_array"], macs * cfg.energy.mac_pj["fp16"] * 1e-6)


# ---- FFT2D / RFFT2D ------------------------------------------------------------------------------

def _fft_graph(real: bool, shape, inverse: bool, rng):
    g = GraphBuilder()
    n, h, w = shape
    xr = rng.uniform(-1, 1, shape).astype(np.float32)
    inputs = {g.tensor(shape, DType.FP32, xr): xr}
    if not real:
        xi = rng.uniform(-1, 1, shape).astype(np.float32)
        inputs[g.tensor(shape, DType.FP32, xi)] = xi
    wo = w // 2 + 1 if real else w
    outs = [g.output((n, h, wo), DType.FP32) for _ in range(2)]
    a = ts.TosaSerializerAttribute()
    if real:
        a.RFFT2dAttribute(False)
    else:
        a.FFT2dAttribute(inverse, False)
    g.op("RFFT2D" if real else "FFT2D", list(inputs), outs, a)
    return g.serialize(), inputs, outs, (n, h, wo), (h * w if real else 2 * h * w)


@pytest.mark.parametrize("real,shape,inverse", [(False, (1, 8, 4), False), (False, (2, 4, 16), True),
                                                (True, (1, 8, 8), False), (True, (2, 2, 32), False)])
def test_fft_runs_as_dft_gemms_on_the_mac_array_and_is_compliant(real, shape, inverse, tmp_path):
    rng = np.random.default_rng(sum(shape))
    tosa, inputs, outs, oshape, ks = _fft_graph(real, shape, inverse, rng)
    r = _run(tosa, inputs, load_config("large-8k"), tmp_path)
    ops = [c.op for c in r.program.commands if getattr(c, "unit", "") == "mac"]
    assert ops and set(ops) == {"conv2d"} and r.report.total_macs > 0
    entries = {o: _entry("fp32", oshape, ks, 0, "fp32") for o in outs}
    refs = fp_oracle.reference(tosa, inputs, {o: "fp32" for o in outs}, entries, True)
    for o in outs:
        assert fp_oracle.verdict(o, entries[o], r.outputs[o], *refs[o]), o


def test_fft_errors_are_one_line(tmp_path):
    rng = np.random.default_rng(1)
    tosa, inputs, *_ = _fft_graph(False, (1, 6, 4), False, rng)
    (tmp_path / "f.tosa").write_bytes(tosa)
    with pytest.raises(ValidationError, match=r"H = 6 is not a power of two"):
        api.compile_model(tmp_path / "f.tosa", load_config("large-8k"), use_cache=False)
    tosa, *_ = _fft_graph(True, (1, 4, 4), False, rng)
    (tmp_path / "r.tosa").write_bytes(tosa)
    with pytest.raises(UnsupportedError, match=r"EXT-FFT"):
        api.compile_model(tmp_path / "r.tosa", load_config("default"), use_cache=False)


def test_fft_host_evaluation_matches_the_machine():
    """The host CPU's kernel (control-flow bodies) computes the same transform."""
    from npu_sim.datapath import fft2d, rfft2d
    rng = np.random.default_rng(2)
    re, im = rng.uniform(-1, 1, (2, 4, 8)), rng.uniform(-1, 1, (2, 4, 8))
    out = fft2d(re, im, False)
    want = np.fft.fft2(re + 1j * im)
    np.testing.assert_allclose(out[0], want.real, atol=1e-5)
    np.testing.assert_allclose(out[1], want.imag, atol=1e-5)
    back = fft2d(out[0], out[1], True)
    np.testing.assert_allclose(back[0], re * 32, atol=1e-4)
    r = rfft2d(re)
    np.testing.assert_allclose(r[1], np.fft.rfft2(re).imag, atol=1e-5)
    assert r[0].dtype == np.float32 and r[0].shape == (2, 4, 5)


# ---- hardware validation -------------------------------------------------------------------------

def test_hw_validation_predicts_with_the_preset_and_one_fixed_overhead():
    """bench/hw_validation.py's prediction is the unchanged preset's simulated time plus one
    constant derived from the smallest shape: nothing else is fitted."""
    spec = importlib.util.spec_from_file_location("hw_validation", REPO / "bench" / "hw_validation.py")
    hw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hw)
    preset = load_config("tpu-v4-core")
    assert hw.PRESET == "tpu-v4-core" and preset.mac_array.arrays == 4
    assert (preset.clock_mhz, preset.mac_array.rows, preset.mac_array.cols) == (1050, 128, 128)
    measured = hw.read_measurements()
    assert len(measured) == 512
    overhead = hw.fusion_overhead_us(preset, measured)
    smallest = next(r for r in measured if (r["M"], r["N"], r["K"]) == hw.SMALLEST)
    assert math.isclose(hw.simulated_us(*hw.SMALLEST, preset) + overhead, smallest["mean_us"])
    t = hw.simulated_us(256, 512, 384, preset)
    program = api.compile_model(_write(hw.matmul_graph(256, 512, 384)), preset, use_cache=False)
    assert t == api.simulate(program, preset, timing_only=True).report.cycles / 1050
    # the megacore diagnostic: one core's half of C, and throughput against one core's
    # single-pass peak (4 MXUs x 128 x 128 MACs at 1050 MHz)
    assert hw.half_us(256, 512, 384, preset) == min(hw.simulated_us(128, 512, 384, preset),
                                                    hw.simulated_us(256, 256, 384, preset))
    assert math.isclose(hw.core_efficiency_pct(4 * 128 * 128 * 1050, 1.0, preset), 100)


def _write(data: bytes) -> Path:
    import tempfile
    f = tempfile.NamedTemporaryFile(suffix=".tosa", delete=False)
    f.write(data)
    f.close()
    return Path(f.name)
