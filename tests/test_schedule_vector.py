"""Vector-unit work on the path between MAC layers, as attention and layer norms make it:
on-chip transposes by the vector unit's permute, elementwise chains computed inside the
reductions that read them, heads streamed whole from a batched matmul, widening rescales as
casts; each compared with the same compiler without it, bit-exact."""
import json

import numpy as np

from npu_sim import api, zoo
from npu_sim.compiler import cascade as compiler_cascade
from npu_sim.compiler import lower as compiler_lower
from npu_sim.compiler.loader import load_bytes
from npu_sim.compiler.lowering import elementwise as compiler_elementwise
from ops_sim_support import _attr, rand, rescale
from oracle import DType, GraphBuilder, run_reference


def _compile(tosa: bytes, cfg):
    return api.compile_model(load_bytes(tosa, "net.tosa"), cfg)


def _timing(program, cfg):
    return api.simulate(program, cfg, timing_only=True).report


def test_an_on_chip_transpose_of_short_runs_is_a_vector_permute(monkeypatch):
    """K's transpose for the attention scores gathers one-byte runs: on chip, the vector unit
    moves it a word per lane where the DMA pays a bank access per byte. Same outputs, faster."""
    cfg = api.load_config("default")
    tosa = zoo.build("transformer")[0]
    program = _compile(tosa, cfg)
    k_t = next(i for i, layer in enumerate(program.layers) if layer.name == "layer0_attn_k_t")
    assert [getattr(c, "op", "dma") for c in program.commands if c.layer == k_t] == ["permute"]
    inputs = api.random_inputs(program, seed=1)
    permuted = api.simulate(program, cfg, inputs)
    monkeypatch.setattr(compiler_lower, "permute_cycles", lambda *a: float("inf"))
    copied = api.simulate(_compile(tosa, cfg), cfg, inputs)
    assert permuted.report.cycles < copied.report.cycles
    for name, value in copied.outputs.items():
        np.testing.assert_array_equal(permuted.outputs[name], value)


def test_an_elementwise_chain_is_computed_inside_the_reduction_reading_it(monkeypatch):
    """A layer norm's int32 rescale before its sum, too large for edge-256's buffer, would be
    written to system SRAM and read back; computed tile by tile inside the sum it is not."""
    g = GraphBuilder()
    x = rand(np.random.default_rng(5), DType.INT8, (1, 64, 512))
    wide, out = g.intermediate([1, 64, 512], DType.INT32), g.output([1, 64, 1], DType.INT32)
    g.op("CAST", [g.tensor([1, 64, 512], DType.INT8, x)], [wide])
    g.op("REDUCE_SUM", [wide], [out], _attr("ReduceSumAttribute", 2))
    tosa, cfg = g.serialize(), api.load_config("edge-256")
    program = _compile(tosa, cfg)
    assert [layer.ops for layer in program.layers] == [["CAST", "REDUCE_SUM"]]
    inputs = api.random_inputs(program, seed=1)
    fused = api.simulate(program, cfg, inputs)
    name = program.outputs[0].name
    assert np.array_equal(fused.outputs[name], run_reference(tosa, inputs, [name])[name])
    monkeypatch.setattr(compiler_cascade, "_reduced", lambda *args: False)
    assert fused.report.cycles < _timing(_compile(tosa, cfg), cfg).cycles


def test_a_batched_matmul_streams_whole_heads_to_its_reader():
    """Attention scores [heads, tokens, tokens] tiled by heads: each tile's output is one run,
    so the softmax's max starts on the first heads while the array computes the rest (tiles
    of a few rows of every head span the whole tensor, and it waited for all of them)."""
    cfg = api.load_config("default")
    program = _compile(zoo.build("transformer", tokens=128, d_model=256, heads=4, d_ff=512,
                                 layers=1)[0], cfg)
    scores = next(i for i, layer in enumerate(program.layers)
                  if layer.name == "layer0_attn_scores_rescale")
    assert {c.outputs["ofm"].shape for c in program.commands
            if c.layer == scores and getattr(c, "op", "") == "matmul"} == {(1, 128, 128)}
    rows = {row.name: row for row in _timing(program, cfg).layers}
    assert rows["layer0_attn_max"].compute_start < rows["layer0_attn_scores_rescale"].end


def test_a_rescale_that_only_widens_is_a_cast(monkeypatch):
    """int8 to int32 at scale 1 (multiplier 1 << shift) and zero points 0, as a layer norm
    widens its centred values: a sign extension, one lane cycle an element, not a rescale's
    two. A zero point kept makes it a rescale still."""
    g = GraphBuilder()
    shape = (1, 64, 768)
    x = g.tensor(shape, DType.INT8, rand(np.random.default_rng(4), DType.INT8, shape))
    rescale(g, x, shape, DType.INT8, DType.INT32, 1 << 30, 30)
    rescale(g, x, shape, DType.INT8, DType.INT32, 1 << 30, 30, izp=-1)
    tosa, cfg = g.serialize(), api.load_config("default")
    program = _compile(tosa, cfg)
    fns = [json.loads(c.attrs["program"])[0]["fn"] for c in program.commands
           if getattr(c, "op", "") == "elementwise"]
    assert set(fns[:len(fns) // 2]) == {"CAST"} and set(fns[len(fns) // 2:]) == {"RESCALE"}
    inputs = api.random_inputs(program, seed=1)
    result = api.simulate(program, cfg, inputs)
    names = [b.name for b in program.outputs]
    expected = run_reference(tosa, inputs, names)
    assert all(np.array_equal(result.outputs[n], expected[n]) for n in names)
    monkeypatch.setattr(compiler_elementwise, "widening_copy", lambda *args: False)
    busy = [r.engines["vector"]["busy_cycles"]
            for r in (result.report, _timing(_compile(tosa, cfg), cfg))]
    assert busy[0] < busy[1]
