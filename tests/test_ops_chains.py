"""Per-operator simulator tests, multi-operator chains: fusion, residency and spills of
intermediates; bit-exact against the reference model."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

from npu_sim import api
from oracle import DType, GraphBuilder
# cfg is the parametrised config fixture; pytest finds it by name.
from ops_sim_support import (  # noqa: F401
    _attr, cfg, check, clamp, clamp_attr, const, conv_attr, get_config, rand, rescale, scalar,
    shape_const, stage_params)

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


@pytest.mark.parametrize("axis", [2, 1])
def test_a_broadcast_intermediate_joins_the_chain(axis, cfg):
    """A softmax's first half along `axis`: the row maximum is rescaled before it is
    subtracted. Along the last axis (a token's channels) that rescale joins the chain
    (compiler/chains.py): each tile computes its rows' maxima, and the vector unit pays for
    those elements alone. Along the rows (axis 1) each band of rows would compute all of
    them again, so it stays a step of its own."""
    rng = np.random.default_rng(7300 + axis)
    shape = (1, 24, 40)
    reduced = tuple(1 if d == axis else n for d, n in enumerate(shape))
    g = GraphBuilder()
    x = g.tensor(shape, DType.INT8, rand(rng, DType.INT8, shape))
    wide = rescale(g, x, shape, DType.INT8, DType.INT32, [1 << 30], [30], 3, 0, output=False)
    peak = g.intermediate(reduced, DType.INT32)
    g.op("REDUCE_MAX", [wide], [peak], _attr("ReduceMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE))
    scaled = rescale(g, peak, reduced, DType.INT32, DType.INT32, [1 << 30], [29], output=False)
    centred = g.intermediate(shape, DType.INT32)
    g.op("SUB", [wide, scaled], [centred])
    rescale(g, centred, shape, DType.INT32, DType.INT8, [1 << 30], [32], 0, -5)
    joined = axis == len(shape) - 1
    tail = [["RESCALE", "SUB", "RESCALE"]] if joined else [["RESCALE"], ["SUB", "RESCALE"]]
    program = check(g, cfg, layers=[["RESCALE"], ["REDUCE_MAX"]] + tail)
    if cfg == "default" and joined:                 # one tile: the maxima rescaled once each
        sim = api.simulate(program, get_config(cfg), timing_only=True).sim
        work = [sim.costs[c.id].vector for c in program.commands
                if c.layer == 2 and getattr(c, "unit", "") == "vector"]
        assert work == [{"rescale": 24 + 24 * 40, "add": 24 * 40}]


def test_a_chain_reading_more_inputs_than_a_command_carries_splits(cfg):
    """A sum of 18 tensors, one ADD after another: one vector program would read 18 data
    inputs, more than the elementwise opcode's 16 (isa/opcodes.py), so the chain ends where
    the next operand would not fit and a second one carries on (compiler/chains.py)."""
    rng = np.random.default_rng(7400)
    shape = (1, 6, 8, 4)
    g = GraphBuilder()
    terms = [g.tensor(shape, DType.INT32, rand(rng, DType.INT32, shape, -1000, 1000))
             for _ in range(18)]
    total = terms[0]
    for k, term in enumerate(terms[1:], 1):
        out = g.output(shape, DType.INT32) if k == 17 else g.intermediate(shape, DType.INT32)
        g.op("ADD", [total, term], [out])
        total = out
    check(g, cfg, layers=[["ADD"] * 2, ["ADD"] * 15])


def test_a_chain_pays_each_micro_op_its_result_and_the_last_the_whole_tile():
    """The vector unit's work on a chain command (npu_sim/ops/elementwise.py): a broadcast
    intermediate costs its own elements, and the micro-op writing the tile costs all of
    them even where its operands broadcast (a program a file could carry)."""
    from types import SimpleNamespace

    from npu_sim.isa.commands import dense
    from npu_sim.ops import VECTOR_WORK
    row, tile = dense(0, 0, (1, 4, 1), "int32"), dense(0, 64, (1, 4, 8), "int32")
    program = ('[{"fn":"ABS","args":["in0"],"tables":[],"dtype":"int32"},'
               '{"fn":"SUB","args":["in1","%0"],"tables":[],"dtype":"int32"}]')
    cmd = SimpleNamespace(inputs={"in0": row, "in1": tile}, outputs={"out": tile},
                          attrs={"program": program})
    assert VECTOR_WORK["elementwise"](cmd) == {"add": 4 + 32}
    alone = ('[{"fn":"ABS","args":["in0"],"tables":[],"dtype":"int32"}]')
    cmd = SimpleNamespace(inputs={"in0": row}, outputs={"out": tile}, attrs={"program": alone})
    assert VECTOR_WORK["elementwise"](cmd) == {"add": 32}


def test_a_chain_of_more_constant_tables_than_a_command_carries_splits(cfg):
    """17 per-channel RESCALEs one after another carry 34 constant tables (multipliers and
    shifts), more than the elementwise opcode's 32: the chain ends where the next one's would
    not fit (compiler/chains.py), bit-exact."""
    rng = np.random.default_rng(7500)
    shape = (1, 4, 6, 8)
    g = GraphBuilder()
    value = g.tensor(shape, DType.INT32, rand(rng, DType.INT32, shape, -1000, 1000))
    for k in range(17):
        mult = rng.integers(1 << 29, 1 << 30, size=8)
        value = rescale(g, value, shape, DType.INT32, DType.INT32, mult, np.full(8, 30),
                        per_channel=True, output=k == 16)
    program = check(g, cfg)
    assert [len(layer.ops) for layer in program.layers] == [1, 16]
