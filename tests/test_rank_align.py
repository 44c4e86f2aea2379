"""Elementwise chains take the shape of the conv output they read (compiler/rank_align.py):
a transformer's residual adds, computed in 3-D on its FC layers' 4-D outputs, are rewritten
into the convs' shape so they can run inside the convs' tiles. Bit-exact against the
reference model, faster on an encoder, and left alone where the view reorders the elements."""
from __future__ import annotations

import numpy as np
import pytest

from npu_sim import api, zoo
from npu_sim.compiler import driver
from npu_sim.compiler.loader import load_bytes
from npu_sim.compiler.rank_align import align_to_conv_views
from npu_sim.config import parse_overrides
from oracle import DType, GraphBuilder, assert_matches_reference
from ops_sim_support import _attr, conv_attr, mac_stage, rand, rescale, scalar, shape_const


def _compile(tosa: bytes, cfg):
    return api.compile_model(load_bytes(tosa, "net.tosa"), cfg, use_cache=False)


def test_an_encoders_residual_adds_ride_its_fc_layers(monkeypatch):
    tosa = zoo.build("transformer", tokens=128, d_model=256, heads=4, d_ff=512, layers=1)[0]
    cfg = api.load_config("default").with_overrides(parse_overrides(["sram.size=512KiB"]))
    program = _compile(tosa, cfg)
    riding = [layer.ops for layer in program.layers if "CONV2D" in layer.ops and "ADD" in layer.ops]
    assert riding == [["CONV2D", "RESCALE", "RESCALE", "RESCALE", "ADD", "RESCALE"]] * 2
    inputs = api.random_inputs(program, seed=4)
    result = api.simulate(program, cfg, inputs)
    assert_matches_reference(tosa, inputs, result.outputs)
    monkeypatch.setattr(driver, "align_to_conv_views", lambda graph: 0)
    apart = _compile(tosa, cfg)
    assert not any("CONV2D" in layer.ops and "ADD" in layer.ops for layer in apart.layers)
    assert result.report.cycles < 0.97 * api.simulate(apart, cfg, timing_only=True).report.cycles


def _conv(g, rng, shape, channels_in=32):
    """A 1x1 int8 CONV2D of a new graph input into accumulators of `shape` (NHWC), with its
    output stage (RESCALE to int8)."""
    n, h, w, c = shape
    x = g.tensor([n, h, w, channels_in], DType.INT8, rand(rng, DType.INT8, (n, h, w, channels_in)))
    acc = g.intermediate(list(shape), DType.INT32)
    g.op("CONV2D", [x, g.tensor([c, 1, 1, channels_in], DType.INT8,
                                rand(rng, DType.INT8, (c, 1, 1, channels_in)), is_const=True),
                    g.tensor([c], DType.INT32, np.zeros(c, np.int32), is_const=True),
                    scalar(g, 0, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr((0, 0, 0, 0), (1, 1), (1, 1)))
    return mac_stage(g, rng, acc, np.array([channels_in * 128 * 128]), list(shape),
                     mode="rescale", output=False)


def _run_bit_exact(g: GraphBuilder, cfg_name: str = "default"):
    tosa = g.serialize()
    cfg = api.load_config(cfg_name)
    program = _compile(tosa, cfg)
    result = api.simulate(program, cfg, dict(g.input_values))
    assert_matches_reference(tosa, dict(g.input_values), result.outputs)
    return program


def _fc_then_add(rng, tokens: int, channels: int, view: list[int]) -> GraphBuilder:
    """A 1x1 conv over `tokens` rows ([tokens, 1, 1, channels]) viewed as `view`, plus a
    graph input and a broadcast constant; the sum is a graph output and is also summed over
    its last axis (a layer norm's first step) and squared."""
    g = GraphBuilder()
    fc = _conv(g, rng, (tokens, 1, 1, channels), channels)
    seen = g.intermediate(view, DType.INT8)
    g.op("RESHAPE", [fc, shape_const(g, view)], [seen])
    other = g.tensor(view, DType.INT8, rand(rng, DType.INT8, view))
    wide = [g.intermediate(view, DType.INT32) for _ in range(2)]
    g.op("CAST", [seen], [wide[0]])
    g.op("CAST", [other], [wide[1]])
    bias_shape = [1] * (len(view) - 1) + [view[-1]]
    bias = g.tensor(bias_shape, DType.INT32, rand(rng, DType.INT32, bias_shape, -99, 99),
                    is_const=True)
    biased = g.intermediate(view, DType.INT32)
    g.op("SUB", [wide[0], bias], [biased])
    total = g.output(view, DType.INT32)
    g.op("ADD", [biased, wide[1]], [total])
    scaled = g.output(view, DType.INT32)
    g.op("MUL", [total, total, scalar(g, 0, DType.INT8)], [scaled])
    summed = g.output(view[:-1] + [1], DType.INT32)
    g.op("REDUCE_SUM", [total], [summed], _attr("ReduceSumAttribute", len(view) - 1))
    return g


@pytest.mark.parametrize("view", [[1, 16, 32], [16, 32], [1, 1, 16, 32]])
def test_a_chain_on_a_conv_view_is_rewritten_bit_exact(view):
    rng = np.random.default_rng(9100 + len(view))
    g = _fc_then_add(rng, 16, 32, view)
    graph = load_bytes(g.serialize(), "net.tosa")
    assert align_to_conv_views(graph) == 1
    shapes = {op.op: graph.tensors[op.outputs[0]].shape for op in graph.operators}
    assert shapes["CAST"] == shapes["SUB"] == shapes["ADD"] == (16, 1, 1, 32)
    assert shapes["MUL"] == tuple(view)         # a chain of its own: the sum is read twice
    for name in g.output_names:          # the graph's outputs keep their names and shapes
        assert graph.tensors[name].shape in (tuple(view), tuple(view[:-1]) + (1,))
    _run_bit_exact(g)


@pytest.mark.parametrize("view", [[8, 64], [1, 32, 16], [16, 32, 1]])
def test_a_view_that_moves_the_channels_is_left_alone(view):
    """[16, 1, 1, 32] as [8, 64] pairs rows, as [1, 32, 16] splits the channels, as
    [16, 32, 1] moves them off the last axis: the chain's per-channel operands would not
    line up with the conv's channels."""
    g = _fc_then_add(np.random.default_rng(9200), 16, 32, view)
    graph = load_bytes(g.serialize(), "net.tosa")
    before = [(op.op, list(op.inputs), list(op.outputs)) for op in graph.operators]
    assert align_to_conv_views(graph) == 0
    assert [(op.op, op.inputs, op.outputs) for op in graph.operators] == before


def test_a_rank0_view_of_a_one_channel_conv_compiles_bit_exact():
    rng = np.random.default_rng(9300)
    g = GraphBuilder()
    fc = _conv(g, rng, (1, 1, 1, 1), channels_in=4)
    seen = g.intermediate([], DType.INT8)
    g.op("RESHAPE", [fc, shape_const(g, [])], [seen])
    wide = g.intermediate([], DType.INT32)
    g.op("CAST", [seen], [wide])
    out = g.output([], DType.INT32)
    g.op("ADD", [wide, g.tensor([], DType.INT32, np.array(5, np.int32), is_const=True)], [out])
    _run_bit_exact(g)


def test_another_convs_output_stage_stays_with_its_conv():
    """The chain reads a view of one conv and, in its own shape, another conv's output: that
    conv's RESCALE is its output stage, not a member of the chain to rewrite."""
    rng = np.random.default_rng(9400)
    g = GraphBuilder()
    shape = [1, 16, 1, 32]
    seen = g.intermediate(shape, DType.INT8)
    g.op("RESHAPE", [_conv(g, rng, (16, 1, 1, 32)), shape_const(g, shape)], [seen])
    other = _conv(g, rng, tuple(shape))
    wide = [g.intermediate(shape, DType.INT32) for _ in range(2)]
    g.op("CAST", [seen], [wide[0]])
    g.op("CAST", [other], [wide[1]])
    g.op("ADD", wide, [g.output(shape, DType.INT32)])
    program = _run_bit_exact(g, "large-8k")
    assert [layer.ops for layer in program.layers].count(["CONV2D", "RESCALE"]) == 2


def test_a_conv_output_read_elsewhere_too_is_left_alone():
    """A cascade takes a conv into the one chain reading its output; read elsewhere too, the
    rewrite could only change the chain's tiles."""
    rng = np.random.default_rng(9500)
    g = GraphBuilder()
    fc = _conv(g, rng, (16, 1, 1, 32))
    seen = g.intermediate([1, 16, 32], DType.INT8)
    g.op("RESHAPE", [fc, shape_const(g, [1, 16, 32])], [seen])
    g.op("CAST", [seen], [g.output([1, 16, 32], DType.INT32)])
    g.op("CAST", [fc], [g.output([16, 1, 1, 32], DType.INT16)])
    graph = load_bytes(g.serialize(), "net.tosa")
    assert align_to_conv_views(graph) == 0


def test_a_broadcast_member_keeps_its_unit_dims_when_the_chain_is_rewritten():
    """A chain on a conv view with a per-token intermediate (a (1, T, 1) scale rescaled, then
    subtracted: compiler/chains.py takes it in) is rewritten into the conv's shape with that
    intermediate as (T, 1, 1, 1), not the whole (T, 1, 1, C): its RESCALE keeps the shape of
    its input, and the vector unit pays for T elements of it."""
    rng = np.random.default_rng(8100)
    tokens, channels = 24, 16
    g = GraphBuilder()
    fc = _conv(g, rng, (tokens, 1, 1, channels))
    view = [1, tokens, channels]
    seen = g.intermediate(view, DType.INT8)
    g.op("RESHAPE", [fc, shape_const(g, view)], [seen])
    s = g.tensor((1, tokens, 1), DType.INT32, rand(rng, DType.INT32, (1, tokens, 1), -1000, 1000))
    wide = rescale(g, seen, view, DType.INT8, DType.INT32, [1 << 30], [30], 3, 0, output=False)
    scaled = rescale(g, s, (1, tokens, 1), DType.INT32, DType.INT32, [1 << 30], [29],
                     output=False)
    centred = g.intermediate(view, DType.INT32)
    g.op("SUB", [wide, scaled], [centred])
    rescale(g, centred, view, DType.INT32, DType.INT8, [1 << 30], [32], 0, -5)
    graph = load_bytes(g.serialize(), "net.tosa")
    assert align_to_conv_views(graph) == 1
    assert graph.tensors[scaled].shape == (tokens, 1, 1, 1)
    assert all(graph.tensors[o.outputs[0]].shape == graph.tensors[o.inputs[0]].shape
               for o in graph.operators if o.op == "RESCALE")
    program = _run_bit_exact(g)
    chain = next(i for i, layer in enumerate(program.layers) if "SUB" in layer.ops)
    sim = api.simulate(program, api.load_config("default"), timing_only=True).sim
    work = [sim.costs[c.id].vector for c in program.commands
            if c.layer == chain and getattr(c, "unit", "") == "vector"]
    assert work == [{"rescale": 2 * tokens * channels + tokens, "add": tokens * channels}]
