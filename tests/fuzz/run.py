"""The fuzz suite from the command line: python tests/fuzz/run.py [--cases N] [-j J] [--seed S].

Runs N seeded mutation cases (spread evenly over .tosa, .tflite, .npub, configs, sweep files, CLI
arguments, NNAPI JSON cases and traces for the viewer) through npu-sim's main(), each judged by tests/fuzz/harness.py, and prints the totals
(README "Robustness"). `--only npub#123` reruns one case; `--json F` writes every result.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import TARGETS, make_case, make_cases  # noqa: E402
from harness import failures, run_cases, summary  # noqa: E402


def worker_env(cache: str) -> dict:
    # Each case's own program cache would only slow it; the hazard checker is tested elsewhere.
    return {"NPU_SIM_CACHE": cache, "NPU_SIM_CHECK_HAZARDS": "0", "OPENBLAS_NUM_THREADS": "1"}


def run(cases, jobs: int, progress: bool = False):
    """The cases on `jobs` workers; results in case order."""
    from cases import artifacts
    artifacts()                    # built once, before the workers fork
    results, lock, done = [None] * len(cases), threading.Lock(), [0]
    with tempfile.TemporaryDirectory(prefix="npu-fuzz-cache-") as cache:
        env = worker_env(cache)

        def lane(k):
            mine = list(range(k, len(cases), jobs))

            def report(result):
                with lock:
                    done[0] += 1
                    if progress and (done[0] % 250 == 0 or result.verdict not in ("refused", "ran")):
                        print(f"  {done[0]}/{len(cases)} {result.case} {result.verdict} {result.detail[:150]}",
                              file=sys.stderr)
            for i, r in zip(mine, run_cases([cases[i] for i in mine], env, report)):
                results[i] = r

        threads = [threading.Thread(target=lane, args=(k,)) for k in range(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=12_000, help="total cases (default 12,000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--only", help="one case, e.g. npub#123")
    p.add_argument("--json", help="write every result here")
    args = p.parse_args(argv)
    if args.only:
        target, _, index = args.only.partition("#")
        cases = [make_case(args.seed, target, int(index))]
    else:
        targets = args.targets.split(",")
        per = {t: args.cases // len(targets) + (i < args.cases % len(targets)) for i, t in enumerate(targets)}
        cases = make_cases(args.seed, per)
    t0 = time.perf_counter()
    results = run(cases, max(1, args.jobs), progress=True)
    totals = {**summary(results), "seconds": round(time.perf_counter() - t0, 1)}
    by_target = {t: summary([r for r in results if r.case.startswith(t + "#")]) for t in TARGETS}
    print(json.dumps({"totals": totals, "by_target": by_target}, indent=1))
    for r in failures(results):
        print(f"FAIL {r.case} {r.verdict}: {r.detail}")
    if args.json:
        Path(args.json).write_text(json.dumps([vars(r) for r in results], indent=0))
    return 1 if failures(results) else 0


if __name__ == "__main__":
    sys.exit(main())
