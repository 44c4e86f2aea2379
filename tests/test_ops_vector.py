"""Per-operator simulator tests, vector-unit and DMA operators: pools, elementwise, RESCALE, CLAMP,
TABLE, data layout, reductions and RESIZE; bit-exact against the reference model."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

from npu_sim.compiler.driver import resident_share
from oracle import DType, GraphBuilder
# cfg is the parametrised config fixture; pytest finds it by name.
from ops_sim_support import (  # noqa: F401
    _attr, _ri, cfg, check, clamp, const, fit_pad, rand, rescale, scalar, shape_const,
    get_config, stage_params)

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


# Moves whose direct DMA would read or write short runs in DRAM (an NCHW image's pixels, a
# TILE's repeats, a REVERSE of the innermost axis): staged through on-chip buffers, bit-exact,
# and on the default buffer cheaper than the direct copy.
STAGED_MOVES = [
    ("TRANSPOSE", (1, 3, 40, 40), DType.INT8, (0, 2, 3, 1)),
    ("TRANSPOSE", (48, 40), DType.INT16, (1, 0)),
    ("TILE", (1, 30, 30, 1), DType.INT8, (1, 1, 1, 3)),
    ("REVERSE", (1, 20, 20, 24), DType.INT8, 3),
]


@pytest.mark.parametrize("case", range(len(STAGED_MOVES)))
def test_staged_moves(case, cfg, monkeypatch):
    from npu_sim.api import compile_model, simulate
    from npu_sim.compiler import lower
    from npu_sim.compiler.loader import load_bytes
    from npu_sim.isa.commands import DmaCopy
    from ops_sim_support import get_config

    op, shape, dt, arg = STAGED_MOVES[case]
    x = rand(np.random.default_rng(6700 + case), dt, shape)
    g = GraphBuilder()
    xi = g.tensor(shape, dt, x)
    if op == "TRANSPOSE":
        o = g.output([shape[p] for p in arg], dt)
        g.op(op, [xi], [o], _attr("TransposeAttribute", list(arg)))
    elif op == "TILE":
        o = g.output([s * m for s, m in zip(shape, arg)], dt)
        g.op(op, [xi, shape_const(g, arg)], [o])
    else:
        o = g.output(shape, dt)
        g.op(op, [xi], [o], _attr("ReverseAttribute", arg))
    program = check(g, cfg)
    if cfg != "default":
        return
    staged = [c for c in program.commands if isinstance(c, DmaCopy) and c.dst.mem == 0]
    assert staged, "expected the move staged through the on-chip buffer"
    cycles = simulate(program, get_config(cfg), timing_only=True).report.cycles
    monkeypatch.setattr(lower, "plan_staging", lambda *a: None)
    direct = compile_model(load_bytes(g.serialize()), get_config(cfg))
    assert cycles < simulate(direct, get_config(cfg), timing_only=True).report.cycles


def test_a_staged_block_past_its_buffer_is_a_compiler_bug(monkeypatch):
    """A staging plan whose ring buffers are smaller than its blocks (a fault put in here)
    stops the compile (compiler/tiling.within_buffer) instead of loading past them."""
    import dataclasses

    from npu_sim.api import compile_model
    from npu_sim.compiler import lower
    from npu_sim.compiler.loader import load_bytes
    from ops_sim_support import get_config

    _, shape, dt, perm = STAGED_MOVES[0]
    g = GraphBuilder()
    xi = g.tensor(shape, dt, rand(np.random.default_rng(6700), dt, shape))
    g.op("TRANSPOSE", [xi], [g.output([shape[p] for p in perm], dt)],
         _attr("TransposeAttribute", list(perm)))
    planned = lower.plan_staging

    def short(*args):
        stage = planned(*args)
        return stage and dataclasses.replace(stage, buffer_bytes=stage.buffer_bytes - 16)
    monkeypatch.setattr(lower, "plan_staging", short)
    with pytest.raises(RuntimeError, match="compiler bug: .* a staged block"):
        compile_model(load_bytes(g.serialize()), get_config("default"), use_cache=False)


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


def _random_resize(g, rng, mode: str, sizes: tuple, output: bool):
    """A RESIZE of a random int8 input of `sizes` (n, h, w, c) in `mode`, of a random valid
    geometry: (its result, the result's shape, the product of the two scale numerators)."""
    n, h, w, c = sizes
    yn, yd, oy, by, oh = _resize_axis(rng, h)
    xn, xd, ox, bx, ow = _resize_axis(rng, w)
    x = rand(rng, DType.INT8, sizes)
    xi = g.tensor(x.shape, DType.INT8, x)
    shape, dt = (n, oh, ow, c), DType.INT8 if mode == "NEAREST" else DType.INT32
    out = g.output(shape, dt) if output else g.intermediate(shape, dt)
    g.op("RESIZE", [xi, shape_const(g, (yn, yd, xn, xd)), shape_const(g, (oy, ox)),
                    shape_const(g, (by, bx))], [out],
         _attr("ResizeAttribute", getattr(ts.ResizeMode, mode)))
    return out, shape, yn * xn


@pytest.mark.parametrize("seed", range(8))
def test_random_resize(seed, cfg):
    rng = np.random.default_rng(9500 + seed)
    mode = ("NEAREST", "BILINEAR")[seed % 2]
    sizes = (_ri(rng, 1, 2), _ri(rng, 1, 10), _ri(rng, 1, 10), _ri(rng, 1, 16))
    g = GraphBuilder()
    _random_resize(g, rng, mode, sizes, output=True)
    check(g, cfg)


@pytest.mark.parametrize("seed", range(6))
def test_resize_into_chain(seed, cfg):
    """A RESIZE read by an elementwise chain alone (ExecuTorch's bilinear upsampling: an int32
    RESIZE, then a RESCALE to int8; a nearest one into a CLAMP): where their tensors do not
    stay on chip, each tile of the chain has the vector unit compute its box of the RESIZE
    first (compiler/cascade.py _resized), from the input rows that box samples."""
    rng = np.random.default_rng(9550 + seed)
    mode = ("BILINEAR", "NEAREST")[seed % 2]
    sizes = (_ri(rng, 1, 2), _ri(rng, 3, 12), _ri(rng, 3, 12), _ri(rng, 4, 24))
    g = GraphBuilder()
    mid, shape, gain = _random_resize(g, rng, mode, sizes, output=False)
    if mode == "BILINEAR":
        mult, shift = stage_params(rng, 127 * gain, 1)
        rescale(g, mid, shape, DType.INT32, DType.INT8, mult, shift, ozp=_ri(rng, -20, 20))
        fused = ["RESIZE", "RESCALE"]
    else:
        lo = _ri(rng, -100, 0)
        clamp(g, mid, shape, DType.INT8, lo, _ri(rng, lo, 100))
        fused = ["RESIZE", "CLAMP"]
    program = check(g, cfg)
    # fused where the RESIZE's output and the chain's do not both stay on chip
    size = int(np.prod(shape))
    trips = size * (4 if mode == "BILINEAR" else 1) + size > resident_share(get_config(cfg))
    assert [list(layer.ops) for layer in program.layers] == \
        ([fused] if trips else [[op] for op in fused])


@pytest.mark.parametrize("chained", [False, True])
def test_resizes_of_one_shape_and_other_geometries_tile_apart(chained, cfg):
    """Two RESIZEs with the same input and output shapes sample their inputs differently
    (2x with no offset; 2x half-pixel style, whose boxes reach a row further): each needs its
    own tile plan, though their tensors alike would share one (compiler/lower.py keys the
    plans by the constant shape operands too). Sharing had made the second one's input boxes
    overrun their buffers, silently, on the tiny configs."""
    check(_two_resizes(chained), cfg, tiled=True)


def test_a_tile_box_past_its_buffer_is_a_compiler_bug_not_a_wrong_result(monkeypatch):
    """With the RESIZE's geometry left out of the plan key again (the fault above), the
    second RESIZE's input boxes outgrow the buffers its shared plan sized: the lowering
    stops there (compiler/tiling.within_buffer) where it wrote past them before."""
    from npu_sim import api
    from npu_sim.compiler import lower
    from npu_sim.compiler.loader import load_bytes

    keyed = lower._shape_of

    def without_values(graph, step):        # each operator's entry less its shape operands
        return tuple(part[:4] if isinstance(part, tuple) and isinstance(part[0], str) else part
                     for part in keyed(graph, step))
    monkeypatch.setattr(lower, "_shape_of", without_values)
    model = load_bytes(_two_resizes(False).serialize(), "two_resizes.tosa")
    with pytest.raises(RuntimeError, match="compiler bug: .* its buffer"):
        api.compile_model(model, get_config("2KiB"), use_cache=False)


def _two_resizes(chained: bool) -> GraphBuilder:
    """Two RESIZEs of one shape: 2x with no offset, and 2x half-pixel style."""
    rng = np.random.default_rng(9580)
    g = GraphBuilder()
    shape = (1, 15, 15, 16)
    for scale, offset, border in (((2, 1, 2, 1), (0, 0), (0, 0)),
                                  ((4, 2, 4, 2), (-1, -1), (-1, -1))):
        x = g.tensor((1, 8, 8, 16), DType.INT8, rand(rng, DType.INT8, (1, 8, 8, 16)))
        out = g.intermediate(shape, DType.INT8) if chained else g.output(shape, DType.INT8)
        g.op("RESIZE", [x, shape_const(g, scale), shape_const(g, offset),
                        shape_const(g, border)], [out],
             _attr("ResizeAttribute", ts.ResizeMode.NEAREST))
        if chained:
            clamp(g, out, shape, DType.INT8, -60, 70)
    return g


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
