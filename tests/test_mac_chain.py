"""The MAC array chains the commands of one operator as it chains a command's folds
(npu_sim/simulator.py, cost.chained): a tile ready before the one ahead of it ends has its
first preload and stream run under that one's last fold and drain. Only tiles of one
operator chain, only when they were ready, and never below the attainable bound's figure for
the whole operator."""
import pytest

from npu_sim import api
from npu_sim.cost import CostModel, array_cycles, chained
from npu_sim.isa.commands import Compute, dense
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
