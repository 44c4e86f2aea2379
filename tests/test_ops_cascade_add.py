"""Cascading a CONV2D into the elementwise chain that reads it (compiler/cascade.py): the
residual add of ResNet-style blocks (RESCALE, RESCALE, ADD, RESCALE on the conv's output and
the shortcut) computes its box of the conv's output on chip, tile by tile, so the conv's
output never exists in memory. Bit-exact against the reference model on the default buffer
and on 4 KiB / 2 KiB buffers whose tiles split rows and channels."""

from __future__ import annotations

import numpy as np
import pytest
import tosa_serializer as ts

from npu_sim.api import compile_model, load_config, simulate
from npu_sim.compiler.loader import load_bytes
from npu_sim.isa.errors import DoesNotFitError
from oracle import DType, GraphBuilder
from ops_sim_support import (  # noqa: F401  (cfg is the parametrised config fixture)
    cfg, check, const, conv_attr, get_config, mac_stage, rand, rescale, scalar, shape_const,
    stage_params)

CASES = [
    # (n, h, w, ic, c, k, stride, pad, shortcut, per-channel output rescale, fused on).
    # On 1 MiB the three maps stay on chip: a chain rides along only where the conv keeps
    # its own tiles, two or more of whole array folds (cases 1 and 4); on 4 KiB (2 KiB of
    # tile room) and 2 KiB (1 KiB) the bands below fit (of channel slices where all
    # channels do not), and 2 KiB splits rows and columns.
    (1, 12, 10, 8, 32, 1, 1, (0, 0, 0, 0), "input", False, ("4KiB", "2KiB")),
    (1, 16, 12, 8, 8, 3, 1, (1, 1, 1, 1), "x", True, ("default", "4KiB")),
    (2, 15, 13, 3, 24, 3, 2, (1, 1, 0, 0), "input", True, ("4KiB",)),
    (1, 8, 8, 16, 96, 1, 1, (0, 0, 0, 0), "input", False, ("4KiB",)),
    # a projection shortcut after the conv: its 3x3 weights do not fit beside a band, so the
    # chain computes the conv before it, and the projection runs first
    (1, 12, 10, 8, 32, 1, 1, (0, 0, 0, 0), "conv", False, ("default", "4KiB", "2KiB")),
]


def _add_stage(g, rng, src, shape, in_dt, izp, bits):
    """An input RESCALE of a TFLite-style add: int8 minus its zero point, scaled to about
    `bits` bits of int32."""
    mult = int(rng.integers(1 << 30, (1 << 31) - 1))
    return rescale(g, src, shape, in_dt, DType.INT32, [mult], [31 + 8 - bits], izp, 0,
                   output=False)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv_into_residual_add(case, cfg):
    rng = np.random.default_rng(5300 + case)
    n, h, w, ic, c, k, s, pad, shortcut, per_channel, fused_on = CASES[case]
    g = GraphBuilder()
    x = g.tensor((n, h, w, ic), DType.INT8, rand(rng, DType.INT8, (n, h, w, ic)))
    oh, ow = (h + pad[0] + pad[1] - k) // s + 1, (w + pad[2] + pad[3] - k) // s + 1
    shape = (n, oh, ow, c)
    bias = rng.integers(-2000, 2000, size=c).astype(np.int32)
    acc = g.intermediate(shape, DType.INT32)
    g.op("CONV2D", [x, const(g, rand(rng, DType.INT8, (c, k, k, ic)), DType.INT8),
                    const(g, bias, DType.INT32), scalar(g, 9, DType.INT8),
                    scalar(g, 0, DType.INT8)], [acc], conv_attr(pad, (s, s), (1, 1)))
    bound = np.array([k * k * ic * 256 * 256 + int(np.abs(bias).max())])
    mid = mac_stage(g, rng, acc, bound, shape, mode="rescale", output=False)
    if shortcut == "x":
        other = x                  # the block's input: read by the conv and by the add
    elif shortcut == "conv":
        sc_bias = rng.integers(-2000, 2000, size=c).astype(np.int32)
        sc_acc = g.intermediate(shape, DType.INT32)
        g.op("CONV2D", [x, const(g, rand(rng, DType.INT8, (c, 3, 3, ic)), DType.INT8),
                        const(g, sc_bias, DType.INT32), scalar(g, -4, DType.INT8),
                        scalar(g, 0, DType.INT8)], [sc_acc], conv_attr((1, 1, 1, 1), (1, 1),
                                                                       (1, 1)))
        other = mac_stage(g, rng, sc_acc, np.array([9 * ic * 256 * 256 + 2000]), shape,
                          mode="rescale", output=False)
    else:
        other = g.tensor(shape, DType.INT8, rand(rng, DType.INT8, shape))
    lhs = _add_stage(g, rng, mid, shape, DType.INT8, 0, 28)
    rhs = _add_stage(g, rng, other, shape, DType.INT8, int(rng.integers(-30, 31)), 27)
    total = g.intermediate(shape, DType.INT32)
    g.op("ADD", [lhs, rhs], [total])
    channels = c if per_channel else 1
    mult, shifts = stage_params(rng, 3 << 27, channels)
    rescale(g, total, shape, DType.INT32, DType.INT8, mult, shifts, 0,
            int(rng.integers(-20, 21)), rounding="DOUBLE_ROUND", per_channel=per_channel)
    conv, add = ["CONV2D", "RESCALE"], ["RESCALE", "RESCALE", "ADD", "RESCALE"]
    first = [conv] if shortcut == "conv" else []
    check(g, cfg, split=("d1", "d2") if "2KiB" in fused_on else (),
          layers=first + ([conv + add] if cfg in fused_on else [conv, add]))


def _fits_only_beside_the_sum(g):
    """Compile `g` on 8 KiB of SRAM and 10 KiB of DRAM (which holds the block's input beside
    the sum) and check it bit-exact; check 8 KiB of DRAM, where it would fit only by writing
    the sum over that input, is refused. Returns the 10 KiB program."""
    tight = get_config("default").with_overrides({"sram.size": "8 KiB",
                                                  "memories.dram.size": "10 KiB"})
    program = compile_model(load_bytes(g.serialize()), tight)
    got = simulate(program, tight, inputs=dict(g.input_values)).outputs
    expected = g.run()
    assert all(np.array_equal(np.asarray(got[n]), expected[n]) for n in g.output_names)
    with pytest.raises(DoesNotFitError, match="does not fit in dram"):
        compile_model(load_bytes(g.serialize()),
                      tight.with_overrides({"memories.dram.size": "8 KiB"}))
    return program


def test_sum_is_not_written_over_the_cascaded_convs_input():
    """When the feature maps do not fit, a chain's output may be written over an input it
    reads last, box over the same box; never over its cascaded conv's input, whose boxes
    reach into other tiles' rows and columns (a 3x3 conv's halo) and which every channel
    slice reads again. The block's input x (4,608 B, above 8 KiB's 4 KiB resident share)
    feeds both the conv and the add: 10 KiB of DRAM holds it beside the sum, bit-exact;
    8 KiB would only by writing the sum over x, which is refused."""
    rng = np.random.default_rng(5400)
    shape = (1, 24, 24, 8)
    g = GraphBuilder()
    x0 = g.tensor((1, 24, 24, 2), DType.INT8, rand(rng, DType.INT8, (1, 24, 24, 2)))
    maps = [x0]
    for k, ic in ((1, 2), (3, 8)):
        bias = rng.integers(-2000, 2000, size=8).astype(np.int32)
        acc = g.intermediate(shape, DType.INT32)
        g.op("CONV2D", [maps[-1], const(g, rand(rng, DType.INT8, (8, k, k, ic)), DType.INT8),
                        const(g, bias, DType.INT32), scalar(g, 3, DType.INT8),
                        scalar(g, 0, DType.INT8)], [acc], conv_attr((k // 2,) * 4, (1, 1), (1, 1)))
        maps.append(mac_stage(g, rng, acc, np.array([k * k * ic * 256 * 256 + 2000]), shape,
                              mode="rescale", output=False))
    _, x, mid = maps
    lhs = _add_stage(g, rng, mid, shape, DType.INT8, 0, 28)
    rhs = _add_stage(g, rng, x, shape, DType.INT8, 5, 27)
    total = g.intermediate(shape, DType.INT32)
    g.op("ADD", [lhs, rhs], [total])
    mult, shifts = stage_params(rng, 3 << 27, 1)
    block = rescale(g, total, shape, DType.INT32, DType.INT8, mult, shifts, 0, 7, output=False)
    acc = g.intermediate((1, 24, 24, 2), DType.INT32)
    g.op("CONV2D", [block, const(g, rand(rng, DType.INT8, (2, 1, 1, 8)), DType.INT8),
                    const(g, np.zeros(2, np.int32), DType.INT32), scalar(g, 1, DType.INT8),
                    scalar(g, 0, DType.INT8)], [acc], conv_attr((0,) * 4, (1, 1), (1, 1)))
    mac_stage(g, rng, acc, np.array([8 * 256 * 256]), (1, 24, 24, 2), mode="rescale")
    conv = ["CONV2D", "RESCALE"]
    program = _fits_only_beside_the_sum(g)
    assert [layer.ops for layer in program.layers] == [
        conv, conv + ["RESCALE", "RESCALE", "ADD", "RESCALE"], conv]


def test_sum_is_not_written_over_an_alias_of_the_cascaded_convs_input():
    """The same guard when the cascaded conv reads its input x through a RESHAPE while the add
    reads x itself: the alias is the same buffer, so the sum may not be written over x. 10 KiB
    of DRAM holds x beside the sum (bit-exact, cascaded); 8 KiB would only by writing over x
    while later tiles still read it through the alias, which is refused."""
    rng = np.random.default_rng(5500)
    shape, ic = (1, 24, 24, 8), 4
    g = GraphBuilder()
    x0 = g.tensor((1, 24, 24, ic), DType.INT8, rand(rng, DType.INT8, (1, 24, 24, ic)))
    acc0 = g.intermediate(shape, DType.INT32)
    g.op("CONV2D", [x0, const(g, rand(rng, DType.INT8, (8, 1, 1, ic)), DType.INT8),
                    const(g, np.zeros(8, np.int32), DType.INT32), scalar(g, 3, DType.INT8),
                    scalar(g, 0, DType.INT8)], [acc0], conv_attr((0,) * 4, (1, 1), (1, 1)))
    x = mac_stage(g, rng, acc0, np.array([4000]), shape, mode="rescale", output=False)
    alias = g.intermediate((1, 12, 48, 8), DType.INT8)
    g.op("RESHAPE", [x, shape_const(g, [1, 12, 48, 8])], [alias])
    acc = g.intermediate(shape, DType.INT32)   # 3x3, stride (1, 2): back to 24x24
    g.op("CONV2D", [alias, const(g, rand(rng, DType.INT8, (8, 3, 3, 8)), DType.INT8),
                    const(g, rng.integers(-2000, 2000, 8).astype(np.int32), DType.INT32),
                    scalar(g, 3, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr((7, 7, 1, 0), (1, 2), (1, 1)))
    mid = mac_stage(g, rng, acc, np.array([20000]), shape, mode="rescale", output=False)
    lhs = _add_stage(g, rng, mid, shape, DType.INT8, 0, 28)
    rhs = _add_stage(g, rng, x, shape, DType.INT8, 5, 27)
    total = g.intermediate(shape, DType.INT32)
    g.op("ADD", [lhs, rhs], [total])
    mult, shifts = stage_params(rng, 100_000_000, 1)
    block = rescale(g, total, shape, DType.INT32, DType.INT8, mult, shifts, 0, 7, output=False)
    out = g.output((1, 12, 12, 8), DType.INT8)
    pool = ts.TosaSerializerAttribute()
    pool.MaxPool2dAttribute([2, 2], [2, 2], [0, 0, 0, 0], ts.NanPropagationMode.PROPAGATE)
    g.op("MAX_POOL2D", [block], [out], pool)
    program = _fits_only_beside_the_sum(g)
    assert ["CONV2D", "RESCALE", "RESCALE", "RESCALE", "ADD", "RESCALE"] in [
        layer.ops for layer in program.layers]


def _projection_block(rng, h, w, ic, c):
    """A MobileNetV2-style projection: a 1x1 CONV2D from `ic` to `c` channels and a residual
    add of its output and the block's shortcut (an input)."""
    g = GraphBuilder()
    x = g.tensor((1, h, w, ic), DType.INT8, rand(rng, DType.INT8, (1, h, w, ic)))
    shape = (1, h, w, c)
    acc = g.intermediate(shape, DType.INT32)
    g.op("CONV2D", [x, const(g, rand(rng, DType.INT8, (c, 1, 1, ic)), DType.INT8),
                    const(g, rng.integers(-2000, 2000, size=c).astype(np.int32), DType.INT32),
                    scalar(g, 3, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr((0,) * 4, (1, 1), (1, 1)))
    mid = mac_stage(g, rng, acc, np.array([ic * 256 * 256 + 2000]), shape, mode="rescale",
                    output=False)
    shortcut = g.tensor(shape, DType.INT8, rand(rng, DType.INT8, shape))
    total = g.intermediate(shape, DType.INT32)
    g.op("ADD", [_add_stage(g, rng, mid, shape, DType.INT8, 0, 28),
                 _add_stage(g, rng, shortcut, shape, DType.INT8, 4, 27)], [total])
    mult, shifts = stage_params(rng, 3 << 27, 1)
    rescale(g, total, shape, DType.INT32, DType.INT8, mult, shifts, 0, -3)
    return g


def test_estimate_cascades_what_no_band_of_whole_rows_fits(monkeypatch):
    """edge-256's 16 KiB of tile room fits no band of a whole 56-pixel row of this block twice
    (its input row of 96 channels, 5 KiB, and three 1.3 KiB rows of the conv's output, the
    shortcut and the sum), so fuse_producers() leaves the conv apart; the tiler's estimate
    of the fused step is below the two apart, so cascade_by_estimate() folds it in:
    bit-exact, and faster in simulation than the program that keeps the conv apart (the
    array's work and the shortcut's loads then hide the vector unit's sum and the round
    trip)."""
    from npu_sim.compiler import driver
    g = _projection_block(np.random.default_rng(5500), 16, 56, 96, 24)
    edge = load_config("edge-256")
    program = compile_model(load_bytes(g.serialize()), edge)
    assert [layer.ops for layer in program.layers] == [
        ["CONV2D", "RESCALE", "RESCALE", "RESCALE", "ADD", "RESCALE"]]
    got = simulate(program, edge, inputs=dict(g.input_values))
    expected = g.run()
    assert all(np.array_equal(np.asarray(got.outputs[n]), expected[n]) for n in g.output_names)
    monkeypatch.setattr(driver, "cascade_by_estimate",
                        lambda graph, steps, resident, placed, place: (steps, placed))
    apart = compile_model(load_bytes(g.serialize()), edge)
    assert [layer.ops for layer in apart.layers] == [
        ["CONV2D", "RESCALE"], ["RESCALE", "RESCALE", "ADD", "RESCALE"]]
    assert got.report.cycles < simulate(apart, edge, timing_only=True).report.cycles


def test_estimate_keeps_no_cascade_that_loses_once_placed(monkeypatch):
    """A fusion is kept only where the fused step, placed anew (its room changes with its
    neighbours'), still beats the two apart: here its estimate there is made to fail, and
    after one retry without it the program keeps the conv apart."""
    from npu_sim.compiler import cascade
    real, placements, fused = cascade.step_estimate, [], []

    def estimate(placement, lowering, step, at):
        if not placements:
            placements.append(placement)        # where the estimates are first made
        if step.producer is not None:
            fused.append(placement is placements[0])
            if placement is not placements[0]:
                return float("inf")
        return real(placement, lowering, step, at)

    monkeypatch.setattr(cascade, "step_estimate", estimate)
    g = _projection_block(np.random.default_rng(5500), 16, 56, 96, 24)
    program = compile_model(load_bytes(g.serialize()), load_config("edge-256"))
    assert fused == [True, False]           # chosen where first placed, refused placed anew
    assert [layer.ops for layer in program.layers] == [
        ["CONV2D", "RESCALE"], ["RESCALE", "RESCALE", "ADD", "RESCALE"]]


def test_cascade_left_apart_where_its_program_passes_the_command_limit(monkeypatch):
    """A cascaded conv's tiles are smaller, so its program may pass the limit of commands
    where the convs apart do not: the compiler then lowers the steps as placed before the
    estimate folded them in, and says nothing; where that passes the limit too, the error
    names the layer."""
    from npu_sim.compiler import driver
    from npu_sim.compiler.emit import CommandLimit
    real, calls = driver._program, []

    def program(graph, config, model_name, steps, placed):
        calls.append([step.producer is not None for step in steps])
        if any(calls[-1]):
            raise CommandLimit(steps[-1].output)
        return real(graph, config, model_name, steps, placed)

    monkeypatch.setattr(driver, "_program", program)
    g = _projection_block(np.random.default_rng(5500), 16, 56, 96, 24)
    edge = load_config("edge-256")
    apart = compile_model(load_bytes(g.serialize()), edge)
    assert calls == [[True], [False, False]]
    assert [layer.ops for layer in apart.layers] == [
        ["CONV2D", "RESCALE"], ["RESCALE", "RESCALE", "ADD", "RESCALE"]]
    got = simulate(apart, edge, inputs=dict(g.input_values)).outputs
    expected = g.run()
    assert all(np.array_equal(np.asarray(got[n]), expected[n]) for n in g.output_names)
    monkeypatch.setattr(driver, "MAX_COMMANDS", 10)
    monkeypatch.setattr(driver, "MACS_PER_COMMAND", 1 << 60)
    monkeypatch.setattr(driver, "_program", real)
    with pytest.raises(DoesNotFitError, match="layer '.+': the program passes 10 commands"):
        compile_model(load_bytes(g.serialize()), edge)


def test_cascade_left_apart_where_the_fused_steps_do_not_fit_placed_anew(monkeypatch):
    """Folding a conv into its chain keeps the conv's input alive until the chain: where the
    steps placed anew do not fit, the compiler keeps the convs apart, as first placed."""
    from npu_sim.compiler import driver
    real, calls = driver._place, []

    def place(graph, steps, config, searches=None, pipelined=frozenset()):
        calls.append(any(step.producer is not None for step in steps))
        if calls[-1]:
            raise DoesNotFitError("the fused steps' feature maps do not fit")
        return real(graph, steps, config, searches, pipelined)

    monkeypatch.setattr(driver, "_place", place)
    g = _projection_block(np.random.default_rng(5500), 16, 56, 96, 24)
    program = compile_model(load_bytes(g.serialize()), load_config("edge-256"))
    assert calls == [False, True]
    assert [layer.ops for layer in program.layers] == [
        ["CONV2D", "RESCALE"], ["RESCALE", "RESCALE", "ADD", "RESCALE"]]
