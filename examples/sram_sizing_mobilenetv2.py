"""How much on-chip buffer does MobileNetV2 need on an edge NPU before more stops paying?

Sweeps sram.size on the edge-256 preset for the embedded int8 MobileNetV2-224, prints cycles,
energy and area against size, and names the smallest size beyond which even the largest buffer
in the sweep buys less than --threshold of latency (default 5%). Single steps are noisy (tiling
can land a little better or worse at one size), so the test looks at all larger sizes at once.

    python examples/sram_sizing_mobilenetv2.py [-j 2] [--threshold 0.05]
"""
import argparse
from concurrent.futures import ProcessPoolExecutor

from npu_sim.dse import evaluate_point

SIZES_KIB = [32, 48, 64, 96, 128, 192, 256, 384, 512]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-j", "--jobs", type=int, default=None, help="worker processes (default: all cores)")
    ap.add_argument("--threshold", type=float, default=0.05, help="latency gain per step that still pays")
    ap.add_argument("--network", default="default", help="network spec (default: embedded MobileNetV2)")
    args = ap.parse_args()

    points = [{"sram.size": f"{kib} KiB"} for kib in SIZES_KIB]
    with ProcessPoolExecutor(args.jobs) as pool:  # each point compiles and simulates independently
        rows = list(pool.map(evaluate_point, ["edge-256"] * len(points), points, [args.network] * len(points)))

    ok = [(kib, r) for kib, r in zip(SIZES_KIB, rows) if r["status"] == "ok"]
    for kib, r in zip(SIZES_KIB, rows):
        if r["status"] != "ok":
            print(f"{kib:>5} KiB  {r['status']}: {r['error']}")
    print(f"{'sram':>8} {'cycles':>12} {'latency ms':>11} {'energy uJ':>10} {'area mm2':>9} {'gain left':>10}")
    knee = None
    for i, (kib, r) in enumerate(ok):
        # what all larger sizes could still buy, relative to this one
        left = max(((r["latency_ms"] - q["latency_ms"]) / r["latency_ms"] for _, q in ok[i + 1:]), default=0.0)
        print(f"{kib:>5} KiB {r['cycles']:>12,} {r['latency_ms']:>11.3f} {r['energy_uj']:>10.1f} "
              f"{r['area_mm2']:>9.3f} {left:>10.1%}")
        if knee is None and left < args.threshold:
            knee = kib
    if knee is not None and knee < ok[-1][0]:
        print(f"more than {knee} KiB stops paying: larger buffers buy less than {args.threshold:.0%} latency")
    else:
        print(f"the largest size still pays {args.threshold:.0%} or more: try larger sizes")


if __name__ == "__main__":
    main()
