"""Row handoffs between the MAC array and the vector unit (npu_sim/handoff.py): a command
reading the other engine's output starts on the rows already finished, never reads a row
before it is, stays bit-exact and hazard-free (the suite checks every run), and only where
it reads them in the order they are written."""
import json
from pathlib import Path

import numpy as np
import pytest

from npu_sim import api
from npu_sim.compiler.loader import load_bytes
from npu_sim.cost import CostModel
from npu_sim.handoff import handoff
from npu_sim.hazards import HazardChecker
from npu_sim.isa.commands import Compute, TensorView, dense
from npu_sim.isa.errors import ConfigError, HazardError
from npu_sim.isa.program import Layer, Program
from ops_sim_support import conv_attr, const, mac_stage, np_conv2d, rand, scalar
from oracle import DType, GraphBuilder


@pytest.fixture(scope="module")
def table_conv_table():
    """TABLE -> 1x1 CONV2D + RESCALE -> TABLE on 256 tokens of 32 channels: the array reads
    the vector unit's rows, then the vector unit the array's."""
    rng = np.random.default_rng(41)
    x = rand(rng, DType.INT8, (1, 256, 1, 32))
    t1, t2 = rand(rng, DType.INT8, (256,)), rand(rng, DType.INT8, (256,))
    wt = rand(rng, DType.INT8, (32, 1, 1, 32))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    mid = g.intermediate(x.shape, DType.INT8)
    g.op("TABLE", [xi, const(g, t1, DType.INT8)], [mid])
    acc = g.intermediate((1, 256, 1, 32), DType.INT32)
    g.op("CONV2D", [mid, const(g, wt, DType.INT8), const(g, np.zeros(32, np.int32), DType.INT32),
                    scalar(g, 0, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr((0, 0, 0, 0), (1, 1), (1, 1)))
    ref = np_conv2d(t1[x.astype(np.int64) + 128], wt, (0, 0, 0, 0), (1, 1), (1, 1), 0, 0)
    y = mac_stage(g, rng, acc, ref, ref.shape, mode="rescale", output=False)
    out = g.output(x.shape, DType.INT8)
    g.op("TABLE", [y, const(g, t2, DType.INT8)], [out])
    return g.serialize(), dict(g.input_values), g.run(), out


def _run(tosa, feed, handoff: bool):
    # a narrow vector unit, so the array waits for its rows (not for its weights)
    cfg = api.load_config("default").with_overrides({"row_handoff": handoff,
                                                     "vector_unit.lanes": 8})
    program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    return program, api.simulate(program, cfg, feed)


def test_each_engine_starts_on_the_others_finished_rows(table_conv_table):
    tosa, feed, expected, out = table_conv_table
    program, rows = _run(tosa, feed, True)
    _, whole = _run(tosa, feed, False)
    assert np.array_equal(rows.outputs[out], expected[out])
    assert np.array_equal(whole.outputs[out], expected[out])
    sim = rows.sim
    cmds = program.commands
    pairs = [(d, c.id) for c in cmds if isinstance(c, Compute) for d in c.deps
             if isinstance(cmds[d], Compute) and cmds[d].unit != c.unit]
    assert {(cmds[p].unit, cmds[c].unit) for p, c in pairs} == {("vector", "mac"),
                                                                ("mac", "vector")}
    costs = sim.costs
    early = set()
    for p, c in pairs:
        work = sim.end[c] - costs[c].busy - costs[c].setup    # when its work began
        # no earlier than its last row allows, and it ends after its producer
        lead = handoff(cmds[c], costs[c], cmds[p], costs[p])
        assert work >= sim.end[p] - lead and sim.end[c] > sim.end[p]
        if work < sim.end[p]:
            early.add((cmds[p].unit, cmds[c].unit))
    assert early == {("vector", "mac"), ("mac", "vector")}
    assert rows.report.cycles < whole.report.cycles
    for p, c in pairs:
        assert whole.sim.start[c] >= whole.sim.end[p]


def _mac_reading(ifm: TensorView, ofm_addr: int = 4096) -> Compute:
    return Compute(id=1, deps=(0,), unit="mac", op="conv2d",
                   inputs={"ifm": ifm, "weights": dense(0, 8192, (32, 1, 1, 32), "int8")},
                   outputs={"ofm": dense(0, ofm_addr, (16, 1, 1, 32), "int8")},
                   attrs={"stride": (1, 1), "pad": (0, 0, 0, 0), "dilation": (1, 1),
                          "input_zp": 0, "weight_zp": 0})


def _lead(consumer: Compute) -> int:
    producer = Compute(id=0, unit="vector", op="elementwise",
                       inputs={"in0": dense(0, 2048, (16, 32), "int8")},
                       outputs={"out": dense(0, 0, (16, 32), "int8")},
                       attrs={"program": json.dumps([{"fn": "CAST", "args": ["in0"],
                                                      "tables": [], "dtype": "int8"}])})
    program = Program([], [1 << 20], [producer, consumer], [], [], [],
                      [Layer("x", ["CLAMP"], "vector")])
    costs = CostModel(api.load_config("default"), program.memories)
    return handoff(consumer, costs.of(consumer), producer, costs.of(producer))


def test_only_rows_read_in_the_order_they_are_written():
    # a preload of the weights and the 16 rows' stream, less a row
    assert _lead(_mac_reading(dense(0, 0, (16, 1, 1, 32), "int8"))) > 16
    # the same bytes walked column by column (a transposed view)
    transposed = TensorView(0, 0, (32, 1, 1, 16), (1, 32, 32, 32), "int8")
    assert _lead(_mac_reading(transposed)) == 0
    # writing over the rows it reads from: it waits for the whole command
    assert _lead(_mac_reading(dense(0, 0, (16, 1, 1, 32), "int8"), ofm_addr=0)) == 0


def test_a_pool_reads_its_window_of_rows_ahead():
    """A 2x2 pool starts on an array command's finished rows, a window of rows later than an
    even pace would; a global pool folds each row into its sums as it comes, at an even
    pace, so it starts earlier still; a 16x16 window strided over 17 rows takes them whole."""
    cfg = api.load_config("default")
    conv = Compute(id=0, unit="mac", op="conv2d",
                   inputs={"ifm": dense(0, 1 << 16, (1, 16, 16, 32), "int8"),
                           "weights": dense(0, 1 << 17, (32, 1, 1, 32), "int8")},
                   outputs={"ofm": dense(0, 0, (1, 16, 16, 32), "int8")},
                   attrs={"stride": (1, 1), "pad": (0, 0, 0, 0), "dilation": (1, 1),
                          "input_zp": 0, "weight_zp": 0})
    costs = CostModel(cfg, [])

    def lead(kernel, stride, out_hw, out_h=None):
        pool = Compute(id=1, deps=(0,), unit="vector", op="avg_pool2d",
                       inputs={"in0": conv.outputs["ofm"]},
                       outputs={"out": dense(0, 3 << 16, (1, out_h or out_hw, out_hw, 32),
                                             "int8")},
                       attrs={"kernel": kernel, "stride": stride, "pad": (0, 0, 0, 0),
                              "input_zp": 0, "output_zp": 0})
        return handoff(pool, costs.of(pool), conv, costs.of(conv))

    windowed = lead((2, 2), (2, 2), 8)
    assert 0 < windowed < costs.of(conv).window
    assert lead((16, 16), (1, 1), 1) > windowed
    # two output rows of 15-row windows: each output row needs its window whole
    assert lead((15, 1), (1, 1), 16, out_h=2) == 0


def test_a_convolution_reads_its_window_of_rows_ahead():
    """A 3x3 convolution starts on the vector unit's finished rows a window of rows (kernel
    and stride) later than a 1x1 convolution of the same rows, as Ethos-U's block
    dependencies count a kernel's rows. A depthwise convolution's taps are not streamed in
    rows (its cost has no stream window): it waits for the whole producer."""
    cfg = api.load_config("default")
    producer = Compute(id=0, unit="vector", op="elementwise",
                       inputs={"in0": dense(0, 1 << 16, (1, 16, 16, 32), "int8")},
                       outputs={"out": dense(0, 0, (1, 16, 16, 32), "int8")},
                       attrs={"program": json.dumps([{"fn": "CAST", "args": ["in0"],
                                                      "tables": [], "dtype": "int8"}])})
    costs = CostModel(cfg, [])

    def lead(op, weights, out_hw):
        conv = Compute(id=1, deps=(0,), unit="mac", op=op,
                       inputs={"ifm": producer.outputs["out"],
                               "weights": dense(0, 1 << 17, weights, "int8")},
                       outputs={"ofm": dense(0, 3 << 16, (1, out_hw, out_hw, 32), "int8")},
                       attrs={"stride": (1, 1), "pad": (0, 0, 0, 0), "dilation": (1, 1),
                              "input_zp": 0, "weight_zp": 0})
        return handoff(conv, costs.of(conv), producer, costs.of(producer))

    pointwise = lead("conv2d", (32, 1, 1, 32), 16)
    windowed = lead("conv2d", (32, 3, 3, 32), 14)
    assert 0 < windowed < pointwise
    assert lead("depthwise_conv2d", (3, 3, 32, 1), 14) == 0


def test_hazard_checker_lets_a_handoff_overlap_and_nothing_else():
    producer = Compute(id=0, unit="vector", op="elementwise", inputs={},
                       outputs={"out": dense(0, 0, (16, 32), "int8")}, attrs={})
    consumer = _mac_reading(dense(0, 0, (16, 1, 1, 32), "int8"))
    program = Program([], [1 << 20], [producer, consumer], [], [], [],
                      [Layer("x", ["CLAMP"], "vector")])
    checker = HazardChecker(program)
    checker.start(producer, 0)
    checker.start(consumer, 10, rows={0: 20})
    checker.end(producer, 30)
    checker.end(consumer, 60)
    checker = HazardChecker(program)
    checker.start(producer, 0)
    checker.start(consumer, 10)
    with pytest.raises(HazardError, match="RAW hazard"):
        checker.end(producer, 30)


def test_presets_hand_rows_over_and_a_config_may_not():
    for name in ("default", "edge-256", "large-8k"):
        assert api.load_config(name).row_handoff
    assert not api.load_config("tpu-v4-core").row_handoff
    with pytest.raises(ConfigError, match="row_handoff: expected true or false"):
        api.load_config("default").with_overrides({"row_handoff": 3})


@pytest.mark.parametrize("config", ["default", "large-8k"])
def test_handoffs_never_take_attention_below_its_bound(config):
    """ExecuTorch's attention block is one chain of MAC and vector layers, where the handoffs
    overlap the most; the attainable bound counts each engine alone, so it stays below."""
    cfg = api.load_config(config)
    assert cfg.row_handoff
    model = Path(__file__).parent / "data" / "attn_block" / "model.tosa"
    report = api.simulate(api.compile_model(model, cfg, use_cache=False), cfg,
                          timing_only=True).report
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"]


def test_a_vector_steps_constants_keep_their_room_while_it_hands_rows_over():
    """A TFLite model's float input QUANTIZE (a vector step reading staged constants) hands
    its rows to the first conv. Its constants keep their room through the conv where that
    room costs the conv's tiles nothing: the conv's output written over them would make its
    first tile wait for the quantize's last, as it did (10,663 cycles, 7,138 now)."""
    data = Path(__file__).parent / "data" / "tflite" / "image_example1"
    cfg = api.load_config("default")
    program = api.compile_model(data / "model.tflite", cfg, use_cache=False)
    sim = api.simulate(program, cfg, timing_only=True).sim
    quantize, conv = ([c.id for c in program.commands if c.layer == layer and
                       isinstance(c, Compute)] for layer in (0, 1))
    assert program.layers[0].unit == "vector" and program.layers[1].unit == "mac"
    assert sim.start[conv[0]] < sim.end[quantize[-1]]
    assert quantize[-1] not in program.commands[conv[0]].deps
