"""The NNAPI CTS (AOSP generated tests, JSON lines) run through the device: getSupportedOperations
first (any false: `unsupported`), then prepareModel and execute, judged by the harness's
accuracy criteria (`pass`/`fail`); an expectFailure case refused anywhere is `expected-failure`.
A case is `exact` too when every checked output equals the expected values bit for bit."""
from __future__ import annotations

import gzip
import itertools
import json
import zlib
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from npu_sim.compiler.frontends.nnapi.model import OperandType as T
from npu_sim.compiler.frontends.nnapi.model import CaseFormatError, model_from_dict, optional
from npu_sim.isa.errors import InputError, ModelError

from ..paths import why_unreadable
from .device import Device
from .hal import ErrorStatus, ExecutionPreference, MeasureTiming, Request

F16_TOL = 5 * 2.0 ** -10


# Bytes of one line (a case): the largest AOSP case (V1_1.jsonl.gz line 263) is 3.4 MiB, and
# a line is read whole, so a compressed file cannot expand without bound.
MAX_LINE = 16 << 20


def read_cases(path: str):
    """(line number, case dict) per line, read one at a time; a malformed line is an InputError
    naming it."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            for n, raw in enumerate(iter(lambda: f.readline(MAX_LINE + 1), b""), 1):
                if len(raw) > MAX_LINE:
                    raise InputError(f"{path}:{n}: a line over {MAX_LINE:,} bytes, longer "
                                     "than any CTS case")
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(f"{path}:{n}: not a text file of JSON cases (not UTF-8: "
                                     f"{exc.reason})") from None
                if not line.strip():
                    continue
                try:
                    case = json.loads(line)
                except (ValueError, RecursionError) as exc:
                    raise InputError(f"{path}:{n}: not a JSON case ({json_why(exc)})") from None
                if not isinstance(case, dict):
                    raise InputError(f"{path}:{n}: a case must be a JSON object")
                yield n, case
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from None


def json_why(exc: Exception, where: bool = False) -> str:
    """Why json.loads refused a text, in a few words; `where`: with the position."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return str(exc) if where else exc.msg
    return str(exc).split(";")[0][:80]           # e.g. an integer of over 4300 digits


def _quant8_atol(case: dict, what: str) -> float:
    """criteria.quant8_atol (default 1), a finite number >= 0."""
    criteria = optional(case, "criteria", "object", {}, what)
    atol = float(optional(criteria, "quant8_atol", "float32", 1, f"{what} criteria"))
    if atol < 0:
        raise CaseFormatError(f"{what} criteria: field 'quant8_atol' is {atol:g}, expected >= 0")
    return atol


def _tolerance(case: dict, otype, relaxed16: bool) -> tuple[float, float]:
    """(atol, rtol) of the harness for outputs of otype; run_case has checked the criteria."""
    if otype in (T.TENSOR_FLOAT32,):
        return (F16_TOL, F16_TOL) if relaxed16 else (1e-5, 5 * 2.0 ** -23)
    if otype == T.TENSOR_FLOAT16:
        return F16_TOL, F16_TOL
    if otype in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM):
        return _quant8_atol(case, ""), 0.0
    if otype == T.TENSOR_BOOL8:
        return 0.0, 0.0
    return 1.0, 0.0


def run_case(case: dict, path: str, device: Device, line: int | None = None) -> dict:
    """One case's result; CaseFormatError (the case breaks the schema) is raised, not counted."""
    name = str(case.get("name", "?"))
    out = {"case": name, "file": path, "status": "", "message": "", "exact": False,
           "operations": [], "type": ""}
    source = f"{path}:{line}" if line else path
    _quant8_atol(case, f"{source} case '{name[:120]}'")
    optional(case, "expectFailure", "bool", False, f"{source} case '{name[:120]}'")
    try:
        model = model_from_dict(case, source)
    except CaseFormatError:
        raise
    except ModelError as exc:
        return {**out, "status": "expected-failure" if case.get("expectFailure") else "invalid",
                "message": str(exc)}
    sg = model.main
    out["operations"] = sorted({op.type.name for op in sg.operations})
    real = [op for op in sg.operations if op.type.name != "ADD"] or sg.operations
    out["type"] = sg.operands[real[0].inputs[0]].type.name if real and real[0].inputs else ""
    expect_fail = bool(case.get("expectFailure"))
    try:
        verdicts = device.supported_operations(model)
    except ModelError as exc:                 # an operation types.spec makes invalid
        return {**out, "status": "expected-failure" if expect_fail else "invalid",
                "message": f"INVALID_ARGUMENT: {exc}"}
    refused = [(i, why) for i, (ok, why) in enumerate(verdicts) if not ok]
    if refused:
        return {**out, "status": "unsupported", "message": refused[0][1]}
    status, prepared = device.prepareModel(model, ExecutionPreference.FAST_SINGLE_ANSWER)
    if status != ErrorStatus.NONE:
        return {**out, "status": "expected-failure" if expect_fail else "fail",
                "message": f"prepareModel: {status.name}"}
    # A case brings every value: AOSP's harness omits an optional input given 'data' [], which
    # the device allows of parameter inputs only (a TRANSPOSE's perm); outputs need theirs.
    for k in sg.input_indexes + sg.output_indexes:
        o = sg.operands[k]
        if o.data is None and o.count and k not in prepared.parameters and \
                not case["main"]["operands"][k].get("isIgnored"):
            return {**out, "status": "expected-failure" if expect_fail else "invalid",
                    "message": f"{source} case '{name[:120]}' main operand {k}: 'data' holds 0 "
                               f"values, dimensions {list(o.dimensions)} need {o.count}"}
    inputs = [sg.operands[k].data for k in sg.input_indexes]
    status, shapes, _, outputs = prepared.execute(Request(inputs), MeasureTiming.YES)
    if status != ErrorStatus.NONE:
        return {**out, "status": "expected-failure" if expect_fail else "fail",
                "message": f"execute: {status.name}"}
    if expect_fail:
        return {**out, "status": "fail", "message": "expected to fail, but ran"}
    relaxed16 = model.relax_computation_float32_to_float16 or any(
        o.type == T.TENSOR_FLOAT16 for g in [sg] + model.referenced for o in g.operands)
    exact, problems = True, []
    for j, k in enumerate(sg.output_indexes):
        o, raw = sg.operands[k], case["main"]["operands"][k]
        if raw.get("isIgnored"):
            continue
        if tuple(shapes[j].dimensions) != tuple(o.dimensions):
            problems.append(f"output {j} dimensions {list(shapes[j].dimensions)}")
            continue
        want = o.data if o.data is not None else np.zeros(o.dimensions)
        got = np.asarray(outputs[j]).astype(np.float64)
        atol, rtol = _tolerance(case, o.type, relaxed16)
        err = np.abs(got - want.astype(np.float64))
        bad = int(np.count_nonzero(err > atol + rtol * np.abs(want.astype(np.float64))))
        if bad:
            problems.append(f"output {j}: {bad} of {want.size} elements off by up to "
                            f"{err.max():g} (atol {atol:g})")
        exact = exact and not err.any()
    return {**out, "status": "fail" if problems else "pass", "message": "; ".join(problems),
            "exact": exact and not problems}


_DEVICES: dict = {}


def _work(args):
    case, path, config, line = args
    device = _DEVICES.setdefault(config, Device(config))
    return run_case(case, path, device, line)


def run_files(paths: list[str], config: str | None, jobs: int = 1):
    """Every case of every file, in order (a malformed line is an InputError)."""
    for p in paths:
        why = why_unreadable(p)
        if why:
            raise InputError(f"{p}: {why}")
    work = ((case, p, config, n) for p in paths for n, case in read_cases(p))
    if jobs <= 1:
        return [_work(w) for w in work]
    results = []
    with ProcessPoolExecutor(jobs) as pool:     # a batch at a time: pool.map reads all first
        while batch := list(itertools.islice(work, 64 * jobs)):
            results += pool.map(_work, batch, chunksize=8)
    return results


def table(results: list[dict]) -> str:
    """Counts per operation and operand type (of the first real operation's first input)."""
    rows: dict = defaultdict(Counter)
    for r in results:
        for op in r["operations"] or ["?"]:
            if op == "ADD" and len(r["operations"]) > 1:
                continue
            rows[(op, r["type"])][r["status"]] += 1
            rows[(op, r["type"])]["exact"] += bool(r.get("exact"))
    cols = ["pass", "exact", "fail", "unsupported", "expected-failure", "invalid"]
    lines = [f"{'operation':<30} {'operand type':<32}" + "".join(f"{c:>10}" for c in
                                                                  ("pass", "exact", "fail", "unsup",
                                                                   "exp-fail", "invalid"))]
    for (op, t), c in sorted(rows.items()):
        lines.append(f"{op:<30} {t:<32}" + "".join(f"{c[k]:>10}" for k in cols))
    total = Counter(r["status"] for r in results)
    n = len(results)
    exact = sum(bool(r.get("exact")) for r in results)
    supported = n - total["unsupported"]
    lines.append(f"{n} cases: {total['pass']} pass ({exact} bit-exact), {total['fail']} fail, "
                 f"{total['unsupported']} unsupported, {total['expected-failure']} expected "
                 f"failures, {total['invalid']} invalid; supported {supported / n:.1%}, "
                 f"bit-exact {exact / n:.1%} of all cases" if n else "0 cases")
    return "\n".join(lines) + "\n"
