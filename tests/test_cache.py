"""The program cache's key: the compiler's source hash, kept by the files' stats."""
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

