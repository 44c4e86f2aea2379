"""The command line as a user meets it: outputs, reports, programs and one-line errors."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data"
SMALL = DATA / "small_cnn"
IN_NAME = "quantized_decomposed_quantize_per_tensor_default"


def npu_sim(*args, cwd=None):
    # -I: the installed npu_sim, never the checkout's folder that `-m` would put first
    return subprocess.run([sys.executable, "-I", "-m", "npu_sim", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_run_writes_exact_outputs_and_reports(tmp_path):
    r = npu_sim("run", SMALL / "model.tosa", "--config", "edge-256",
                "--input", f"{IN_NAME}={SMALL / 'input-0.npy'}", "--output-dir", tmp_path / "out",
                "--report", tmp_path / "r.json", "--csv", tmp_path / "layers.csv")
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out" / "tosa_reshape_default.npy")
    assert out.dtype == np.int8 and np.array_equal(out, np.load(SMALL / "ref-result-0.npy"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["cycles"] > 0 and report["timing"]["timeOnDevice"] > 0
    assert set(report["performance_info"]) >= {"execTime", "powerUsage"}
    assert (tmp_path / "layers.csv").read_text().count("\n") == len(report["layers"]) + 1
    assert "PerformanceInfo" in r.stdout and "cycles" in r.stdout
    assert "seeded random" not in r.stdout           # every input was given


def test_a_run_says_which_inputs_it_made_up(tmp_path, capsys):
    from npu_sim.cli import main
    assert main(["run", str(SMALL / "model.tosa"), "--seed", "7",
                 "--output-dir", str(tmp_path / "out")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "seeded random" in line]
    assert len(lines) == 1 and "--seed 7" in lines[0] and IN_NAME in lines[0], lines


def test_compile_disasm_and_run_program(tmp_path):
    prog = tmp_path / "small.npub"
    assert npu_sim("compile", SMALL / "model.tosa", "--config", "edge-256", "-o", prog).returncode == 0
    text = npu_sim("disasm", prog).stdout
    assert "LOAD" in text and "CONV2D" in text and "wait(" in text
    r = npu_sim("run", prog, "--input", f"{IN_NAME}={SMALL / 'input-0.npy'}",
                "--output-dir", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "o" / "tosa_reshape_default.npy"),
                          np.load(SMALL / "ref-result-0.npy"))
    wrong = npu_sim("run", prog, "--config", "default", "--output-dir", tmp_path / "w")
    assert wrong.returncode == 2 and "compiled for config 'edge-256'" in wrong.stderr


def _bad_config(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(Path("configs/default.yaml").read_text().replace("rows: 32", "rows: -4", 1))
    return p


def _wide_argmax(tmp_path):
    """ARGMAX needs its whole axis in one tile: 4096 int8 values cannot fit a 1 KiB buffer."""
    from oracle import GraphBuilder, DType
    import tosa_serializer as ts
    g = GraphBuilder()
    x = g.tensor((2, 4096), DType.INT8)
    out = g.output((2,), DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.ArgMaxAttribute(1, ts.NanPropagationMode.PROPAGATE)
    g.op("ARGMAX", [x], [out], attr)
    p = tmp_path / "argmax.tosa"
    p.write_bytes(g.serialize())
    return p


def _truncated_model(tmp_path):
    p = tmp_path / "trunc.tosa"
    p.write_bytes((SMALL / "model.tosa").read_bytes()[:4000])
    return p


@pytest.mark.parametrize("args,needle", [
    (["run", "missing.tosa"], "no such file"),
    (["run", "configs"], "directory"),
    (["run", "pyproject.toml"], "not a TOSA flatbuffer"),
    (["run", "TRUNC"], "model error"),
    (["run", SMALL / "model.tosa", "--config", "BADCFG"], "mac_array.rows"),
    (["run", SMALL / "model.tosa", "--config", "no-such-preset"], "config error"),
    (["run", SMALL / "model.tosa", "--input", "nope=x.npy"], "input error"),
    (["run", SMALL / "model.tosa", "--input", f"{IN_NAME}=pyproject.toml"], "cannot read"),
    (["run", SMALL / "model.tosa", "--config", "edge-256", "--input",
      f"{IN_NAME}={DATA / 'attn_block' / 'input-0.npy'}"], "shape"),
    (["run", "WIDE", "--config", "TINY"], "does not fit"),
    (["disasm", SMALL / "model.tosa"], "not an npu-sim program"),
    (["run", SMALL / "model.tosa", "--report", "/proc/no-such-dir/r.json"],
     "file error: /proc/no-such-dir/r.json:"),            # the destination, not a .part file
    (["run", SMALL / "model.tosa", "--config", "DIR"], "is a directory"),
    (["run", "JUNK.npub"], "not an npu-sim program"),
    (["run", "EDGE.npub", "--set", "mac_array.rows=8"], "not one with mac_array.rows 8"),
    (["op", ""], "op '': not a TOSA operator"),
    (["run", SMALL / "model.tosa", "--input", f"{IN_NAME}=JOINED.npy"], "holds 6,920 bytes of data, its header declares"),
    (["run", SMALL / "model.tosa", "--input", f"{IN_NAME}=CUT.npy"], "holds 6,000 bytes of data, its header declares"),
    (["run", SMALL / "model.tosa", "--seed", "\uff11"], "expected an integer"),
    (["run", SMALL / "model.tosa", "--timing-only", "--state", "s.npz"], "--state: a --timing-only"),
    (["compile", SMALL / "model.tosa", "-o", "/proc/no-such-dir/p.npub"], "file error"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, args, needle):
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(Path("configs/default.yaml").read_text().replace("size: 1 MiB", "size: 1 KiB", 1))
    subst = {"BADCFG": _bad_config(tmp_path), "TRUNC": _truncated_model(tmp_path), "TINY": tiny,
             "WIDE": _wide_argmax(tmp_path), "DIR": "configs"}
    for marker, edit in (("JOINED.npy", lambda b: b + b"JUNKJUNK"),    # 8 bytes more
                         ("CUT.npy", lambda b: b[:len(b) - 6912 + 6000])):   # 912 fewer
        if len(args) > 3 and marker in str(args[3]):
            made = tmp_path / marker.lower()
            made.write_bytes(edit((SMALL / "input-0.npy").read_bytes()))
            args = args[:3] + [args[3].replace(marker, str(made))]
    if "JUNK.npub" in args:
        subst["JUNK.npub"] = tmp_path / "junk.npub"
        subst["JUNK.npub"].write_bytes(bytes(range(7, 107)))
    if "EDGE.npub" in args:             # --set alone applies to the config the program holds
        subst["EDGE.npub"] = tmp_path / "edge.npub"
        assert npu_sim("compile", SMALL / "model.tosa", "--config", "edge-256", "-o",
                       subst["EDGE.npub"]).returncode == 0
    args = [subst.get(a, a) if isinstance(a, str) else a for a in args]
    r = npu_sim(*args, "--output-dir", tmp_path / "out") if args[0] == "run" else npu_sim(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npu-sim: "), r.stderr
    assert needle in lines[0], lines[0]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("columns", ["50", "123", "", "junk"])
def test_help_is_wrapped_as_argparse_wraps_it(monkeypatch, columns):
    """The parser finds the terminal's width itself (argparse's own way imports shutil): the
    help must come out as argparse's default formatter lays it out."""
    import argparse

    from npu_sim import cli
    monkeypatch.setenv("COLUMNS", columns)
    ours = cli.build_parser(["run"])
    theirs = cli.build_parser(["run"])
    for parser in [theirs, *theirs._subparsers._group_actions[0].choices.values()]:
        parser.formatter_class = argparse.HelpFormatter
    run_ours = ours._subparsers._group_actions[0].choices["run"]
    run_theirs = theirs._subparsers._group_actions[0].choices["run"]
    assert run_ours.format_help() == run_theirs.format_help()
    assert ours.format_help() == theirs.format_help()
    if columns == "50":            # help texts wrap to the width (a long choice list cannot)
        assert all(len(line) <= 50 for line in run_ours.format_help().splitlines()
                   if line.startswith(" " * 24))


def _unclosed_npy_header(tmp_path):
    """An .npy whose header dict never closes: numpy's parser raises tokenize's error."""
    header = b"{'descr': '|i1', 'fortran_order': False, 'shape': (1, 3,"
    header += b" " * (63 - len(header) % 64) + b"\n"
    p = tmp_path / "unclosed.npy"
    p.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(3))
    return p


@pytest.mark.parametrize("args,needle", [
    (["compile", SMALL / "model.tosa", "-o", ""], "an empty output path"),
    (["run", SMALL / "model.tosa", "--timing-only", "--report", "FIFO"], "not a regular file"),
    (["run", SMALL / "model.tosa", "--timing-only", "--report", "R", "--csv", "R"],
     "named for two outputs"),
    (["run", SMALL / "model.tosa", "--input", f"{IN_NAME}={SMALL / 'input-0.npy'}",
      "--input", f"{IN_NAME}={SMALL / 'input-0.npy'}"], "given twice"),
    (["run", SMALL / "model.tosa", "--input", f"{IN_NAME}=UNCLOSED"], "cannot read as .npy"),
    (["run", SMALL / "model.tosa", "--timing-only", "--report", "R", "--csv", "SUB/../r.json"],
     "named for two outputs"),                          # one file, spelled two ways
    (["run", SMALL / "model.tosa", "--timing-only", "--report", SMALL / "model.tosa"],
     "is an input of this command"),
    (["compile", SMALL / "model.tosa", "-o", SMALL / "model.tosa"], "is an input of this command"),
    (["run", SMALL / "model.tosa", "--timing-only", "--report", ""], "--report: an empty path"),
])
def test_bad_output_and_input_paths_are_one_line_and_touch_nothing(tmp_path, capsys, args,
                                                                     needle):
    from npu_sim.cli import main
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "sub").mkdir()
    subst = {"FIFO": fifo, "R": tmp_path / "r.json", "UNCLOSED": _unclosed_npy_header(tmp_path),
             "SUB/../r.json": tmp_path / "sub" / ".." / "r.json"}
    args = [str(subst.get(a, a)).replace("UNCLOSED", str(subst["UNCLOSED"])) for a in args]
    assert main(args + (["--output-dir", str(tmp_path / "out")] if args[0] == "run" else [])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert fifo.is_fifo() and not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "sub", "unclosed.npy"], \
        list(tmp_path.iterdir())
    assert (SMALL / "model.tosa").read_bytes()[4:8] == b"TOSA"


def test_preference_prints_the_three_schedules_and_refuses_what_it_would_ignore(tmp_path,
                                                                                 capsys):
    from npu_sim.cli import main
    model = str(DATA / "tflite" / "tflite_micro_speech" / "model.tflite")
    assert main(["run", model, "--config", "edge-256", "--preference", "LOW_POWER"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line[2:].startswith(("LOW_POWER", "FAST_SINGLE", "SUSTAINED"))]
    assert len(rows) == 3 and rows[0].startswith("* LOW_POWER"), rows
    assert main(["run", model, "--preference", "LOW_POWER", "--report", str(tmp_path / "r.json"),
                 "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--report, --output-dir would be ignored" in err, err
    assert not list(tmp_path.iterdir())
