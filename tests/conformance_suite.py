#!/usr/bin/env python3
"""TOSA 1.0 PRO-INT conformance for npu-sim: Arm's generator makes the tests, Arm's reference
model the expected outputs, `npu-sim conformance` runs them.

    python tests/conformance_suite.py --out DIR [-j N]            # the full suite
    python tests/conformance_suite.py --out DIR --sample [-j N]   # the CI sample
    python tests/conformance_suite.py --out DIR --ops conv2d,add  # some operators only
    python tests/conformance_suite.py --out DIR --profile ext-shape [--sample]
                                     # the TOSA 1.1-draft shape operators (EXT-SHAPE), apart

Steps (a run into a folder that holds an earlier one's redoes only what changed):
1. generate, afresh unless --skip-generate (DIR/tests then holds only this selection's tests):
   the full suite is tosa_verif_conformance_generator (the official selection, its
   default seed) for --profile tosa-pro-int and the extensions EXT-INT16, EXT-INT4,
   EXT-DOUBLEROUND, EXT-INEXACTROUND and EXT-CONTROLFLOW (not with --no-controlflow), TOSA
   1.0.2, binary output, into DIR/tests. The sample is tosa_verif_build_tests driven in-process per operator
   (tests/validate_cases/build_conformance.py) with the suite's own per-operator selection
   criteria but small shapes (dimensions 1..8), at most 2 tests per permutation, one ERROR_IF
   test per kind, a random mix of constant and variable inputs where the suite has one, and a
   pinned seed (42); it adds CONST_SHAPE tests (a shape_t graph output), which the official
   selection lacks. `--profile ext-shape` is the same for the 15 shape operators of the TOSA
   1.1 draft (--tosa-version 1.1.0 --extension tosa-ext-shape, every profile).
   `--profile pro-fp`: tosa_verif_conformance_generator --tosa-version 1.0.2 --profile
   tosa-pro-fp --extension tosa-ext-bf16 tosa-ext-fp8e4m3 tosa-ext-fp8e5m2 tosa-ext-fft
   (9,896 tests); its sample is every PRO-FP operator in fp32, fp16, bf16 and both fp8 types.
2. expected outputs: the reference model runs every valid test in precise mode (fp64 results
   of float tests, and the bounds file where test_requirements.bounds_file_required); its outputs go to
   DIR/expected/<test name>/<ofm_file> (tests it calls UNPREDICTABLE or ERROR are listed in
   DIR/expected/reference.json and reported), beside the digest of the test's files they
   follow from: a later run reuses them only for a test whose files are the same.
3. run: npu-sim conformance DIR/tests --expected-dir DIR/expected --json DIR/results.json;
   float outputs are judged by Arm's compliance checker (compliant / non-compliant); the
   per-operator table goes to DIR/summary.md. Each result is appended to DIR/results.jsonl as
   it comes; `--skip-generate --resume` reruns only the tests it does not list yet.

Only this helper and the tests call the reference model; npu-sim itself never does.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from oracle import reference_binary

HERE = Path(__file__).resolve().parent

TOSA_VERSION = "1.0.2"
PROFILE = "tosa-pro-int"
EXTENSIONS = ("tosa-ext-int16", "tosa-ext-int4", "tosa-ext-doubleround", "tosa-ext-inexactround",
              "tosa-ext-controlflow")
CONTROLFLOW = "tosa-ext-controlflow"
SAMPLE_SEED = 42

# The generator's operator names: every operator of TOSA 1.0 PRO-INT (the list).
PRO_INT_OPS = (
    "argmax", "avg_pool2d", "conv2d", "conv3d", "depthwise_conv2d", "matmul", "max_pool2d",
    "transpose_conv2d", "clamp", "add", "sub", "mul", "arithmetic_right_shift", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "intdiv", "logical_and", "logical_or",
    "logical_xor", "logical_not", "logical_left_shift", "logical_right_shift", "maximum",
    "minimum", "table", "abs", "clz", "negate", "select", "equal", "greater", "greater_equal",
    "reduce_all", "reduce_any", "reduce_max", "reduce_min", "reduce_sum", "concat", "pad",
    "reshape", "reverse", "slice", "tile", "transpose", "gather", "scatter", "resize", "cast",
    "rescale", "const", "identity")
CONTROLFLOW_OPS = ("cond_if", "while_loop")          # EXT-CONTROLFLOW, run on the host CPU
SUITE_OPS = PRO_INT_OPS + CONTROLFLOW_OPS
# The official selection has no CONST_SHAPE tests (every PAD, RESHAPE, SLICE, TILE and RESIZE
# test feeds its shape operands from CONST_SHAPE); tosa_verif_build_tests has some, with the
# shape_t as the graph output: the sample adds them.
SAMPLE_ONLY_OPS = ("const_shape",)

# TOSA 1.1-draft shape operators (EXT-SHAPE): every one the generator has (its "shape" group).
SHAPE_OPS = ("add_shape", "assert_equal_shape", "concat_shape", "dim", "div_ceil_shape",
             "div_floor_shape", "exp2_shape", "log2_ceil_shape", "log2_floor_shape", "max_shape",
             "min_shape", "mod_shape", "mul_shape", "slice_shape", "sub_shape")


@dataclass(frozen=True)
class Suite:
    """One selection of conformance tests: what the generators are asked for."""
    name: str                    # the --profile value
    version: str                 # --tosa-version
    profiles: tuple              # generator --profile values (empty: every profile)
    extensions: tuple
    ops: tuple                   # operators of the official selection
    sample_dtypes: tuple         # --target-dtype of the sample
    sample_ops: tuple = ()       # operators only the sample generates
    op_args: dict | None = None  # extra sample generator arguments of some operators


# Every PRO-FP operator of TOSA 1.0 as the generator names them, MAC and FFT ones included
# (EXT-BF16, EXT-FP8E4M3, EXT-FP8E5M2 and EXT-FFT add types and FFT2D/RFFT2D).
FP_NON_MAC_OPS = (
    "abs", "add", "argmax", "avg_pool2d", "cast", "ceil", "clamp", "concat", "const", "cos",
    "equal", "erf", "exp", "floor", "gather", "greater", "greater_equal", "identity", "log",
    "max_pool2d", "maximum", "minimum", "mul", "negate", "pad", "pow", "reciprocal", "reduce_max",
    "reduce_min", "reduce_product", "reduce_sum", "reshape", "resize", "reverse", "rsqrt",
    "scatter", "select", "sigmoid", "sin", "slice", "sub", "tanh", "tile", "transpose")
FP_MAC_OPS = ("conv2d", "conv3d", "depthwise_conv2d", "transpose_conv2d", "matmul")
FFT_OPS = ("fft2d", "rfft2d")      # tosa_verif_build_tests makes no valid ones in the sample's sizes
FP_EXTENSIONS = ("tosa-ext-bf16", "tosa-ext-fp8e4m3", "tosa-ext-fp8e5m2", "tosa-ext-fft")

# Operators whose float tests the generator makes only for longer reductions (a DOT_PRODUCT
# check needs enough terms): the suite's own value range and a dimension range of that size.
FP_SAMPLE_OP_ARGS = {"reduce_sum": ["--fp-values-range=-max,max", "--tensor-dim-range", "32,34",
                                 "--target-rank", "3"],
                  "avg_pool2d": ["--fp-values-range=-max,max", "--target-shape", "2,11,7,5",
                                 "--allow-pooling-and-conv-oversizes"],
                  "conv2d": ["--fp-values-range=-max,max", "--target-shape", "1,9,7,9",
                             "--tensor-dim-range", "1,16", "--allow-pooling-and-conv-oversizes"],
                  "depthwise_conv2d": ["--fp-values-range=-max,max", "--target-shape", "1,9,7,5",
                                       "--tensor-dim-range", "1,16",
                                       "--allow-pooling-and-conv-oversizes"],
                  "matmul": ["--fp-values-range=-max,max", "--tensor-dim-range", "13,20"],
                  "fft2d": ["--fp-values-range=-max,max", "--tensor-dim-range", "8,16"],
                  "rfft2d": ["--fp-values-range=-max,max", "--tensor-dim-range", "8,16"]}

SUITES = {
    "pro-int": Suite("pro-int", TOSA_VERSION, (PROFILE,), EXTENSIONS, SUITE_OPS,
                     ("bool", "int4", "int8", "int16", "int32", "int48", "shape"), SAMPLE_ONLY_OPS),
    # Reported apart: a draft of the next version, run only because a graph declares it.
    "ext-shape": Suite("ext-shape", "1.1.0", (), ("tosa-ext-shape",), SHAPE_OPS,
                       ("bool", "int8", "int16", "int32", "fp32", "fp16", "bf16", "fp8e4m3",
                        "fp8e5m2")),
    # The official selection is one generator run over every operator (ops empty): about
    # 9,900 tests, integer-typed tests of the operators both profiles share included.
    "pro-fp": Suite("pro-fp", TOSA_VERSION, ("tosa-pro-fp",), FP_EXTENSIONS, (),
                    ("fp32", "fp16", "bf16", "fp8e4m3", "fp8e5m2"), FP_NON_MAC_OPS + FP_MAC_OPS + FFT_OPS,
                    FP_SAMPLE_OP_ARGS),
}

# Sample selection: the official per-operator selection criteria of the conformance suite
# (conformance/cts-config_v1.0.json: which parameters are permuted, which covered in full),
# with at most SAMPLE_MAXIMUM tests per permutation, one ERROR_IF test per kind, small shapes.
SAMPLE_MAXIMUM = 2
FALLBACK_SELECTION = {"permutes": ["type"], "maximum": 1}
SAMPLE_ARGS = ["--no-special-tests", "--tensor-dim-range", "1,8"]
BUILD_SCRIPT = HERE / "validate_cases" / "build_conformance.py"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# 1. generation
# --------------------------------------------------------------------------------------------

def _official_selection() -> dict:
    try:
        import generator
        path = Path(generator.__file__).parents[1] / "conformance" / "cts-config_v1.0.json"
        return json.loads(path.read_text())
    except (ImportError, OSError, ValueError):
        return {}


def _selection(op: str, official: dict) -> dict:
    sel = dict(official.get(op, {}).get("selection", {}).get("default", FALLBACK_SELECTION))
    sel.pop("errorifs", None)
    sel.pop("missing_errorifs", None)
    sel["maximum"] = min(int(sel.get("maximum", SAMPLE_MAXIMUM)), SAMPLE_MAXIMUM)
    sel["num_errorifs"] = 1
    return sel


def _profile_args(suite: Suite) -> list[str]:
    return ["--profile", *suite.profiles] if suite.profiles else []


def generate_sample(out: Path, ops=SUITE_OPS, seed: int = SAMPLE_SEED, jobs: int = 2,
                    extensions=EXTENSIONS, suite: Suite = SUITES["pro-int"]) -> dict[str, str]:
    """tosa_verif_build_tests per operator, in `jobs` processes; tests land in out/part<i>/.
    Returns {operator: the generator's last output line} of the operators Arm's generator
    could not build on this seed (seed 2027 makes a CONCAT test with a zero-size input that
    its data generator cannot fill): a batch that fails is built again operator by operator,
    so one such operator does not take the others with it."""
    out.mkdir(parents=True, exist_ok=True)
    config = out / "selection.json"
    official = _official_selection()
    config.write_text(json.dumps({op: {"selection": {"default": _selection(op, official)}}
                                  for op in ops}))
    common = [*_profile_args(suite), "--extension", *extensions, "--tosa-version", suite.version,
              "--test-type", "both", "--seed", str(seed), "--test-selection-config", str(config),
              "--target-dtype", *suite.sample_dtypes, *SAMPLE_ARGS]
    # Operators the suite generates with any mix of constant and variable inputs (e.g. a CONV2D
    # bias fed at run time) get that here too.
    op_args = suite.op_args or {}
    own = [op for op in ops if op in op_args]
    mixed = [op for op in ops if op not in own
             and "random_const_inputs" in official.get(op, {}).get("support_for", [])]
    plain = [op for op in ops if op not in mixed and op not in own]
    batches = [(op, op_args[op]) for op in own]
    for group, extra in ((mixed, ["--random-const-inputs"]), (plain, [])):
        for i in range(jobs):
            if group[i::jobs]:
                batches.append((",".join(group[i::jobs]), extra))
    failed: dict[str, str] = {}
    retry: list[tuple[str, list]] = []

    def build(batches, k0: int, on_failure):
        procs = []

        def wait():
            (part, extra, folder), proc = procs.pop(0)
            text, _ = proc.communicate()
            if proc.returncode:
                shutil.rmtree(folder, ignore_errors=True)     # a partial batch is no test
                on_failure(part, extra, text.decode(errors="replace"))

        for k, (part, extra) in enumerate(batches, k0):
            if len(procs) >= jobs:
                wait()
            folder = out / f"part{k}"
            procs.append(((part, extra, folder), subprocess.Popen(
                [sys.executable, str(BUILD_SCRIPT), part, "-o", str(folder), *common, *extra],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=out)))
        while procs:
            wait()

    build(batches, 0, lambda part, extra, _: retry.extend((op, extra) for op in part.split(",")))
    if retry:
        log(f"a generator batch failed: building {', '.join(op for op, _ in retry)} one by one")

        def note(op, extra, text):
            lines = text.strip().splitlines()
            failed[op] = lines[-1] if lines else "no output"
            log(f"Arm's generator cannot build {op} on seed {seed}: {failed[op]}")
        build(retry, len(batches), note)
    return failed


def generate_full(out: Path, ops=None, jobs: int = 2, extensions=EXTENSIONS,
                  suite: Suite = SUITES["pro-int"]) -> Path:
    """The official conformance selection (tosa_verif_conformance_generator, default seed)."""
    out.mkdir(parents=True, exist_ok=True)
    build = out.parent / "build"
    cmd = ["tosa_verif_conformance_generator", *_profile_args(suite), "--extension", *extensions,
           "--tosa-version", suite.version, "--output-type", "binary", "--output-directory", str(out),
           "--build-directory", str(build), "-j", str(jobs)]
    for op in ops or suite.ops or ("",):
        log(f"generating {op or 'every operator'} ...")
        t0 = time.perf_counter()
        proc = subprocess.run(cmd + (["--operators", op] if op else []), capture_output=True,
                              text=True, cwd=out.parent)
        if proc.returncode:
            raise RuntimeError(f"generating {op} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        log(f"  {op}: {time.perf_counter() - t0:.0f} s")
    shutil.rmtree(build, ignore_errors=True)
    return out


# --------------------------------------------------------------------------------------------
# 2. expected outputs
# --------------------------------------------------------------------------------------------

def reference_run(test_dir: Path, expected_dir: Path, binary: str | None = None) -> tuple[str, str]:
    """Run one valid test on the reference model in compliance mode (--precise_mode=1, as Arm's
    runner does); its outputs, and `bounds_<ofm_file>` for tests whose compliance mode needs
    bounds (RESCALE_INEXACT), go to expected_dir/<test name>/.
    Returns (status, message): status "ok", "unpredictable" or "error"."""
    desc = json.loads((test_dir / "desc.json").read_text())
    dest = expected_dir / test_dir.name
    missing = [f for f in desc["ifm_file"] if not (test_dir / f).is_file()]
    if missing:           # lazily generated data: let tosa-tools' data generator write it
        from conformance import model_files as cmf
        from generator.datagenerator import GenerateLibrary
        gen = GenerateLibrary(Path(cmf.find_tosa_file(cmf.TosaFileType.GENERATE_LIBRARY, None)))
        gen.set_config(desc)
        gen.write_numpy_files(test_dir)
    # Outputs kept from an earlier run serve only the same test: another seed's sample names
    # its tests alike but feeds them other data.
    source = source_digest(test_dir, desc)
    if all((dest / f).is_file() for f in desc["ofm_file"]) and \
            (dest / SOURCE_FILE).is_file() and (dest / SOURCE_FILE).read_text() == source:
        return "ok", ""
    tmp = expected_dir / f".{test_dir.name}.part"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cmd = [binary or reference_binary(), "--test_desc", str(test_dir / "desc.json"),
           "--output_dir", str(tmp), "--precise_mode=1", "--tosa_level", "EIGHTK"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=test_dir)
    if proc.returncode != 0 or not all((tmp / f).is_file() for f in desc["ofm_file"]):
        shutil.rmtree(tmp, ignore_errors=True)
        kind = {1: "unpredictable"}.get(proc.returncode, "error")
        text = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return kind, f"tosa_reference_model exit {proc.returncode}: {' '.join(text[:3])[:400]}"
    (tmp / SOURCE_FILE).write_text(source)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    return "ok", ""


SOURCE_FILE = "source.sha256"       # beside a test's expected outputs: source_digest() of the test


def source_digest(test_dir: Path, desc: dict) -> str:
    """SHA-256 of what a test's expected outputs follow from: its description, graph and
    input data."""
    digest = hashlib.sha256((test_dir / "desc.json").read_bytes())
    for name in [desc.get("tosa_file", ""), *desc["ifm_file"]]:
        if name and (test_dir / name).is_file():
            digest.update(name.encode() + b"\0" + (test_dir / name).read_bytes())
    return digest.hexdigest()


def reference_outputs(tests, expected_dir: Path, jobs: int = 2) -> dict[str, tuple[str, str]]:
    """Expected outputs of every valid test (threads: the work is in the native binary)."""
    expected_dir.mkdir(parents=True, exist_ok=True)
    binary = reference_binary()
    valid = [t for t in tests if not json.loads((t / "desc.json").read_text()).get("expected_failure")]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(lambda t: reference_run(t, expected_dir, binary), valid))
    status = {str(t): r for t, r in zip(valid, results)}
    problems = {k: v for k, v in status.items() if v[0] != "ok"}
    (expected_dir / "reference.json").write_text(json.dumps(problems, indent=1) + "\n")
    return status


# --------------------------------------------------------------------------------------------
# 3. run through npu-sim
# --------------------------------------------------------------------------------------------

def run_npu_sim(tests_dir: Path, expected_dir: Path, results_json: Path, jobs: int,
                config: str | None = None, output_dir: Path | None = None,
                resume: bool = False) -> list[dict]:
    """npu-sim on every test; each result is also appended to results_json's .jsonl sibling as it
    comes (a stopped run keeps what it measured), and `resume` reruns only the tests not listed
    there by a run with the same config."""
    from npu_sim import conformance as conf
    tests = conf.find_tests([tests_dir])
    log_file = results_json.with_suffix(".jsonl")
    head = {"config": config or "default"}
    done: dict[str, dict] = {}
    if resume and log_file.is_file():
        lines = log_file.read_text().splitlines()
        if lines and json.loads(lines[0]) != head:
            log(f"{log_file}: written by a run with {lines[0]}, not {json.dumps(head)}: "
                "resume with the same --config, or delete it")
            raise SystemExit(2)
        for line in lines[1:]:
            try:
                row = json.loads(line)
            except ValueError:            # the last line of a run stopped mid-write
                continue
            done[row["test"]] = row
    todo = [t for t in tests if str(t) not in done]
    if not done:
        log_file.write_text(json.dumps(head) + "\n")
    log(f"npu-sim: {len(todo)} tests to run, {len(tests) - len(todo)} already measured")
    with log_file.open("a") as f:
        def progress(r, n, total):
            f.write(json.dumps(r.to_json()) + "\n")
            f.flush()
        for r in conf.run_tests(todo, config, output_dir, expected_dir, jobs, progress=progress):
            done[str(r.test)] = r.to_json()
    rows = [done[str(t)] for t in tests]
    results_json.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def refused_by_both(rows: list[dict], reference: dict[str, tuple[str, str]]) -> int:
    """Marks the valid tests npu-sim refused as ERROR_IF tests where the reference model
    refused them too, with an ERROR_IF: the generator made a graph that breaks a rule (the
    1.1-draft ASSERT_EQUAL_SHAPE tests with broadcast inputs, on some seeds, RESHAPE to a
    shape their output does not have). Returns how many."""
    count = 0
    for row in rows:
        kind, why = reference.get(row["test"], ("ok", ""))
        if row["status"] == "fail" and row["message"].startswith("refused a valid graph") \
                and kind == "error" and "ERROR_IF" in why:
            row["status"], row["expected_failure"] = "refused", True
            row["message"] += f" (the reference model refuses it too: {why})"
            count += 1
    return count


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="working directory")
    ap.add_argument("--profile", choices=sorted(SUITES), default="pro-int",
                    help="the selection: pro-int (default); pro-fp, PRO-FP with EXT-BF16, "
                    "EXT-FP8E4M3, EXT-FP8E5M2 and EXT-FFT (run on large-8k unless --config); or "
                    "ext-shape, the TOSA 1.1-draft shape operators (reported apart)")
    ap.add_argument("--sample", action="store_true", help="the small CI sample instead of the full suite")
    ap.add_argument("--ops", help="comma-separated generator operator names (default: every "
                    "operator of the selection)")
    ap.add_argument("--no-controlflow", action="store_true", help="leave out EXT-CONTROLFLOW")
    ap.add_argument("--seed", type=int, default=SAMPLE_SEED, help="sample seed (default 42)")
    ap.add_argument("--config", help="npu-sim config (default: default; large-8k for pro-fp)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--skip-generate", action="store_true", help="reuse DIR/tests as it is")
    ap.add_argument("--resume", action="store_true", help="rerun through npu-sim only the tests "
                    "DIR/results.jsonl does not list (same --config; the code must not have changed)")
    args = ap.parse_args(argv)
    suite = SUITES[args.profile]
    out = args.out.resolve()
    ops = tuple(args.ops.split(",")) if args.ops else suite.ops + (suite.sample_ops if args.sample else ())
    config = args.config or ("large-8k" if suite.name == "pro-fp" else None)   # (fp8)
    exts = suite.extensions
    if args.no_controlflow:
        exts = tuple(e for e in exts if e != CONTROLFLOW)
        ops = tuple(op for op in ops if op not in CONTROLFLOW_OPS)
    tests_dir = out / "tests"
    t0 = time.perf_counter()
    not_built: dict[str, str] = {}
    if not args.skip_generate:
        shutil.rmtree(tests_dir, ignore_errors=True)   # only this selection's tests are run
        if args.sample:
            not_built = generate_sample(tests_dir, ops, args.seed, args.jobs, exts, suite)
        else:
            generate_full(tests_dir, ops, args.jobs, exts, suite)
    log(f"generated in {time.perf_counter() - t0:.0f} s")
    from npu_sim import conformance as conf
    tests = conf.find_tests([tests_dir])
    t1 = time.perf_counter()
    ref = reference_outputs(tests, out / "expected", args.jobs)
    bad_ref = {k: v for k, v in ref.items() if v[0] != "ok"}
    log(f"{len(ref)} reference runs in {time.perf_counter() - t1:.0f} s; "
        f"{len(bad_ref)} without outputs (see expected/reference.json)")
    t2 = time.perf_counter()
    rows = run_npu_sim(tests_dir, out / "expected", out / "results.json", args.jobs, config,
                      resume=args.resume)
    log(f"{len(rows)} npu-sim runs in {time.perf_counter() - t2:.0f} s")
    agreed = refused_by_both(rows, bad_ref)
    if agreed:
        log(f"{agreed} tests the generator marks valid break an ERROR_IF by the reference "
            "model too: counted as refused")
    table = conf.summary_table(rows, markdown=True)
    if not_built:
        table += "".join(f"\nNot generated (Arm's generator failed on seed {args.seed}): {op}: "
                         f"{why}\n" for op, why in sorted(not_built.items()))
    (out / "summary.md").write_text(table)
    print(table)
    for r in rows:
        if r["status"] in ("fail", "error", "non-compliant", "malformed"):
            print(f"{r['status'].upper()} {r['test']}: {r['message']}")
    return 0 if conf.ok(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
