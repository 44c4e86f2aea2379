"""--set KEY=VALUE on the command line: read as YAML, validated like the config file."""
from pathlib import Path

import pytest

from npu_sim import api
from npu_sim.cli import main
from npu_sim.config import parse_overrides
from npu_sim.isa.errors import ConfigError

SMALL = Path(__file__).parent / "data" / "small_cnn" / "model.tosa"
SWEEP = Path(__file__).parent.parent / "examples" / "sweep-edge.yaml"


def test_values_are_yaml():
    assert parse_overrides(["mac_array.rows=64", "sram.size=2 MiB", "mac_array.fold_overlap=false",
                            "mac_array.precision={int8xint8: 1}"]) == {
        "mac_array.rows": 64, "sram.size": "2 MiB", "mac_array.fold_overlap": False,
        "mac_array.precision": {"int8xint8": 1}}


@pytest.mark.parametrize("arg,needle", [
    ("mac_array.rows", "expected KEY=VALUE"), ("mac_array.rows=0", "mac_array.rows: expected a positive"),
    ("mac_array.rowz=3", "mac_array.rowz: unknown key"), ("sram.size=[1", "is not YAML"),
    ("mac_array.fold_overlap=2", "mac_array.fold_overlap: expected true or false")])
def test_bad_overrides_are_one_line_exit_2(capsys, arg, needle):
    assert main(["run", str(SMALL), "--timing-only", "--set", arg]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_run_and_compile_take_the_overrides(tmp_path, capsys):
    assert main(["run", str(SMALL), "--timing-only", "--config", "edge-256",
                 "--set", "mac_array.rows=8", "--set", "mac_array.cols=8",
                 "--report", str(tmp_path / "r.json")]) == 0
    narrow = api.run(SMALL, api.load_config("edge-256").with_overrides(
        {"mac_array.rows": 8, "mac_array.cols": 8}), timing_only=True).report.cycles
    assert f"{narrow:,}" in capsys.readouterr().out
    prog = tmp_path / "p.npub"
    assert main(["compile", str(SMALL), "--set", "mac_array.dataflow=input_stationary",
                 "-o", str(prog)]) == 0
    assert api.load_program(prog).meta["config"] == "default"
    # the program keeps the config it was compiled for: other overrides are refused, the
    # message naming the first figure that differs (both configs are called "default"; the
    # dataflow differs too, after the rows)
    capsys.readouterr()
    assert main(["run", str(prog), "--timing-only", "--set", "mac_array.rows=16"]) == 2
    err = capsys.readouterr().err
    assert "compiled for config 'default', not one with mac_array.rows 16 (it has 32);" in err
    assert err.count("\n") == 1, err


def test_dse_set_joins_the_fixed_overrides_and_refuses_an_axis():
    from npu_sim.dse.cli import with_sets
    from npu_sim.dse.sweep import load_sweep
    sweep = load_sweep(SWEEP)
    assert with_sets(sweep, ["mac_array.fold_overlap=false"]).fixed["mac_array.fold_overlap"] is False
    axis = sweep.axes[0].keys[0]
    with pytest.raises(ConfigError, match="the sweep varies it"):
        with_sets(sweep, [f"{axis}=1"])
    with pytest.raises(ConfigError, match="unknown key"):
        with_sets(sweep, ["mac_array.rowz=1"])
