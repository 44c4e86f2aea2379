"""`npu-sim conformance PATH...`: run TOSA conformance test folders through npu-sim.

A conformance test folder (as tosa_verif_build_tests / tosa_verif_conformance_generator write
them with `--output-type binary`) holds `desc.json`, the graph (`test.tosa`) and its input data
(`.npy`); the generator's default JSON form (`test.json`, `input-N.json`) is read too, the
graph compiled with tosa-tools' flatc. Each test is loaded, validated and compiled for the
chosen config and simulated on the bit-exact datapath; its outputs are written to
`D/<test folder name>/<ofm_file>` with exactly the dtype the reference model writes (int48 as
int64, bool as numpy bool).

Statuses (one per test, in the JSON report and the per-operator summary):

    pass      the graph ran; its outputs equal the expected ones bit for bit, or no expected
              output was found (message "no expected output")
    compliant      a test with floating-point outputs ran, its integer outputs (if any) are
              bit-exact and Arm's compliance checker finds every float output within the
              bounds of the fp64 reference (the message: the checker's, or the mode)
    non-compliant  the same, but the checker finds a float output outside them (the message
              is the checker's: where, by how much, against which bound)
    fail      outputs differ; or an expected-failure (ERROR_IF) test was accepted; or a valid
              test was refused (the message gives the reason)
    refused   an expected-failure test was rejected (NpuSimError from load/validate/compile/
              run): the right answer for ERROR_IF tests
    error     an internal error (a bug: any other exception)
    malformed the folder cannot be read as a test (desc.json, or a file it names, missing,
              unreadable, of the wrong type or inconsistent with the graph): bad input,
              not npu-sim's verdict (conformance_folder.py)
    skipped   the test needs a profile or extension the config does not enable, or a
              multiply-accumulate its MAC array does not declare (mac_array.precision)

Expected outputs, in order of preference: `--expected-dir E` (E/<test name>/<ofm_file>), the
desc's `expected_result_file` list, `<ofm_file>` or `ref-<ofm_file>` in the test folder, or
the reference results Arm's runner leaves (`<stem>.runner.tosa_refmodel_compliance_sut_run.npy`).
Integer outputs must match bit for bit, except under the RESCALE_INEXACT compliance mode
(EXT-INEXACTROUND), where they must lie within the bounds the reference model's compliance run
writes next to the expected output (`bounds_<file>`). Float outputs are judged by Arm's checker
(npu_sim/compliance.py) against the expected output of the reference model's precise run
(`--precise_mode=1`: fp64) and its `bounds_<file>` where the desc requires bounds.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from npu_sim.isa.errors import InputError, NotEnabledError, NpuSimError, UnsupportedError

from .conformance_folder import (MalformedTestError, field, load_desc, load_graph, npy_header,
                                 read_inputs, read_npy)

STATUSES = ("pass", "compliant", "non-compliant", "fail", "refused", "error", "malformed",
            "skipped")
FAILED = ("fail", "error", "non-compliant", "malformed")       # listed as they come
REF_RUNNER_SUFFIX = ".runner.tosa_refmodel_compliance_sut_run"


@dataclass
class TestResult:
    test: str                     # the test folder
    status: str                   # one of STATUSES
    message: str = ""
    operator: str = ""
    expected_failure: bool = False
    seconds: float = 0.0
    cycles: int | None = None
    npu_ops: int | None = None
    host_ops: int | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


# --------------------------------------------------------------------------------------------
# discovery and descriptors
# --------------------------------------------------------------------------------------------

def find_tests(paths) -> list[Path]:
    """Every folder holding a desc.json, at or below each path (sorted, deduplicated)."""
    found: list[Path] = []
    seen: set[Path] = set()
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
        if p.is_file():
            if p.name in ("desc.json", "desc_binary.json"):
                p = p.parent
            else:
                raise InputError(f"{p}: expected a conformance test folder (with desc.json) or a "
                                 "folder of such folders")
        if (p / "desc.json").is_file():
            dirs = [p]
        else:
            dirs = sorted({d.parent for d in p.rglob("desc.json")})
        for d in dirs:
            key = d.resolve()
            if key not in seen:
                seen.add(key)
                found.append(d)
    return found


def operator_of(desc: dict, test_dir: Path) -> str:
    op = field(desc, "test_details.operator")
    if op:
        return str(op).upper()
    return test_dir.name.split("_")[0].upper()


def _norm_ext(name: str) -> str:
    name = str(name).strip().upper()
    if name.startswith("TOSA-"):
        name = name[5:]
    return name if name.startswith("EXT-") else "EXT-" + name


def unsupported_requirement(desc: dict, config) -> str | None:
    """Why the config cannot run this test (profile/extension not enabled), or None."""
    req = desc.get("test_requirements", {})
    profiles = [str(p).upper().removeprefix("TOSA-") for p in req.get("profiles_supported", [])]
    if profiles and not set(profiles) & set(config.tosa.profiles):
        return (f"needs profile {' or '.join(profiles)}; the config implements "
                f"{', '.join(config.tosa.profiles)}")
    enabled = {_norm_ext(e) for e in config.tosa.extensions}
    missing = [e for e in (_norm_ext(x) for x in req.get("extensions_required", [])) if e not in enabled]
    if missing:
        return f"needs extension {', '.join(missing)}, which config '{config.name}' does not enable"
    return None


def expected_files(test_dir: Path, desc: dict, expected_dir: Path | None) -> list[Path] | None:
    """The expected output of every ofm, or None when they are not all available."""
    ofm = list(desc.get("ofm_file", []))
    candidates = []
    if expected_dir is not None:
        candidates.append([Path(expected_dir) / test_dir.name / f for f in ofm])
    if desc.get("expected_result_file"):
        candidates.append([test_dir / f for f in desc["expected_result_file"]])
    candidates.append([test_dir / f for f in ofm])
    candidates.append([test_dir / f"ref-{f}" for f in ofm])
    candidates.append([test_dir / f"{Path(f).stem}{REF_RUNNER_SUFFIX}{Path(f).suffix}" for f in ofm])
    for files in candidates:
        if files and all(f.is_file() for f in files):
            return files
    return None


# --------------------------------------------------------------------------------------------
# running one test
# --------------------------------------------------------------------------------------------

_CONFIGS: dict = {}


def conformance_config(spec: str | None, level: str | None):
    from . import api
    key = (spec, level)
    if key not in _CONFIGS:
        cfg = api.load_config(spec)
        if level:
            cfg = cfg.with_overrides({"tosa.level": level})
        _CONFIGS[key] = cfg
    return _CONFIGS[key]


def _compliance(desc: dict, name: str) -> dict:
    return field(desc, "meta.compliance.tensors", {}).get(name, {})


def _compare(actual: dict, expected: list[Path], desc: dict):
    """(problem, how, verdict): problem None when every integer output matches its expected
    array, else what differs; verdict None when no output is a float one, else (compliant,
    message) of Arm's checker over the float outputs (npu_sim/compliance.py).

    Integer compliance modes are EXACT (bit for bit, dtype and shape included) except
    RESCALE_INEXACT (EXT-INEXACTROUND): there the reference model's compliance run writes the
    lowest allowed value as the result and the highest as `bounds_<ofm_file>`, and any value in
    between conforms, as Arm's verifier checks it. Float outputs are judged against the fp64
    reference of the precise run and, when the test needs them, its `bounds_<file>`."""
    import numpy as np

    from . import compliance
    problems, how, verdicts = [], "bit-exact", []
    needs_bounds = field(desc, "test_requirements.bounds_file_required", False)
    for name, path in zip(desc.get("ofm_name", []), expected):
        got = actual.get(name)
        if got is None:
            problems.append(f"{name}: not produced")
            continue
        shape, dtype = npy_header(path, f"expected output {path}")     # before any data
        info = _compliance(desc, name)
        bounds = path.with_name(f"bounds_{path.name}")
        if compliance.judged(info):
            if got.shape != shape:
                problems.append(f"{name}: shape {list(got.shape)}, expected {list(shape)}")
                continue
            if needs_bounds and not bounds.is_file():
                problems.append(f"{name}: the test needs the reference model's bounds, {bounds} "
                                "is missing")
                continue
            good, text = compliance.check(name, desc["meta"]["compliance"], got,
                                          read_npy(path, f"expected output {path}"),
                                          _bounds(bounds, shape) if needs_bounds else None)
            verdicts.append((good, f"{name}: {text}"))
            continue
        if got.dtype != dtype:
            problems.append(f"{name}: dtype {got.dtype}, expected {dtype}")
            continue
        if got.shape != shape:
            problems.append(f"{name}: shape {list(got.shape)}, expected {list(shape)}")
            continue
        want = read_npy(path, f"expected output {path}")
        if info.get("mode") == "RESCALE_INEXACT" and bounds.is_file():
            hi = _bounds(bounds, shape, dtype)
            lo, g = want, got
            if info.get("rescale_inexact_info", {}).get("unsigned_data"):
                udt = np.dtype(f"u{want.dtype.itemsize}")
                lo, hi, g = lo.view(udt), hi.view(udt), g.view(udt)
            diff = (g < lo) | (g > hi)
            if diff.any():
                idx = tuple(int(i) for i in np.argwhere(diff)[0])
                problems.append(f"{name}: {int(diff.sum())} of {diff.size} values outside the "
                                f"RESCALE_INEXACT bounds (first at {list(idx)}: {g[idx]!r}, allowed "
                                f"{lo[idx]!r}..{hi[idx]!r})")
            elif (got != want).any():
                how = "within RESCALE_INEXACT bounds"
            continue
        diff = got != want
        if diff.any():
            idx = tuple(int(i) for i in np.argwhere(diff)[0])
            problems.append(f"{name}: {int(diff.sum())} of {diff.size} values differ (first at "
                            f"{list(idx)}: {got[idx]!r}, expected {want[idx]!r})")
    verdict = None
    if verdicts:
        bad = [m for good, m in verdicts if not good]
        verdict = (not bad, "; ".join(bad or [m for _, m in verdicts]))
    return ("; ".join(problems) or None), how, verdict


def _bounds(path: Path, shape: tuple, dtype=None) -> np.ndarray:
    """A bounds_<file> array, of its expected output's shape (and dtype, when given)."""
    what = f"bounds {path}"
    held, held_dtype = npy_header(path, what)
    if held != shape or dtype not in (None, held_dtype):
        raise MalformedTestError(f"{what}: holds {held_dtype}{list(held)[:8]}, its expected "
                                 f"output {dtype or ''}{list(shape)}")
    return read_npy(path, what)


def _save_npy(f, array) -> None:
    """np.save, except that raw bytes (bf16 |V2, fp8e4m3 |V1) get the '<V2' / '<V1' header
    the reference model writes: tosa_verify, which Arm's runner checks SUT outputs with,
    refuses numpy's '|V2' spelling of the same bytes ("Data type/format not suitable")."""
    import numpy as np
    if array.dtype.kind != "V":
        np.save(f, array, allow_pickle=False)
        return
    header = "{'descr': '<V%d', 'fortran_order': False, 'shape': %r, }" % (
        array.dtype.itemsize, tuple(array.shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"      # 64-byte aligned, as numpy does
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
    f.write(np.ascontiguousarray(array).tobytes())


def write_outputs(outputs: dict, desc: dict, out_dir: Path) -> None:
    from npu_sim.isa.dtypes import as_npy
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, file in zip(desc.get("ofm_name", []), desc.get("ofm_file", [])):
        if name in outputs:
            tmp = out_dir / f".{file}.part"
            with open(tmp, "wb") as f:
                _save_npy(f, as_npy(outputs[name]))
            os.replace(tmp, out_dir / file)


class ConfigLacksError(UnsupportedError):
    """The config, by its own declaration, cannot run the graph."""


def _array_lacks(graph, config) -> str | None:
    """Why the config's MAC array cannot run a multiply-accumulate of the graph by what it
    declares (mac_array.precision: the operand pair, an fp32 accumulator), or None."""
    from npu_sim.isa.operators import OPERATORS
    array = config.mac_array
    for op in graph.operators:
        if OPERATORS[op.op].engine != "mac":
            continue
        act, weight = (graph.tensors[n].dtype for n in op.inputs[:2])
        pair = f"{act}x{weight}"
        if pair not in array.precision:
            return (f"needs {act} x {weight} multiply-accumulates ({op.op}), which config "
                    f"'{config.name}' does not declare (mac_array.precision: "
                    f"{', '.join(array.precision)})")
        acc = op.attrs.get("acc_type") if op.op != "MATMUL" else graph.tensors[op.outputs[0]].dtype
        if acc == "fp32" and array.float_acc.get(pair, "fp32") != "fp32":
            return (f"needs {pair} accumulated in fp32 ({op.op}), config '{config.name}' "
                    f"accumulates it in {array.float_acc[pair]} (mac_array.precision.{pair}.acc)")
    return None


def run_graph(test_dir: Path, desc: dict, config):
    """Load, validate, compile and simulate one test. Returns the api.RunResult.
    Raises MalformedTestError when the folder cannot be read as a test, ConfigLacksError
    when the config's MAC array cannot run the graph, NpuSimError when npu-sim refuses it.
    Inputs are read once the graph has compiled: they then fit the config's memory."""
    from npu_sim.compiler.validate import validate
    from . import api
    graph = load_graph(test_dir, desc)
    compiled = graph.copy()
    validate(compiled, config.tosa.profiles, config.tosa.extensions, config.tosa.level)
    try:
        program = api.compile_model(compiled, config, validated=True)
    except UnsupportedError:
        why = _array_lacks(compiled, config)     # (as compiled so far: FFTs became GEMMs)
        if why:
            raise ConfigLacksError(why) from None
        raise
    for name in desc.get("ofm_name", []):
        if name not in graph.outputs:
            raise MalformedTestError(f"'ofm_name' names '{name}', which is no output of the "
                                     f"graph (outputs: {', '.join(graph.outputs)})")
    return api.simulate(program, config, read_inputs(test_dir, desc, graph))


def run_test(test_dir, config_spec: str | None = None, output_dir=None, expected_dir=None,
             level: str | None = None) -> TestResult:
    """Run one conformance test folder; never raises."""
    test_dir = Path(test_dir)
    t0 = time.perf_counter()
    res = TestResult(str(test_dir), "error")
    try:
        desc = load_desc(test_dir)
        res.operator = operator_of(desc, test_dir)
        res.expected_failure = desc.get("expected_failure", False)
        config = conformance_config(config_spec, level)
        why = unsupported_requirement(desc, config)
        if why:
            res.status, res.message = "skipped", why
            return res
        try:
            result = run_graph(test_dir, desc, config)
        except (ConfigLacksError, NotEnabledError) as exc:     # the config says it cannot
            res.status, res.message = "skipped", str(exc)
            return res
        except MalformedTestError:
            raise
        except NpuSimError as exc:
            if res.expected_failure:
                res.status, res.message = "refused", exc.one_line()
            else:
                res.status, res.message = "fail", f"refused a valid graph: {exc.one_line()}"
            return res
        rep = result.report
        res.cycles = int(rep.cycles)
        res.npu_ops, res.host_ops = rep.operators["npu"], rep.operators["host"]
        if res.expected_failure:
            what = desc.get("test_details", {}).get("ERRORIF") or desc.get("expected_failure_desc", "")
            res.status = "fail"
            res.message = f"expected the graph to be refused ({what}), but it ran"
            return res
        if output_dir is not None:
            write_outputs(result.outputs, desc, Path(output_dir) / test_dir.name)
        expected = expected_files(test_dir, desc, expected_dir)
        if expected is None:
            res.status, res.message = "pass", "no expected output"
            return res
        problem, how, verdict = _compare(result.outputs, expected, desc)
        if problem:
            res.status, res.message = "fail", problem
        elif verdict is not None:
            res.status = "compliant" if verdict[0] else "non-compliant"
            res.message = verdict[1]
        else:
            res.status, res.message = "pass", how
        return res
    except MalformedTestError as exc:
        res.status, res.message = "malformed", str(exc)
        return res
    except Exception as exc:  # a bug in npu-sim
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        res.status, res.message = "error", f"{type(exc).__name__}: {exc}{where}"
        return res
    finally:
        res.seconds = round(time.perf_counter() - t0, 4)


def _worker_init():
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def _run_one(args):
    return run_test(*args)


def run_tests(tests, config_spec: str | None = None, output_dir=None, expected_dir=None,
              jobs: int = 1, level: str | None = None, progress=None) -> list[TestResult]:
    """Run test folders (in `jobs` worker processes); results in the order of `tests`."""
    work = [(str(t), config_spec, output_dir, expected_dir, level) for t in tests]
    conformance_config(config_spec, level)          # a bad config fails here, once, as a ConfigError
    results: list[TestResult] = []
    if jobs <= 1 or len(work) <= 1:
        for w in work:
            results.append(_run_one(w))
            if progress:
                progress(results[-1], len(results), len(work))
        return results
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=min(jobs, len(work)), initializer=_worker_init) as pool:
        for r in pool.map(_run_one, work, chunksize=max(1, min(16, len(work) // (jobs * 8) or 1))):
            results.append(r)
            if progress:
                progress(r, len(results), len(work))
    return results


# --------------------------------------------------------------------------------------------
# summaries
# --------------------------------------------------------------------------------------------

def summarize(results) -> dict[str, dict[str, int]]:
    """{operator: {status: count}} over results (TestResult or their JSON dicts)."""
    table: dict[str, dict[str, int]] = {}
    for r in results:
        d = r.to_json() if isinstance(r, TestResult) else r
        row = table.setdefault(d.get("operator") or "?", {s: 0 for s in STATUSES})
        row[d["status"]] += 1
    return dict(sorted(table.items()))


def summary_table(results, markdown: bool = False) -> str:
    table = summarize(results)
    cols = ("passed", "compliant", "non-compliant", "refused", "failed", "errors", "malformed",
            "skipped")
    keys = {"passed": "pass", "compliant": "compliant", "non-compliant": "non-compliant",
            "refused": "refused", "failed": "fail", "errors": "error", "malformed": "malformed",
            "skipped": "skipped"}
    if not any(row["compliant"] + row["non-compliant"] for row in table.values()):
        cols = tuple(c for c in cols if "compliant" not in c)    # an integer-only run
    if not any(row["malformed"] for row in table.values()):
        cols = tuple(c for c in cols if c != "malformed")
    total = {c: sum(row[keys[c]] for row in table.values()) for c in cols}
    width = max([len(op) for op in table] + [8])
    lines = []
    if markdown:
        lines.append("| operator | " + " | ".join(cols) + " |")
        lines.append("|---|" + "---:|" * len(cols))
        for op, row in table.items():
            lines.append(f"| {op} | " + " | ".join(str(row[keys[c]]) for c in cols) + " |")
        lines.append("| **total** | " + " | ".join(f"**{total[c]}**" for c in cols) + " |")
    else:
        lines.append(f"{'operator':<{width}} " + " ".join(f"{c:>{len(c) if len(c) > 8 else 8}}" for c in cols))
        for op, row in table.items():
            lines.append(f"{op:<{width}} " + " ".join(f"{row[keys[c]]:>{max(8, len(c))}}" for c in cols))
        lines.append(f"{'total':<{width}} " + " ".join(f"{total[c]:>{max(8, len(c))}}" for c in cols))
    return "\n".join(lines) + "\n"


def ok(results) -> bool:
    """True when every test passed (valid tests) or was refused (ERROR_IF tests), ignoring
    skipped ones."""
    for r in results:
        d = r.to_json() if isinstance(r, TestResult) else r
        if d["status"] in FAILED:
            return False
        if d["status"] == "refused" and not d.get("expected_failure", True):
            return False
    return True


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def _run_with_progress(tests, args, jobs: int) -> list:
    """run_tests() with failures listed as they come and, on a terminal, a counter. A single
    test's malformed folder is left to the command's one error line."""
    single = len(tests) == 1
    show = sys.stderr.isatty() and not args.quiet and not single

    def progress(r, done, total):
        if r.status in FAILED and not args.quiet and not (single and r.status == "malformed"):
            print(f"  {r.status.upper():7} {r.test}: {r.message}", file=sys.stderr)
        if show:
            print(f"\r  {done}/{total}", end="", file=sys.stderr, flush=True)

    results = run_tests(tests, args.config, args.output_dir, args.expected_dir, jobs, args.level,
                        progress)
    if show:
        print(file=sys.stderr)
    return results


def cmd_conformance(args) -> int:
    jobs = args.jobs
    if not 1 <= jobs <= 512:                # as npu-sim dse: more only spawn idle processes
        raise InputError(f"-j {jobs}: expected 1 to 512 worker processes")
    tests = find_tests(args.paths)
    if not tests:
        raise InputError(f"no conformance tests (folders with desc.json) under {' '.join(args.paths)}")
    if args.output_dir and os.path.exists(args.output_dir) and not os.path.isdir(args.output_dir):
        raise InputError(f"--output-dir {args.output_dir}: exists and is not a directory")
    from .cli_files import Staged
    with Staged() as staged:
        # the report's file is claimed before the tests run: a bad path fails at once
        report = staged.path(args.json) if args.json else None
        t0 = time.perf_counter()
        results = _run_with_progress(tests, args, jobs)
        if len(results) == 1 and results[0].status == "malformed":    # bad input, as the path
            raise MalformedTestError(f"{results[0].test}: {results[0].message}")
        if report is not None:
            report.write_text(json.dumps([r.to_json() for r in results], indent=1) + "\n")
            staged.commit()
    sys.stdout.write(summary_table(results))
    print(f"{len(results)} tests in {time.perf_counter() - t0:.1f} s"
          + (f"; outputs in {args.output_dir}" if args.output_dir else ""))
    return 0 if ok(results) else 1


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "conformance", help="run TOSA conformance test folders (desc.json + test.tosa + .npy)",
        description="Run TOSA conformance tests: each PATH is a test folder or a folder of them "
                    "(searched recursively). Exit status 0 when every valid test passes and every "
                    "ERROR_IF test is refused, 1 otherwise (a malformed test folder among "
                    "others included), 2 on bad arguments or when the only test folder is "
                    "malformed.")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--config", help="preset name or YAML path (default: default, which enables "
                   "every PRO-INT extension)")
    p.add_argument("--level", choices=("8K", "none"), help="override the config's TOSA level")
    p.add_argument("--output-dir", metavar="D", help="write outputs to D/<test name>/<ofm_file>")
    p.add_argument("--expected-dir", metavar="E", help="expected outputs as E/<test name>/<ofm_file> "
                   "(otherwise looked up in each test folder)")
    p.add_argument("--json", metavar="R.json", help="write one {test, status, message, ...} per test")
    p.add_argument("-j", "--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("-q", "--quiet", action="store_true", help="do not list failures as they happen")
    p.set_defaults(func=cmd_conformance)
