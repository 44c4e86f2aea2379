"""Every non-MAC PRO-FP operator with its fp16/fp32 rows and the bf16/fp8 rows of the
extensions, end to end on the simulated machine, judged by Arm's compliance checker against
the reference model's precise-mode result and bounds (tests/fp_oracle.py). Data are seeded;
the small-buffer config splits the operators into many tiles."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import tosa_serializer as ts

from fp_oracle import check_graph, compliance_entry
from npu_sim.api import compile_model, load_config, simulate
from npu_sim.isa.encoding import decode, encode
from npu_sim.isa.errors import UnsupportedError, ValidationError
from oracle import NP_DTYPE, DType, GraphBuilder

T = {"fp16": DType.FP16, "fp32": DType.FP32, "bf16": DType.BF16, "fp8e4m3": DType.FP8E4M3,
     "fp8e5m2": DType.FP8E5M2, "int8": DType.INT8, "int16": DType.INT16, "int32": DType.INT32,
     "bool": DType.BOOL}
FLOATS = ("fp16", "fp32", "bf16")
_CONFIGS = {}


def seed(*parts) -> int:
    """A stable seed from the case's parameters (hash() of strings varies per process)."""
    return zlib.crc32(repr(parts).encode())


def config(name):
    if name not in _CONFIGS:
        base, _, sram = name.partition("@")
        cfg = load_config(base)
        _CONFIGS[name] = cfg.with_overrides({"sram.size": sram}) if sram else cfg
    return _CONFIGS[name]


def data(rng, shape, dtype, lo=-3.0, hi=3.0):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype.startswith("int"):
        info = np.iinfo(NP_DTYPE[T[dtype]])
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(NP_DTYPE[T[dtype]])
    return rng.uniform(lo, hi, shape).astype(NP_DTYPE[T[dtype]])


def run_and_check(tmp_path, g, out, out_dtype, entry, cfg="default"):
    path = tmp_path / "g.tosa"
    path.write_bytes(g.serialize())
    c = config(cfg)
    program = decode(encode(compile_model(path, c)))
    res = simulate(program, c, inputs=g.input_values)
    assert res.outputs[out].dtype == NP_DTYPE[T[out_dtype]]
    check_graph(g.serialize(), g.input_values, {out: out_dtype}, res.outputs, {out: entry})
    return res


def nan_attr(op):
    a = ts.TosaSerializerAttribute()
    getattr(a, {"MAXIMUM": "MaximumAttribute", "MINIMUM": "MinimumAttribute"}[op])(
        ts.NanPropagationMode.PROPAGATE)
    return a


# ---- elementwise ------------------------------------------------------------------------------

# (operator, input range): ranges keep inputs in each operator's REQUIRE domain
UNARY = [("ABS", (-4, 4)), ("NEGATE", (-4, 4)), ("CEIL", (-40, 40)), ("FLOOR", (-40, 40)),
         ("EXP", (-9, 9)), ("LOG", (0.001, 100)), ("RECIPROCAL", (-8, 8)), ("RSQRT", (0.001, 100)),
         ("SIN", (-6, 6)), ("COS", (-6, 6)), ("ERF", (-3, 3)), ("SIGMOID", (-10, 10)),
         ("TANH", (-5, 5))]
BINARY = [("ADD", (-100, 100)), ("SUB", (-100, 100)), ("MUL", (-30, 30)), ("MAXIMUM", (-5, 5)),
          ("MINIMUM", (-5, 5)), ("POW", (0.1, 4))]


def _zp(g, dtype):
    return g.tensor((1,), T[dtype], np.zeros(1, NP_DTYPE[T[dtype]]), is_const=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op, span", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("shape, cfg", [((3, 5, 47), "default"), ((2, 9, 31, 8), "default@2 KiB")])
def test_unary(tmp_path, op, span, dtype, shape, cfg):
    g = GraphBuilder()
    rng = np.random.default_rng(seed((op, dtype, len(shape))))
    x = g.tensor(shape, T[dtype], data(rng, shape, dtype, *span))
    inputs = [x, _zp(g, dtype), _zp(g, dtype)] if op == "NEGATE" else [x]
    o = g.output(shape, T[dtype])
    g.op(op, inputs, [o])
    run_and_check(tmp_path, g, o, dtype, compliance_entry(op, dtype, shape), cfg)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op, span", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("shapes, cfg", [(((4, 1, 33), (4, 7, 33)), "default"),
                                         (((2, 30, 40), (1, 30, 40)), "default@2 KiB")])
def test_binary(tmp_path, op, span, dtype, shapes, cfg):
    g = GraphBuilder()
    rng = np.random.default_rng(seed((op, dtype, cfg)))
    a = g.tensor(shapes[0], T[dtype], data(rng, shapes[0], dtype, *span))
    lo, hi = (-2, 2) if op == "POW" else span
    b = g.tensor(shapes[1], T[dtype], data(rng, shapes[1], dtype, lo, hi))
    shape = tuple(max(x, y) for x, y in zip(*shapes))
    o = g.output(shape, T[dtype])
    inputs = [a, b]
    attr = None
    if op == "MUL":
        inputs.append(g.tensor((1,), DType.INT8, np.zeros(1, np.int8), is_const=True))
    if op in ("MAXIMUM", "MINIMUM"):
        attr = nan_attr(op)
    g.op(op, inputs, [o], attr)
    run_and_check(tmp_path, g, o, dtype, compliance_entry(op, dtype, shape), cfg)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["EQUAL", "GREATER", "GREATER_EQUAL"])
def test_comparison(tmp_path, op, dtype):
    g = GraphBuilder()
    rng = np.random.default_rng(11)
    av = data(rng, (6, 40), dtype, -2, 2)
    bv = av.copy()
    bv[::2] = data(rng, (3, 40), dtype, -2, 2)         # equal elements too
    a, b = g.tensor((6, 40), T[dtype], av), g.tensor((6, 40), T[dtype], bv)
    o = g.output((6, 40), DType.BOOL)
    g.op(op, [a, b], [o])
    run_and_check(tmp_path, g, o, "bool", compliance_entry(op, "bool", (6, 40)))


@pytest.mark.parametrize("dtype", FLOATS)
def test_select_and_clamp_chain(tmp_path, dtype):
    """SELECT then CLAMP: one vector chain, exact."""
    g = GraphBuilder()
    rng = np.random.default_rng(5)
    shape = (5, 16, 9)
    c = g.tensor(shape, DType.BOOL, data(rng, shape, "bool"))
    a, b = (g.tensor(shape, T[dtype], data(rng, shape, dtype)) for _ in range(2))
    t = g.intermediate(shape, T[dtype])
    o = g.output(shape, T[dtype])
    g.op("SELECT", [c, a, b], [t])
    npt = NP_DTYPE[T[dtype]]
    attr = ts.TosaSerializerAttribute()
    attr.ClampAttribute(np.array([-1.25], npt).view(np.uint8).tolist(),
                        np.array([2.5], npt).view(np.uint8).tolist(), ts.NanPropagationMode.PROPAGATE)
    g.op("CLAMP", [t], [o], attr)
    res = run_and_check(tmp_path, g, o, dtype, compliance_entry("CLAMP", dtype, shape))
    assert len(res.report.layers) == 1


CASTS = [("fp32", "fp16"), ("fp16", "fp32"), ("fp32", "bf16"), ("bf16", "fp32"), ("fp32", "int8"),
         ("fp16", "int16"), ("fp32", "int32"), ("bf16", "int8"), ("int8", "fp16"),
         ("int16", "bf16"), ("int32", "fp32"), ("int32", "fp16"), ("fp32", "fp8e4m3"),
         ("fp16", "fp8e5m2"), ("bf16", "fp8e4m3"), ("fp8e4m3", "fp16"), ("fp8e5m2", "bf16"),
         ("fp8e4m3", "fp32")]


@pytest.mark.parametrize("src, dst", CASTS, ids=[f"{a}-{b}" for a, b in CASTS])
def test_cast(tmp_path, src, dst):
    g = GraphBuilder()
    rng = np.random.default_rng(len(src) * 7 + len(dst))
    span = (-150, 150) if dst.startswith("int") else (-20, 20)
    if src.startswith("fp8"):
        span = (-8, 8)
    shape = (7, 45)
    x = g.tensor(shape, T[src], data(rng, shape, src, *span))
    o = g.output(shape, T[dst])
    g.op("CAST", [x], [o])
    cfg = "large-8k" if "fp8" in src + dst else "default"
    run_and_check(tmp_path, g, o, dst, compliance_entry("CAST", dst, shape, src), cfg)


def test_cast_float_to_int_rounds_half_to_even_and_saturates(tmp_path):
    g = GraphBuilder()
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 127.4, 127.6, 1000.0, -1000.0, -128.5],
                      np.float32)
    x = g.tensor((10,), DType.FP32, values)
    o = g.output((10,), DType.INT8)
    g.op("CAST", [x], [o])
    res = run_and_check(tmp_path, g, o, "int8", compliance_entry("CAST", "int8", (10,)))
    assert res.outputs[o].tolist() == [0, 2, 2, 0, -2, 127, 127, 127, -128, -128]


# ---- reductions, pools, argmax, resize ---------------------------------------------------------

def _axis_attr(axis, nan=True):
    a = ts.TosaSerializerAttribute()
    if nan:
        a.ReduceMaxAttribute(axis, ts.NanPropagationMode.PROPAGATE)
    else:
        a.ReduceSumAttribute(axis)
    return a


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["REDUCE_SUM", "REDUCE_PRODUCT", "REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("shape, axis, cfg", [((4, 37, 6), 1, "default"),
                                              ((3, 700), 1, "default@2 KiB"),
                                              ((60, 5, 8), 0, "default@2 KiB")])
def test_reduce(tmp_path, op, dtype, shape, axis, cfg):
    g = GraphBuilder()
    rng = np.random.default_rng(seed((op, dtype, axis)))
    span = (0.8, 1.25) if op == "REDUCE_PRODUCT" else (-4, 4)
    x = g.tensor(shape, T[dtype], data(rng, shape, dtype, *span))
    out_shape = tuple(1 if i == axis else s for i, s in enumerate(shape))
    o = g.output(out_shape, T[dtype])
    a = ts.TosaSerializerAttribute()
    if op in ("REDUCE_MAX", "REDUCE_MIN"):
        getattr(a, op.title().replace("_", "") + "Attribute")(axis, ts.NanPropagationMode.PROPAGATE)
    else:
        getattr(a, op.title().replace("_", "") + "Attribute")(axis)
    g.op(op, [x], [o], a)
    acc = "fp32" if dtype == "bf16" else dtype
    run_and_check(tmp_path, g, o, dtype,
                  compliance_entry(op, dtype, out_shape, terms=shape[axis], acc=acc), cfg)


@pytest.mark.parametrize("dtype", FLOATS + ("fp8e4m3", "fp8e5m2"))
def test_argmax(tmp_path, dtype):
    g = GraphBuilder()
    rng = np.random.default_rng(3)
    x = g.tensor((5, 33, 4), T[dtype], data(rng, (5, 33, 4), dtype, -4, 4))
    o = g.output((5, 4), DType.INT32)
    a = ts.TosaSerializerAttribute()
    a.ArgMaxAttribute(1, ts.NanPropagationMode.PROPAGATE)
    g.op("ARGMAX", [x], [o], a)
    run_and_check(tmp_path, g, o, "int32", compliance_entry("ARGMAX", "int32", (5, 4)),
                  "large-8k" if "fp8" in dtype else "default")


POOLS = [("AVG_POOL2D", d, acc) for d, acc in (("fp16", "fp32"), ("fp16", "fp16"), ("fp32", "fp32"),
                                              ("bf16", "fp32"), ("fp8e4m3", "fp16"),
                                              ("fp8e5m2", "fp16"))]
POOLS += [("MAX_POOL2D", d, "") for d in FLOATS + ("fp8e4m3", "fp8e5m2")]


@pytest.mark.parametrize("op, dtype, acc", POOLS, ids=[f"{o}-{d}-{a}" for o, d, a in POOLS])
def test_pool(tmp_path, op, dtype, acc):
    g = GraphBuilder()
    rng = np.random.default_rng(9)
    shape, kernel, stride, pad = (1, 17, 19, 8), (3, 3), (2, 2), (1, 1, 1, 1)
    out_shape = (1, 9, 10, 8)
    x = g.tensor(shape, T[dtype], data(rng, shape, dtype, -3, 3))
    o = g.output(out_shape, T[dtype])
    a = ts.TosaSerializerAttribute()
    if op == "AVG_POOL2D":
        a.AvgPool2dAttribute(kernel, stride, pad, T[acc])
        g.op(op, [x, _zp(g, dtype), _zp(g, dtype)], [o], a)
    else:
        a.MaxPool2dAttribute(kernel, stride, pad, ts.NanPropagationMode.PROPAGATE)
        g.op(op, [x], [o], a)
    cfg = "large-8k" if dtype.startswith("fp8") else "default@2 KiB"
    run_and_check(tmp_path, g, o, dtype,
                  compliance_entry(op, dtype, out_shape, terms=9, acc=acc), cfg)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["BILINEAR", "NEAREST"])
def test_resize(tmp_path, dtype, mode):
    g = GraphBuilder()
    rng = np.random.default_rng(4)
    shape = (1, 9, 11, 5)
    x = g.tensor(shape, T[dtype], data(rng, shape, dtype, -3, 3))
    scale, offset, border = [4, 2, 3, 2], [0, 0], [0, 0]     # 2x in y, 1.5x in x
    oh = ((shape[1] - 1) * 4 - 0 + 0) // 2 + 1
    ow = ((shape[2] - 1) * 3 - 0 + 0) // 2 + 1
    s = g.ser.addConst([4], DType.SHAPE, np.array(scale, np.int64))
    off = g.ser.addConst([2], DType.SHAPE, np.array(offset, np.int64))
    bor = g.ser.addConst([2], DType.SHAPE, np.array(border, np.int64))
    o = g.output((1, oh, ow, 5), T[dtype])
    a = ts.TosaSerializerAttribute()
    a.ResizeAttribute(getattr(ts.ResizeMode, mode))
    g.op("RESIZE", [x, s.name, off.name, bor.name], [o], a)
    run_and_check(tmp_path, g, o, dtype, compliance_entry("RESIZE", dtype, (1, oh, ow, 5)),
                  "default@4 KiB")


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_float_resize_inside_its_chain_computes_what_it_does_apart(tmp_path, dtype):
    """A float bilinear RESIZE read by an ADD alone: on 8 KiB the vector unit computes each
    ADD tile's box of it inside the chain (compiler/cascade.py _resized), on 1 MiB the two run
    apart; every output value is the same IEEE value either way."""
    rng = np.random.default_rng(seed("resize-chain", dtype))
    g = GraphBuilder()
    x = g.tensor((1, 9, 11, 24), T[dtype], data(rng, (1, 9, 11, 24), dtype))
    up = g.intermediate((1, 17, 21, 24), T[dtype])
    s = g.ser.addConst([4], DType.SHAPE, np.array([4, 2, 4, 2], np.int64))
    off = g.ser.addConst([2], DType.SHAPE, np.array([0, 0], np.int64))
    a = ts.TosaSerializerAttribute()
    a.ResizeAttribute(ts.ResizeMode.BILINEAR)
    g.op("RESIZE", [x, s.name, off.name, off.name], [up], a)
    y = g.tensor((1, 17, 21, 24), T[dtype], data(rng, (1, 17, 21, 24), dtype))
    o = g.output((1, 17, 21, 24), T[dtype])
    g.op("ADD", [up, y], [o])
    path = tmp_path / "g.tosa"
    path.write_bytes(g.serialize())
    outputs = []
    for cfg, layers in (("large-8k@1 MiB", [["RESIZE"], ["ADD"]]),
                        ("large-8k@8 KiB", [["RESIZE", "ADD"]])):
        program = compile_model(path, config(cfg))
        assert [list(layer.ops) for layer in program.layers] == layers
        outputs.append(simulate(program, config(cfg), inputs=g.input_values).outputs[o])
    assert _same(*outputs)


# ---- data movement, host operators ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + ("fp8e4m3", "fp8e5m2"))
def test_data_movement_chain(tmp_path, dtype):
    """PAD (float pad_const) -> TRANSPOSE -> SLICE -> REVERSE -> TILE -> CONCAT -> RESHAPE:
    exact bit copies through the DMA engines."""
    g = GraphBuilder()
    rng = np.random.default_rng(6)
    npt = NP_DTYPE[T[dtype]]
    x = g.tensor((2, 5, 6), T[dtype], data(rng, (2, 5, 6), dtype, -3, 3))
    pads = g.ser.addConst([6], DType.SHAPE, np.array([0, 1, 2, 0, 1, 1], np.int64))
    pc = g.tensor((1,), T[dtype], np.array([-1.75], npt), is_const=True)
    p = g.intermediate((3, 7, 8), T[dtype])
    g.op("PAD", [x, pads.name, pc], [p])
    t = g.intermediate((8, 3, 7), T[dtype])
    ta = ts.TosaSerializerAttribute()
    ta.TransposeAttribute([2, 0, 1])
    g.op("TRANSPOSE", [p], [t], ta)
    st = g.ser.addConst([3], DType.SHAPE, np.array([1, 0, 2], np.int64))
    sz = g.ser.addConst([3], DType.SHAPE, np.array([6, 3, 4], np.int64))
    sl = g.intermediate((6, 3, 4), T[dtype])
    g.op("SLICE", [t, st.name, sz.name], [sl])
    r = g.intermediate((6, 3, 4), T[dtype])
    ra = ts.TosaSerializerAttribute()
    ra.ReverseAttribute(1)
    g.op("REVERSE", [sl], [r], ra)
    mult = g.ser.addConst([3], DType.SHAPE, np.array([1, 2, 1], np.int64))
    ti = g.intermediate((6, 6, 4), T[dtype])
    g.op("TILE", [r, mult.name], [ti])
    c = g.intermediate((12, 6, 4), T[dtype])
    ca = ts.TosaSerializerAttribute()
    ca.ConcatAttribute(0)
    g.op("CONCAT", [ti, ti], [c], ca)
    shp = g.ser.addConst([2], DType.SHAPE, np.array([72, 4], np.int64))
    o = g.output((72, 4), T[dtype])
    g.op("RESHAPE", [c, shp.name], [o])
    cfg = "large-8k" if dtype.startswith("fp8") else "default"
    res = run_and_check(tmp_path, g, o, dtype, compliance_entry("PAD", dtype, (72, 4)), cfg)
    assert (res.outputs[o].astype(np.float32) == -1.75).any()      # the pad value arrived


@pytest.mark.parametrize("dtype", FLOATS + ("fp8e4m3",))
def test_gather_scatter(tmp_path, dtype):
    g = GraphBuilder()
    rng = np.random.default_rng(8)
    values = g.tensor((2, 10, 3), T[dtype], data(rng, (2, 10, 3), dtype))
    idx = g.tensor((2, 4), DType.INT32, np.array([[0, 9, 3, 3], [5, 1, 0, 8]], np.int32))
    gathered = g.intermediate((2, 4, 3), T[dtype])
    g.op("GATHER", [values, idx], [gathered])
    sidx = g.tensor((2, 4), DType.INT32, np.array([[1, 2, 3, 4], [9, 8, 7, 6]], np.int32))
    o = g.output((2, 10, 3), T[dtype])
    g.op("SCATTER", [values, sidx, gathered], [o])
    cfg = "large-8k" if dtype.startswith("fp8") else "default"
    run_and_check(tmp_path, g, o, dtype, compliance_entry("SCATTER", dtype, (2, 10, 3)), cfg)


# ---- special values: the spec's tables for ±inf, NaN, ±0 and subnormals ---------------------------

_SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-40, 1.0, -1.0, 2.0, 1e30],
                    np.float32)


def _same(a, b) -> bool:
    """Equal as IEEE values, NaN matching NaN and zeros matching by sign."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(nan | ((a == b) & (np.signbit(a) == np.signbit(b)))))


@pytest.mark.parametrize("op", [u[0] for u in UNARY])
def test_special_values_match_the_spec_tables(tmp_path, op):
    g = GraphBuilder()
    x = g.tensor(_SPECIAL.shape, DType.FP32, _SPECIAL)
    inputs = [x, _zp(g, "fp32"), _zp(g, "fp32")] if op == "NEGATE" else [x]
    o = g.output(_SPECIAL.shape, DType.FP32)
    g.op(op, inputs, [o])
    path = tmp_path / "s.tosa"
    path.write_bytes(g.serialize())
    res = simulate(compile_model(path, config("default")), config("default"), inputs=g.input_values)
    out = res.outputs[o]
    ref = g.run()[o]
    special = ~np.isfinite(_SPECIAL) | (_SPECIAL == 0)
    # ±inf, NaN and ±0: exactly the reference's result (the spec's table)
    assert _same(out[special], ref[special]), (op, out[special], ref[special])
    # subnormal inputs may be flushed (the reference model does); npu-sim keeps them
    sub = (_SPECIAL != 0) & (np.abs(_SPECIAL) < 1e-38)
    if op in ("ABS", "NEGATE"):
        assert _same(out[sub], np.abs(_SPECIAL[sub]) if op == "ABS" else -_SPECIAL[sub])
    expected = {"EXP": {1: 0.0}, "LOG": {3: -np.inf, 4: -np.inf}, "RECIPROCAL": {3: np.inf, 4: -np.inf},
                "SIGMOID": {1: 0.0, 0: 1.0}, "TANH": {0: 1.0, 1: -1.0}}.get(op, {})
    for i, v in expected.items():
        assert _same(out[i], v), (op, i, out[i])


def test_nan_modes_of_maximum_clamp_and_reductions(tmp_path):
    g = GraphBuilder()
    av = np.array([np.nan, 1.0, np.nan, -2.0], np.float32)
    bv = np.array([3.0, np.nan, np.nan, -1.0], np.float32)
    a, b = g.tensor((4,), DType.FP32, av), g.tensor((4,), DType.FP32, bv)
    prop, ign = g.output((4,), DType.FP32), g.output((4,), DType.FP32)
    for out, mode in ((prop, ts.NanPropagationMode.PROPAGATE), (ign, ts.NanPropagationMode.IGNORE)):
        attr = ts.TosaSerializerAttribute()
        attr.MaximumAttribute(mode)
        g.op("MAXIMUM", [a, b], [out], attr)
    rmax = g.output((1,), DType.FP32)
    attr = ts.TosaSerializerAttribute()
    attr.ReduceMaxAttribute(0, ts.NanPropagationMode.IGNORE)
    g.op("REDUCE_MAX", [a], [rmax], attr)
    am = g.output((), DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.ArgMaxAttribute(0, ts.NanPropagationMode.PROPAGATE)
    g.op("ARGMAX", [a], [am], attr)
    path = tmp_path / "n.tosa"
    path.write_bytes(g.serialize())
    res = simulate(compile_model(path, config("default")), config("default"), inputs=g.input_values)
    ref = g.run()
    for name in (prop, ign, rmax, am):
        assert _same(res.outputs[name], ref[name]), (name, res.outputs[name], ref[name])
    assert _same(res.outputs[ign], [3.0, 1.0, np.nan, -1.0])
    assert int(res.outputs[am]) == 0                       # the first NaN wins under PROPAGATE


# ---- ERROR_IF and refusals ---------------------------------------------------------------------------

def _compile_one(tmp_path, build, cfg="default"):
    g = GraphBuilder()
    build(g)
    path = tmp_path / "e.tosa"
    path.write_bytes(g.serialize())
    return compile_model(path, config(cfg))


def test_float_zero_points_must_be_zero(tmp_path):
    def build(g):
        x = g.tensor((4,), DType.FP16)
        zp = g.tensor((1,), DType.FP16, np.array([0.5], np.float16), is_const=True)
        o = g.output((4,), DType.FP16)
        g.op("NEGATE", [x, zp, _zp(g, "fp16")], [o])
    with pytest.raises(ValidationError, match=r"input1_zp is 0.5.*in_out_t is int8"):
        _compile_one(tmp_path, build)


def test_clamp_nan_bound_refused(tmp_path):
    def build(g):
        x = g.tensor((4,), DType.FP32)
        o = g.output((4,), DType.FP32)
        attr = ts.TosaSerializerAttribute()
        attr.ClampAttribute(np.array([np.nan], np.float32).view(np.uint8).tolist(),
                            np.array([1], np.float32).view(np.uint8).tolist(),
                            ts.NanPropagationMode.PROPAGATE)
        g.op("CLAMP", [x], [o], attr)
    with pytest.raises(ValidationError, match="isNaN"):
        _compile_one(tmp_path, build)


def test_mixed_float_types_refused(tmp_path):
    def build(g):
        a, b = g.tensor((4,), DType.FP16), g.tensor((4,), DType.FP32)
        o = g.output((4,), DType.FP16)
        g.op("ADD", [a, b], [o])
    with pytest.raises(ValidationError, match="in_out_t is fp16"):
        _compile_one(tmp_path, build)


@pytest.mark.parametrize("op", ["EXP", "REDUCE_PRODUCT"])
def test_pro_fp_operator_on_an_integer_only_config(tmp_path, op):
    def build(g):
        x = g.tensor((4, 4), DType.FP32)
        o = g.output((1, 4) if op == "REDUCE_PRODUCT" else (4, 4), DType.FP32)
        attr = None
        if op == "REDUCE_PRODUCT":
            attr = ts.TosaSerializerAttribute()
            attr.ReduceProductAttribute(0)
        g.op(op, [x], [o], attr)
    with pytest.raises(UnsupportedError, match=f"operator #0 {op}.*needs profile PRO-FP"):
        _compile_one(tmp_path, build, "edge-256")


def test_fp8_elementwise_is_not_a_spec_row(tmp_path):
    """TOSA 1.0 has no fp8 ADD: refused even where fp8 is enabled, naming the rows."""
    def build(g):
        a = g.tensor((4,), DType.FP8E4M3)
        o = g.output((4,), DType.FP8E4M3)
        g.op("ADD", [a, a], [o])
    with pytest.raises(ValidationError, match="ADD supports in_out_t in"):
        _compile_one(tmp_path, build, "large-8k")


def test_special_function_path_is_charged(tmp_path):
    """EXP costs fp_special passes, POW two of them and a multiply (the operator rows)."""
    g = GraphBuilder()
    x = g.tensor((32, 32), DType.FP16, np.ones((32, 32), np.float16))
    t = g.intermediate((32, 32), DType.FP16)
    o = g.output((32, 32), DType.FP16)
    g.op("EXP", [x], [t])
    g.op("POW", [t, x], [o])
    path = tmp_path / "c.tosa"
    path.write_bytes(g.serialize())
    cfg = config("default")
    res = simulate(compile_model(path, cfg), cfg, inputs=g.input_values)
    work = {}
    for c in res.sim.costs:
        for k, n in (c.vector or {}).items():
            work[k] = work.get(k, 0) + n
    assert work == {"fp_special": 3 * 1024, "fp_multiply": 1024}
    assert res.report.energy_uj["vector_unit"] == pytest.approx(
        (3 * 1024 * 3.0 + 1024 * 0.8) * 1e-6, rel=1e-6)


# ---- control flow and variables with float tensors -------------------------------------------------

def _attr(kind, *args):
    a = ts.TosaSerializerAttribute()
    getattr(a, kind)(*args)
    return a


def test_while_loop_and_cond_if_on_float_tensors(tmp_path):
    """main: (n', x') = WHILE_LOOP(n, x); y = ADD(x', x) (fp32 on the NPU). BODY: n - 1 and
    COND_IF(n > 2, x): THEN x * 1.5, ELSE EXP(x) - 1 (host CPU, float kernels)."""
    F, I = DType.FP32, DType.INT32
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    n, x = ser.addPlaceholder([], I, None), ser.addPlaceholder([5], F, None)
    n_out, x_out = ser.addIntermediate([], I), ser.addIntermediate([5], F)
    ser.addOperator(ts.Op.WHILE_LOOP, [n.name, x.name], [n_out.name, x_out.name],
                    _attr("WhileLoopAttribute", "COND", "BODY"))
    y = ser.addOutput([5], F)
    ser.addOperator(ts.Op.ADD, [x_out.name, x.name], [y.name], _attr("AddAttribute"))
    ser.addOutputTensor(x_out)

    def region(name, *inputs):
        ser.startRegion(name, "")
        ser.addBasicBlock(name)
        for t in inputs:
            ser.addInputTensor(t)

    def const(value, dtype=I, shape=()):
        return ser.addConst(list(shape), dtype, np.full(shape, value, NP_DTYPE[dtype])).name

    region("COND", n, x)
    c = ser.addOutput([], DType.BOOL)
    ser.addOperator(ts.Op.GREATER, [n.name, const(0)], [c.name], _attr("GreaterAttribute"))
    region("BODY", n, x)
    n1, big, x1 = ser.addIntermediate([], I), ser.addIntermediate([], DType.BOOL), ser.addIntermediate([5], F)
    ser.addOperator(ts.Op.SUB, [n.name, const(1)], [n1.name], _attr("SubAttribute"))
    ser.addOperator(ts.Op.GREATER, [n.name, const(2)], [big.name], _attr("GreaterAttribute"))
    ser.addOperator(ts.Op.COND_IF, [big.name, x.name], [x1.name], _attr("CondIfAttribute", "THEN", "ELSE"))
    ser.addOutputTensor(n1)
    ser.addOutputTensor(x1)
    region("THEN", x)
    t = ser.addOutput([5], F)
    ser.addOperator(ts.Op.MUL, [x.name, const(1.5, F, (1,)), const(0, DType.INT8, (1,))], [t.name],
                    _attr("MulAttribute"))
    region("ELSE", x)
    e1 = ser.addIntermediate([5], F)
    ser.addOperator(ts.Op.EXP, [x.name], [e1.name], _attr("ExpAttribute"))
    e = ser.addOutput([5], F)
    ser.addOperator(ts.Op.SUB, [e1.name, const(1.0, F, (1,))], [e.name], _attr("SubAttribute"))
    buf = ser.serialize()
    feed = {n.name: np.array(4, np.int32), x.name: np.array([0.1, -0.7, 0.3, 0.02, -0.05], np.float32)}
    from npu_sim.compiler.loader import load_bytes
    from oracle import run_reference
    ref = run_reference(buf, feed, [x_out.name, y.name], precise=True)
    cfg = config("default")
    res = simulate(compile_model(load_bytes(buf, "cf.tosa"), cfg), cfg, feed)
    for name in (x_out.name, y.name):
        # a chain of operators each rounding to fp32 (the spec bounds operators, not chains);
        # EXP(x) - 1 near 0 magnifies one ulp by 1/|x|: a few 1e-6 relative
        np.testing.assert_allclose(res.outputs[name].astype(np.float64), ref[name], rtol=2e-5)
    assert res.outputs[y.name].dtype == np.float32


def test_fp16_variable_persists_across_runs(tmp_path):
    from npu_sim.compiler.loader import load_bytes
    from npu_sim.simulator import Machine
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    state = ser.addIntermediate([4], DType.FP16, False, True, "state")
    x = ser.addPlaceholder([4], DType.FP16, None)
    y = ser.addOutput([4], DType.FP16)
    s = ser.addIntermediate([4], DType.FP16)
    ser.addOperator(ts.Op.IDENTITY, [state.name], [y.name], _attr("VariableReadAttribute"))
    ser.addOperator(ts.Op.ADD, [y.name, x.name], [s.name], _attr("AddAttribute"))
    ser.addOperator(ts.Op.IDENTITY, [s.name], [state.name], _attr("VariableWriteAttribute"))
    buf = ser.serialize()
    cfg = config("default")
    program = compile_model(load_bytes(buf, "v.tosa"), cfg)
    machine = Machine(program, cfg)
    step = np.array([0.5, -1.25, 3.0, 1e-3], np.float16)
    seen = [machine.run({x.name: step}).outputs[y.name] for _ in range(3)]
    assert np.array_equal(seen[2], (step + step).astype(np.float16))   # two runs' sums
    with pytest.raises(UnsupportedError, match="needs profile PRO-FP"):
        compile_model(load_bytes(buf, "v.tosa"), config("edge-256").with_overrides(
            {"tosa.extensions": ["EXT-INT16", "EXT-VARIABLE"]}))


def test_cli_compile_and_run_a_float_program(tmp_path):
    """A split fp16 REDUCE_SUM (fp32 partials between its tiles) through a saved
    .npub: the program checker takes the float attributes; the output is compliant."""
    import subprocess
    import sys
    g = GraphBuilder()
    rng = np.random.default_rng(2)
    x = g.tensor((3, 900), DType.FP16, data(rng, (3, 900), "fp16", -2, 2))
    o = g.output((3, 1), DType.FP16)
    a = ts.TosaSerializerAttribute()
    a.ReduceSumAttribute(1)
    g.op("REDUCE_SUM", [x], [o], a)
    path, prog = tmp_path / "r.tosa", tmp_path / "r.npub"
    path.write_bytes(g.serialize())
    np.save(tmp_path / "x.npy", g.input_values[x])

    def cli(*args):
        return subprocess.run([sys.executable, "-I", "-m", "npu_sim", *map(str, args)],
                              capture_output=True, text=True)
    r = cli("compile", path, "--config", "default", "--set", "sram.size=2 KiB", "-o", prog)
    assert r.returncode == 0, r.stderr
    assert cli("disasm", prog).stdout.count(" REDUCE") > 1       # split across tiles
    r = cli("run", prog, "--input", f"{x}={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out" / f"{o}.npy")
    check_graph(g.serialize(), g.input_values, {o: "fp16"}, {o: out},
                {o: compliance_entry("REDUCE_SUM", "fp16", (3, 1), terms=900)})
