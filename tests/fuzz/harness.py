"""Runs fuzz cases through the CLI's main() in worker processes and judges each one.

A worker (forked, so the imports are paid once) runs its cases one after another in-process;
the parent watches it: a case still running after TIMEOUT_S is a hang, one whose resident
memory grows more than MEMORY_CAP over the worker's before the case is over the cap, and both
cost the worker its life (a fresh one takes over). Verdicts:

  refused     exit status 2 and exactly one line on stderr, "npu-sim: ...", no traceback
  ran         exit status 0 and what the case says a correct run leaves (outputs that load,
              a finite report, a sweep without errored points, the original bytes' results)
  traceback   an exception escaped main(), or a message of more than one line
  wrong-run   exit status 0 but the run is not correct (see the case's check)
  bad-exit    any other exit status
  partial     files left behind by a failed run, or a staged *.part file after any run
  hang, over-cap, crash   as above; crash: the worker died (a signal, os._exit)
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import multiprocessing
import os
import shutil
import signal
import stat
import tempfile
import time
import traceback
from dataclasses import dataclass, field

TIMEOUT_S = 30.0
MEMORY_CAP = 1 << 30
GOOD = ("refused", "ran")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Case:
    target: str                       # one of cases.TARGETS
    index: int
    argv: list[str]
    # relative path -> bytes, or a special: ("dir",), ("fifo",), ("symlink", target), ("sparse", size)
    files: dict = field(default_factory=dict)
    check: str = "outputs"            # what exit 0 must show: outputs | report | sweep | none | same:<digest>
    keep: tuple = ()                  # paths a failed run may leave (a sweep's results file)
    note: str = ""                    # the mutation, for the failure listing

    @property
    def name(self) -> str:
        return f"{self.target}#{self.index}"


@dataclass
class Result:
    case: str
    verdict: str
    rc: int | None = None
    detail: str = ""
    seconds: float = 0.0
    rss_growth: int = 0


def _materialize(root: str, files: dict) -> None:
    for rel, spec in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path) or root, exist_ok=True)
        if isinstance(spec, (bytes, bytearray)):
            with open(path, "wb") as f:
                f.write(spec)
        elif spec[0] == "dir":
            os.makedirs(path, exist_ok=True)
        elif spec[0] == "fifo":
            os.mkfifo(path)
        elif spec[0] == "symlink":
            os.symlink(spec[1], path)
        elif spec[0] == "sparse":
            with open(path, "wb") as f:
                f.truncate(spec[1])


def _tree(root: str) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            out.add(os.path.relpath(os.path.join(dirpath, n), root))
    return out


def _finite(obj) -> bool:
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(_finite(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_finite(v) for v in obj)
    return True


def _outputs_digest(root: str) -> str:
    import hashlib

    import numpy as np
    h = hashlib.sha256()
    out = os.path.join(root, "out")
    for name in sorted(os.listdir(out)) if os.path.isdir(out) else []:
        h.update(name.encode())
        h.update(np.load(os.path.join(out, name), allow_pickle=False).tobytes())
    return h.hexdigest()[:16]


def _check_run(case: Case, root: str, stdout: str) -> str:
    """'' when an exit-0 run is correct for the case, else why not."""
    import numpy as np
    kind = case.check
    if kind == "none":
        return ""
    if kind == "outputs" or kind.startswith("same:"):
        if "--timing-only" in case.argv or case.argv[0] != "run":
            return ""
        names = sorted(p for p in _tree(root) if p.endswith(".npy") and p not in case.files)
        if not names:
            return "no outputs written"
        for n in names:
            np.load(os.path.join(root, n), allow_pickle=False)
        if kind.startswith("same:") and _outputs_digest(root) != kind[5:]:
            return "outputs differ from the unmutated input's"
        return ""
    if kind == "report":
        with open(os.path.join(root, "r.json")) as f:
            return "" if _finite(json.load(f)) else "the report holds inf or NaN"
    if kind == "sweep":
        with open(os.path.join(root, "out", "results.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        bad = [r for r in rows if r.get("status") == "error"]
        return f"{len(bad)} points errored: {bad[0].get('error')}" if bad else ""
    return f"unknown check {kind}"


def run_in_process(case: Case) -> Result:
    """Run one case in this process (the worker's side)."""
    from npu_sim.cli import main
    root = tempfile.mkdtemp(prefix="npu-fuzz-")
    cwd = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    rc, crash = None, ""
    try:
        _materialize(root, case.files)
        before = _tree(root)
        os.chdir(root)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(list(case.argv))
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            if not isinstance(exc.code, (int, type(None))):
                err.write(str(exc.code))
        except BaseException:
            crash = traceback.format_exc()
        finally:
            os.chdir(cwd)
        seconds = time.perf_counter() - t0
        if crash:
            return Result(case.name, "traceback", None, crash.strip().splitlines()[-1][:300], seconds)
        text = err.getvalue()
        lines = text.strip().splitlines()
        new = _tree(root) - before
        staged = sorted(p for p in new if p.endswith(".part") or ".part." in p)
        if staged:
            return Result(case.name, "partial", rc, f"staged files left: {staged[:3]}", seconds)
        if rc == 2:
            if "Traceback" in text or len(lines) != 1 or not lines[0].startswith("npu-sim: "):
                return Result(case.name, "traceback", rc, " | ".join(lines)[:300], seconds)
            if lines[0].startswith("npu-sim: out of memory"):
                return Result(case.name, "over-cap", rc, lines[0], seconds)
            left = sorted(p for p in new if not any(p.startswith(k) for k in case.keep))
            if left:
                return Result(case.name, "partial", rc, f"a failed run left {left[:3]}", seconds)
            return Result(case.name, "refused", rc, lines[0][:200], seconds)
        if rc == 0:
            if "Traceback" in text:
                return Result(case.name, "traceback", rc, text[-300:], seconds)
            try:
                why = _check_run(case, root, out.getvalue())
            except Exception as exc:            # the run claimed success but its files are bad
                why = f"{type(exc).__name__}: {exc}"
            return Result(case.name, "wrong-run" if why else "ran", rc, why[:300], seconds)
        return Result(case.name, "bad-exit", rc, " | ".join(lines)[:300], seconds)
    finally:
        os.chdir(cwd)
        _rmtree(root)


def _rmtree(root: str) -> None:
    def onerror(func, path, exc_info):
        with contextlib.suppress(OSError):
            os.chmod(path, stat.S_IRWXU)
            func(path)
    shutil.rmtree(root, onerror=onerror)


def _worker(conn, env: dict, scratch: str) -> None:
    os.environ.update(env)
    tempfile.tempdir = scratch          # the parent clears it if this worker has to be killed
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        case = conn.recv()
        if case is None:
            return
        conn.send(run_in_process(case))


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


class Worker:
    def __init__(self, env: dict):
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.scratch = tempfile.mkdtemp(prefix="npu-fuzz-worker-")
        self.proc = ctx.Process(target=_worker, args=(child, env, self.scratch))  # not daemonic: sweeps fork
        self.proc.start()

    def run(self, case: Case, timeout: float = TIMEOUT_S, cap: int = MEMORY_CAP) -> Result:
        base = _rss(self.proc.pid)
        peak = base
        t0 = time.perf_counter()
        self.conn.send(case)
        while True:
            if self.conn.poll(0.02):
                try:
                    result = self.conn.recv()
                except EOFError:
                    return Result(case.name, "crash", None, f"worker exit {self.proc.exitcode}",
                                  time.perf_counter() - t0, peak - base)
                result.rss_growth = peak - base
                return result
            peak = max(peak, _rss(self.proc.pid))
            elapsed = time.perf_counter() - t0
            if peak - base > cap or elapsed > timeout or not self.proc.is_alive():
                verdict = "over-cap" if peak - base > cap else "hang" if elapsed > timeout else "crash"
                self.kill()
                return Result(case.name, verdict, None, f"{elapsed:.1f} s, +{(peak - base) >> 20} MiB",
                              elapsed, peak - base)

    def kill(self) -> None:
        if self.proc.is_alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join()
        _rmtree(self.scratch)

    def close(self) -> None:
        if self.proc.is_alive():
            with contextlib.suppress(OSError, BrokenPipeError):
                self.conn.send(None)
            self.proc.join(5)
        self.kill()


def run_cases(cases: list[Case], env: dict, progress=None) -> list[Result]:
    """Run cases one after another in one worker (restarted after a hang, cap or crash)."""
    results, worker = [], None
    try:
        for case in cases:
            if worker is None:
                worker = Worker(env)
            result = worker.run(case)
            if result.verdict in ("hang", "over-cap", "crash"):
                worker = None
            results.append(result)
            if progress:
                progress(result)
    finally:
        if worker is not None:
            worker.close()
    return results


def summary(results: list[Result]) -> dict:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return {"cases": len(results), **dict(sorted(counts.items())),
            "max_seconds": round(max((r.seconds for r in results), default=0), 2),
            "max_rss_growth_mib": round(max((r.rss_growth for r in results), default=0) / 2**20, 1)}


def failures(results: list[Result]) -> list[Result]:
    return [r for r in results if r.verdict not in GOOD]

