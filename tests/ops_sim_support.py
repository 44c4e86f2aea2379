"""Harness for the per-operator simulator tests (test_ops_*.py). End to end, per operator: TOSA graph -> compile_model -> simulate, bit-exact vs the reference.

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

from npu_sim.compiler import lower as compiler_lower
from npu_sim.compiler.loader import load_bytes
from npu_sim.isa.errors import DoesNotFitError
from npu_sim.api import compile_model, load_config, simulate
from oracle import DType, GraphBuilder, fit_pad  # noqa: F401  (fit_pad is re-exported)

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
    hook = next(n for n in ("plan_tiles", "search") if hasattr(compiler_lower, n))
    orig = getattr(compiler_lower, hook)

    def recording_search(space, budget, *args, **kwargs):
        plan = orig(space, budget, *args, **kwargs)
        if plan is not None:
            log.plans.append(dict(plan.counts))
        return plan

    setattr(compiler_lower, hook, recording_search)
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
        setattr(compiler_lower, hook, orig)
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


def int8_conv(g, rng, x, ic, out_shape, kernel, pad=(0, 0, 0, 0), stride=(1, 1)) -> str:
    """A CONV2D of int8 tensor `x` (`ic` channels) with random int8 weights of `kernel`
    (kh, kw), zero bias and zero points, into a new int32 accumulator of `out_shape`."""
    oc = out_shape[-1]
    acc = g.intermediate(out_shape, DType.INT32)
    g.op("CONV2D", [x, const(g, rand(rng, DType.INT8, (oc, *kernel, ic)), DType.INT8),
                    const(g, np.zeros(oc, np.int32), DType.INT32), scalar(g, 0, DType.INT8),
                    scalar(g, 0, DType.INT8)], [acc], conv_attr(pad, stride, (1, 1)))
    return acc


def mac_stage(g, rng, acc_name, acc, shape, *, mode, scale32=True, rounding="SINGLE_ROUND",
              per_channel=True, acc_dt=DType.INT32, out_dt=DType.INT8, output=True):
    """After an accumulator tensor: nothing (mode 'acc'), RESCALE to out_dt ('rescale'),
    or RESCALE + CLAMP ('clamp'). Returns the final tensor's name: a graph output, or with
    output=False an intermediate."""
    if mode == "acc":
        return acc_name
    oc = shape[-1]
    n = oc if per_channel else 1
    out_bits = (5, 10) if out_dt == DType.INT8 else (12, 18)
    mult, shift = stage_params(rng, int(np.abs(acc).max(initial=0)), n, scale32, out_bits)
    ozp = int(rng.integers(-40, 41)) if out_dt == DType.INT8 else 0
    r = rescale(g, acc_name, shape, acc_dt, out_dt, mult, shift, 0, ozp, scale32=scale32,
                rounding=rounding, per_channel=per_channel, output=output and mode == "rescale")
    if mode == "clamp":
        info = np.iinfo(NP[out_dt])
        lo = int(rng.integers(info.min, info.min // 6))
        hi = int(rng.integers(info.max // 6, info.max + 1))
        return clamp(g, r, shape, out_dt, lo, hi, output=output)
    return r


LAYERS = {"acc": ["CONV2D"], "rescale": ["CONV2D", "RESCALE"], "clamp": ["CONV2D", "RESCALE", "CLAMP"]}


def fused(op, mode):
    """The single fused layer a MAC op with output stage `mode` compiles to."""
    return [[op] + LAYERS[mode][1:]]




def _attr(method, *args):
    a = ts.TosaSerializerAttribute()
    getattr(a, method)(*args)
    return a




def _ri(rng, lo, hi):
    return int(rng.integers(lo, hi + 1))
