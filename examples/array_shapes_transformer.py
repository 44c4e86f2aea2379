"""Is a 32x32 MAC array better than 16x64 or 64x16 for a transformer block?

All three shapes have 1024 MACs (same area); what differs is how well the layers' reduction
(K) and output-channel (N) dimensions fill the rows and columns. Runs a zoo transformer encoder
block on the default preset with each shape and both dataflows, and prints cycles, MAC
utilization and energy.

    python examples/array_shapes_transformer.py [--tokens 64 --d-model 128 --heads 4 --d-ff 256]
"""
import argparse
from concurrent.futures import ProcessPoolExecutor

from npu_sim.dse import evaluate_point

SHAPES = [(32, 32), (16, 64), (64, 16)]
DATAFLOWS = ["weight_stationary", "output_stationary"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="default", help="config preset or YAML (default: default, 1024 MACs)")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-ff", type=int, default=256)
    ap.add_argument("-j", "--jobs", type=int, default=None, help="worker processes (default: all cores)")
    args = ap.parse_args()

    network = f"zoo:transformer?tokens={args.tokens}&d_model={args.d_model}&heads={args.heads}&d_ff={args.d_ff}"
    points = [{"mac_array.rows": r, "mac_array.cols": c, "mac_array.dataflow": df} for df in DATAFLOWS for r, c in SHAPES]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(evaluate_point, [args.base] * len(points), points, [network] * len(points)))

    print(f"{network} on {args.base}")
    print(f"{'shape':>7} {'dataflow':<18} {'cycles':>10} {'latency ms':>11} {'MAC util':>9} {'energy uJ':>10} {'area mm2':>9}")
    for p, r in zip(points, rows):
        shape = f"{p['mac_array.rows']}x{p['mac_array.cols']}"
        if r["status"] != "ok":
            print(f"{shape:>7} {p['mac_array.dataflow']:<18} {r['status']}: {r['error']}")
            continue
        print(f"{shape:>7} {p['mac_array.dataflow']:<18} {r['cycles']:>10,} {r['latency_ms']:>11.4f} "
              f"{r['mac_utilization']:>9.1%} {r['energy_uj']:>10.2f} {r['area_mm2']:>9.3f}")
    ok = [(r["cycles"], p) for p, r in zip(points, rows) if r["status"] == "ok"]
    if ok:
        cycles, p = min(ok, key=lambda t: t[0])
        print(f"fastest: {p['mac_array.rows']}x{p['mac_array.cols']} {p['mac_array.dataflow']} ({cycles:,} cycles)")


if __name__ == "__main__":
    main()
