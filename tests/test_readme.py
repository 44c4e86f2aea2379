"""The README's sample outputs are what the commands print today: a change to the cost model
must bring the samples along (the capabilities block had stayed several timing changes old)."""
import re
from pathlib import Path

import pytest

from npu_sim import cli

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
# the report's figures, from its cycle count to its Timing line
FIGURES = re.compile(r"^  (cycles|roofline bound|attainable bound|MACs|operators|engines|"
                     r"bytes moved|energy|average power|PerformanceInfo|Timing) .*$", re.M)


def _printed(capsys, argv) -> str:
    assert cli.main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _blocks(text: str) -> list[str]:
    """The contents of the fenced blocks of a Markdown text."""
    blocks, current = [], None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _sample(header: str) -> str:
    """The README's fenced block whose first line is `header`."""
    blocks = [b for b in _blocks(README) if b.startswith(header)]
    assert len(blocks) == 1, f"README: {len(blocks)} samples start with {header!r}"
    return blocks[0]


def test_capabilities_sample_is_what_the_command_prints(capsys):
    printed = _printed(capsys, ["capabilities"])
    assert _sample("$ npu-sim capabilities\n") == "$ npu-sim capabilities\n" + printed


def test_run_sample_figures_are_the_default_models(capsys):
    """The figures of the embedded MobileNetV2 on `default` (a timing-only run reports the
    same ones as the README's full run)."""
    lines = [m.group(0) for m in FIGURES.finditer(_printed(capsys, ["run", "--timing-only"]))]
    assert len(lines) == 11
    sample = _sample("npu-sim: mobilenet_v2_224 on default")
    assert [m.group(0) for m in FIGURES.finditer(sample)] == lines


def test_tflite_sample_figures(capsys, tmp_path):
    pytest.importorskip("tflite")
    model = REPO / "tests/data/tflite/tflite_micro_speech"
    out = _printed(capsys, ["run", str(model / "model.tflite"), "--config", "edge-256",
                            "--input", f"input_1_int8={model / 'input-0.npy'}",
                            "--output-dir", str(tmp_path)])
    sample = _sample("npu-sim: model on edge-256")
    shown = [m.group(0) for m in FIGURES.finditer(sample)]
    assert len(shown) == 4
    assert shown == [m.group(0) for m in FIGURES.finditer(out)][:4]
