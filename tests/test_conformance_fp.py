"""TOSA 1.0 PRO-FP conformance with Arm's compliance checker (issue: floating point, item 7).

tosa_verif_build_tests generates, with seed 42 and TOSA 1.0.2, a sample of every PRO-FP
operator (tests/conformance_suite.py FP_NON_MAC_OPS, FP_MAC_OPS; not FFT2D/RFFT2D, of which
the generator makes no valid tests in the sample's sizes) in fp32, fp16, bf16,
fp8e4m3 and fp8e5m2, valid and ERROR_IF tests, small shapes. The reference model computes the
fp64 reference and bounds in precise mode; `npu-sim conformance` (large-8k: it has fp8) must
then find every valid test compliant by Arm's checker (integer-typed outputs bit-exact) and
refuse every ERROR_IF test. The same run through Arm's runner (a few tests), and the statuses.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import conformance_suite as cs
from npu_sim import conformance as conf
from test_conformance import _conforms, _run_sample

FP_OPS = cs.FP_NON_MAC_OPS + cs.FP_MAC_OPS
OPERATORS = sorted(op.upper() for op in FP_OPS)
FP_TYPES = {"FP32", "FP16", "BF16", "FP8E4M3", "FP8E5M2"}


@pytest.fixture(scope="session")
def fp_suite(tmp_path_factory):
    suite = cs.SUITES["pro-fp"]
    return _run_sample(tmp_path_factory.mktemp("conformance_fp"), suite, FP_OPS, "large-8k")


def test_fp_sample_covers_every_operator_type_and_extension(fp_suite):
    rows = fp_suite["results"]
    for op in OPERATORS:
        kinds = {r["expected_failure"] for r in rows if r["operator"] == op}
        assert False in kinds, f"no valid {op} test"
    types, exts = set(), set()
    for desc in fp_suite["descs"].values():
        for info in desc["meta"].get("compliance", {}).get("tensors", {}).values():
            types.add(info.get("data_type"))
        exts |= set(desc.get("test_requirements", {}).get("extensions_required", []))
    assert FP_TYPES <= types, sorted(FP_TYPES - types)
    assert {"tosa-ext-bf16", "tosa-ext-fp8e4m3", "tosa-ext-fp8e5m2"} <= exts
    assert not {k: v for k, v in fp_suite["reference"].items() if v[0] != "ok"}
    assert sum(r["status"] == "compliant" for r in rows) > 900


@pytest.mark.parametrize("op", OPERATORS)
def test_fp_operator_conforms(fp_suite, op):
    _conforms(fp_suite["results"], op)


def _pick(suite, op, dtype, failure=False):
    for t in suite["tests"]:
        d = suite["descs"][str(t)]
        if d["test_details"]["operator"] == op and bool(d.get("expected_failure")) == failure \
                and f"_{dtype}" in t.name:
            return t
    raise AssertionError(f"no {op} {dtype} test")


def test_non_compliant_with_the_checkers_message(fp_suite, tmp_path):
    """An output pushed outside its bound is non-compliant, with the checker's message; the
    same folder with the right reference is compliant."""
    t = _pick(fp_suite, "EXP", "f32")
    d = tmp_path / t.name
    shutil.copytree(t, d)
    desc = conf.load_desc(d)
    for f in desc["ofm_file"]:
        for src in (fp_suite["root"] / "expected" / t.name).glob("*.npy"):
            shutil.copy(src, d / src.name.replace(f, f"ref-{f}"))
    r = conf.run_test(d, "large-8k")
    assert r.status == "compliant", r
    ref = d / f"ref-{desc['ofm_file'][0]}"
    wrong = np.load(ref)
    wrong.reshape(-1)[0] = wrong.reshape(-1)[0] * 1.5 + 1.0
    np.save(ref, wrong)
    r = conf.run_test(d, "large-8k")
    assert r.status == "non-compliant" and "deviance" in r.message.lower(), r
    assert not conf.ok([r])


def test_summary_and_cli_statuses(fp_suite, tmp_path, capsys):
    from npu_sim.cli import main as cli_main
    picked = [_pick(fp_suite, "ADD", "bf16"), _pick(fp_suite, "SIGMOID", "f16")]
    for t in picked:
        shutil.copytree(t, tmp_path / "t" / t.name)
    report = tmp_path / "r.json"
    assert cli_main(["conformance", str(tmp_path / "t"), "--config", "large-8k", "--json", str(report),
                     "--expected-dir", str(fp_suite["root"] / "expected")]) == 0
    rows = json.loads(report.read_text())
    assert {r["status"] for r in rows} == {"compliant"}
    assert "compliant" in capsys.readouterr().out


def test_arm_runner_drives_the_sut_module_on_float_tests(fp_suite, tmp_path):
    """tosa_verif_run_tests checks npu-sim's float outputs with tosa_verify against its own
    precise-mode reference run."""
    if shutil.which("tosa_verif_run_tests") is None:
        pytest.skip("tosa_verif_run_tests is not installed")
    picked = [_pick(fp_suite, "EXP", "bf16"), _pick(fp_suite, "REDUCE_SUM", "f32"),
              _pick(fp_suite, "CAST", "f8e4m3"), _pick(fp_suite, "MUL", "f16", failure=True)]
    for t in picked:
        shutil.copytree(t, tmp_path / t.name)
    cmd = ["tosa_verif_run_tests", "--sut-module", "npu_sim.conformance_sut", "--sut-module-args",
           "npu_sim.conformance_sut:config=large-8k", "-r", "-t", str(tmp_path), "--ref-model-path",
           shutil.which("tosa_reference_model"), "-j", "1", "--profile", "tosa-pro-fp",
           "--extension", *cs.FP_EXTENSIONS]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("Totals (npu_sim.conformance_sut)")]
    assert line, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "3 expected_pass, 1 expected_failure, 0 unexpected_pass, 0 unexpected_failure, " \
           "0 internal_error, 0 skipped" in line[0], proc.stdout[-3000:]
