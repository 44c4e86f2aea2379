"""compiler.validate on whole models and on Arm's generated tests.

1. The real models validate cleanly, and every PRO-INT operator has a check.
2. Conformance: tosa_verif_build_tests generates ERROR_IF (negative) and positive tests for a
   selection of operators; every negative must be refused, every positive accepted.
(Hand-built graphs breaking one rule each are in test_validate.py.)
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from npu_sim.compiler.loader import load_model
from npu_sim.compiler.validate import CHECKS, SPECS, validate
from npu_sim.isa.errors import ModelError, UnsupportedError, ValidationError

DATA = Path(__file__).parent / "data"
MODELS = sorted(DATA.glob("*/model.tosa"))

PRO_INT_OPS = {
    "ARGMAX", "AVG_POOL2D", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "MATMUL", "MAX_POOL2D",
    "TRANSPOSE_CONV2D", "CLAMP", "ADD", "SUB", "MUL", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND",
    "BITWISE_OR", "BITWISE_XOR", "BITWISE_NOT", "INTDIV", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR",
    "LOGICAL_NOT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "MAXIMUM", "MINIMUM", "TABLE", "ABS",
    "CLZ", "NEGATE", "SELECT", "EQUAL", "GREATER", "GREATER_EQUAL", "REDUCE_ALL", "REDUCE_ANY",
    "REDUCE_MAX", "REDUCE_MIN", "REDUCE_SUM", "CONCAT", "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE",
    "TRANSPOSE", "GATHER", "SCATTER", "RESIZE", "CAST", "RESCALE", "CONST", "CONST_SHAPE", "IDENTITY"}


# ---------------------------------------------------------------------------------------------
# 1. real models
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.parent.name)
def test_real_models_validate(path):
    assert validate(load_model(path), "PRO-INT", (), "8K") is None


def test_every_pro_int_operator_has_a_check():
    assert PRO_INT_OPS <= set(CHECKS)
    assert PRO_INT_OPS <= set(SPECS)




# ---------------------------------------------------------------------------------------------
# 2. conformance tests from tosa_verif_build_tests
# ---------------------------------------------------------------------------------------------

CONFORMANCE_OPS = ("conv2d", "depthwise_conv2d", "conv3d", "transpose_conv2d", "avg_pool2d", "max_pool2d",
                   "matmul", "argmax", "rescale", "cast", "add", "mul", "arithmetic_right_shift", "equal",
                   "negate", "select", "clamp", "table", "concat", "pad", "slice", "reshape", "reverse",
                   "tile", "transpose", "gather", "scatter", "resize", "reduce_sum", "reduce_max",
                   "identity", "const", "while_loop")
GEN_SEED = 42
GEN_EXTENSIONS = ("tosa-ext-int16", "tosa-ext-int4", "tosa-ext-doubleround", "tosa-ext-inexactround",
                  "tosa-ext-controlflow")
NO_ERROR_IF_TESTS = {"identity", "const"}       # the generator has no ERROR_IF tests for these
# Per operator: one positive test per type combination, two negative tests per ERROR_IF kind.
SELECTION = {"permutes": ["type"], "maximum": 1, "num_errorifs": 2, "groups": []}


BUILD_SCRIPT = Path(__file__).parent / "validate_cases" / "build_conformance.py"


@pytest.fixture(scope="module")
def conformance(tmp_path_factory):
    """{operator: [(test dir, desc.json)]} for tests generated into a temporary directory."""
    try:
        import generator.tosa_verif_build_tests  # noqa: F401
    except ImportError:
        pytest.skip("tosa_verif_build_tests (tosa-tools) is not installed")
    root = tmp_path_factory.mktemp("conformance")
    config = root / "selection.json"
    config.write_text(json.dumps({op: {"selection": {"default": SELECTION}} for op in CONFORMANCE_OPS}))
    common = ["--profile", "tosa-pro-int", "--extension", *GEN_EXTENSIONS, "--tosa-version", "1.0.2",
              "--test-type", "both", "--seed", str(GEN_SEED), "--test-selection-config", str(config),
              "--target-dtype", "bool", "int4", "int8", "int16", "int32", "int48", "--no-special-tests",
              "--tensor-dim-range", "1,12"]
    procs = []
    for i in range(2):                       # two processes, each generating every other operator
        ops = ",".join(CONFORMANCE_OPS[i::2])
        procs.append(subprocess.Popen([sys.executable, str(BUILD_SCRIPT), ops, "-o", str(root / f"part{i}"),
                                       *common], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=root))
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out.decode(errors="replace")[-3000:]
    tests: dict[str, list[tuple[Path, dict]]] = {}
    for desc in sorted(root.glob("part*/*/*/desc.json")):
        d = json.loads(desc.read_text())
        tests.setdefault(d["test_details"]["operator"].lower(), []).append((desc.parent, d))
    return tests


def _run(test_dir: Path, desc: dict):
    """None when the graph loads and validates, else the refusal."""
    exts = desc.get("test_requirements", {}).get("extensions_required", [])
    try:
        validate(load_model(test_dir / desc["tosa_file"]), "PRO-INT", exts, "8K")
    except (ModelError, ValidationError, UnsupportedError) as err:
        return err
    return None


@pytest.mark.parametrize("op", CONFORMANCE_OPS)
def test_conformance_negative_tests_refused(conformance, op):
    tests = [(p, d) for p, d in conformance.get(op, []) if d.get("expected_failure")]
    if op in NO_ERROR_IF_TESTS:
        assert not tests
        return
    assert tests, f"no negative {op} tests were generated"
    accepted = [f"{p.name} ({d['test_details'].get('ERRORIF')})" for p, d in tests if _run(p, d) is None]
    assert not accepted, f"{len(accepted)} of {len(tests)} negative tests accepted: {accepted}"


@pytest.mark.parametrize("op", CONFORMANCE_OPS)
def test_conformance_positive_tests_accepted(conformance, op):
    tests = [(p, d) for p, d in conformance.get(op, []) if not d.get("expected_failure")]
    assert tests, f"no positive {op} tests were generated"
    refused = []
    for path, desc in tests:
        err = _run(path, desc)
        if err is not None:
            refused.append(f"{path.name}: {err}")
    assert not refused, f"{len(refused)} of {len(tests)} positive tests refused: {refused}"
