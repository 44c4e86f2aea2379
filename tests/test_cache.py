"""The program cache: its key (the compiler's source hash, kept by the files' stats) and its size."""
import os

import pytest

from npu_sim import cache


def _version(monkeypatch, setting: str) -> str:
    monkeypatch.setenv("NPU_SIM_CACHE", setting)
    cache.compiler_version.cache_clear()
    try:
        return cache.compiler_version()
    finally:
        cache.compiler_version.cache_clear()


def test_source_hash_is_kept_by_the_files_stats_and_equals_the_content_hash(tmp_path,
                                                                             monkeypatch):
    computed = _version(monkeypatch, "off")             # no cache directory: hashed afresh
    assert len(computed) == 16
    assert _version(monkeypatch, str(tmp_path)) == computed
    memos = list((tmp_path / "sources").iterdir())
    assert [m.read_text() for m in memos] == [computed]
    # a later run reads the kept hash instead of the sources
    memos[0].write_text("0123456789abcdef")
    assert _version(monkeypatch, str(tmp_path)) == "0123456789abcdef"
    # a damaged entry is hashed again and rewritten
    memos[0].write_text("?")
    assert _version(monkeypatch, str(tmp_path)) == computed
    assert memos[0].read_text() == computed


def test_model_digest_is_kept_by_the_files_stats_and_a_rewrite_is_seen(tmp_path, monkeypatch):
    import hashlib
    import time
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "m.tosa"
    model.write_bytes(b"TOSA one")
    assert cache.kept_digest(model)[0] is None                 # not kept yet
    data = model.read_bytes()
    digest = cache.model_digest(data, cache.kept_digest(model)[1])
    assert digest == hashlib.blake2b(data, digest_size=32).hexdigest()
    assert cache.kept_digest(model)[0] is None                 # just written: not kept
    monkeypatch.setattr(cache, "RACY_NS", -1 << 62)            # as if written long ago
    cache.model_digest(data, cache.kept_digest(model)[1])
    assert cache.kept_digest(model)[0] == digest
    time.sleep(0.05)                   # past the file system's timestamp granularity
    model.write_bytes(b"TOSA two")                             # the same size, rewritten
    assert cache.kept_digest(model)[0] is None
    assert cache.kept_digest(tmp_path) == (None, None)         # not a regular file



def test_past_its_limit_the_cache_drops_the_least_recently_used_programs(tmp_path):
    import os
    for i in range(8):                                  # 8 programs of 1 KiB, used in turn
        path = tmp_path / f"{i}.npub"
        path.write_bytes(bytes(1024))
        os.utime(path, ns=(i * 10**9, i * 10**9))
    (tmp_path / "yaml").mkdir()                         # what else is kept there stays
    cache.trim(tmp_path, 8 * 1024)                      # at the limit: nothing goes
    assert len(list(tmp_path.glob("*.npub"))) == 8
    cache.trim(tmp_path, 6 * 1024)                      # past it: down to 3/4 of it
    assert sorted(p.name for p in tmp_path.glob("*.npub")) == [f"{i}.npub" for i in (4, 5, 6, 7)]
    assert (tmp_path / "yaml").is_dir()


def test_a_cached_run_marks_its_program_used_and_a_compile_trims(tmp_path, monkeypatch):
    import os
    from npu_sim import api
    from pathlib import Path
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path))
    model = Path(__file__).parent / "data" / "small_cnn" / "model.tosa"
    cfg = api.load_config("default")
    api.compile_model(model, cfg)
    (entry,) = tmp_path.glob("*.npub")
    os.utime(entry, ns=(0, 0))                          # as if last used in 1970
    api.compile_model(model, cfg)                       # from the cache
    assert entry.stat().st_mtime_ns > 0
    monkeypatch.setenv("NPU_SIM_CACHE_MIB", "0")        # no room: a compile empties it
    api.compile_model(model, api.load_config("edge-256"))
    assert not list(tmp_path.glob("*.npub"))


@pytest.mark.parametrize("setting", ["lots", "\u00b2"])     # '2'.isdigit(), but no int
def test_a_bad_cache_size_is_one_line(monkeypatch, capsys, setting):
    from npu_sim.cli import main
    monkeypatch.setenv("NPU_SIM_CACHE_MIB", setting)
    assert main(["run", "--timing-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"NPU_SIM_CACHE_MIB={setting!r}" in err, err


@pytest.mark.parametrize("kind", ["fifo", "device", "not utf-8"])
def test_a_cache_memo_that_is_no_memo_is_passed_over(tmp_path, kind):
    """The cache directory's memos are shortcuts: a FIFO, a device or damaged bytes where one
    should be is read as none (a FIFO had hung every run, /dev/zero had filled the memory)."""
    memo = tmp_path / "memo"
    if kind == "fifo":
        os.mkfifo(memo)
    elif kind == "device":
        memo.symlink_to("/dev/zero")
    else:
        memo.write_bytes(b"\xff\xfe" * 8)
    assert cache.read_memo(memo, 16) == ""
    (tmp_path / "good").write_text("0123456789abcdef")
    assert cache.read_memo(tmp_path / "good", 16) == "0123456789abcdef"
    assert cache.read_memo(tmp_path / "good", 15) == ""


def test_the_cache_folder_is_read_as_a_shell_would(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NPU_SIM_CACHE", "~/progs")
    assert cache.cache_dir() == tmp_path / "progs"
    monkeypatch.setenv("NPU_SIM_CACHE", "  ")
    assert cache.cache_dir() == tmp_path / ".cache" / "npu-sim"
