"""Time one command as a whole process and record its peak memory.

Peak memory is the `ru_maxrss` (KiB) that wait4() reports for the command: on Linux it covers
the process and the children it waited for (e.g. the native binary behind
tosa_reference_model's Python shim). Linux starts a child's maxrss at the RSS of the process
it was forked from, so the command is not forked from this (numpy-sized) process: it runs
under GNU time (`/usr/bin/time -f ... -o FILE`, ~1 MiB floor) when that is installed, else
under a minimal `python -S -I` launcher that spawns it and reports wait4()'s rusage (a
~10 MiB floor). `floor()` measures the floor with `true`. Wall time is `time.perf_counter()`
around the whole thing; CPU time is user + system of the command from the same rusage.
"""
from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

# numpy's OpenBLAS (and any OpenMP runtime) would otherwise start one thread per core.
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def child_env(threads: int) -> dict[str, str]:
    """The environment every timed process gets: the same thread counts for every tool
    (threads 0: leave the variables as they are)."""
    env = dict(os.environ)
    for v in THREAD_VARS if threads > 0 else ():
        env[v] = str(threads)
    return env


def find_tool(name: str) -> str | None:
    """A console script next to this interpreter first (skips pyenv's bash shims, whose
    start-up would otherwise be timed too), else from PATH."""
    here = Path(sys.executable).parent / name
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which(name)


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    maxrss_kib: int
    rc: int
    stderr_tail: str = ""
    extra: dict = field(default_factory=dict)

    def to_dict(self):
        return asdict(self)


_GNU_TIME = "/usr/bin/time"
_LAUNCHER = r"""
import os, sys
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, ru = os.wait4(pid, 0)
rc = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as f:
    f.write("%d %r %r %d\n" % (rc, ru.ru_utime, ru.ru_stime, ru.ru_maxrss))
sys.exit(rc if 0 <= rc < 256 else 1)
"""


def method() -> str:
    """How commands are measured: 'gnu-time' or 'python-launcher'."""
    if os.access(_GNU_TIME, os.X_OK):
        try:
            r = subprocess.run([_GNU_TIME, "-f", "%M", "true"], capture_output=True, text=True,
                               timeout=30)
            if r.returncode == 0 and r.stderr.strip().splitlines()[-1].isdigit():
                return "gnu-time"
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    return "python-launcher"


METHOD = method()


def _wrap(cmd: list[str], rusage_file: Path) -> list[str]:
    if METHOD == "gnu-time":
        return [_GNU_TIME, "-f", "%x %U %S %M", "-o", str(rusage_file), *cmd]
    return [sys.executable, "-S", "-I", "-c", _LAUNCHER, str(rusage_file), *cmd]


def _parse(rusage_file: Path) -> tuple[int, float, int] | None:
    try:
        last = rusage_file.read_text().strip().splitlines()[-1].split()
        return int(last[0]), float(last[1]) + float(last[2]), int(last[3])
    except (OSError, IndexError, ValueError):
        return None


def run(cmd: list[str], env: dict, cwd: Path, log_base: Path, timeout_s: float = 900) -> Sample:
    """Run `cmd`, stdout/stderr to `log_base`.out/.err; return wall, CPU, peak RSS and rc."""
    log_base.parent.mkdir(parents=True, exist_ok=True)
    rusage_file = Path(f"{log_base}.rusage")
    rusage_file.unlink(missing_ok=True)
    with open(f"{log_base}.out", "wb") as out, open(f"{log_base}.err", "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(_wrap(cmd, rusage_file), env=env, cwd=cwd, stdout=out, stderr=err,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        # a blocking wait: Popen.wait(timeout=...) polls with sleeps of up to 50 ms, which
        # would quantize the wall time; a timer thread enforces the timeout instead
        killer = threading.Timer(timeout_s, _kill_group, (p,))
        killer.start()
        try:
            rc = p.wait()
        finally:
            killer.cancel()
        wall = time.perf_counter() - t0
    got = _parse(rusage_file)
    if got is None:
        cpu, rss = 0.0, 0
        rc = rc or -1
    else:
        rc, cpu, rss = got if rc == 0 or got[0] != 0 else (rc, got[1], got[2])
    tail = ""
    if rc != 0:
        lines = Path(f"{log_base}.err").read_text(errors="replace").strip().splitlines()
        tail = "\n".join(lines[-5:]) if lines else f"(exit status {rc}, no stderr)"
        if got is None and wall >= timeout_s:
            tail = f"killed after the {timeout_s:g} s timeout"
    return Sample(wall, cpu, rss, rc, tail)


def _kill_group(p: subprocess.Popen):
    """Kill the command and everything it started (it runs in its own session)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        p.kill()


def floor(env: dict, cwd: Path, log_base: Path) -> Sample:
    """The measurement's own floor: `true` under the same wrapper."""
    return run(["true"], env, cwd, log_base)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(samples: list[Sample]) -> dict | None:
    ok = [s for s in samples if s.rc == 0]
    if not ok:
        return None
    walls = [s.wall_s for s in ok]
    return {"n": len(ok), "wall_s": median(walls), "wall_min_s": min(walls),
            "wall_max_s": max(walls), "cpu_s": median([s.cpu_s for s in ok]),
            "peak_rss_mib": max(s.maxrss_kib for s in ok) / 1024}


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b
