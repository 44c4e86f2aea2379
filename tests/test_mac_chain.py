"""The MAC array chains the commands of one operator as it chains a command's folds
(npu_sim/simulator.py, cost.chained): a tile ready before the one ahead of it ends has its
first preload and stream run under that one's last fold and drain. Only tiles of one
operator chain, only when they were ready, and never below the attainable bound's figure for
the whole operator (isa/systolic.py chain_least)."""
import random

import pytest

from npu_sim import api
from npu_sim.bounds import attainable
from npu_sim.cost import CostModel, array_cycles, chained
from npu_sim.isa.commands import Compute, dense
from npu_sim.isa.errors import UnsupportedError
from npu_sim.isa.program import Layer, Program
from npu_sim.simulator import Machine

ROWS, TILES, CHANNELS, TERMS = 64, 4, 32, 96


def _tile(i: int, deps=()) -> Compute:
    """Tile i of a 1x1 convolution: ROWS output rows of CHANNELS, from its own input rows and
    the shared weights, each tile in its own place."""
    return Compute(id=i, deps=deps, layer=0, unit="mac", op="conv2d",
                   inputs={"ifm": dense(0, (1 << 16) + i * ROWS * TERMS, (1, ROWS, 1, TERMS), "int8"),
                           "weights": dense(0, 1 << 15, (CHANNELS, 1, 1, TERMS), "int8")},
                   outputs={"ofm": dense(0, i * ROWS * CHANNELS, (1, ROWS, 1, CHANNELS), "int8")},
                   attrs={"stride": (1, 1), "pad": (0, 0, 0, 0), "dilation": (1, 1),
                          "input_zp": 0, "weight_zp": 0})


WHOLE = ["gemm", ROWS * TILES, CHANNELS, TERMS, "int8", "int8", "int8"]


def _run(cfg, problems=(WHOLE,), chained_deps=False):
    cmds = [_tile(i, (i - 1,) if chained_deps and i else ()) for i in range(TILES)]
    program = Program([], [1 << 20], cmds, [], [], [],
                      [Layer("conv", ["CONV2D"], "mac", array_problems=[list(p) for p in problems])])
    return Machine(program, cfg).run(compute_values=False), CostModel(cfg, []).of(cmds[0])


@pytest.mark.parametrize("preset", ["default", "edge-256", "large-8k"])
def test_tiles_of_one_operator_chain_by_a_drain_and_a_hidden_preload(preset):
    cfg = api.load_config(preset)
    sim, cost = _run(cfg)
    skew = cfg.mac_array.rows + cfg.mac_array.cols - 2
    hidden = chained(cost, cost, cost.busy)
    assert hidden == skew + min(cost.tail, cost.head) > skew
    assert list(sim.end) == [cost.busy + i * (cost.busy - hidden) for i in range(TILES)]
    assert [sim.costs[i].busy for i in range(TILES)] == [cost.busy] + [cost.busy - hidden] * 3
    # row tiles chained take what the whole operator takes as one command: the attainable
    # bound's figure for it, which no schedule beats
    assert sim.cycles == array_cycles(cfg, *WHOLE)


@pytest.mark.parametrize("case", ["two operators", "each waits for the last", "no fold overlap"])
def test_tiles_pay_their_own_fill_and_drain_otherwise(case):
    cfg = api.load_config("default")
    if case == "no fold overlap":
        cfg = cfg.with_overrides({"mac_array.fold_overlap": False})
    problems = (WHOLE, WHOLE) if case == "two operators" else (WHOLE,)
    sim, cost = _run(cfg, problems, chained_deps=case == "each waits for the last")
    assert list(sim.end) == [cost.busy * (i + 1) for i in range(TILES)]


def _gemm_tile(i, rows, chans, terms, ifm, weights, ofm, types=("int8", "int8", "int8"),
               op="conv2d"):
    act, wgt, out = types
    if op == "depthwise_conv2d":       # rows x chans outputs of `terms` taps each
        return Compute(id=i, layer=0, unit="mac", op=op,
                       inputs={"ifm": dense(0, ifm, (1, rows + terms - 1, 1, chans), act),
                               "weights": dense(0, weights, (terms, 1, chans, 1), wgt)},
                       outputs={"ofm": dense(0, ofm, (1, rows, 1, chans), out)},
                       attrs={"stride": (1, 1), "pad": (0, 0, 0, 0), "dilation": (1, 1),
                              "input_zp": 0, "weight_zp": 0})
    return Compute(id=i, layer=0, unit="mac", op=op,
                   inputs={"ifm": dense(0, ifm, (1, rows, 1, terms), act),
                           "weights": dense(0, weights, (chans, 1, 1, terms), wgt)},
                   outputs={"ofm": dense(0, ofm, (1, rows, 1, chans), out)},
                   attrs={"stride": (1, 1), "pad": (0, 0, 0, 0), "dilation": (1, 1),
                          "input_zp": 0, "weight_zp": 0})


def _split_run(cfg, m, n, k, axis, parts, types, op="conv2d"):
    """Cycles of an operator's tiles along `axis` ("m" rows or "n" channels), all ready at
    once, and the attainable bound of the whole operator."""
    size = 1 << 24
    cmds, first = [], 0
    for i, part in enumerate(parts):
        rows, chans = (part, n) if axis == "m" else (m, part)
        cmds.append(_gemm_tile(i, rows, chans, k, (1 << 22) + first * k * 4 * (axis == "m"),
                               (1 << 21) + first * k * 4 * (axis == "n"), first * n * 4, types,
                               op))
        first += part
    kind = "depthwise" if op == "depthwise_conv2d" else "gemm"
    layer = Layer("op", [op.upper()], "mac", array_problems=[[kind, m, n, k, *types]])
    program = Program([], [size], cmds, [], [], [], [layer])
    return Machine(program, cfg).run(compute_values=False).cycles, \
        attainable(program.layers, cfg)["cycles"]


@pytest.mark.parametrize("preset,overrides,types,shape,axis,tile", [
    # preloads bound by the weights' port, a lighter first tile (int16 weights on edge-256)
    ("edge-256", {}, ("int16", "int16", "int16"), (287, 67, 27), "n", 51),
    ("edge-256", {}, ("int16", "int16", "int16"), (368, 67, 27), "n", 35),
    # port-paced preloads and streams of fractional cycles
    ("default", {"mac_array.ports.activations": 24, "mac_array.ports.weights": 24},
     ("int8", "int8", "int8"), (1200, 32, 32), "m", 40),
    # four arrays split each tile their own way: no chaining
    ("default", {"mac_array.arrays": 4}, ("bf16", "bf16", "bf16"), (136, 48, 64), "n", 24),
    ("tpu-v4-core", {}, ("int8", "int8", "int8"), (300, 640, 64), "n", 256),
])
def test_no_chain_beats_the_bound(preset, overrides, types, shape, axis, tile):
    cfg = api.load_config(preset).with_overrides(overrides)
    m, n, k = shape
    total = m if axis == "m" else n
    parts = [min(tile, total - s) for s in range(0, total, tile)]
    cycles, bound = _split_run(cfg, m, n, k, axis, parts, types)
    assert cycles >= bound


@pytest.mark.parametrize("preset", ["default", "edge-256", "large-8k"])
def test_random_splits_stay_above_the_bound(preset):
    """Seeded operators (GEMMs of several precisions, depthwise) split into uneven tiles."""
    cfg = api.load_config(preset)
    rows, cols = cfg.mac_array.rows, cfg.mac_array.cols
    rng = random.Random(20261207)
    pairs = [p for p in cfg.mac_array.precision if p.split("x")[0] in ("int8", "int16")]
    checked = 0
    for _ in range(60):
        depthwise = rng.random() < 0.3
        act, wgt = ("int8", "int8") if depthwise else rng.choice(pairs).split("x")
        m = rng.randint(2, 600)
        n = rng.choice([rng.randint(2, 5 * cols), cols, cols // 2 * 3])
        k = rng.choice([9, 25]) if depthwise else rng.choice([rng.randint(1, 3 * rows), 27, rows])
        axis = rng.choice("mn")
        total = m if axis == "m" else n
        tile = rng.randint(1, total - 1)
        parts = [min(tile, total - s) for s in range(0, total, tile)][:64]
        if sum(parts) != total:
            continue
        try:
            cycles, bound = _split_run(cfg, m, n, k, axis, parts, (act, wgt, act),
                                       "depthwise_conv2d" if depthwise else "conv2d")
        except UnsupportedError:
            continue
        assert cycles >= bound, (act, wgt, m, n, k, axis, tile)
        checked += 1
    assert checked > 40
