"""On-disk cache of compiled programs, keyed by model bytes, config and compiler version.

Users rerun the same model on the same config many times (inputs, reports, sweeps over
run-time options); compiling is then skipped. The key includes a hash of the compiler's and the
ISA's source, so a changed compiler does not reuse an old program. That hash is kept by the
files' sizes and modification times, so an edit that restores both (or a copy with normalised
times) is not seen (clear the cache then). A model's digest is kept likewise, by its file's
device, inode, size and modification and change times. NPU_SIM_CACHE=off disables it;
NPU_SIM_CACHE=DIR moves it (default ~/.cache/npu-sim). Its programs take at most
NPU_SIM_CACHE_MIB mebibytes (default 1024): a compile that passes it removes the least recently
used ones down to three quarters of it (a cached run marks its program used).
"""
from __future__ import annotations

import os
import stat
import time
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

from npu_sim.isa.encoding import decode, encode
from npu_sim.isa.errors import ConfigError, ProgramError

from .digest import hasher, hexdigest

_PACKAGE = Path(__file__).resolve().parent


DEFAULT_MIB = 1024


def size_limit() -> int:
    """Bytes the cached programs may take (NPU_SIM_CACHE_MIB, a whole number of MiB)."""
    setting = os.environ.get("NPU_SIM_CACHE_MIB", "").strip()
    if not setting:
        return DEFAULT_MIB << 20
    if not (setting.isascii() and setting.isdigit()) or len(setting) > 9:   # not '²'
        raise ConfigError(f"NPU_SIM_CACHE_MIB={setting[:40]!r}: expected a whole number of MiB "
                          f"(default {DEFAULT_MIB})")
    return int(setting) << 20


def cache_dir() -> Path | None:
    setting = os.environ.get("NPU_SIM_CACHE", "").strip()
    if setting.lower() in ("0", "off", "no", "false"):
        return None
    size_limit()                         # a bad NPU_SIM_CACHE_MIB is refused on every run
    # '~/x' as a shell would read it, not a folder named '~' in the working directory
    return Path(setting).expanduser() if setting else Path.home() / ".cache" / "npu-sim"


def read_memo(path: Path | None, limit: int) -> str:
    """A memo kept in the cache directory as text, or "" where there is none, or it is no
    regular file (a FIFO, /dev/zero), over `limit` bytes or not UTF-8: a memo is only ever a
    shortcut, so what cannot be one is passed over, never waited on."""
    if path is None:
        return ""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
        return data.decode() if len(data) <= limit else ""
    except (OSError, UnicodeDecodeError):
        return ""
    finally:
        os.close(fd)


@lru_cache(maxsize=1)
def compiler_version() -> str:
    """Hash of the product's own installed source: every module of the npu_sim package and its
    mapped subpackages (a source checkout maps npu_sim.isa and npu_sim.compiler elsewhere).

    Reading and hashing the megabyte of source was a twentieth of a small network's cached
    run, so the hash is kept in the cache directory under a digest of every file's path, size
    and modification time (what Python trusts to reuse a module's bytecode: a file changed
    unseen by these would run stale code anyway)."""
    roots = [Path(find_spec(name).origin).parent for name in ("npu_sim.isa", "npu_sim.compiler")]
    found: list[tuple[str, str, os.stat_result]] = []
    for root in [_PACKAGE] + [r for r in roots if _PACKAGE not in r.parents]:
        _sources(str(root), len(str(root.parent)) + 1, found)
    found.sort(key=lambda p: p[1])
    listing = hasher()
    for path, _, st in found:
        listing.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    root = cache_dir()
    memo = root / "sources" / listing.hexdigest()[:32] if root is not None else None
    version = read_memo(memo, 16)
    if len(version) == 16:
        return version
    h = hasher()
    for path, name, _ in found:
        h.update(name.encode())
        with open(path, "rb") as f:
            h.update(f.read())
    version = h.hexdigest()[:16]
    if memo is not None:
        _write(memo, version.encode())
    return version


def _sources(folder: str, cut: int, found: list) -> None:
    """Add (path, its name from the root's parent on: '/'-separated, `cut` characters in, its
    stat) of every .py file under `folder` to `found`. os.scandir, as every cached run pays
    this: pathlib's rglob took it several times as long."""
    with os.scandir(folder) as entries:
        for e in entries:
            if e.is_dir():
                if e.name != "__pycache__":
                    _sources(e.path, cut, found)
            elif e.name.endswith(".py"):
                found.append((e.path, e.path[cut:].replace(os.sep, "/"), e.stat()))


RACY_NS = 2_000_000_000


def kept_digest(path) -> tuple[str | None, os.stat_result | None]:
    """The digest of a model file's bytes as kept by model_digest for the file's identity and
    stats (None when not kept), and those stats (None when it is not a regular file).

    Reading and hashing a 4 MB model was a twentieth of a cached run's time, which needs only
    its digest. Kept under its device, inode, size and modification and change times: a
    rewrite changes the change time, which no call can set back."""
    try:
        st = os.stat(path)
    except OSError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        return None, None
    root = cache_dir()
    if root is None:
        return None, st
    digest = read_memo(_digest_memo(root, st), 64)
    return (digest, st) if len(digest) == 64 else (None, st)


def model_digest(data: bytes, st: os.stat_result | None) -> str:
    """The digest of a model's bytes, kept for kept_digest when `st` (its file's stats)."""
    digest = hexdigest(data)
    root = cache_dir()
    # Not kept for a file changed in the last RACY_NS: a rewrite within the file system's
    # clock tick (milliseconds) would leave its stats as they were.
    if (root is not None and st is not None
            and time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS):
        _write(_digest_memo(root, st), digest.encode())
    return digest


def _digest_memo(root: Path, st: os.stat_result) -> Path:
    ident = f"{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
    return root / "models" / hexdigest(ident.encode())[:32]


def key(model_digest: str, config) -> str:
    """The cache key of a model (its bytes' digest, hex) compiled for `config`."""
    h = hasher(model_digest.encode())
    h.update(config.fingerprint().encode())
    h.update(compiler_version().encode())
    return h.hexdigest()


def load(k: str):
    root = cache_dir()
    if root is None:
        return None
    path = root / f"{k}.npub"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))   # a FIFO: no wait
        with os.fdopen(fd, "rb") as f:   # read section by section
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            program = decode(f, "cache")
    except (OSError, ProgramError):
        return None              # a missing or damaged entry is simply recompiled
    try:
        os.utime(path)           # used now: the last to go when the cache is trimmed
    except OSError:
        pass
    return program


def store(k: str, program) -> None:
    root = cache_dir()
    if root is not None:
        limit = size_limit()
        _write(root / f"{k}.npub", encode(program))
        trim(root, limit)


def trim(root: Path, limit: int) -> None:
    """Past `limit` bytes of programs, remove the least recently used down to 3/4 of it."""
    try:
        entries = []
        with os.scandir(root) as it:
            for e in it:
                if e.name.endswith(".npub") and e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    entries.append((st.st_mtime_ns, st.st_size, e.path))
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return
    entries.sort()
    for _, size, path in entries:
        if total <= limit * 3 // 4:
            break
        try:
            os.remove(path)
            total -= size
        except OSError:
            pass             # another process removed it, or the directory is read-only


def _write(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all (a temporary file moved into place)."""
    import tempfile                      # only here: a cached run writes nothing
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass                     # a read-only or full disk only costs the next compile
