"""Soak: 1,000 consecutive design points in one process, as a sweep worker runs them, with the
resident memory flat (issue 17: within 10 MB once warm).

    python bench/soak.py [--points 1000] [--network zoo:ds_cnn?channels=8] [--json F]

Each point compiles the network for a config (sram.size and vector lanes cycle through a few
values, so compiled programs and reports vary) and simulates it timing-only through
npu_sim.dse.evaluate_point, the function sweep workers call. RSS is sampled from /proc after
every point; the verdict compares the end with the level after the first WARMUP points (caches
of loaded graphs and configs fill there). Exit status 1 when memory grew more than the limit.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

WARMUP = 100
LIMIT_MB = 10.0
SIZES = ["32 KiB", "48 KiB", "64 KiB", "96 KiB", "128 KiB"]
LANES = [8, 16, 32]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=1000)
    p.add_argument("--network", default="zoo:ds_cnn?channels=8")
    p.add_argument("--base", default="edge-256")
    p.add_argument("--json")
    args = p.parse_args(argv)
    os.environ.setdefault("NPU_SIM_CHECK_HAZARDS", "0")
    from npu_sim.dse import evaluate_point
    samples, statuses = [], {}
    t0 = time.perf_counter()
    for i in range(args.points):
        row = evaluate_point(args.base, {"sram.size": SIZES[i % len(SIZES)],
                                         "vector_unit.lanes": LANES[i % len(LANES)]}, args.network)
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        if i + 1 == WARMUP:
            gc.collect()
        samples.append(rss_mb())
    gc.collect()
    end = rss_mb()
    warm = samples[min(WARMUP, len(samples)) - 1]
    result = {"points": args.points, "network": args.network, "base": args.base, "statuses": statuses,
              "seconds": round(time.perf_counter() - t0, 1), "rss_after_warmup_mb": round(warm, 1),
              "rss_end_mb": round(end, 1), "growth_mb": round(end - warm, 2),
              "max_mb": round(max(samples), 1), "limit_mb": LIMIT_MB}
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if end - warm <= LIMIT_MB and statuses.get("ok") == args.points else 1


if __name__ == "__main__":
    sys.exit(main())
