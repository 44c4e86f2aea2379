"""EXT-FFT conformance: FFT2D and RFFT2D tests of Arm's generator (tests/data/conformance_fft)
judged by Arm's compliance checker against the reference model's precise-mode results on
large-8k (the preset with EXT-FFT); every ERROR_IF test refused. `default` lacks EXT-FFT."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import conformance_suite as cs
from npu_sim import conformance as conf

DATA = Path(__file__).parent / "data" / "conformance_fft"


@pytest.fixture(scope="module")
def fft_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("conformance_fft")
    shutil.copytree(DATA, root / "tests", ignore=shutil.ignore_patterns("README.md"))
    tests = conf.find_tests([root / "tests"])
    reference = cs.reference_outputs(tests, root / "expected", jobs=2)
    assert not {k: v for k, v in reference.items() if v[0] != "ok"}
    return [r.to_json() for r in conf.run_tests(tests, "large-8k", root / "out", root / "expected",
                                                jobs=2)]


def test_every_fft_test_is_compliant_or_refused(fft_results):
    by_status = {}
    for r in fft_results:
        by_status.setdefault(r["status"], []).append(r)
    assert {r["operator"] for r in fft_results} == {"FFT2D", "RFFT2D"}
    assert len(by_status.get("compliant", [])) == 5, by_status
    assert all(r["expected_failure"] for r in by_status.get("refused", []))
    assert len(by_status.get("refused", [])) == 13
    assert set(by_status) == {"compliant", "refused"}, {s: [(r["test"], r["message"]) for r in rs]
                                                        for s, rs in by_status.items()}


def test_default_has_no_fft(tmp_path):
    test = next(p for p in conf.find_tests([DATA]) if "ERRORIF" not in p.name)
    [result] = conf.run_tests([test], "default", tmp_path / "out", None, jobs=1)
    assert result.status == "skipped" and "EXT-FFT" in result.message
