"""The hazard checker (npu_sim/hazards.py): exact byte overlap of strided views, clean programs
pass, and a program with one dependency removed is stopped with a message naming both
commands."""
import dataclasses
import itertools
import re

import numpy as np
import pytest

from npu_sim import api, cli
from npu_sim.compiler.loader import load_bytes
from npu_sim.hazards import ENV_VAR, HazardChecker, enabled, shared_range
from npu_sim.isa.commands import DmaCopy, TensorView, dense
from npu_sim.isa.errors import HazardError, ProgramError
from npu_sim.isa.program import Layer, Program
from ops_sim_support import conv_attr, const, mac_stage, np_conv2d, rand, scalar
from oracle import DType, GraphBuilder

# --------------------------------------------------------------------------------------------
# exact overlap of strided views


def _bytes(v: TensorView) -> set[int]:
    out = set()
    for idx in itertools.product(*(range(d) for d in v.shape)):
        a = v.addr + sum(i * s for i, s in zip(idx, v.strides))
        out.update(range(a, a + v.itemsize))
    return out


def test_interleaved_views_with_overlapping_footprints_share_no_byte():
    # Two channel halves of one [8, 4] int8 tensor, and the even and odd int16 elements of a row.
    left, right = TensorView(0, 0, (8, 2), (4, 1), "int8"), TensorView(0, 2, (8, 2), (4, 1), "int8")
    even, odd = TensorView(0, 0, (8,), (4,), "int16"), TensorView(0, 2, (8,), (4,), "int16")
    for a, b in ((left, right), (even, odd)):
        lo, hi = max(a.footprint()[0], b.footprint()[0]), min(a.footprint()[1], b.footprint()[1])
        assert lo < hi                       # the footprints overlap ...
        assert shared_range(a, b) is None    # ... the bytes do not
    assert shared_range(left, TensorView(0, 1, (8, 2), (4, 1), "int8")) == (1, 30)
    assert shared_range(left, TensorView(1, 0, (8, 2), (4, 1), "int8")) is None   # other memory


def test_shared_range_matches_the_bytes_of_random_views():
    rng = np.random.default_rng(7)
    for _ in range(400):
        views = []
        for _ in range(2):
            dtype = str(rng.choice(["int8", "int16", "int32"]))
            rank = int(rng.integers(1, 4))
            shape = tuple(int(d) for d in rng.integers(1, 5, rank))
            strides = tuple(int(s) for s in rng.choice([-12, -4, -2, 0, 1, 2, 3, 4, 6, 8, 16, 24], rank))
            views.append(TensorView(0, int(rng.integers(40, 80)), shape, strides, dtype))
        a, b = views
        shared = _bytes(a) & _bytes(b)
        want = (min(shared), max(shared) + 1) if shared else None
        assert shared_range(a, b) == want, (a, b)


def test_enabled_by_flag_or_environment(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert not enabled() and enabled(True)
    monkeypatch.setenv(ENV_VAR, "1")
    assert enabled() and not enabled(False)
    monkeypatch.setenv(ENV_VAR, "0")
    assert not enabled()


def _copy(i, channel, src, dst):
    return DmaCopy(id=i, layer=0, channel=channel, src=src, dst=dst)


def _tiny_program(cmds):
    return Program(["dram"], [64, 1024], cmds, [], [], [], [Layer("conv", ["CONV2D"], "mac")])


def test_checker_flags_shared_bytes_only_while_both_are_in_flight():
    src = dense(1, 0, (16,), "int8")
    # Two DMAs writing interleaved halves of one tensor concurrently: no hazard.
    a = _copy(0, 0, src, TensorView(0, 0, (8, 2), (4, 1), "int8"))
    b = _copy(1, 1, src, TensorView(0, 2, (8, 2), (4, 1), "int8"))
    hz = HazardChecker(_tiny_program([a, b]))
    hz.start(a, 0)
    hz.start(b, 5)
    hz.end(a, 10)
    hz.end(b, 12)
    # One that starts in the very cycle the other ends is ordered, not in conflict.
    c = _copy(2, 1, src, TensorView(0, 1, (8, 2), (4, 1), "int8"))
    hz = HazardChecker(_tiny_program([a, c]))
    hz.start(a, 0)
    hz.start(c, 10)
    hz.end(a, 10)
    hz.end(c, 20)
    # Overlapping columns written while both are in flight: WAW, with the shared range.
    hz = HazardChecker(_tiny_program([a, c]))
    hz.start(a, 0)
    hz.start(c, 4)
    with pytest.raises(HazardError) as exc:
        hz.end(a, 10)
    assert isinstance(exc.value, ProgramError)
    assert exc.value.one_line() == (
        "npu-sim: hazard: WAW hazard on onchip bytes [0x1, 0x1e): command 0 (dma0 LOAD, "
        "layer 0 'conv') writes them and command 2 (dma1 LOAD, layer 0 'conv') writes them, "
        "both in flight at cycle 4 with no dependency between them")


# --------------------------------------------------------------------------------------------
# compiled programs


@pytest.fixture(scope="module")
def tiled_conv():
    """A 3x3 CONV2D + RESCALE that a 4 KiB buffer splits into many tiles."""
    rng = np.random.default_rng(11)
    x = rand(rng, DType.INT8, (1, 16, 18, 8))
    wt = rand(rng, DType.INT8, (12, 3, 3, 8))
    g = GraphBuilder()
    xi = g.tensor(x.shape, DType.INT8, x)
    acc = g.intermediate((1, 16, 18, 12), DType.INT32)
    g.op("CONV2D", [xi, const(g, wt, DType.INT8), const(g, np.zeros(12, np.int32), DType.INT32),
                    scalar(g, 0, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr((1, 1, 1, 1), (1, 1), (1, 1)))
    ref = np_conv2d(x, wt, (1, 1, 1, 1), (1, 1), (1, 1), 0, 0)
    mac_stage(g, rng, acc, ref, ref.shape, mode="rescale")
    cfg = api.load_config("default").with_overrides({"sram.size": "4 KiB"})
    program = api.compile_model(load_bytes(g.serialize()), cfg)
    assert program.layers[0].tiles > 1
    return program, cfg, dict(g.input_values)


def _without_dep(program, cmd, dep):
    cmds = list(program.commands)
    cmds[cmd.id] = dataclasses.replace(cmd, deps=tuple(d for d in cmd.deps if d != dep))
    return dataclasses.replace(program, commands=cmds)


def _broken(program, cfg):
    """The program with one cross-engine dependency removed that the checker then catches
    between exactly those two commands (most deps are implied by others, or their removal
    leaves the schedule ordered anyway)."""
    engine = {c.id: c.engine for c in program.commands}
    for cmd in program.commands:
        for dep in cmd.deps:
            if engine[dep] == cmd.engine:
                continue
            broken = _without_dep(program, cmd, dep)
            try:
                api.simulate(broken, cfg, timing_only=True, check_hazards=True)
            except HazardError as exc:
                if {int(n) for n in re.findall(r"command (\d+)", str(exc))} == {cmd.id, dep}:
                    return broken, cmd, program.commands[dep], str(exc)
    pytest.fail("no single removed dependency makes the schedule overlap")


def test_clean_program_passes(tiled_conv):
    program, cfg, feed = tiled_conv
    checked = api.simulate(program, cfg, feed, check_hazards=True)
    plain = api.simulate(program, cfg, feed, check_hazards=False)
    assert checked.report.cycles == plain.report.cycles
    assert all(np.array_equal(checked.outputs[k], plain.outputs[k]) for k in plain.outputs)
    api.simulate(program, cfg, timing_only=True, check_hazards=True)


def test_removed_dependency_is_caught(tiled_conv):
    program, cfg, feed = tiled_conv
    broken, cmd, dep, message = _broken(program, cfg)
    for who in (cmd, dep):
        assert re.search(rf"command {who.id} \({who.engine} [A-Z_0-9]+, layer 0 "
                         rf"'{program.layers[0].name}'\) (reads|writes) them", message)
    assert re.match(r"(RAW|WAR|WAW) hazard on onchip bytes \[0x[0-9a-f]+, 0x[0-9a-f]+\)", message)
    # With values too, and the run without the checker does not notice.
    with pytest.raises(HazardError, match=f"command {cmd.id} "):
        api.simulate(broken, cfg, feed, check_hazards=True)
    api.simulate(broken, cfg, feed, check_hazards=False)


def test_cli_flag_stops_with_one_line(tiled_conv, tmp_path, capsys, monkeypatch):
    program, cfg, _ = tiled_conv
    broken, cmd, dep, message = _broken(program, cfg)
    path = tmp_path / "broken.npub"
    api.save_program(broken, path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert cli.main(["run", str(path), "--timing-only"]) == 0
    capsys.readouterr()
    assert cli.main(["run", str(path), "--timing-only", "--check-hazards"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err == f"npu-sim: hazard: {message}\n"
    monkeypatch.setenv(ENV_VAR, "1")
    assert cli.main(["run", str(path), "--output-dir", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
