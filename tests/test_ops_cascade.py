"""Cascading (compiler/cascade.py): a 1x1 CONV2D whose only reader is a DEPTHWISE_CONV2D,
any CONV2D whose only reader is a MAX_POOL2D or AVG_POOL2D, or a DEPTHWISE_CONV2D whose only
reader is a 1x1 CONV2D (where that pays), runs tile by tile inside its reader, so its output
never exists in memory. Bit-exact against the reference model on the default buffer and on
4 KiB / 2 KiB buffers that split rows (halo rows copied on chip, new rows computed) and
channels."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

from npu_sim import api
from npu_sim.compiler import cascade
from npu_sim.compiler.loader import load_bytes

from oracle import DType, GraphBuilder
from ops_sim_support import (  # noqa: F401  (cfg is the parametrised config fixture)
    cfg, check, clamp, const, conv_attr, fit_pad, mac_stage, rand, reference, scalar)

CASES = [
    # (n, h, w, ic, c, m, k, stride, dil, max_pad, producer clamp, dw mode, split on 2 KiB)
    (1, 16, 12, 8, 24, 1, (3, 3), (1, 1), (1, 1), 1, True, "clamp", ("oh", "c")),
    (1, 15, 13, 6, 20, 1, (3, 3), (2, 2), (1, 1), 1, False, "rescale", ("oh", "c")),
    # 7 channels: channel slices would be 7-byte runs, so 2 KiB splits columns (each tile's
    # array fill makes a batch split cost more than the narrower column tiles it saves)
    (2, 9, 11, 5, 7, 2, (3, 2), (1, 2), (2, 1), 3, True, "rescale", ("ow",)),
    (1, 4, 3, 8, 96, 2, (3, 3), (1, 1), (1, 1), 1, True, "rescale", ("c",)),
    (1, 20, 9, 16, 40, 1, (5, 5), (2, 1), (1, 1), 2, False, "clamp", ("oh", "c")),
]


def _bound(rng_taps: int, bias) -> np.ndarray:
    """The largest |accumulator| a stage can see: what mac_stage sizes its shift by."""
    return np.array([rng_taps * 256 * 256 + int(np.abs(bias).max())])


@pytest.mark.parametrize("case", range(len(CASES)))
def test_pointwise_into_depthwise(case, cfg):
    rng = np.random.default_rng(5000 + case)
    n, h, w, ic, c, m, (kh, kw), stride, dil, max_pad, producer_clamp, mode, split = CASES[case]
    g = GraphBuilder()
    x = g.tensor((n, h, w, ic), DType.INT8, rand(rng, DType.INT8, (n, h, w, ic)))
    pw_bias = rng.integers(-2000, 2000, size=c).astype(np.int32)
    acc = g.intermediate((n, h, w, c), DType.INT32)
    g.op("CONV2D", [x, const(g, rand(rng, DType.INT8, (c, 1, 1, ic)), DType.INT8),
                    const(g, pw_bias, DType.INT32), scalar(g, -7, DType.INT8),
                    scalar(g, 0, DType.INT8)], [acc], conv_attr((0, 0, 0, 0), (1, 1), (1, 1)))
    mid = mac_stage(g, rng, acc, _bound(ic, pw_bias), (n, h, w, c),
                    mode="clamp" if producer_clamp else "rescale", output=False)
    pt, pb = fit_pad(rng, h, (kh - 1) * dil[0] + 1, stride[0], max_pad)
    pl, pr = fit_pad(rng, w, (kw - 1) * dil[1] + 1, stride[1], max_pad)
    oh = (h + pt + pb - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (w + pl + pr - (kw - 1) * dil[1] - 1) // stride[1] + 1
    dw_bias = rng.integers(-3000, 3000, size=c * m).astype(np.int32)
    dw_acc = g.intermediate((n, oh, ow, c * m), DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.DepthwiseConv2dAttribute([pt, pb, pl, pr], list(stride), list(dil), False, DType.INT32)
    g.op("DEPTHWISE_CONV2D", [mid, const(g, rand(rng, DType.INT8, (kh, kw, c, m)), DType.INT8),
                              const(g, dw_bias, DType.INT32), scalar(g, 3, DType.INT8),
                              scalar(g, 0, DType.INT8)], [dw_acc], attr)
    mac_stage(g, rng, dw_acc, _bound(kh * kw, dw_bias), (n, oh, ow, c * m), mode=mode)
    producer = ["CONV2D", "RESCALE"] + (["CLAMP"] if producer_clamp else [])
    consumer = ["DEPTHWISE_CONV2D", "RESCALE"] + (["CLAMP"] if mode == "clamp" else [])
    check(g, cfg, split=split, layers=[producer + consumer])


def test_int16_pointwise_into_depthwise(cfg):
    """EXT-INT16: int16 activations, int48 accumulators and 16-bit RESCALE multipliers in both
    the cascaded producer and the depthwise conv."""
    rng = np.random.default_rng(5100)
    n, h, w, ic, c = 1, 12, 10, 6, 12
    g = GraphBuilder()
    x = g.tensor((n, h, w, ic), DType.INT16, rand(rng, DType.INT16, (n, h, w, ic)))
    pw_bias = rng.integers(-(1 << 30), 1 << 30, size=c).astype(np.int64)
    acc = g.intermediate((n, h, w, c), DType.INT48)
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute([0, 0, 0, 0], [1, 1], [1, 1], False, DType.INT48)
    g.op("CONV2D", [x, const(g, rand(rng, DType.INT8, (c, 1, 1, ic)), DType.INT8),
                    g.tensor([c], DType.INT48, pw_bias, is_const=True), scalar(g, 0, DType.INT16),
                    scalar(g, 0, DType.INT8)], [acc], attr)
    mid = mac_stage(g, rng, acc, np.array([ic * 32768 * 128 + (1 << 30)]), (n, h, w, c),
                    mode="rescale", scale32=False, acc_dt=DType.INT48, out_dt=DType.INT16,
                    output=False)
    dw_bias = rng.integers(-(1 << 30), 1 << 30, size=c).astype(np.int64)
    dw_acc = g.intermediate((n, h, w, c), DType.INT48)
    attr = ts.TosaSerializerAttribute()
    attr.DepthwiseConv2dAttribute([1, 1, 1, 1], [1, 1], [1, 1], False, DType.INT48)
    g.op("DEPTHWISE_CONV2D", [mid, const(g, rand(rng, DType.INT8, (3, 3, c, 1)), DType.INT8),
                              g.tensor([c], DType.INT48, dw_bias, is_const=True),
                              scalar(g, 0, DType.INT16), scalar(g, 0, DType.INT8)], [dw_acc], attr)
    mac_stage(g, rng, dw_acc, np.array([9 * 32768 * 128 + (1 << 30)]), (n, h, w, c),
              mode="clamp", scale32=False, acc_dt=DType.INT48, out_dt=DType.INT16)
    check(g, cfg, split=("oh",), layers=[["CONV2D", "RESCALE", "DEPTHWISE_CONV2D", "RESCALE",
                                          "CLAMP"]])


POOL_CASES = [
    # (n, h, w, ic, c, conv k, conv stride, conv pad, pool, kernel, pool stride, pool pad)
    (1, 20, 20, 3, 8, 3, 1, (1, 1, 1, 1), "MAX_POOL2D", (2, 2), (2, 2), (0, 0, 0, 0)),
    (1, 40, 30, 2, 8, 3, 2, (1, 0, 1, 0), "MAX_POOL2D", (3, 3), (2, 2), (1, 0, 1, 1)),
    (2, 17, 13, 3, 7, 2, 1, (0, 0, 1, 0), "AVG_POOL2D", (2, 3), (1, 2), (0, 1, 1, 1)),
]


@pytest.mark.parametrize("case", range(len(POOL_CASES)))
def test_conv_into_pool(case, cfg):
    """A conv whose output does not fit the resident share (4 KiB keeps 2 KiB resident) is
    computed band by band inside the pool that reads it; on 1 MiB it stays on chip and runs
    alone, and on 2 KiB a band of all its channels does not fit the tiles' room."""
    from ops_sim_support import _attr
    rng = np.random.default_rng(5200 + case)
    n, h, w, ic, c, k, s, pad, pool, kernel, ps, ppad = POOL_CASES[case]
    g = GraphBuilder()
    x = g.tensor((n, h, w, ic), DType.INT8, rand(rng, DType.INT8, (n, h, w, ic)))
    bias = rng.integers(-2000, 2000, size=c).astype(np.int32)
    oh, ow = (h + pad[0] + pad[1] - k) // s + 1, (w + pad[2] + pad[3] - k) // s + 1
    acc = g.intermediate((n, oh, ow, c), DType.INT32)
    g.op("CONV2D", [x, const(g, rand(rng, DType.INT8, (c, k, k, ic)), DType.INT8),
                    const(g, bias, DType.INT32), scalar(g, 5, DType.INT8),
                    scalar(g, 0, DType.INT8)], [acc], conv_attr(pad, (s, s), (1, 1)))
    mid = mac_stage(g, rng, acc, _bound(k * k * ic, bias), (n, oh, ow, c), mode="clamp",
                    output=False)
    ph = (oh + ppad[0] + ppad[1] - kernel[0]) // ps[0] + 1
    pw = (ow + ppad[2] + ppad[3] - kernel[1]) // ps[1] + 1
    out = g.output((n, ph, pw, c), DType.INT8)
    if pool == "MAX_POOL2D":
        attr = _attr("MaxPool2dAttribute", list(kernel), list(ps), list(ppad),
                     ts.NanPropagationMode.PROPAGATE)
        g.op(pool, [mid], [out], attr)
    else:
        attr = _attr("AvgPool2dAttribute", list(kernel), list(ps), list(ppad), DType.INT32)
        g.op(pool, [mid, scalar(g, -3, DType.INT8), scalar(g, 4, DType.INT8)], [out], attr)
    conv = ["CONV2D", "RESCALE", "CLAMP"]
    fused = n * oh * ow * c > 2048 and cfg == "4KiB"
    check(g, cfg, layers=[conv + [pool]] if fused else [conv, [pool]])


DW_PW_CASES = [
    # (n, h, w, c, oc, k, stride, dilation, max pad, depthwise mode, pointwise mode, split
    # on 2 KiB: the 1x1 conv's reduction too, each k-tile computing its channel slice;
    # the buffers it pays on: where a band of a row or two would reload the depthwise input
    # with its halo more than the round trip moves, the two layers run apart)
    (1, 14, 12, 24, 16, (3, 3), (1, 1), (1, 1), 1, "clamp", "rescale", ("oh",), ("4KiB",)),
    (1, 25, 21, 32, 12, (3, 3), (2, 2), (1, 1), 1, "rescale", "clamp", ("oh", "ic"),
     ("4KiB", "2KiB")),
    (2, 21, 11, 40, 24, (5, 3), (1, 2), (2, 1), 2, "clamp", "clamp", ("oh",), ()),
]


@pytest.mark.parametrize("case", range(len(DW_PW_CASES)))
def test_depthwise_into_pointwise(case, cfg):
    """A depthwise conv read only by a 1x1 conv (a depthwise-separable block) whose output
    does not fit the resident share is computed tile by tile inside the 1x1 conv, each
    tile's channel slice from the same slice of its input (halo rows and columns included),
    so the depthwise output never crosses the memory port: bit-exact, fused on the small
    buffers it pays on, alone elsewhere (on the default buffer it stays on chip)."""
    rng = np.random.default_rng(5300 + case)
    n, h, w, c, oc, (kh, kw), stride, dil, max_pad, dw_mode, pw_mode, split, fused = \
        DW_PW_CASES[case]
    g = GraphBuilder()
    x = g.tensor((n, h, w, c), DType.INT8, rand(rng, DType.INT8, (n, h, w, c)))
    pt, pb = fit_pad(rng, h, (kh - 1) * dil[0] + 1, stride[0], max_pad)
    pl, pr = fit_pad(rng, w, (kw - 1) * dil[1] + 1, stride[1], max_pad)
    oh = (h + pt + pb - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (w + pl + pr - (kw - 1) * dil[1] - 1) // stride[1] + 1
    dw_bias = rng.integers(-3000, 3000, size=c).astype(np.int32)
    dw_acc = g.intermediate((n, oh, ow, c), DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.DepthwiseConv2dAttribute([pt, pb, pl, pr], list(stride), list(dil), False, DType.INT32)
    g.op("DEPTHWISE_CONV2D", [x, const(g, rand(rng, DType.INT8, (kh, kw, c, 1)), DType.INT8),
                              const(g, dw_bias, DType.INT32), scalar(g, -4, DType.INT8),
                              scalar(g, 0, DType.INT8)], [dw_acc], attr)
    mid = mac_stage(g, rng, dw_acc, _bound(kh * kw, dw_bias), (n, oh, ow, c), mode=dw_mode,
                    output=False)
    pw_bias = rng.integers(-2000, 2000, size=oc).astype(np.int32)
    acc = g.intermediate((n, oh, ow, oc), DType.INT32)
    g.op("CONV2D", [mid, const(g, rand(rng, DType.INT8, (oc, 1, 1, c)), DType.INT8),
                    const(g, pw_bias, DType.INT32), scalar(g, 6, DType.INT8),
                    scalar(g, 0, DType.INT8)], [acc], conv_attr((0, 0, 0, 0), (1, 1), (1, 1)))
    mac_stage(g, rng, acc, _bound(c, pw_bias), (n, oh, ow, oc), mode=pw_mode)
    stage = {"rescale": ["RESCALE"], "clamp": ["RESCALE", "CLAMP"]}
    dw, pw = ["DEPTHWISE_CONV2D"] + stage[dw_mode], ["CONV2D"] + stage[pw_mode]
    assert n * oh * ow * c > 2048               # more than 4 KiB's resident share
    check(g, cfg, split=split, layers=[dw + pw] if cfg in fused else [dw, pw])


def test_depthwise_into_pointwise_only_where_it_pays(monkeypatch):
    """A depthwise conv into a 1x1 conv to 5x its channels, on an 8 KiB buffer: fused, the
    1x1 conv's tiles would slice its output channels, each slice recomputing the depthwise
    output and reloading its input with the halo (4x the cycles of the two layers apart), so
    the compiled program is no slower than with the cascade refused, and bit-exact."""
    rng = np.random.default_rng(5400)
    g = GraphBuilder()
    x = g.tensor((1, 16, 16, 40), DType.INT8, rand(rng, DType.INT8, (1, 16, 16, 40)))
    dw_acc = g.intermediate((1, 16, 16, 40), DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.DepthwiseConv2dAttribute([1, 1, 1, 1], [1, 1], [1, 1], False, DType.INT32)
    g.op("DEPTHWISE_CONV2D", [x, const(g, rand(rng, DType.INT8, (3, 3, 40, 1)), DType.INT8),
                              const(g, np.zeros(40, np.int32), DType.INT32),
                              scalar(g, 0, DType.INT8), scalar(g, 0, DType.INT8)], [dw_acc], attr)
    mid = mac_stage(g, rng, dw_acc, _bound(9, [0]), (1, 16, 16, 40), mode="rescale",
                     output=False)
    acc = g.intermediate((1, 16, 16, 200), DType.INT32)
    g.op("CONV2D", [mid, const(g, rand(rng, DType.INT8, (200, 1, 1, 40)), DType.INT8),
                    const(g, np.zeros(200, np.int32), DType.INT32), scalar(g, 0, DType.INT8),
                    scalar(g, 0, DType.INT8)], [acc], conv_attr((0, 0, 0, 0), (1, 1), (1, 1)))
    mac_stage(g, rng, acc, _bound(40, [0]), (1, 16, 16, 200), mode="rescale")
    buf, cfg = g.serialize(), api.load_config("default").with_overrides({"sram.size": "8 KiB"})

    def run():
        program = api.compile_model(load_bytes(buf, "dw_pw.tosa"), cfg)
        return api.simulate(program, cfg, dict(g.input_values))

    chosen = run()
    monkeypatch.setattr(cascade, "_depthwise_into", lambda *args: False)
    apart = run()
    assert chosen.report.cycles <= apart.report.cycles
    want = reference(g, buf, dict(g.input_values))
    assert all(np.array_equal(run.outputs[n], want[n]) for run in (chosen, apart) for n in want)
