"""What the benchmark ran on: CPU, cores, memory, versions, thread settings, load."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 ** 2, 1)
    except OSError:
        pass
    return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git(repo: Path, *args) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def blas_info(env: dict) -> list | str:
    """numpy's BLAS as the timed processes see it (threadpoolctl in a child with their env)."""
    code = ("import json, numpy, threadpoolctl; "
            "print(json.dumps(threadpoolctl.threadpool_info()))")
    try:
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable ({exc})"
    if r.returncode != 0:
        return "unavailable (pip install threadpoolctl to record it)"
    keep = ("internal_api", "version", "num_threads", "threading_layer", "architecture")
    return [{k: d.get(k) for k in keep} for d in json.loads(r.stdout)]


def describe(repo: Path, env: dict) -> dict:
    import numpy

    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    dirty = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": affinity,
        "mem_total_gib": _mem_total_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "tosa_tools": _version("tosa-tools"),
        "ethos_u_vela": _version("ethos-u-vela"),
        "npu_sim": _version("npu-sim"),
        "git_commit": _git(repo, "rev-parse", "--short", "HEAD"),
        "git_dirty_files": dirty.splitlines() if dirty else [],
        "thread_env": {k: env.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                               "MKL_NUM_THREADS", "OPENBLAS_CORETYPE",
                                               "OPENBLAS_L2_SIZE")},
        "blas": blas_info(env),
    }


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
