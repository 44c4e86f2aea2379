"""End to end, per operator: TOSA graph -> compile_model -> simulate, bit-exact vs the reference.

Every case builds a small TOSA 1.0 graph with GraphBuilder, runs it once on the TOSA reference
model (cached per graph), then compiles and simulates it on three configs: "default" (1 MiB
buffer: usually one tile per op, intermediates resident on chip) and two tiny-buffer variants
(4 KiB and 2 KiB) on which the operators split into many tiles (rows, output channels, reduction
axes, input channels) and intermediates spill to DRAM. Every output must match the reference
exactly, dtype and shape included. All inputs stay in TOSA's valid domain (no REQUIRE/ERROR_IF).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import tosa_serializer as ts

import compiler.lower
from compiler.loader import load_bytes
from isa.errors import DoesNotFitError
from npu_sim.api import compile_model, load_config, simulate
from oracle import DType, GraphBuilder

# --------------------------------------------------------------------------------------------
# configs and the compare-against-reference harness

_CONFIG_OVERRIDES = {"default": {}, "4KiB": {"sram.size": "4 KiB"}, "2KiB": {"sram.size": "2 KiB"}}
_CONFIGS: dict = {}
SMALLEST = "2KiB"          # where the tiling expectations (tiled=, split=) are checked


def get_config(name):
    if name not in _CONFIGS:
        cfg = load_config("default")
        _CONFIGS[name] = cfg.with_overrides(_CONFIG_OVERRIDES[name]) if _CONFIG_OVERRIDES[name] else cfg
    return _CONFIGS[name]


@pytest.fixture(params=list(_CONFIG_OVERRIDES))
def cfg(request):
    return request.param


_REF_CACHE: dict[str, dict] = {}


def reference(g: GraphBuilder, buf: bytes, feed: dict) -> dict:
    h = hashlib.sha256(buf)
    for name in sorted(feed):
        h.update(name.encode())
        h.update(str(feed[name].dtype).encode())
        h.update(np.ascontiguousarray(feed[name]).tobytes())
    key = h.hexdigest()
    if key not in _REF_CACHE:
        _REF_CACHE[key] = g.run()
    return _REF_CACHE[key]


class PlanLog:
    """Records the tile plan (dim -> tile count) of every tiled step compile_model lowers."""

    def __init__(self):
        self.plans: list[dict[str, int]] = []

    def split(self, dim: str) -> bool:
        return any(p.get(dim, 1) > 1 for p in self.plans)


def check(g: GraphBuilder, cfg_name: str, *, tiled: bool = False, split: tuple = (),
          may_not_fit: str = "", layers: list | None = None):
    """Reference vs compile+simulate on config `cfg_name`.

    tiled: on the smallest config, at least one step must be split into several tiles.
    split: on the smallest config, these iteration dims must be split (e.g. ("oc", "ic")).
    may_not_fit: on the 2 KiB config, compile_model may refuse this op (named) with
        DoesNotFitError because one indivisible operand exceeds the 1 KiB workspace.
    layers: the expected fusion, as the TOSA ops of each program layer in order.
    """
    buf = g.serialize()
    feed = dict(g.input_values)
    ref = reference(g, buf, feed)
    cfg = get_config(cfg_name)
    log = PlanLog()
    # Hook the tile planner the lowering calls (named plan_tiles, formerly search).
    hook = next(n for n in ("plan_tiles", "search") if hasattr(compiler.lower, n))
    orig = getattr(compiler.lower, hook)

    def recording_search(space, budget, *args, **kwargs):
        plan = orig(space, budget, *args, **kwargs)
        if plan is not None:
            log.plans.append(dict(plan.counts))
        return plan

    setattr(compiler.lower, hook, recording_search)
    try:
        if may_not_fit and cfg_name == "2KiB":
            try:
                program = compile_model(load_bytes(buf), cfg)
            except DoesNotFitError as exc:
                assert may_not_fit in str(exc)
                return None
        else:
            program = compile_model(load_bytes(buf), cfg)
    finally:
        setattr(compiler.lower, hook, orig)
    if layers is not None:
        assert [list(layer.ops) for layer in program.layers] == layers
    result = simulate(program, cfg, inputs=feed)
    for name in g.output_names:
        exp = ref[name]
        got = np.asarray(result.outputs[name])
        assert got.dtype == exp.dtype, f"{name}: dtype {got.dtype}, reference {exp.dtype}"
        assert got.shape == exp.shape, f"{name}: shape {got.shape}, reference {exp.shape}"
        if not np.array_equal(got, exp):
            bad = np.argwhere(got != exp)
            first = tuple(int(i) for i in bad[0])
            pytest.fail(f"{name} on config {cfg_name}: {len(bad)}/{exp.size} elements differ; "
                        f"first at {first}: got {got[first]}, reference {exp[first]}")
    if cfg_name == SMALLEST and tiled:
        assert any(layer.tiles > 1 for layer in program.layers), \
            f"expected tiling on {cfg_name}, got {[layer.tiles for layer in program.layers]}"
    if cfg_name == SMALLEST:
        for dim in split:
            assert log.split(dim), f"expected dim {dim} split on {cfg_name}: {log.plans}"
    return program


# --------------------------------------------------------------------------------------------
# graph-building helpers

NP = {DType.INT8: np.int8, DType.INT16: np.int16, DType.INT32: np.int32}


def rand(rng, dt, shape, lo=None, hi=None):
    info = np.iinfo(NP[dt])
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(NP[dt])


def const(g, arr, dt):
    arr = np.asarray(arr)
    return g.tensor(list(arr.shape), dt, arr, is_const=True)


def scalar(g, value, dt):
    return g.tensor([1], dt, [value], is_const=True)


def shape_const(g, values):
    return g.tensor([len(values)], DType.SHAPE, list(values), is_const=True)


def out_or_mid(g, shape, dt, output):
    return g.output(shape, dt) if output else g.intermediate(shape, dt)


def rescale(g, src, shape, in_dt, out_dt, mult, shift, izp=0, ozp=0, *, scale32=True,
            rounding="SINGLE_ROUND", per_channel=False, in_unsigned=False, out_unsigned=False,
            output=True):
    mult = np.asarray(mult).reshape(-1)
    shift = np.asarray(shift).reshape(-1)
    m = const(g, mult, DType.INT32 if scale32 else DType.INT16)
    s = const(g, shift, DType.INT8)
    iz, oz = scalar(g, izp, in_dt), scalar(g, ozp, out_dt)
    out = out_or_mid(g, shape, out_dt, output)
    a = ts.TosaSerializerAttribute()
    a.RescaleAttribute(scale32, getattr(ts.RoundingMode, rounding), per_channel, in_unsigned,
                       out_unsigned)
    g.op("RESCALE", [src, m, s, iz, oz], [out], a)
    return out


def clamp_attr(dt, lo, hi):
    def raw(v):
        b = list(ts.TosaSerializer.convertDataToUint8Vec(dt, [v]))
        return b + [0] * (-len(b) % 8)
    a = ts.TosaSerializerAttribute()
    a.ClampAttribute(raw(lo), raw(hi), ts.NanPropagationMode.PROPAGATE)
    return a


def clamp(g, src, shape, dt, lo, hi, output=True):
    out = out_or_mid(g, shape, dt, output)
    g.op("CLAMP", [src], [out], clamp_attr(dt, lo, hi))
    return out


def fit_pad(rng, size, k_eff, stride, max_pad):
    """(lo, hi) padding with (size + lo + hi - k_eff) divisible by stride (TOSA needs exact)."""
    lo = int(rng.integers(0, max_pad + 1))
    hi = int(rng.integers(0, max_pad + 1))
    span = size + lo + hi - k_eff
    if span < 0:
        hi -= span
        span = 0
    return lo, hi + (-span) % stride


def stage_params(rng, bound, n, scale32=True, out_bits=(5, 10)):
    """RESCALE multiplier/shift for int32 values with |v| <= bound: REQUIRE |v| < 2^(shift-1),
    outputs of roughly out_bits bits (so some saturate)."""
    bb = max(int(bound), 1).bit_length()
    mbits = 31 if scale32 else 15
    shift = bb + mbits - 1 - rng.integers(*out_bits, size=n)
    shift = np.clip(shift, max(bb + 1, 2), 62).astype(np.int64)
    mult = rng.integers(1 << (mbits - 1), (1 << mbits) - 1, size=n, endpoint=True).astype(np.int64)
    return mult, shift


# Independent numpy references for the accumulators, used only to pick valid RESCALE shifts.

def np_conv2d(x, w, pad, stride, dil, izp, wzp):
    pt, pb, pl, pr = pad
    sy, sx = stride
    dy, dx = dil
    n, h, wd, _ = x.shape
    oc, kh, kw, _ = w.shape
    xp = np.pad(x.astype(np.int64) - izp, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    wf = w.astype(np.int64) - wzp
    oh = (h + pt + pb - (kh - 1) * dy - 1) // sy + 1
    ow = (wd + pl + pr - (kw - 1) * dx - 1) // sx + 1
    acc = np.zeros((n, oh, ow, oc), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, ky * dy: ky * dy + (oh - 1) * sy + 1: sy, kx * dx: kx * dx + (ow - 1) * sx + 1: sx]
            acc += patch @ wf[:, ky, kx, :].T
    return acc


def np_depthwise(x, w, pad, stride, dil, izp, wzp):
    kh, kw, c, m = w.shape
    # as a grouped conv: one conv per channel multiplier column
    outs = []
    for ch in range(c):
        wc = np.transpose(w[:, :, ch:ch + 1, :], (3, 0, 1, 2))       # [m, kh, kw, 1]
        outs.append(np_conv2d(x[..., ch:ch + 1], wc, pad, stride, dil, izp, wzp))
    return np.concatenate(outs, axis=-1)


def np_transpose_conv(x, w, stride, out_pad, izp, wzp):
    n, ih, iw, _ = x.shape
    oc, kh, kw, _ = w.shape
    sy, sx = stride
    opt, opb, opl, opr = out_pad
    oh = (ih - 1) * sy + opt + opb + kh
    ow = (iw - 1) * sx + opl + opr + kw
    acc = np.zeros((n, oh + 2 * kh, ow + 2 * kw, oc), np.int64)   # margin for negative out_pad
    xf = x.astype(np.int64) - izp
    wf = w.astype(np.int64) - wzp
    for ky in range(kh):
        for kx in range(kw):
            contrib = xf @ wf[:, ky, kx, :].T                          # [n, ih, iw, oc]
            y0, x0 = ky + opt + kh, kx + opl + kw
            acc[:, y0: y0 + (ih - 1) * sy + 1: sy, x0: x0 + (iw - 1) * sx + 1: sx] += contrib
    return acc[:, kh: kh + oh, kw: kw + ow]


def conv_attr(pad, stride, dil):
    a = ts.TosaSerializerAttribute()
    a.Conv2dAttribute(list(pad), list(stride), list(dil), False, DType.INT32)
    return a


def mac_stage(g, rng, acc_name, acc, shape, *, mode, scale32=True, rounding="SINGLE_ROUND",
              per_channel=True, acc_dt=DType.INT32, out_dt=DType.INT8):
    """After an accumulator tensor: nothing (mode 'acc'), RESCALE to out_dt ('rescale'),
    or RESCALE + CLAMP ('clamp'). Returns the final output name."""
    if mode == "acc":
        return acc_name
    oc = shape[-1]
    n = oc if per_channel else 1
    out_bits = (5, 10) if out_dt == DType.INT8 else (12, 18)
    mult, shift = stage_params(rng, int(np.abs(acc).max(initial=0)), n, scale32, out_bits)
    ozp = int(rng.integers(-40, 41)) if out_dt == DType.INT8 else 0
    r = rescale(g, acc_name, shape, acc_dt, out_dt, mult, shift, 0, ozp, scale32=scale32,
                rounding=rounding, per_channel=per_channel, output=(mode == "rescale"))
    if mode == "clamp":
        info = np.iinfo(NP[out_dt])
        lo = int(rng.integers(info.min, info.min // 6))
        hi = int(rng.integers(info.max // 6, info.max + 1))
        return clamp(g, r, shape, out_dt, lo, hi)
    return r


LAYERS = {"acc": ["CONV2D"], "rescale": ["CONV2D", "RESCALE"], "clamp": ["CONV2D", "RESCALE", "CLAMP"]}


def fused(op, mode):
    """The single fused layer a MAC op with output stage `mode` compiles to."""
    return [[op] + LAYERS[mode][1:]]


# --------------------------------------------------------------------------------------------
# CONV2D

def build_conv2d(rng, n, h, w, ic, oc, k, stride, dil, max_pad, mode, rounding="SINGLE_ROUND",
                 per_channel=True, scale32=True, izp=None, wzp=0, bias_len=None):
    kh, kw = k
    sy, sx = stride
    dy, dx = dil
    pt, pb = fit_pad(rng, h, (kh - 1) * dy + 1, sy, max_pad)
    pl, pr = fit_pad(rng, w, (kw - 1) * dx + 1, sx, max_pad)
    x = rand(rng, DType.INT8, (n, h, w, ic))
    wt = rand(rng, DType.INT8, (oc, kh, kw, ic))
    bias = rng.integers(-5000, 5000, size=bias_len or oc).astype(np.int32)
    izp = int(rng.integers(-128, 128)) if izp is None else izp
    acc = np_conv2d(x, wt, (pt, pb, pl, pr), stride, dil, izp, wzp) + bias
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    ins = [xi, const(g, wt, DType.INT8), const(g, bias, DType.INT32), scalar(g, izp, DType.INT8),
           scalar(g, wzp, DType.INT8)]
    acc_name = out_or_mid(g, acc.shape, DType.INT32, mode == "acc")
    g.op("CONV2D", ins, [acc_name], conv_attr((pt, pb, pl, pr), stride, dil))
    mac_stage(g, rng, acc_name, acc, acc.shape, mode=mode, scale32=scale32, rounding=rounding,
              per_channel=per_channel)
    g.out_shape = acc.shape
    return g


CONV_CASES = [
    # (n, h, w, ic, oc, k, stride, dil, max_pad, mode, rounding, per_channel, scale32, wzp, bias_len)
    (1, 16, 18, 8, 12, (3, 3), (1, 1), (1, 1), 2, "clamp", "SINGLE_ROUND", True, True, 0, None),
    (2, 14, 10, 6, 10, (3, 2), (2, 1), (1, 2), 3, "clamp", "DOUBLE_ROUND", True, True, -9, None),
    (1, 13, 12, 8, 9, (2, 3), (2, 3), (2, 1), 2, "rescale", "DOUBLE_ROUND", True, True, 0, 1),
    (1, 8, 8, 16, 12, (1, 1), (1, 1), (1, 1), 0, "rescale", "SINGLE_ROUND", False, True, 37, None),
    (1, 20, 17, 10, 16, (5, 3), (3, 2), (1, 1), 3, "clamp", "SINGLE_ROUND", True, False, 0, None),
    (2, 12, 13, 6, 8, (3, 3), (1, 2), (2, 2), 3, "acc", "SINGLE_ROUND", True, True, 0, 1),
    (1, 6, 6, 20, 16, (3, 3), (2, 2), (1, 1), 1, "acc", "SINGLE_ROUND", True, True, -128, None),
]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv2d(case, cfg):
    rng = np.random.default_rng(1000 + case)
    n, h, w, ic, oc, k, stride, dil, max_pad, mode, rounding, pc, s32, wzp, blen = CONV_CASES[case]
    g = build_conv2d(rng, n, h, w, ic, oc, k, stride, dil, max_pad, mode, rounding, pc, s32,
                     wzp=wzp, bias_len=blen)
    check(g, cfg, tiled=True, layers=fused("CONV2D", mode))


@pytest.mark.parametrize("rounding", ["SINGLE_ROUND", "DOUBLE_ROUND"])
def test_conv2d_large_rows_and_channels_split(rounding, cfg):
    """1x20x20x40 -> 48 channels, 3x3, fused RESCALE+CLAMP: the tiny configs split rows and
    output channels."""
    rng = np.random.default_rng(1100 + (rounding == "DOUBLE_ROUND"))
    g = build_conv2d(rng, 1, 20, 20, 40, 48, (3, 3), (1, 1), (1, 1), 1, "clamp", rounding, izp=-7)
    check(g, cfg, tiled=True, split=("oh", "oc"), layers=fused("CONV2D", "clamp"))


@pytest.mark.parametrize("mode", ["clamp", "acc"])
def test_conv2d_input_channels_split(mode, cfg):
    """One output channel's weights (3x3x300 B) exceed the tiny workspace: ic must be split
    and partial sums carried in the accumulator."""
    rng = np.random.default_rng(1200 + (mode == "acc"))
    g = build_conv2d(rng, 1, 5, 4, 300, 6, (3, 3), (1, 1), (1, 1), 1, mode, "DOUBLE_ROUND", wzp=3)
    check(g, cfg, tiled=True, split=("ic",), layers=fused("CONV2D", mode))


def test_conv2d_acc_shared_by_two_rescales(cfg):
    """The accumulator has two consumers, so no RESCALE fusion: both run on the vector unit."""
    rng = np.random.default_rng(1300)
    x = rand(rng, DType.INT8, (1, 8, 8, 6))
    wt = rand(rng, DType.INT8, (10, 3, 3, 6))
    bias = rng.integers(-3000, 3000, size=10).astype(np.int32)
    acc = np_conv2d(x, wt, (1, 1, 1, 1), (1, 1), (1, 1), 3, 0) + bias
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    a = g.intermediate(acc.shape, DType.INT32)
    g.op("CONV2D", [xi, const(g, wt, DType.INT8), const(g, bias, DType.INT32),
                    scalar(g, 3, DType.INT8), scalar(g, 0, DType.INT8)], [a],
         conv_attr((1, 1, 1, 1), (1, 1), (1, 1)))
    mac_stage(g, rng, a, acc, acc.shape, mode="rescale", per_channel=True)
    mac_stage(g, rng, a, acc, acc.shape, mode="clamp", per_channel=False, rounding="DOUBLE_ROUND")
    program = check(g, cfg, tiled=True)
    assert list(program.layers[0].ops) == ["CONV2D"]          # the int32 accumulator is stored
    assert sorted(op for layer in program.layers for op in layer.ops) == \
        ["CLAMP", "CONV2D", "RESCALE", "RESCALE"]


def test_conv2d_rescale_output_also_clamped(cfg):
    """The RESCALE result is a graph output and feeds a CLAMP: RESCALE fuses, CLAMP cannot."""
    rng = np.random.default_rng(1310)
    g = build_conv2d(rng, 1, 12, 12, 8, 16, (3, 3), (1, 1), (1, 1), 1, "rescale", "DOUBLE_ROUND")
    r = g.output_names[-1]
    clamp(g, r, g.out_shape, DType.INT8, -30, 90)
    check(g, cfg, tiled=True, layers=[["CONV2D", "RESCALE"], ["CLAMP"]])


@pytest.mark.parametrize("mode", ["clamp", "acc"])
def test_conv2d_int16_activations(mode, cfg):
    """EXT-INT16: int16 x int8 with an int48 accumulator, RESCALE (16-bit multiplier) to int16."""
    rng = np.random.default_rng(1320 + (mode == "acc"))
    n, h, w, ic, oc = 1, 10, 9, 12, 10
    pad = (1, 1, 0, 2)
    x = rand(rng, DType.INT16, (n, h, w, ic))
    wt = rand(rng, DType.INT8, (oc, 3, 3, ic))
    bias = rng.integers(-(1 << 30), 1 << 30, size=oc).astype(np.int64)
    acc = np_conv2d(x, wt, pad, (1, 1), (1, 1), 0, 0) + bias
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT16, x)
    a = out_or_mid(g, acc.shape, DType.INT48, mode == "acc")
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute(list(pad), [1, 1], [1, 1], False, DType.INT48)
    g.op("CONV2D", [xi, const(g, wt, DType.INT8), g.tensor([oc], DType.INT48, bias, is_const=True),
                    scalar(g, 0, DType.INT16), scalar(g, 0, DType.INT8)], [a], attr)
    mac_stage(g, rng, a, acc, acc.shape, mode=mode, scale32=False, acc_dt=DType.INT48,
              out_dt=DType.INT16)
    check(g, cfg, tiled=True, layers=fused("CONV2D", mode))


# --------------------------------------------------------------------------------------------
# DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, MATMUL

DW_CASES = [
    # (n, h, w, c, m, k, stride, dil, max_pad, mode)
    (1, 12, 10, 24, 1, (3, 3), (1, 1), (1, 1), 1, "clamp"),
    (1, 11, 13, 10, 2, (3, 3), (2, 2), (1, 1), 2, "rescale"),
    (2, 9, 9, 7, 2, (3, 2), (1, 2), (2, 1), 3, "acc"),
    (1, 16, 16, 32, 1, (5, 5), (2, 1), (1, 1), 2, "clamp"),
]


@pytest.mark.parametrize("case", range(len(DW_CASES)))
def test_depthwise_conv2d(case, cfg):
    rng = np.random.default_rng(2000 + case)
    n, h, w, c, m, (kh, kw), stride, dil, max_pad, mode = DW_CASES[case]
    pt, pb = fit_pad(rng, h, (kh - 1) * dil[0] + 1, stride[0], max_pad)
    pl, pr = fit_pad(rng, w, (kw - 1) * dil[1] + 1, stride[1], max_pad)
    x = rand(rng, DType.INT8, (n, h, w, c))
    wt = rand(rng, DType.INT8, (kh, kw, c, m))
    bias = rng.integers(-3000, 3000, size=c * m).astype(np.int32)
    izp = int(rng.integers(-128, 128))
    wzp = (0, 11, 0, -5)[case]
    acc = np_depthwise(x, wt, (pt, pb, pl, pr), stride, dil, izp, wzp) + bias
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    a = out_or_mid(g, acc.shape, DType.INT32, mode == "acc")
    attr = ts.TosaSerializerAttribute()
    attr.DepthwiseConv2dAttribute([pt, pb, pl, pr], list(stride), list(dil), False, DType.INT32)
    g.op("DEPTHWISE_CONV2D", [xi, const(g, wt, DType.INT8), const(g, bias, DType.INT32),
                              scalar(g, izp, DType.INT8), scalar(g, wzp, DType.INT8)], [a], attr)
    mac_stage(g, rng, a, acc, acc.shape, mode=mode, rounding=("SINGLE_ROUND", "DOUBLE_ROUND")[case % 2])
    check(g, cfg, tiled=True, layers=fused("DEPTHWISE_CONV2D", mode))


TCONV_CASES = [
    # (n, ih, iw, ic, oc, k, stride, out_pad, mode)
    (1, 10, 9, 12, 10, (3, 3), (1, 1), (0, 0, 0, 0), "clamp"),
    (1, 5, 6, 6, 8, (3, 3), (2, 2), (0, 1, 0, 1), "rescale"),
    (2, 4, 5, 5, 4, (4, 2), (2, 1), (1, 0, -1, 2), "acc"),
    (1, 7, 7, 12, 10, (2, 3), (2, 2), (-1, -1, 1, 0), "clamp"),
    (1, 8, 8, 16, 24, (3, 3), (2, 2), (1, 1, 1, 1), "rescale"),
]


@pytest.mark.parametrize("case", range(len(TCONV_CASES)))
def test_transpose_conv2d(case, cfg):
    rng = np.random.default_rng(2100 + case)
    n, ih, iw, ic, oc, k, stride, out_pad, mode = TCONV_CASES[case]
    x = rand(rng, DType.INT8, (n, ih, iw, ic))
    wt = rand(rng, DType.INT8, (oc, *k, ic))
    bias = rng.integers(-3000, 3000, size=oc).astype(np.int32)
    izp = int(rng.integers(-128, 128))
    wzp = (0, 0, 21, 0, -3)[case]
    acc = np_transpose_conv(x, wt, stride, out_pad, izp, wzp) + bias
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    a = out_or_mid(g, acc.shape, DType.INT32, mode == "acc")
    attr = ts.TosaSerializerAttribute()
    attr.TransposeConv2dAttribute(list(out_pad), list(stride), False, DType.INT32)
    g.op("TRANSPOSE_CONV2D", [xi, const(g, wt, DType.INT8), const(g, bias, DType.INT32),
                              scalar(g, izp, DType.INT8), scalar(g, wzp, DType.INT8)], [a], attr)
    mac_stage(g, rng, a, acc, acc.shape, mode=mode, rounding=("SINGLE_ROUND", "DOUBLE_ROUND")[case % 2])
    check(g, cfg, tiled=True, layers=fused("TRANSPOSE_CONV2D", mode))


MATMUL_CASES = [
    # (n, h, c, w, b_const, mode, k_split)
    (1, 24, 40, 20, True, "acc", False),
    (2, 20, 32, 16, False, "clamp", False),
    (1, 4, 600, 6, True, "acc", True),
    (1, 3, 700, 5, False, "rescale", True),
    (2, 5, 520, 3, False, "clamp", True),
]


@pytest.mark.parametrize("case", range(len(MATMUL_CASES)))
def test_matmul(case, cfg):
    rng = np.random.default_rng(2200 + case)
    n, h, c, w, b_const, mode, k_split = MATMUL_CASES[case]
    a = rand(rng, DType.INT8, (n, h, c))
    b = rand(rng, DType.INT8, (n, c, w))
    azp, bzp = (int(v) for v in rng.integers(-128, 128, size=2))
    acc = np.einsum("nhc,ncw->nhw", a.astype(np.int64) - azp, b.astype(np.int64) - bzp)
    g = GraphBuilder()
    ai = g.tensor(a.shape, DType.INT8, a)
    bi = const(g, b, DType.INT8) if b_const else g.tensor(b.shape, DType.INT8, b)
    o = out_or_mid(g, acc.shape, DType.INT32, mode == "acc")
    g.op("MATMUL", [ai, bi, scalar(g, azp, DType.INT8), scalar(g, bzp, DType.INT8)], [o])
    mac_stage(g, rng, o, acc, acc.shape, mode=mode, rounding="DOUBLE_ROUND",
              per_channel=bool(case % 2))
    check(g, cfg, tiled=True, split=("k",) if k_split else (), layers=fused("MATMUL", mode))


# --------------------------------------------------------------------------------------------
# pooling

POOL_CASES = [
    # (n, h, w, c, kernel, stride, max_pad)
    (1, 12, 12, 16, (3, 3), (2, 2), 1),
    (2, 12, 14, 9, (2, 3), (1, 2), 2),
    (1, 16, 14, 24, (5, 4), (3, 2), 3),
    (1, 7, 7, 48, (7, 7), (1, 1), 0),
]


def _pool_pads(rng, h, w, kernel, stride, max_pad):
    pt, pb = fit_pad(rng, h, kernel[0], stride[0], min(max_pad, kernel[0] - 1))
    pl, pr = fit_pad(rng, w, kernel[1], stride[1], min(max_pad, kernel[1] - 1))
    # ERROR_IF(pad >= kernel): fit_pad may grow the trailing pad by up to stride-1
    assert pb < kernel[0] and pr < kernel[1]
    return pt, pb, pl, pr


def _pool_out(h, w, kernel, stride, pad):
    pt, pb, pl, pr = pad
    return (h + pt + pb - kernel[0]) // stride[0] + 1, (w + pl + pr - kernel[1]) // stride[1] + 1


@pytest.mark.parametrize("case", range(len(POOL_CASES)))
def test_avg_pool2d(case, cfg):
    rng = np.random.default_rng(3000 + case)
    n, h, w, c, kernel, stride, max_pad = POOL_CASES[case]
    pad = _pool_pads(rng, h, w, kernel, stride, max_pad)
    oh, ow = _pool_out(h, w, kernel, stride, pad)
    x = rand(rng, DType.INT8, (n, h, w, c))
    izp, ozp = (int(v) for v in rng.integers(-128, 128, size=2))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    o = g.output((n, oh, ow, c), DType.INT8)
    attr = ts.TosaSerializerAttribute()
    attr.AvgPool2dAttribute(list(kernel), list(stride), list(pad), DType.INT32)
    g.op("AVG_POOL2D", [xi, scalar(g, izp, DType.INT8), scalar(g, ozp, DType.INT8)], [o], attr)
    check(g, cfg, tiled=True)


@pytest.mark.parametrize("case", range(len(POOL_CASES)))
def test_max_pool2d(case, cfg):
    rng = np.random.default_rng(3100 + case)
    n, h, w, c, kernel, stride, max_pad = POOL_CASES[case]
    pad = _pool_pads(rng, h, w, kernel, stride, max_pad)
    oh, ow = _pool_out(h, w, kernel, stride, pad)
    x = rand(rng, DType.INT8, (n, h, w, c))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    o = g.output((n, oh, ow, c), DType.INT8)
    attr = ts.TosaSerializerAttribute()
    attr.MaxPool2dAttribute(list(kernel), list(stride), list(pad), ts.NanPropagationMode.PROPAGATE)
    g.op("MAX_POOL2D", [xi], [o], attr)
    check(g, cfg, tiled=True)


# --------------------------------------------------------------------------------------------
# elementwise arithmetic

BINARY_SHAPES = [
    ((2, 9, 10, 16), (2, 9, 10, 16)),
    ((2, 9, 10, 16), (1, 1, 1, 16)),
    ((1, 12, 1, 24), (3, 1, 11, 24)),
    ((7, 300), (1, 300)),
    ((40, 1, 6), (1, 33, 1)),
]


@pytest.mark.parametrize("op", ["ADD", "SUB"])
@pytest.mark.parametrize("case", range(len(BINARY_SHAPES)))
def test_add_sub_int32(op, case, cfg):
    rng = np.random.default_rng(4000 + case + 10 * (op == "SUB"))
    s1, s2 = BINARY_SHAPES[case]
    out_shape = tuple(max(a, b) for a, b in zip(s1, s2))
    a = rand(rng, DType.INT32, s1, -(1 << 30), (1 << 30) - 1)
    b = rand(rng, DType.INT32, s2, -(1 << 30), (1 << 30) - 1)
    g = GraphBuilder()
    ai, bi = g.tensor(s1, DType.INT32, a), g.tensor(s2, DType.INT32, b)
    o = g.output(out_shape, DType.INT32)
    g.op(op, [ai, bi], [o])
    check(g, cfg, tiled=True)


def test_add_constant_operand(cfg):
    rng = np.random.default_rng(4100)
    a = rand(rng, DType.INT32, (1, 10, 10, 20), -(1 << 30), (1 << 30) - 1)
    b = rand(rng, DType.INT32, (1, 1, 10, 20), -(1 << 30), (1 << 30) - 1)
    g = GraphBuilder()
    ai = g.tensor(a.shape, DType.INT32, a)
    o = g.output(a.shape, DType.INT32)
    g.op("ADD", [const(g, b, DType.INT32), ai], [o])
    check(g, cfg, tiled=True)


MUL_CASES = [
    # (shape1, shape2, dtype, shift)
    ((2, 8, 9, 12), (2, 8, 9, 12), DType.INT8, 0),
    ((1, 10, 10, 16), (1, 1, 10, 1), DType.INT8, 0),
    ((3, 20, 30), (3, 20, 30), DType.INT32, 13),
    ((6, 1, 40), (1, 25, 40), DType.INT32, 31),
    ((4, 50), (4, 50), DType.INT32, 1),
]


@pytest.mark.parametrize("case", range(len(MUL_CASES)))
def test_mul(case, cfg):
    rng = np.random.default_rng(4200 + case)
    s1, s2, dt, shift = MUL_CASES[case]
    out_shape = tuple(max(a, b) for a, b in zip(s1, s2))
    if dt == DType.INT32:
        lim = min((1 << 31) - 1, 1 << ((30 + shift) // 2))     # keeps the result in int32
        a, b = rand(rng, dt, s1, -lim, lim), rand(rng, dt, s2, -lim, lim)
    else:
        a, b = rand(rng, dt, s1), rand(rng, dt, s2)
    g = GraphBuilder()
    ai, bi = g.tensor(s1, dt, a), g.tensor(s2, dt, b)
    o = g.output(out_shape, DType.INT32)
    g.op("MUL", [ai, bi, scalar(g, shift, DType.INT8)], [o])
    check(g, cfg, tiled=True)


# --------------------------------------------------------------------------------------------
# RESCALE in every mode

RESCALE_TYPES = {   # name -> (TOSA dtype, numpy storage, unsigned, bits)
    "int8": (DType.INT8, np.int8, False, 8),
    "uint8": (DType.INT8, np.int8, True, 8),
    "int16": (DType.INT16, np.int16, False, 16),
    "uint16": (DType.INT16, np.int16, True, 16),
    "int32": (DType.INT32, np.int32, False, 32),
}

RESCALE_CASES = [
    # (in, out, per_channel, scale32, rounding, shape)
    ("int8", "int8", False, True, "SINGLE_ROUND", (2, 10, 12, 16)),
    ("int8", "int8", True, True, "DOUBLE_ROUND", (1, 9, 9, 24)),
    ("int8", "int8", True, False, "SINGLE_ROUND", (3, 14, 40)),
    ("int8", "int32", False, True, "SINGLE_ROUND", (2, 11, 13, 8)),
    ("int8", "int32", True, False, "SINGLE_ROUND", (400, 9)),
    ("int32", "int8", True, True, "DOUBLE_ROUND", (1, 12, 10, 20)),
    ("int32", "int8", True, True, "SINGLE_ROUND", (2, 6, 6, 32)),
    ("int32", "int8", False, True, "DOUBLE_ROUND", (5, 300)),
    ("int32", "int8", False, False, "SINGLE_ROUND", (1, 8, 8, 30)),
    ("int16", "int8", True, True, "DOUBLE_ROUND", (1, 10, 10, 12)),
    ("int16", "int8", False, False, "SINGLE_ROUND", (2, 9, 17, 5)),
    ("int16", "int8", False, True, "SINGLE_ROUND", (700,)),
    ("uint8", "int8", False, True, "SINGLE_ROUND", (1, 12, 12, 16)),
    ("uint8", "int8", True, False, "SINGLE_ROUND", (1, 14, 9, 10)),
    ("int8", "uint8", False, True, "DOUBLE_ROUND", (1, 12, 12, 16)),
    ("int8", "uint8", True, True, "SINGLE_ROUND", (2, 10, 7, 9)),
    ("uint16", "int16", False, True, "SINGLE_ROUND", (1, 9, 9, 20)),
    ("int16", "uint16", True, True, "DOUBLE_ROUND", (1, 9, 9, 20)),
    ("int32", "int16", True, True, "DOUBLE_ROUND", (1, 10, 10, 12)),
    ("int8", "int16", False, True, "SINGLE_ROUND", (3, 40, 20)),
]


def _zp_for(rng, name):
    if name == "int8":
        return int(rng.integers(-128, 128))
    if name == "uint8":
        return int(rng.integers(0, 256))
    if name == "uint16":
        return int(rng.choice([0, 32768]))
    return 0


def _raw(v, bits, np_dt):
    """Unsigned values -> their bit pattern in the signed storage type."""
    return np.asarray(v, np.int64).astype({8: np.uint8, 16: np.uint16}[bits]).view(np_dt)


@pytest.mark.parametrize("case", range(len(RESCALE_CASES)))
def test_rescale(case, cfg):
    rng = np.random.default_rng(5000 + case)
    in_name, out_name, per_channel, scale32, rounding, shape = RESCALE_CASES[case]
    in_dt, in_np, in_u, in_bits = RESCALE_TYPES[in_name]
    out_dt, out_np, out_u, out_bits = RESCALE_TYPES[out_name]
    izp, ozp = _zp_for(rng, in_name), _zp_for(rng, out_name)
    nc = shape[-1] if per_channel else 1
    # input values (after zero point) with vb bits; shift keeps |v| < 2^(shift-1)
    vb = {8: 9, 16: 16, 32: int(rng.integers(12, 31))}[in_bits] if not in_u else in_bits + 1
    tlo, thi = (0, (1 << in_bits) - 1) if in_u else (-(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1)
    lo, hi = max(tlo, izp - (1 << (vb - 1)) + 1), min(thi, izp + (1 << (vb - 1)) - 1)
    v = rng.integers(lo, hi, size=shape, endpoint=True)
    edge = rng.random(shape) < 0.05
    v[edge] = rng.choice([lo, hi, izp], size=int(edge.sum()))
    x = _raw(v, in_bits, in_np) if in_u else v.astype(in_np)
    mbits = 31 if scale32 else 15
    want_bits = {8: (6, 10), 16: (13, 18), 32: (14, 26)}[out_bits]
    shift = vb + mbits - 1 - rng.integers(*want_bits, size=nc)
    shift = np.clip(shift, max(vb + 1, 2), 62)
    mult = rng.integers(1 << (mbits - 2), (1 << mbits) - 1, size=nc, endpoint=True)
    g = GraphBuilder()
    xi = g.tensor(shape, in_dt, x)
    izp_s = int(_raw(izp, in_bits, in_np)) if in_u else izp
    ozp_s = int(_raw(ozp, out_bits, out_np)) if out_u else ozp
    rescale(g, xi, shape, in_dt, out_dt, mult, shift, izp_s, ozp_s, scale32=scale32,
            rounding=rounding, per_channel=per_channel, in_unsigned=in_u, out_unsigned=out_u)
    check(g, cfg, tiled=True)


# --------------------------------------------------------------------------------------------
# CLAMP, TABLE

@pytest.mark.parametrize("case", range(3))
def test_clamp_int8(case, cfg):
    rng = np.random.default_rng(5500 + case)
    shape = [(2, 10, 12, 16), (50, 70), (1, 9, 9, 33)][case]
    lo, hi = [(-20, 35), (-128, 0), (5, 5)][case]
    x = rand(rng, DType.INT8, shape)
    g = GraphBuilder()
    xi = g.tensor(shape, DType.INT8, x)
    clamp(g, xi, shape, DType.INT8, lo, hi)
    check(g, cfg, tiled=True)


@pytest.mark.parametrize("case", range(2))
def test_table_int8(case, cfg):
    rng = np.random.default_rng(5600 + case)
    shape = [(2, 12, 12, 16), (3, 500)][case]
    x = rand(rng, DType.INT8, shape)
    table = rand(rng, DType.INT8, (256,))
    g = GraphBuilder()
    xi = g.tensor(shape, DType.INT8, x)
    o = g.output(shape, DType.INT8)
    g.op("TABLE", [xi, const(g, table, DType.INT8)], [o])
    check(g, cfg, tiled=True)


@pytest.mark.parametrize("case", range(2))
def test_table_int16(case, cfg):
    rng = np.random.default_rng(5700 + case)
    shape = [(1, 10, 10, 12), (4, 300)][case]
    x = rand(rng, DType.INT16, shape)
    t = np.linspace(-1.0, 1.0, 513) * (2.5 + case)
    table = np.round(np.tanh(t) * 30000 + rng.integers(-50, 50, size=513)).astype(np.int16)
    assert np.abs(np.diff(table.astype(np.int64))).max() < 32768        # slope REQUIRE
    g = GraphBuilder()
    xi = g.tensor(shape, DType.INT16, x)
    o = g.output(shape, DType.INT32)
    g.op("TABLE", [xi, const(g, table, DType.INT16)], [o])
    # the 513-entry table (1026 B) cannot be split and exceeds the 2 KiB config's workspace
    check(g, cfg, tiled=True, may_not_fit="TABLE")


# --------------------------------------------------------------------------------------------
# data movement

def _attr(method, *args):
    a = ts.TosaSerializerAttribute()
    getattr(a, method)(*args)
    return a


@pytest.mark.parametrize("axis,shapes", [
    (1, [(1, 4, 6, 8), (1, 7, 6, 8)]),
    (3, [(2, 5, 6, 3), (2, 5, 6, 9), (2, 5, 6, 4)]),
    (0, [(3, 10), (5, 10)]),
])
def test_concat(axis, shapes, cfg):
    rng = np.random.default_rng(6000 + axis)
    out_shape = list(shapes[0])
    out_shape[axis] = sum(s[axis] for s in shapes)
    g = GraphBuilder()
    names = [g.tensor(s, DType.INT8, rand(rng, DType.INT8, s)) for s in shapes]
    o = g.output(out_shape, DType.INT8)
    g.op("CONCAT", names, [o], _attr("ConcatAttribute", axis))
    check(g, cfg)


@pytest.mark.parametrize("case", range(3))
def test_pad(case, cfg):
    rng = np.random.default_rng(6100 + case)
    shape, pads, dt = [((1, 5, 6, 3), (0, 0, 1, 2, 3, 0, 0, 1), DType.INT8),
                       ((4, 7), (2, 1, 0, 3), DType.INT32),
                       ((2, 3, 4), (1, 1, 1, 1, 1, 1), DType.INT16)][case]
    x = rand(rng, dt, shape)
    value = int(rand(rng, dt, ()))
    out_shape = [s + pads[2 * i] + pads[2 * i + 1] for i, s in enumerate(shape)]
    g = GraphBuilder()
    xi = g.tensor(shape, dt, x)
    o = g.output(out_shape, dt)
    g.op("PAD", [xi, shape_const(g, pads), scalar(g, value, dt)], [o])
    check(g, cfg)


@pytest.mark.parametrize("case", range(3))
def test_slice(case, cfg):
    rng = np.random.default_rng(6200 + case)
    shape, start, size = [((1, 8, 9, 6), (0, 2, 3, 1), (1, 5, 4, 4)),
                          ((6, 10), (1, 0), (4, 10)),
                          ((3, 4, 5), (2, 1, 4), (1, 3, 1))][case]
    x = rand(rng, DType.INT8, shape)
    g = GraphBuilder()
    xi = g.tensor(shape, DType.INT8, x)
    o = g.output(size, DType.INT8)
    g.op("SLICE", [xi, shape_const(g, start), shape_const(g, size)], [o])
    check(g, cfg)


@pytest.mark.parametrize("case", range(2))
def test_reshape(case, cfg):
    rng = np.random.default_rng(6300 + case)
    shape, new = [((1, 4, 6, 8), (1, 24, 8)), ((2, 3, 10), (6, 5, 2))][case]
    x = rand(rng, DType.INT8, shape)
    g = GraphBuilder()
    xi = g.tensor(shape, DType.INT8, x)
    o = g.output(new, DType.INT8)
    g.op("RESHAPE", [xi, shape_const(g, new)], [o])
    check(g, cfg)


@pytest.mark.parametrize("shape,perms", [
    ((3, 5, 7), (2, 0, 1)),
    ((3, 5, 7), (1, 0, 2)),
    ((2, 3, 4, 5), (0, 3, 1, 2)),
    ((2, 3, 4, 5), (3, 2, 1, 0)),
])
def test_transpose(shape, perms, cfg):
    rng = np.random.default_rng(6400 + sum(perms) * 7 + len(shape))
    x = rand(rng, DType.INT16, shape)
    g = GraphBuilder()
    xi = g.tensor(shape, DType.INT16, x)
    o = g.output([shape[p] for p in perms], DType.INT16)
    g.op("TRANSPOSE", [xi], [o], _attr("TransposeAttribute", list(perms)))
    check(g, cfg)


@pytest.mark.parametrize("shape,mults", [((2, 3, 4), (1, 2, 3)), ((1, 2, 2, 5), (2, 1, 3, 1))])
def test_tile(shape, mults, cfg):
    rng = np.random.default_rng(6500 + len(shape))
    x = rand(rng, DType.INT8, shape)
    g = GraphBuilder()
    xi = g.tensor(shape, DType.INT8, x)
    o = g.output([s * m for s, m in zip(shape, mults)], DType.INT8)
    g.op("TILE", [xi, shape_const(g, mults)], [o])
    check(g, cfg)


@pytest.mark.parametrize("axis", range(4))
def test_reverse(axis, cfg):
    rng = np.random.default_rng(6600 + axis)
    shape = (2, 3, 4, 5)
    x = rand(rng, DType.INT32, shape)
    g = GraphBuilder()
    xi = g.tensor(shape, DType.INT32, x)
    o = g.output(shape, DType.INT32)
    g.op("REVERSE", [xi], [o], _attr("ReverseAttribute", axis))
    check(g, cfg)


# --------------------------------------------------------------------------------------------
# reductions

@pytest.mark.parametrize("op", ["REDUCE_SUM", "REDUCE_MAX"])
@pytest.mark.parametrize("axis", range(4))
def test_reduce(op, axis, cfg):
    rng = np.random.default_rng(7000 + axis + 10 * (op == "REDUCE_MAX"))
    # the reduction axis is long enough that one column of it exceeds the tiny workspace
    shape = [(600, 2, 3, 2), (2, 650, 3, 2), (2, 3, 700, 2), (3, 2, 2, 620)][axis]
    if op == "REDUCE_MAX":  # int8: twice as many elements for the same bytes
        shape = tuple(2 * s if i == axis else s for i, s in enumerate(shape))
    out_shape = [1 if i == axis else s for i, s in enumerate(shape)]
    g = GraphBuilder()
    if op == "REDUCE_SUM":
        dt, x = DType.INT32, rand(rng, DType.INT32, shape, -(1 << 20), 1 << 20)
        attr = _attr("ReduceSumAttribute", axis)
    else:
        dt, x = DType.INT8, rand(rng, DType.INT8, shape)
        attr = _attr("ReduceMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE)
    xi = g.tensor(shape, dt, x)
    o = g.output(out_shape, dt)
    g.op(op, [xi], [o], attr)
    check(g, cfg, tiled=True, split=(f"d{axis}",))


# --------------------------------------------------------------------------------------------
# RESIZE

RESIZE_CASES = [
    # (mode, (n, h, w, c), (yn, yd, xn, xd), (oy, ox), (by, bx))
    ("NEAREST", (1, 8, 8, 16), (2, 1, 2, 1), (0, 0), (1, 1)),
    ("BILINEAR", (1, 8, 8, 16), (2, 1, 2, 1), (0, 0), (1, 1)),
    ("NEAREST", (1, 8, 9, 10), (4, 2, 4, 2), (-1, -1), (1, 1)),      # half-pixel style x2
    ("BILINEAR", (2, 6, 7, 8), (4, 2, 4, 2), (-1, -1), (1, 1)),
    ("NEAREST", (1, 7, 9, 12), (5, 3, 7, 4), (1, -2), (0, 0)),       # odd scales
    ("BILINEAR", (1, 7, 9, 12), (5, 3, 7, 4), (1, -2), (0, 0)),
    ("BILINEAR", (1, 12, 10, 8), (3, 5, 2, 3), (2, 0), (-1, 0)),    # downscale
]


@pytest.mark.parametrize("case", range(len(RESIZE_CASES)))
def test_resize(case, cfg):
    rng = np.random.default_rng(7500 + case)
    mode, (n, h, w, c), scale, offset, border = RESIZE_CASES[case]
    yn, yd, xn, xd = scale
    oy, ox = offset
    by, bx = border
    # fix the borders so that the output sizes are exact (ERROR_IF otherwise)
    by -= ((h - 1) * yn - oy + by) % yd
    bx -= ((w - 1) * xn - ox + bx) % xd
    assert -16 * yn <= by < yn and -16 * xn <= bx < xn
    oh = ((h - 1) * yn - oy + by) // yd + 1
    ow = ((w - 1) * xn - ox + bx) // xd + 1
    x = rand(rng, DType.INT8, (n, h, w, c))
    out_dt = DType.INT8 if mode == "NEAREST" else DType.INT32
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    o = g.output((n, oh, ow, c), out_dt)
    g.op("RESIZE", [xi, shape_const(g, scale), shape_const(g, (oy, ox)), shape_const(g, (by, bx))],
         [o], _attr("ResizeAttribute", getattr(ts.ResizeMode, mode)))
    check(g, cfg, tiled=True)


# --------------------------------------------------------------------------------------------
# multi-op chains (on-chip residency of intermediates on the default config, spills on tiny)

def _add_conv(g, rng, src, x_shape, oc, k, stride, pad, izp, *, out_zp_range=(-10, 10),
              clamp_lo=None):
    """CONV2D -> RESCALE(-> CLAMP) as intermediates; returns (name, shape, int8 acc estimate)."""
    n, h, w, ic = x_shape
    wt = rand(rng, DType.INT8, (oc, k, k, ic), -60, 60)
    bias = rng.integers(-2000, 2000, size=oc).astype(np.int32)
    oh = (h + pad[0] + pad[1] - k) // stride + 1
    ow = (w + pad[2] + pad[3] - k) // stride + 1
    bound = k * k * ic * 255 * 60 + 2000              # worst case, keeps REQUIRE for any input
    acc = g.intermediate((n, oh, ow, oc), DType.INT32)
    g.op("CONV2D", [src, const(g, wt, DType.INT8), const(g, bias, DType.INT32),
                    scalar(g, izp, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr(pad, (stride, stride), (1, 1)))
    mult, shift = stage_params(rng, bound, oc, out_bits=(11, 14))
    ozp = int(rng.integers(*out_zp_range))
    shape = (n, oh, ow, oc)
    r = rescale(g, acc, shape, DType.INT32, DType.INT8, mult, shift, 0, ozp, per_channel=True,
                rounding="DOUBLE_ROUND", output=False)
    if clamp_lo is not None:
        r = clamp(g, r, shape, DType.INT8, clamp_lo, 127, output=False)
    return r, shape, ozp


def _chain_graph(rng, n, h, w, c):
    """CONV2D -> RESCALE -> CLAMP -> MAX_POOL2D -> CONV2D -> RESCALE -> ADD(residual via
    RESCALEs to int32) -> RESCALE to int8."""
    x = rand(rng, DType.INT8, (n, h, w, c))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    izp = int(rng.integers(-20, 20))
    c1, s1, z1 = _add_conv(g, rng, xi, x.shape, 16, 3, 1, (1, 1, 1, 1), izp, clamp_lo=-100)
    ph, pw = s1[1] // 2, s1[2] // 2
    p = g.intermediate((n, ph, pw, 16), DType.INT8)
    g.op("MAX_POOL2D", [c1], [p], _attr("MaxPool2dAttribute", [2, 2], [2, 2], [0, 0, 0, 0],
                                        ts.NanPropagationMode.PROPAGATE))
    c2, s2, z2 = _add_conv(g, rng, p, (n, ph, pw, 16), 16, 3, 1, (1, 1, 1, 1), z1)
    # residual: both branches to int32 with their zero points removed, add, back to int8
    m1, sh1 = rng.integers(1 << 30, 1 << 31, size=1), np.array([20])
    r1 = rescale(g, p, s2, DType.INT8, DType.INT32, m1, sh1, z1, 0, output=False)
    r2 = rescale(g, c2, s2, DType.INT8, DType.INT32, m1, sh1, z2, 0, output=False)
    add = g.intermediate(s2, DType.INT32)
    g.op("ADD", [r1, r2], [add])
    mult, shift = stage_params(rng, 1 << 21, 1, out_bits=(7, 9))
    rescale(g, add, s2, DType.INT32, DType.INT8, mult, shift, 0, 5, rounding="DOUBLE_ROUND")
    # a second graph output read from an intermediate keeps it live across the chain
    o2 = g.output(s1, DType.INT8)
    g.op("CLAMP", [c1], [o2], clamp_attr(DType.INT8, -50, 50))
    return g


@pytest.mark.parametrize("seed", range(3))
def test_chain_conv_pool_conv_residual(seed, cfg):
    rng = np.random.default_rng(8000 + seed)
    n, h, w, c = [(1, 16, 16, 8), (1, 12, 10, 3), (2, 8, 8, 5)][seed]
    check(_chain_graph(rng, n, h, w, c), cfg, tiled=True)


def test_chain_depthwise_pointwise_table(cfg):
    """DEPTHWISE(+RESCALE+CLAMP) -> CONV2D 1x1 (+RESCALE) -> TABLE -> AVG_POOL2D -> RESHAPE ->
    MATMUL with a constant B (+RESCALE)."""
    rng = np.random.default_rng(8100)
    n, h, w, c = 1, 10, 10, 12
    x = rand(rng, DType.INT8, (n, h, w, c))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    dw = rand(rng, DType.INT8, (3, 3, c, 1), -60, 60)
    a1 = g.intermediate((n, h, w, c), DType.INT32)
    g.op("DEPTHWISE_CONV2D", [xi, const(g, dw, DType.INT8), const(g, np.zeros(c, np.int32), DType.INT32),
                              scalar(g, 4, DType.INT8), scalar(g, 0, DType.INT8)], [a1],
         _attr("DepthwiseConv2dAttribute", [1, 1, 1, 1], [1, 1], [1, 1], False, DType.INT32))
    mult, shift = stage_params(rng, 9 * 255 * 60, c, out_bits=(9, 11))
    r1 = rescale(g, a1, (n, h, w, c), DType.INT32, DType.INT8, mult, shift, 0, -3,
                 per_channel=True, output=False)
    r1c = clamp(g, r1, (n, h, w, c), DType.INT8, -128, 100, output=False)
    r2, s2, z2 = _add_conv(g, rng, r1c, (n, h, w, c), 20, 1, 1, (0, 0, 0, 0), -3)
    t = g.intermediate(s2, DType.INT8)
    g.op("TABLE", [r2, const(g, rand(rng, DType.INT8, (256,)), DType.INT8)], [t])
    ap = g.intermediate((n, 5, 5, 20), DType.INT8)
    g.op("AVG_POOL2D", [t, scalar(g, 0, DType.INT8), scalar(g, 0, DType.INT8)], [ap],
         _attr("AvgPool2dAttribute", [2, 2], [2, 2], [0, 0, 0, 0], DType.INT32))
    rs = g.intermediate((1, 25, 20), DType.INT8)
    g.op("RESHAPE", [ap, shape_const(g, (1, 25, 20))], [rs])
    b = rand(rng, DType.INT8, (1, 20, 30))
    mm = g.intermediate((1, 25, 30), DType.INT32)
    g.op("MATMUL", [rs, const(g, b, DType.INT8), scalar(g, 0, DType.INT8), scalar(g, 1, DType.INT8)],
         [mm])
    mult, shift = stage_params(rng, 20 * 128 * 129, 30, out_bits=(6, 8))
    rescale(g, mm, (1, 25, 30), DType.INT32, DType.INT8, mult, shift, 0, 0, per_channel=True)
    check(g, cfg, tiled=True)


def test_chain_layout_ops_between_convs(cfg):
    """CONV2D -> PAD -> CONV2D, then CONCAT of two branches, TRANSPOSE and SLICE, RESIZE."""
    rng = np.random.default_rng(8200)
    x = rand(rng, DType.INT8, (1, 8, 8, 6))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    c1, s1, z1 = _add_conv(g, rng, xi, x.shape, 8, 3, 1, (1, 1, 1, 1), 0)
    pd = g.intermediate((1, 10, 10, 8), DType.INT8)
    g.op("PAD", [c1, shape_const(g, (0, 0, 1, 1, 1, 1, 0, 0)), scalar(g, z1, DType.INT8)], [pd])
    c2, s2, z2 = _add_conv(g, rng, pd, (1, 10, 10, 8), 8, 3, 1, (0, 0, 0, 0), z1)
    cat = g.intermediate((1, 8, 8, 16), DType.INT8)
    g.op("CONCAT", [c1, c2], [cat], _attr("ConcatAttribute", 3))
    tr = g.intermediate((1, 16, 8, 8), DType.INT8)
    g.op("TRANSPOSE", [cat], [tr], _attr("TransposeAttribute", [0, 3, 1, 2]))
    sl = g.intermediate((1, 12, 8, 6), DType.INT8)
    g.op("SLICE", [tr, shape_const(g, (0, 2, 0, 1)), shape_const(g, (1, 12, 8, 6))], [sl])
    o = g.output((1, 24, 16, 6), DType.INT8)
    g.op("RESIZE", [sl, shape_const(g, (2, 1, 2, 1)), shape_const(g, (0, 0)), shape_const(g, (1, 1))],
         [o], _attr("ResizeAttribute", ts.ResizeMode.NEAREST))
    check(g, cfg, tiled=True)


# --------------------------------------------------------------------------------------------
# seeded random shapes (small: mostly one tile on "default", several on the tiny configs)

def _ri(rng, lo, hi):
    return int(rng.integers(lo, hi + 1))


@pytest.mark.parametrize("seed", range(8))
def test_random_conv2d(seed, cfg):
    rng = np.random.default_rng(9000 + seed)
    k = (_ri(rng, 1, 4), _ri(rng, 1, 4))
    mode = ("acc", "rescale", "clamp", "clamp")[seed % 4]
    g = build_conv2d(rng, _ri(rng, 1, 2), _ri(rng, 3, 16), _ri(rng, 3, 16), _ri(rng, 1, 24),
                     _ri(rng, 1, 24), k, (_ri(rng, 1, 3), _ri(rng, 1, 3)),
                     (_ri(rng, 1, 2), _ri(rng, 1, 2)), 3, mode,
                     rounding=("SINGLE_ROUND", "DOUBLE_ROUND")[_ri(rng, 0, 1)],
                     per_channel=bool(_ri(rng, 0, 1)), wzp=_ri(rng, -128, 127) * _ri(rng, 0, 1))
    check(g, cfg, layers=fused("CONV2D", mode))


@pytest.mark.parametrize("seed", range(6))
def test_random_depthwise_conv2d(seed, cfg):
    rng = np.random.default_rng(9100 + seed)
    n, h, w, c, m = _ri(rng, 1, 2), _ri(rng, 3, 14), _ri(rng, 3, 14), _ri(rng, 1, 20), _ri(rng, 1, 3)
    kh, kw = _ri(rng, 1, 4), _ri(rng, 1, 4)
    stride, dil = (_ri(rng, 1, 3), _ri(rng, 1, 3)), (_ri(rng, 1, 2), _ri(rng, 1, 2))
    pt, pb = fit_pad(rng, h, (kh - 1) * dil[0] + 1, stride[0], 3)
    pl, pr = fit_pad(rng, w, (kw - 1) * dil[1] + 1, stride[1], 3)
    mode = ("acc", "rescale", "clamp")[seed % 3]
    x = rand(rng, DType.INT8, (n, h, w, c))
    wt = rand(rng, DType.INT8, (kh, kw, c, m))
    bias = rng.integers(-3000, 3000, size=c * m).astype(np.int32)
    izp, wzp = _ri(rng, -128, 127), _ri(rng, -128, 127) * _ri(rng, 0, 1)
    acc = np_depthwise(x, wt, (pt, pb, pl, pr), stride, dil, izp, wzp) + bias
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    a = out_or_mid(g, acc.shape, DType.INT32, mode == "acc")
    g.op("DEPTHWISE_CONV2D", [xi, const(g, wt, DType.INT8), const(g, bias, DType.INT32),
                              scalar(g, izp, DType.INT8), scalar(g, wzp, DType.INT8)], [a],
         _attr("DepthwiseConv2dAttribute", [pt, pb, pl, pr], list(stride), list(dil), False,
               DType.INT32))
    mac_stage(g, rng, a, acc, acc.shape, mode=mode, rounding="DOUBLE_ROUND",
              per_channel=bool(seed % 2))
    check(g, cfg, layers=fused("DEPTHWISE_CONV2D", mode))


@pytest.mark.parametrize("seed", range(8))
def test_random_transpose_conv2d(seed, cfg):
    rng = np.random.default_rng(9200 + seed)
    n, ih, iw, ic, oc = _ri(rng, 1, 2), _ri(rng, 1, 8), _ri(rng, 1, 8), _ri(rng, 1, 16), _ri(rng, 1, 16)
    kh, kw = _ri(rng, 1, 4), _ri(rng, 1, 4)
    sy, sx = _ri(rng, 1, 3), _ri(rng, 1, 3)
    out_pad = [_ri(rng, 1 - kh, 2), _ri(rng, 1 - kh, 2), _ri(rng, 1 - kw, 2), _ri(rng, 1 - kw, 2)]
    # OH = (IH - 1) * stride + out_pad_top + out_pad_bottom + KH must be >= 1
    out_pad[1] = max(out_pad[1], 1 - (ih - 1) * sy - out_pad[0] - kh)
    out_pad[3] = max(out_pad[3], 1 - (iw - 1) * sx - out_pad[2] - kw)
    mode = ("acc", "rescale", "clamp", "clamp")[seed % 4]
    x = rand(rng, DType.INT8, (n, ih, iw, ic))
    wt = rand(rng, DType.INT8, (oc, kh, kw, ic))
    bias = rng.integers(-3000, 3000, size=oc).astype(np.int32)
    izp, wzp = _ri(rng, -128, 127), _ri(rng, -128, 127) * _ri(rng, 0, 1)
    acc = np_transpose_conv(x, wt, (sy, sx), out_pad, izp, wzp) + bias
    assert acc.shape[1] >= 1 and acc.shape[2] >= 1
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    a = out_or_mid(g, acc.shape, DType.INT32, mode == "acc")
    g.op("TRANSPOSE_CONV2D", [xi, const(g, wt, DType.INT8), const(g, bias, DType.INT32),
                              scalar(g, izp, DType.INT8), scalar(g, wzp, DType.INT8)], [a],
         _attr("TransposeConv2dAttribute", out_pad, [sy, sx], False, DType.INT32))
    mac_stage(g, rng, a, acc, acc.shape, mode=mode, rounding=("SINGLE_ROUND", "DOUBLE_ROUND")[seed % 2])
    check(g, cfg, layers=fused("TRANSPOSE_CONV2D", mode))


@pytest.mark.parametrize("seed", range(6))
def test_random_matmul(seed, cfg):
    rng = np.random.default_rng(9300 + seed)
    n, h, c, w = _ri(rng, 1, 3), _ri(rng, 1, 20), _ri(rng, 1, 300), _ri(rng, 1, 20)
    mode = ("acc", "rescale", "clamp")[seed % 3]
    a = rand(rng, DType.INT8, (n, h, c))
    b = rand(rng, DType.INT8, (n, c, w))
    azp, bzp = _ri(rng, -128, 127), _ri(rng, -128, 127)
    acc = np.einsum("nhc,ncw->nhw", a.astype(np.int64) - azp, b.astype(np.int64) - bzp)
    g = GraphBuilder()
    ai = g.tensor(a.shape, DType.INT8, a)
    bi = const(g, b, DType.INT8) if seed % 2 else g.tensor(b.shape, DType.INT8, b)
    o = out_or_mid(g, acc.shape, DType.INT32, mode == "acc")
    g.op("MATMUL", [ai, bi, scalar(g, azp, DType.INT8), scalar(g, bzp, DType.INT8)], [o])
    mac_stage(g, rng, o, acc, acc.shape, mode=mode, rounding="SINGLE_ROUND",
              per_channel=bool(_ri(rng, 0, 1)))
    check(g, cfg, layers=fused("MATMUL", mode))


@pytest.mark.parametrize("op", ["AVG_POOL2D", "MAX_POOL2D"])
@pytest.mark.parametrize("seed", range(5))
def test_random_pool2d(op, seed, cfg):
    rng = np.random.default_rng(9400 + seed + 10 * (op == "MAX_POOL2D"))
    n, h, w, c = _ri(rng, 1, 2), _ri(rng, 1, 14), _ri(rng, 1, 14), _ri(rng, 1, 24)
    kernel = (_ri(rng, 1, min(4, h + 2)), _ri(rng, 1, min(4, w + 2)))
    pad, stride = [], []
    for size, k in ((h, kernel[0]), (w, kernel[1])):      # pads < kernel, exact output size
        lo, hi = _ri(rng, 0, k - 1), _ri(rng, 0, k - 1)
        hi = max(hi, k - size - lo)                        # at least one output
        span = size + lo + hi - k
        pad += [lo, hi]
        stride.append(int(rng.choice([s for s in (1, 2, 3) if span % s == 0])))
    stride = tuple(stride)
    oh, ow = _pool_out(h, w, kernel, stride, pad)
    x = rand(rng, DType.INT8, (n, h, w, c))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    o = g.output((n, oh, ow, c), DType.INT8)
    if op == "AVG_POOL2D":
        izp, ozp = _ri(rng, -128, 127), _ri(rng, -128, 127)
        g.op(op, [xi, scalar(g, izp, DType.INT8), scalar(g, ozp, DType.INT8)], [o],
             _attr("AvgPool2dAttribute", list(kernel), list(stride), pad, DType.INT32))
    else:
        g.op(op, [xi], [o], _attr("MaxPool2dAttribute", list(kernel), list(stride), pad,
                                  ts.NanPropagationMode.PROPAGATE))
    check(g, cfg)


def _resize_axis(rng, n):
    """(scale_n, scale_d, offset, border, out_size) satisfying RESIZE's ERROR_IFs (level 8K)."""
    while True:
        sn = _ri(rng, 1, 11)
        sd = _ri(rng, 1, min(16 * sn - 1, 12))
        off = _ri(rng, -sn, 2 * sn - 1)
        border = _ri(rng, -sn, sn - 1)
        border -= ((n - 1) * sn - off + border) % sd      # exact output size
        num = (n - 1) * sn - off + border
        if border >= -16 * sn and num >= 0:
            return sn, sd, off, border, num // sd + 1


@pytest.mark.parametrize("seed", range(8))
def test_random_resize(seed, cfg):
    rng = np.random.default_rng(9500 + seed)
    mode = ("NEAREST", "BILINEAR")[seed % 2]
    n, h, w, c = _ri(rng, 1, 2), _ri(rng, 1, 10), _ri(rng, 1, 10), _ri(rng, 1, 16)
    yn, yd, oy, by, oh = _resize_axis(rng, h)
    xn, xd, ox, bx, ow = _resize_axis(rng, w)
    x = rand(rng, DType.INT8, (n, h, w, c))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    o = g.output((n, oh, ow, c), DType.INT8 if mode == "NEAREST" else DType.INT32)
    g.op("RESIZE", [xi, shape_const(g, (yn, yd, xn, xd)), shape_const(g, (oy, ox)),
                    shape_const(g, (by, bx))], [o],
         _attr("ResizeAttribute", getattr(ts.ResizeMode, mode)))
    check(g, cfg)


@pytest.mark.parametrize("seed", range(6))
def test_random_elementwise_int32(seed, cfg):
    """ADD / SUB / MUL(shift) with random equal-rank broadcasting."""
    rng = np.random.default_rng(9600 + seed)
    op = ("ADD", "SUB", "MUL")[seed % 3]
    rank = _ri(rng, 1, 4)
    base = [_ri(rng, 1, 12) for _ in range(rank)]
    shapes = [tuple(1 if rng.random() < 0.35 else d for d in base) for _ in range(2)]
    out_shape = tuple(max(a, b) for a, b in zip(*shapes))
    g = GraphBuilder()
    if op == "MUL":
        shift = _ri(rng, 0, 40)
        lim = min((1 << 31) - 1, 1 << ((30 + shift) // 2))
        xs = [rand(rng, DType.INT32, s, -lim, lim) for s in shapes]
    else:
        xs = [rand(rng, DType.INT32, s, -(1 << 30), (1 << 30) - 1) for s in shapes]
    names = [g.tensor(s, DType.INT32, v) for s, v in zip(shapes, xs)]
    o = g.output(out_shape, DType.INT32)
    g.op(op, names + ([scalar(g, shift, DType.INT8)] if op == "MUL" else []), [o])
    check(g, cfg)


@pytest.mark.parametrize("seed", range(6))
def test_random_rescale(seed, cfg):
    """RESCALE of a random-rank tensor, random mode and types."""
    rng = np.random.default_rng(9700 + seed)
    combos = [("int8", "int8"), ("int32", "int8"), ("int16", "int8"), ("uint8", "int8"),
              ("int8", "uint8"), ("int8", "int32")]
    in_name, out_name = combos[seed % len(combos)]
    in_dt, in_np, in_u, in_bits = RESCALE_TYPES[in_name]
    out_dt, out_np, out_u, out_bits = RESCALE_TYPES[out_name]
    shape = tuple(_ri(rng, 1, 9) for _ in range(_ri(rng, 1, 4)))
    per_channel = bool(_ri(rng, 0, 1))
    scale32 = bool(_ri(rng, 0, 1))
    rounding = "DOUBLE_ROUND" if scale32 and _ri(rng, 0, 1) else "SINGLE_ROUND"
    nc = shape[-1] if per_channel else 1
    izp, ozp = _zp_for(rng, in_name), _zp_for(rng, out_name)
    tlo, thi = (0, (1 << in_bits) - 1) if in_u else (-(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1)
    vb = in_bits + 1 if in_bits < 32 else _ri(rng, 10, 31)
    lo, hi = max(tlo, izp - (1 << (vb - 1)) + 1), min(thi, izp + (1 << (vb - 1)) - 1)
    v = rng.integers(lo, hi, size=shape, endpoint=True)
    x = _raw(v, in_bits, in_np) if in_u else v.astype(in_np)
    shift = rng.integers(vb + 1, min(vb + 33, 62), size=nc, endpoint=True)
    mult = rng.integers(0, (1 << (31 if scale32 else 15)) - 1, size=nc, endpoint=True)
    g = GraphBuilder()
    xi = g.tensor(shape, in_dt, x)
    rescale(g, xi, shape, in_dt, out_dt, mult, shift,
            int(_raw(izp, in_bits, in_np)) if in_u else izp,
            int(_raw(ozp, out_bits, out_np)) if out_u else ozp,
            scale32=scale32, rounding=rounding, per_channel=per_channel, in_unsigned=in_u,
            out_unsigned=out_u)
    check(g, cfg)


def test_chain_data_movement_of_intermediates(cfg):
    """Layout ops on intermediates (resident on chip on "default"): CONV2D -> REVERSE -> TILE ->
    CONCAT with a constant -> CONV2D 1x1 -> RESHAPE (graph output, and MATMUL input); plus
    ADD of a tensor with itself."""
    rng = np.random.default_rng(8300)
    x = rand(rng, DType.INT8, (1, 8, 8, 6))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    c1, s1, z1 = _add_conv(g, rng, xi, x.shape, 8, 3, 1, (1, 1, 1, 1), -5, clamp_lo=-120)
    rv = g.intermediate(s1, DType.INT8)
    g.op("REVERSE", [c1], [rv], _attr("ReverseAttribute", 2))
    tl = g.intermediate((1, 8, 16, 8), DType.INT8)
    g.op("TILE", [rv, shape_const(g, (1, 1, 2, 1))], [tl])
    cat = g.intermediate((1, 11, 16, 8), DType.INT8)
    g.op("CONCAT", [tl, const(g, rand(rng, DType.INT8, (1, 3, 16, 8)), DType.INT8)], [cat],
         _attr("ConcatAttribute", 1))
    c2, s2, z2 = _add_conv(g, rng, cat, (1, 11, 16, 8), 12, 1, 1, (0, 0, 0, 0), z1)
    o1 = g.output((11, 16, 12), DType.INT8)
    g.op("RESHAPE", [c2, shape_const(g, (11, 16, 12))], [o1])
    rs = g.intermediate((1, 176, 12), DType.INT8)
    g.op("RESHAPE", [c2, shape_const(g, (1, 176, 12))], [rs])
    mm = g.output((1, 176, 5), DType.INT32)
    g.op("MATMUL", [rs, const(g, rand(rng, DType.INT8, (1, 12, 5)), DType.INT8),
                    scalar(g, z2, DType.INT8), scalar(g, 0, DType.INT8)], [mm])
    r32 = rescale(g, c1, s1, DType.INT8, DType.INT32, [1 << 30], [16], z1, 0, output=False)
    o3 = g.output(s1, DType.INT32)
    g.op("ADD", [r32, r32], [o3])
    check(g, cfg, tiled=True)
