"""Which npu-sim source the benchmark measures.

By default a committed revision (HEAD): its product packages are exported with `git archive`
into the cache and put first on npu-sim's PYTHONPATH, so edits that land in the work tree
while the benchmark runs (other people's, or your own) cannot mix code versions within one
run. `--worktree` measures the live work tree instead; then a fingerprint of the product
sources taken before and after the run tells whether they changed meanwhile.
"""
from __future__ import annotations

import compileall
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

PRODUCT_DIRS = ("compiler", "isa", "npu_sim", "configs")
# The repository's top-level folders that install as subpackages of npu_sim (pyproject.toml).
MAPPED_SUBPACKAGES = ("isa", "compiler", "configs")


def _git(repo: Path, *args, binary=False):
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True,
                       timeout=120)
    return r.stdout if binary else r.stdout.decode().strip()


def fingerprint(root: Path) -> str:
    """Hash of the product sources (.py, .yaml, .tosa) under `root`."""
    h = hashlib.sha256()
    for d in PRODUCT_DIRS:
        base = root / d
        if not base.is_dir() or base.is_symlink():
            continue
        for f in sorted(base.rglob("*")):
            if f.suffix in (".py", ".yaml", ".tosa") and f.is_file() \
                    and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(root)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


def snapshot(repo: Path, rev: str, cache: Path) -> tuple[str, Path]:
    """Export `rev`'s product packages to cache/src/<sha>; return (sha, path)."""
    sha = _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    dest = cache / "src" / sha[:12]
    if not (dest / ".complete").exists():
        data = _git(repo, "archive", "--format=tar", sha, *PRODUCT_DIRS, binary=True)
        tmp = dest.with_name(dest.name + ".part")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            if hasattr(tarfile, "tar_filter"):
                tar.extractall(tmp, filter="tar")
            else:
                tar.extractall(tmp)
        if (tmp / "configs" / "__init__.py").exists():      # lay them out as pip installs them
            for name in MAPPED_SUBPACKAGES:
                (tmp / name).rename(tmp / "npu_sim" / name)
        # Byte-compile as pip does for an installed package, so a machine that sets
        # PYTHONDONTWRITEBYTECODE does not charge every timed run with compiling the sources.
        compileall.compile_dir(str(tmp), quiet=1)
        (tmp / ".complete").write_text(sha + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    return sha, dest


def use(path: Path, env: dict) -> dict:
    """`env` with `path` first on PYTHONPATH; also imports from it in this process."""
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join([str(path)] + ([env["PYTHONPATH"]]
                                                       if env.get("PYTHONPATH") else []))
    sys.path.insert(0, str(path))
    return env


def check(env: dict, cwd: Path) -> str:
    """Where npu-sim's processes import npu_sim from."""
    r = subprocess.run([sys.executable, "-c", "import npu_sim; print(npu_sim.__file__)"],
                       env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    return r.stdout.strip() or r.stderr.strip()
