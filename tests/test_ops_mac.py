"""Per-operator simulator tests, MAC-array operators: CONV2D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D
and MATMUL with fused output stages; bit-exact against the reference model."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

from oracle import DType, GraphBuilder
# cfg is the parametrised config fixture; pytest finds it by name.
from ops_sim_support import (  # noqa: F401
    _attr, _ri, cfg, check, clamp, const, conv_attr, fit_pad, fused, mac_stage, np_conv2d,
    np_depthwise, np_transpose_conv, out_or_mid, rand, scalar)

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
# --------------------------------------------------------------------------------------------
# large tiles run in slabs (npu_sim/execute.py): bounded temporaries, the same integers


@pytest.mark.parametrize("test, args", [
    (test_conv2d, (0,)), (test_conv2d, (3,)), (test_conv2d_large_rows_and_channels_split,
                                               ("DOUBLE_ROUND",)),
    (test_conv2d_input_channels_split, ("acc",)), (test_depthwise_conv2d, (1,)),
    (test_matmul, (0,)), (test_matmul, (1,))])
def test_tiles_in_slabs_of_rows_and_channels_are_bit_exact(test, args, cfg, monkeypatch):
    """With slabs of a few outputs and weights, every tile of these convolutions (padding,
    stride, dilation, split reductions) and matmuls runs in many slabs, bit-exact."""
    from npu_sim import execute
    monkeypatch.setattr(execute, "ROW_SLAB", 11)
    monkeypatch.setattr(execute, "CHANNEL_SLAB", 40)
    tiles = []
    run_tile = execute._mac_tile
    monkeypatch.setattr(execute, "_mac_tile", lambda *a: tiles.append(1) or run_tile(*a))
    commands = []
    run_mac = execute._mac
    monkeypatch.setattr(execute, "_mac", lambda *a: commands.append(1) or run_mac(*a))
    test(*args, cfg)
    assert len(tiles) > 2 * len(commands) > 0
