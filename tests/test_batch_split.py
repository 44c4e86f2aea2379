"""Attention split head by head (compiler/batch_split.py): where a transformer's attention
does not stay on chip whole but one head's tensors do, each head gets its own copy of the
region, pipelined so the array computes the next head's scores while the vector unit runs
this one's softmax. Bit-exact against the reference model, faster than the region whole, and
left whole where it fits, where a head does not fit, or where the estimate gains too little."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tosa_serializer as ts

from npu_sim import api, zoo
from npu_sim.compiler import batch_split, driver, placement
from npu_sim.compiler.ir import Operator, Tensor
from npu_sim.compiler.loader import load_bytes
from npu_sim.config import parse_overrides
from oracle import DType, GraphBuilder, assert_matches_reference
from ops_sim_support import _attr, clamp_attr, conv_attr, mac_stage, rand, scalar, shape_const

# 64 tokens, 4 heads of 32: the attention's tensors take about 110 KB whole, 28 KB a head
ENCODER = dict(tokens=64, d_model=128, heads=4, d_ff=256, layers=1)


@pytest.fixture(scope="module")
def encoder() -> bytes:
    return zoo.build("transformer", **ENCODER)[0]


def _config(sram: str, preset: str = "default"):
    return api.load_config(preset).with_overrides(parse_overrides([f"sram.size={sram}"]))


def _compile(tosa: bytes, cfg):
    return api.compile_model(load_bytes(tosa, "net.tosa"), cfg, use_cache=False)


def _heads(program) -> int:
    return sum("::head" in layer.name for layer in program.layers)


def _split_by_force(tosa: bytes, cfg, monkeypatch):
    """The program with every qualifying region split, whatever its size or estimate."""
    monkeypatch.setattr(driver, "SPLIT_GAIN", -10.0)
    monkeypatch.setattr(batch_split, "_peak_bytes",
                        lambda graph, region, axes, batch, entries: 1 if entries == 1 else 1 << 40)
    program = _compile(tosa, cfg)
    assert _heads(program) > 0
    return program


def test_a_spilling_attention_is_split_bit_exact_and_faster(encoder, monkeypatch):
    cfg = _config("64KiB")
    program = _compile(encoder, cfg)
    # the region's seven layers (K's transpose, the scores, the softmax's max, exponentials
    # with the max's rescale, sum and probabilities with the sum's reciprocal, the context)
    # and the three convs computing Q, K and V, once a head
    assert _heads(program) == 4 * 10
    assert not any(layer.name == "layer0_attn_qkv_rescale" for layer in program.layers)
    inputs = api.random_inputs(program, seed=3)
    split = api.simulate(program, cfg, inputs)
    assert_matches_reference(encoder, inputs, split.outputs)
    monkeypatch.setattr(driver, "split_batches", lambda graph, resident: (graph, frozenset()))
    whole = _compile(encoder, cfg)
    assert _heads(whole) == 0
    assert split.report.cycles < 0.95 * api.simulate(whole, cfg, timing_only=True).report.cycles


def test_the_heads_overlap_on_the_two_engines(encoder):
    """Some head's MATMUL runs while the vector unit runs another head's softmax."""
    cfg = _config("64KiB")
    program = _compile(encoder, cfg)
    sim = api.simulate(program, cfg, timing_only=True).sim
    heads = {i for i, layer in enumerate(program.layers) if "::head" in layer.name}
    spans = {unit: [(sim.start[c.id], sim.end[c.id]) for c in program.commands
                    if c.layer in heads and getattr(c, "unit", None) == unit]
             for unit in ("mac", "vector")}
    assert any(a < d and c < b for a, b in spans["mac"] for c, d in spans["vector"])


def test_pipelined_buffers_wait_for_their_engine(monkeypatch):
    """Kept until their reader's engine moves on, the heads' buffers are not written over by
    the other engine's steps meanwhile, which would make the array wait for the vector unit
    (or the reverse): without that the same split runs slower (8 heads on 128 KiB; where
    the buffer is tighter still, keeping them longer can cost more room than it saves)."""
    tosa = zoo.build("transformer", tokens=64, d_model=256, heads=8, d_ff=512, layers=1)[0]
    cfg = _config("128KiB")
    program = _compile(tosa, cfg)
    assert _heads(program) > 0
    kept = api.simulate(program, cfg, timing_only=True).report.cycles
    monkeypatch.setattr(placement, "_overlapped", lambda *args: None)
    assert api.simulate(_compile(tosa, cfg), cfg, timing_only=True).report.cycles > kept


@pytest.mark.parametrize("sram", ["1MiB", "16KiB"])
def test_left_whole_where_it_fits_or_a_head_does_not(encoder, sram):
    """On 1 MiB the whole attention stays on chip; on 16 KiB (8 KiB resident) not even one
    head's tensors do: either way splitting would only multiply the steps."""
    assert _heads(_compile(encoder, _config(sram))) == 0


def test_left_whole_where_the_estimate_gains_too_little(encoder, monkeypatch):
    """On large-8k's array with 64 KiB the region spills: the pipeline's estimate saves
    less than SPLIT_GAIN of it, and the split, forced, is slower in the simulator too."""
    cfg = _config("64KiB", "large-8k")
    whole = _compile(encoder, cfg)
    assert _heads(whole) == 0
    monkeypatch.setattr(driver, "SPLIT_GAIN", -1.0)
    forced = _compile(encoder, cfg)
    assert _heads(forced) > 0
    assert api.simulate(forced, cfg, timing_only=True).report.cycles > \
        api.simulate(whole, cfg, timing_only=True).report.cycles


def _region_of(ops_builder) -> list | None:
    graph = load_bytes(ops_builder.serialize(), "g.tosa")
    seed = next(o for o in graph.operators if o.op == "MATMUL")
    found = batch_split._region(graph, seed)
    return None if found is None else found[0]


def test_a_region_that_leaves_and_comes_back_is_not_split():
    """A batched MATMUL, its rows' maximum and the difference from it form a region; with the
    maximum going through two TRANSPOSEs (outside the region: the first puts the batch on
    an inner axis) into the difference, the region would need its own output before its
    copies ran: it is not split."""
    rng = np.random.default_rng(7)
    for reenter in (False, True):
        g = GraphBuilder()
        a = g.tensor([4, 8, 16], DType.INT8, rng.integers(-50, 50, (4, 8, 16)).astype(np.int8))
        b = g.tensor([4, 16, 8], DType.INT8, rng.integers(-50, 50, (4, 16, 8)).astype(np.int8))
        zero = scalar(g, 0, DType.INT8)
        scores = g.intermediate([4, 8, 8], DType.INT32)
        g.op("MATMUL", [a, b, zero, zero], [scores])
        top = g.intermediate([4, 8, 1], DType.INT32)
        g.op("REDUCE_MAX", [scores], [top],
             _attr("ReduceMaxAttribute", 2, ts.NanPropagationMode.PROPAGATE))
        other = top
        if reenter:
            inner = g.intermediate([8, 4, 1], DType.INT32)
            g.op("TRANSPOSE", [top], [inner], _attr("TransposeAttribute", [1, 0, 2]))
            other = g.intermediate([4, 8, 1], DType.INT32)
            g.op("TRANSPOSE", [inner], [other], _attr("TransposeAttribute", [1, 0, 2]))
        out = g.output([4, 8, 8], DType.INT32)
        g.op("SUB", [scores, other], [out])
        region = _region_of(g)
        if reenter:
            assert region is None
        else:
            assert [o.op for o in region] == ["MATMUL", "REDUCE_MAX", "SUB"]


def _scores_and_shift(g: GraphBuilder, q: str, k: str, batch: int, tokens: int,
                      output: bool = True) -> str:
    """A batched MATMUL, its rows' maximum and the difference from it (a graph output, or
    with output=False an intermediate)."""
    zero = scalar(g, 0, DType.INT8)
    scores = g.intermediate([batch, tokens, tokens], DType.INT32)
    g.op("MATMUL", [q, k, zero, zero], [scores])
    top = g.intermediate([batch, tokens, 1], DType.INT32)
    g.op("REDUCE_MAX", [scores], [top],
         _attr("ReduceMaxAttribute", 2, ts.NanPropagationMode.PROPAGATE))
    out = (g.output if output else g.intermediate)([batch, tokens, tokens], DType.INT32)
    g.op("SUB", [scores, top], [out])
    return out


def test_two_regions_share_their_input_slices_and_take_no_name_twice(monkeypatch):
    """Two split regions reading the same Q slice it once, and a tensor of the file already
    named like a slice keeps its own producer: every tensor has one, and the outputs match
    the reference model."""
    from dataclasses import replace
    monkeypatch.setattr(driver, "SPLIT_GAIN", -1.0)
    rng = np.random.default_rng(11)
    g = GraphBuilder()
    q = g.tensor([4, 64, 32], DType.INT8, rng.integers(-128, 128, (4, 64, 32)))
    k1, k2 = (g.tensor([4, 32, 64], DType.INT8, rng.integers(-128, 128, (4, 32, 64)))
              for _ in range(2))
    _scores_and_shift(g, q, k1, 4, 64)
    _scores_and_shift(g, q, k2, 4, 64)
    x = g.tensor([2, 3], DType.INT8, rng.integers(-128, 128, (2, 3)))
    y = g.output([2, 3], DType.INT8)
    g.op("CLAMP", [x], [y], clamp_attr(DType.INT8, -50, 50))
    tosa = g.serialize()
    graph = load_bytes(tosa, "net.tosa")
    taken = f"{q}::head1"          # the CLAMP's input, renamed as a slice of q would be
    graph.tensors[taken] = replace(graph.tensors.pop(x), name=taken)
    graph.inputs = [taken if n == x else n for n in graph.inputs]
    for op in graph.operators:
        op.inputs = [taken if n == x else n for n in op.inputs]
    cfg = _config("64KiB")
    split, names = batch_split.split_batches(graph, driver.resident_share(cfg))
    assert names and split is not graph
    producers = [n for op in split.operators for n in op.outputs]
    assert len(producers) == len(set(producers))
    assert sum(op.op == "SLICE" and op.inputs[0] == q for op in split.operators) == 4
    program = api.compile_model(graph, cfg, use_cache=False)
    assert _heads(program) > 0
    inputs = {**g.input_values}
    inputs[taken] = inputs.pop(x)
    result = api.simulate(program, cfg, inputs)
    assert_matches_reference(tosa, g.input_values, result.outputs)


def test_a_graph_with_variables_is_left_whole(encoder):
    """A variable's reads and writes are ordered by the operators' order alone: re-sorting
    the graph around a split could move a read after the write (the state read back would
    be the new one), so such a graph is not split."""
    graph = load_bytes(encoder, "net.tosa")
    state = Tensor("state", (1,), "int8", np.zeros(1, np.int8), variable=True)
    graph.tensors["state"] = state
    graph.operators.insert(0, Operator("VARIABLE_READ", ["state"], ["state_now"],
                                       {"variable_read": True}))
    graph.tensors["state_now"] = Tensor("state_now", (1,), "int8")
    assert batch_split.split_batches(graph, driver.resident_share(_config("64KiB"))) == \
        (graph, frozenset())


def test_executorch_attention_splits_through_its_reshapes(monkeypatch):
    """ExecuTorch's attention views its scores 4-D for the softmax and back: the region
    follows the batch through both RESHAPEs, and split (forced: on this 16-token block the
    estimate would keep it whole) it is bit-exact."""
    tosa = (Path(__file__).parent / "data" / "attn_block" / "model.tosa").read_bytes()
    graph = load_bytes(tosa, "attn_block.tosa")
    region, axes = batch_split._region(graph, next(o for o in graph.operators
                                                   if o.op == "MATMUL"))
    assert [o.op for o in region].count("RESHAPE") == 2
    assert [o.op for o in region][-2:] == ["MATMUL", "RESCALE"]
    assert sorted(set(axes.values())) == [0, 1]          # the 4-D view has heads on axis 1
    cfg = api.load_config("default")
    program = _split_by_force(tosa, cfg, monkeypatch)
    inputs = api.random_inputs(program, seed=4)
    assert_matches_reference(tosa, inputs, api.simulate(program, cfg, inputs).outputs)
    monkeypatch.setattr(driver, "_heads_computing", _computing_by_force)
    program = _split_by_force(tosa, cfg, monkeypatch)
    # each head's Q, K and V convs (compiler/head_source.py), through the 5-D views
    assert sum(layer.name.endswith("::rescale") for layer in program.layers) == 2 * 3
    assert_matches_reference(tosa, inputs, api.simulate(program, cfg, inputs).outputs)


def _computing_by_force(computing, config, resident, split):
    """driver._heads_computing that takes the heads computing their inputs where any do."""
    graph, pipelined = computing
    if pipelined == split[3]:
        return split
    return (graph, *driver._steps_placed(graph, config, resident, pipelined), pipelined)


@pytest.mark.parametrize("seed", range(6))
def test_random_regions_split_by_force_match_the_reference(seed, monkeypatch):
    """Random batch-local regions, split by force: a batched MATMUL, its rows' maximum and
    the difference (viewed 4-D with the batch on axis 1, or not), a broadcast constant
    added, a second MATMUL of the narrowed result (or not), and outputs read inside the
    region as well as outside it; bit-exact against the reference model."""
    rng = np.random.default_rng(8100 + seed)
    batch, rows, depth = int(rng.integers(2, 5)), int(rng.integers(2, 9)), int(rng.integers(1, 9))
    g = GraphBuilder()
    zero = scalar(g, 0, DType.INT8)
    q = g.tensor([batch, rows, depth], DType.INT8, rand(rng, DType.INT8, (batch, rows, depth)))
    k = g.tensor([batch, depth, rows], DType.INT8, rand(rng, DType.INT8, (batch, depth, rows)))
    scores = g.output([batch, rows, rows], DType.INT32)        # read inside the region too
    g.op("MATMUL", [q, k, zero, zero], [scores])
    view = scores
    four_d = bool(seed % 2)
    if four_d:
        view = g.intermediate([1, batch, rows, rows], DType.INT32)
        g.op("RESHAPE", [scores, shape_const(g, [1, batch, rows, rows])], [view])
    shape = [1, batch, rows, rows] if four_d else [batch, rows, rows]
    axis = len(shape) - 1
    top = g.intermediate(shape[:-1] + [1], DType.INT32)
    g.op("REDUCE_MAX", [view], [top],
         _attr("ReduceMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE))
    shifted = g.intermediate(shape, DType.INT32)
    g.op("SUB", [view, top], [shifted])
    bias = g.tensor([1] * (len(shape) - 1) + [rows], DType.INT32,
                    rand(rng, DType.INT32, [1] * (len(shape) - 1) + [rows], -99, 99),
                    is_const=True)
    biased = g.intermediate(shape, DType.INT32)
    g.op("ADD", [shifted, bias], [biased])
    back = biased
    if four_d:
        back = g.intermediate([batch, rows, rows], DType.INT32)
        g.op("RESHAPE", [biased, shape_const(g, [batch, rows, rows])], [back])
    narrow = g.intermediate([batch, rows, rows], DType.INT8)
    g.op("CAST", [back], [narrow])
    if seed % 3:
        v = g.tensor([batch, rows, depth], DType.INT8, rand(rng, DType.INT8, (batch, rows, depth)))
        context = g.output([batch, rows, depth], DType.INT32)
        g.op("MATMUL", [narrow, v, zero, zero], [context])
    else:
        out = g.output([batch, rows, rows], DType.INT8)
        g.op("CLAMP", [narrow], [out], clamp_attr(DType.INT8, -100, 100))
    tosa = g.serialize()
    cfg = api.load_config("default")
    program = _split_by_force(tosa, cfg, monkeypatch)
    result = api.simulate(program, cfg, dict(g.input_values))
    assert_matches_reference(tosa, dict(g.input_values), result.outputs)


def _slicing_their_inputs(computing, config, resident, split):
    """driver._heads_computing that keeps the split slicing the heads' inputs."""
    return split


def test_heads_computing_their_inputs_beat_heads_slicing_them(encoder, monkeypatch):
    """Each head's Q, K and V from its own convs (compiler/head_source.py): the array computes
    the next head's while the vector unit runs this one's softmax, instead of all of them
    before the first softmax."""
    cfg = _config("64KiB")
    computing = api.simulate(_compile(encoder, cfg), cfg, timing_only=True).report.cycles
    monkeypatch.setattr(driver, "_heads_computing", _slicing_their_inputs)
    slicing = _compile(encoder, cfg)
    assert any(layer.name == "layer0_attn_qkv_rescale" for layer in slicing.layers)
    assert computing < 0.97 * api.simulate(slicing, cfg, timing_only=True).report.cycles


def _executorch_graph():
    graph = load_bytes((Path(__file__).parent / "data" / "attn_block" / "model.tosa").read_bytes(),
                       "model.tosa")
    driver.rewrite_operators(graph)
    return graph


def test_a_head_source_is_found_through_views_transposes_and_slices():
    """ExecuTorch's attention lays its QKV conv's 96 channels out as [3, 1, 2, 16, 16] (q, k,
    v by 2 heads by 16) through 5-D views, transposes and a slice each; K's is transposed."""
    from npu_sim.compiler.head_source import per_head_source
    graph = _executorch_graph()
    seed = next(o for o in graph.operators if o.op == "MATMUL")
    region, axes = batch_split._region(graph, seed)
    found = {}
    for name in axes:
        if name not in {o.outputs[0] for o in region} and not graph.tensors[name].is_const:
            source = per_head_source(graph, name, axes[name], 2)
            if source is not None:
                found[(source.first, source.width)] = source.transposed
    assert found == {(0, 16): False, (32, 16): True, (64, 16): False}   # Q, K^T, V


@pytest.mark.parametrize("layout,found", [((16, 2, 8), True), ((16, 8, 2), False)])
def test_a_head_source_needs_each_heads_channels_in_one_block(layout, found):
    """[16, 1, 1, 16] viewed as 16 x (2 heads x 8) gives each head a block of 8 channels;
    as 16 x (8 x 2 heads), a head's channels are every other one: no conv of a block."""
    from npu_sim.compiler.head_source import per_head_source
    rng = np.random.default_rng(8300)
    g = GraphBuilder()
    x = g.tensor([16, 1, 1, 8], DType.INT8, rand(rng, DType.INT8, (16, 1, 1, 8)))
    acc = g.intermediate([16, 1, 1, 16], DType.INT32)
    g.op("CONV2D", [x, g.tensor([16, 1, 1, 8], DType.INT8, rand(rng, DType.INT8, (16, 1, 1, 8)),
                                is_const=True),
                    g.tensor([16], DType.INT32, np.zeros(16, np.int32), is_const=True),
                    scalar(g, 0, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr((0, 0, 0, 0), (1, 1), (1, 1)))
    fc = mac_stage(g, rng, acc, np.array([8 * 128 * 128]), [16, 1, 1, 16], mode="rescale",
                   output=False)
    view = g.intermediate(list(layout), DType.INT8)
    g.op("RESHAPE", [fc, shape_const(g, list(layout))], [view])
    heads_first = [2, 16, 8]
    perms = (1, 0, 2) if layout == (16, 2, 8) else (2, 0, 1)
    heads = g.output(heads_first, DType.INT8)
    g.op("TRANSPOSE", [view], [heads], _attr("TransposeAttribute", list(perms)))
    graph = load_bytes(g.serialize(), "g.tosa")
    assert (per_head_source(graph, heads, 0, 2) is not None) == found


def test_two_regions_reading_one_convs_heads_leave_no_whole_conv(monkeypatch):
    """Two regions read the same Q, K^T and V of one conv: the heads compute them once, and
    the whole conv, read by neither any more, is gone (it had run for nothing)."""
    rng = np.random.default_rng(8400)
    heads, dim, tokens = 2, 8, 16
    g = GraphBuilder()
    x = g.tensor([tokens, 1, 1, 16], DType.INT8, rand(rng, DType.INT8, (tokens, 1, 1, 16)))
    acc = g.intermediate([tokens, 1, 1, 3 * heads * dim], DType.INT32)
    g.op("CONV2D", [x, g.tensor([3 * heads * dim, 1, 1, 16], DType.INT8,
                                rand(rng, DType.INT8, (3 * heads * dim, 1, 1, 16)), is_const=True),
                    g.tensor([3 * heads * dim], DType.INT32, np.zeros(3 * heads * dim, np.int32),
                             is_const=True),
                    scalar(g, 0, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr((0, 0, 0, 0), (1, 1), (1, 1)))
    qkv = mac_stage(g, rng, acc, np.array([16 * 128 * 128]), [tokens, 1, 1, 3 * heads * dim],
                    mode="rescale", output=False)
    split4 = g.intermediate([tokens, 3, heads, dim], DType.INT8)
    g.op("RESHAPE", [qkv, shape_const(g, [tokens, 3, heads, dim])], [split4])
    heads_first = g.intermediate([3, heads, tokens, dim], DType.INT8)
    g.op("TRANSPOSE", [split4], [heads_first], _attr("TransposeAttribute", [1, 2, 0, 3]))
    parts = []
    for i in range(3):
        part = g.intermediate([1, heads, tokens, dim], DType.INT8)
        g.op("SLICE", [heads_first, shape_const(g, [i, 0, 0, 0]),
                       shape_const(g, [1, heads, tokens, dim])], [part])
        entry = g.intermediate([heads, tokens, dim], DType.INT8)
        g.op("RESHAPE", [part, shape_const(g, [heads, tokens, dim])], [entry])
        parts.append(entry)
    q, k, v = parts
    kt = g.intermediate([heads, dim, tokens], DType.INT8)
    g.op("TRANSPOSE", [k], [kt], _attr("TransposeAttribute", [0, 2, 1]))
    zero = scalar(g, 0, DType.INT8)
    for _ in range(2):
        shifted = _scores_and_shift(g, q, kt, heads, tokens, output=False)
        narrow = g.intermediate([heads, tokens, tokens], DType.INT8)
        g.op("CAST", [shifted], [narrow])
        g.op("MATMUL", [narrow, v, zero, zero], [g.output([heads, tokens, dim], DType.INT32)])
    tosa = g.serialize()
    monkeypatch.setattr(batch_split, "_peak_bytes",
                        lambda graph, region, axes, batch, entries: 1 if entries == 1 else 1 << 40)
    split, _ = batch_split.split_batches(load_bytes(tosa, "g.tosa"), 2, from_convs=True)
    assert [op.op for op in split.operators].count("CONV2D") == 3 * heads
    assert not any(op.op == "CONV2D" and op.outputs[0] == acc for op in split.operators)
    cfg = api.load_config("default")
    monkeypatch.setattr(driver, "_heads_computing", _computing_by_force)
    program = _split_by_force(tosa, cfg, monkeypatch)
    assert sum(layer.name.endswith("::rescale") for layer in program.layers) == 3 * heads
    assert_matches_reference(tosa, dict(g.input_values),
                             api.simulate(program, cfg, dict(g.input_values)).outputs)
