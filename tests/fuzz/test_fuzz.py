"""The CI's fixed fuzz sample: 800 seeded cases (100 per target), each refused in one line or
run correctly, none over its time or memory cap, none leaving partial outputs. The full run
is `python tests/fuzz/run.py` (12,000 cases; README "Robustness")."""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import TARGETS, make_case, make_cases  # noqa: E402
from harness import Case, Worker, failures, summary  # noqa: E402
from run import run  # noqa: E402

CI_SEED = 20261201
PER_TARGET = 100


def test_fuzz_sample_is_clean():
    cases = make_cases(CI_SEED, dict.fromkeys(TARGETS, PER_TARGET))
    assert len(cases) == PER_TARGET * len(TARGETS)
    results = run(cases, jobs=1)
    totals = summary(results)
    print(totals)
    bad = [f"{r.case} {r.verdict}: {r.detail}" for r in failures(results)]
    assert not bad, "\n".join(bad[:20])
    assert totals.get("ran", 0) >= 25 and totals.get("refused", 0) >= 250   # both kinds exercised


def test_cases_are_reproducible():
    a, b = make_case(3, "npub", 17), make_case(3, "npub", 17)
    assert (a.argv, a.files, a.note) == (b.argv, b.files, b.note)


@pytest.mark.parametrize("argv, files, verdict", [
    (["run", "f"], {"f": ("fifo",)}, "refused"),                   # would block in open()
    (["run", "z"], {"z": ("symlink", "/dev/zero")}, "refused"),     # would never end
    (["run", "l"], {"l": ("symlink", "l")}, "refused"),
])
def test_harness_judges_odd_files(argv, files, verdict):
    from run import worker_env
    w = Worker(worker_env("off"))
    try:
        result = w.run(Case("cli", 0, argv, files), timeout=20)
    finally:
        w.close()
    assert result.verdict == verdict, result


def test_harness_catches_hangs_and_memory():
    """The watchdog itself: a case that sleeps is a hang, one that allocates is over the cap."""
    import harness
    from run import worker_env
    real = harness.run_in_process
    harness.run_in_process = lambda case: time.sleep(5)
    w = Worker(worker_env("off"))
    try:
        hang = w.run(Case("cli", 1, [], {}), timeout=0.5)
    finally:
        w.close()
        harness.run_in_process = real
    assert hang.verdict == "hang"
    harness.run_in_process = lambda case: bytearray(64 << 20) and time.sleep(5)
    w = Worker(worker_env("off"))
    try:
        big = w.run(Case("cli", 2, [], {}), timeout=10, cap=16 << 20)
    finally:
        w.close()
        harness.run_in_process = real
    assert big.verdict == "over-cap"
