"""The timing model against real hardware: 512 fp16 GEMMs measured on a Google TPU v4 beside
npu-sim's prediction on the `tpu-v4-core` preset.

    python bench/hw_validation.py              # all 512 shapes (about a minute on 2 cores)
    python bench/hw_validation.py --limit 40   # every 13th shape, a quick look

Each GEMM C[M,N] = A[M,K] B[K,N] is built as a TOSA MATMUL graph with tosa-tools' serializer
(A [1,M,K] and B [1,K,N] fp16 graph inputs in HBM, as the JAX arrays were; C [1,M,N] fp16),
compiled for the preset and simulated with `timing_only=True`. The prediction is

    simulated cycles / 1050 MHz + FUSION_OVERHEAD_US

with the preset unchanged (load_config("tpu-v4-core"): its figures are Google's published
ones, see configs/tpu-v4-core.yaml) and the one fixed per-kernel overhead below. Reported:
the mean absolute percentage error against the measured mean latency, the worst shapes, and
the split by shape class. Writes bench/results/hw_validation.{json,md}.

Where the error comes from (reported beside the headline, never folded into it): JAX runs a
TPU v4 chip as one megacore device, and the data's own profiler traces show both TensorCores
executing each fusion at once, each charged half its bytes and flops. So the measurement is
one core's time for about half the GEMM, while the headline simulates all of it on one core.
The report adds (a) the measured throughput per TensorCore as a share of its single-pass bf16
peak, from the data alone, and (b) the preset's prediction of one core's half (C split in two
along M or N, whichever the model finishes first: XLA's split is not published), with its own
overhead derived by the same rule from 128x128x128.

Data: bench/data/tpu_v4_matmul_fp16.csv (SCALE-Sim-validation, MIT licence beside it).
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tosa_serializer as ts

from npu_sim import api
from npu_sim.config import load_config

HERE = Path(__file__).parent
DATA = HERE / "data" / "tpu_v4_matmul_fp16.csv"
RESULTS = HERE / "results"
PRESET = "tpu-v4-core"

# The one fixed per-kernel cost: what the device spends on an XLA fusion besides its work
# (launching the fused program, its synchronisation flags, its DMA descriptors' issue), which
# the machine model does not contain. Derivation, from the data's one shape where that cost is
# all there is: the smallest GEMM (128 x 128 x 128) measures 1.356 us; the preset predicts
# it takes SMALLEST_PREDICTED_US without the overhead; the difference is the overhead. It is
# the same for every shape (no per-shape term, nothing fitted to the other 511 shapes).
SMALLEST = (128, 128, 128)


def read_measurements(path: Path = DATA) -> list[dict]:
    with open(path, newline="") as f:
        return [{"M": int(r["M"]), "N": int(r["N"]), "K": int(r["K"]),
                 "mean_us": float(r["latency_us_mean"]), "std_us": float(r["latency_us_stddev"])}
                for r in csv.DictReader(f)]


def matmul_graph(m: int, n: int, k: int) -> bytes:
    """C = A @ B in fp16 as one TOSA MATMUL (fp16 with fp16 accumulate: the out type)."""
    with tempfile.TemporaryDirectory() as tmp:
        ser = ts.TosaSerializer(tmp, targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
        a = ser.addPlaceholder([1, m, k], ts.DType.FP16, None).name
        b = ser.addPlaceholder([1, k, n], ts.DType.FP16, None).name
        zps = [ser.addConst([1], ts.DType.FP16, np.zeros(1, np.float16)).name for _ in range(2)]
        c = ser.addOutput([1, m, n], ts.DType.FP16).name
        attr = ts.TosaSerializerAttribute()
        attr.MatMulAttribute()
        ser.addOperator(ts.Op.MATMUL, [a, b, *zps], [c], attr)
        return ser.serialize()


def simulated_us(m: int, n: int, k: int, config) -> float:
    """The preset's time for one GEMM, timing only, without the fixed overhead."""
    with tempfile.NamedTemporaryFile(suffix=".tosa") as f:
        f.write(matmul_graph(m, n, k))
        f.flush()
        program = api.compile_model(f.name, config, use_cache=False)
    report = api.simulate(program, config, timing_only=True).report
    return report.cycles / config.clock_mhz


def fusion_overhead_us(config, measured: list[dict]) -> float:
    row = next(r for r in measured if (r["M"], r["N"], r["K"]) == SMALLEST)
    return row["mean_us"] - simulated_us(*SMALLEST, config)


def half_us(m: int, n: int, k: int, config) -> float:
    """One TensorCore's share under megacore: half of C (rows or columns, the faster)."""
    return min(simulated_us(max(1, m // 2), n, k, config), simulated_us(m, max(1, n // 2), k, config))


def core_efficiency_pct(macs: float, us: float, config) -> float:
    """MACs per cycle in `us` as a share of one core's single-pass peak (4 MXUs x 128 x 128)."""
    return 100 * macs / (us * config.clock_mhz) / config.mac_array.macs_per_cycle


def shape_class(m: int, n: int, k: int) -> str:
    """small: every dimension <= 256; large: every dimension >= 768; skinny: the largest
    dimension at least 4x the smallest; the rest: medium."""
    dims = (m, n, k)
    if max(dims) <= 256:
        return "small"
    if min(dims) >= 768:
        return "large"
    if max(dims) >= 4 * min(dims):
        return "skinny"
    return "medium"


def _summary(out: list[dict], key: str) -> dict:
    """MAPE and mean signed error of `key` over all rows and per shape class."""
    def stats(xs):
        return {"shapes": len(xs), "mape_pct": round(statistics.mean(abs(x[key]) for x in xs), 2),
                "mean_signed_pct": round(statistics.mean(x[key] for x in xs), 2)}
    classes = {c: stats(xs) for c in ("small", "medium", "large", "skinny")
               if (xs := [x for x in out if x["class"] == c])}
    return {**stats(out), "classes": classes}


def evaluate(limit: int | None = None) -> dict:
    config = load_config(PRESET)
    measured = read_measurements()
    rows = measured if not limit else measured[::max(1, len(measured) // limit)]
    overhead = fusion_overhead_us(config, measured)
    smallest = next(r for r in measured if (r["M"], r["N"], r["K"]) == SMALLEST)
    half_overhead = smallest["mean_us"] - half_us(*SMALLEST, config)
    out = []
    start = time.time()
    for r in rows:
        m, n, k = r["M"], r["N"], r["K"]
        sim = simulated_us(m, n, k, config)
        pred = sim + overhead
        half = half_us(m, n, k, config) + half_overhead
        out.append({**r, "simulated_us": round(sim, 4), "predicted_us": round(pred, 4),
                    "error_pct": round(100 * (pred - r["mean_us"]) / r["mean_us"], 2),
                    "class": shape_class(m, n, k),
                    "half_predicted_us": round(half, 4),
                    "half_error_pct": round(100 * (half - r["mean_us"]) / r["mean_us"], 2),
                    # per core: half the MACs in the measured time; the model: all of them
                    "measured_core_eff_pct": round(core_efficiency_pct(m * n * k / 2, r["mean_us"],
                                                                       config), 2),
                    "simulated_core_eff_pct": round(core_efficiency_pct(m * n * k, sim, config), 2)})
    head = _summary(out, "error_pct")
    eff = {}
    for cls in ("small", "medium", "large", "skinny"):
        xs = [x for x in out if x["class"] == cls]
        if xs:
            eff[cls] = {key: {"mean_pct": round(statistics.mean(x[col] for x in xs), 1),
                              "max_pct": round(max(x[col] for x in xs), 1)}
                        for key, col in (("measured", "measured_core_eff_pct"),
                                         ("simulated", "simulated_core_eff_pct"))}
    best = max(out, key=lambda x: x["measured_core_eff_pct"])
    return {"preset": PRESET, "shapes": len(out), "overhead_us": round(overhead, 4),
            "mape_pct": head["mape_pct"], "mean_signed_pct": head["mean_signed_pct"],
            "classes": head["classes"], "worst": sorted(out, key=lambda x: -abs(x["error_pct"]))[:10],
            "megacore_half": {"overhead_us": round(half_overhead, 4), **_summary(out, "half_error_pct")},
            "core_efficiency": {"classes": eff, "best": {
                "shape": [best["M"], best["N"], best["K"]], "pct": best["measured_core_eff_pct"],
                "min_bf16_passes": round(100 / best["measured_core_eff_pct"], 2)}},
            "seconds": round(time.time() - start, 1), "rows": out}


def markdown(result: dict) -> str:
    lines = [f"# TPU v4 fp16 GEMMs vs `{result['preset']}` (timing only)", "",
             f"- shapes: {result['shapes']}; fixed per-fusion overhead {result['overhead_us']} us "
             f"(derived from the 128x128x128 shape, see bench/hw_validation.py)",
             f"- **MAPE {result['mape_pct']}%** (mean signed error {result['mean_signed_pct']}%); "
             "SCALE-Sim's unfitted figure on this data: 43.7%", "",
             "| class | shapes | MAPE % | mean signed % |", "|---|---:|---:|---:|"]
    lines += [f"| {c} | {v['shapes']} | {v['mape_pct']} | {v['mean_signed_pct']} |"
              for c, v in result["classes"].items()]
    lines += ["", "Worst shapes:", "", "| M | N | K | measured us | predicted us | error % |",
              "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {w['M']} | {w['N']} | {w['K']} | {w['mean_us']} | {w['predicted_us']} | "
              f"{w['error_pct']} |" for w in result["worst"]]
    eff, half = result["core_efficiency"], result["megacore_half"]
    best = eff["best"]
    lines += ["", "## Where the error comes from", "",
              "Throughput per TensorCore as a share of its single-pass bf16 peak (4 x 128 x 128 "
              "MACs per cycle): measured, one core doing half of each GEMM (megacore, see "
              "bench/hw_validation.py); simulated, the preset doing all of it:", "",
              "| class | measured mean % | measured max % | simulated mean % | simulated max % |",
              "|---|---:|---:|---:|---:|"]
    lines += [f"| {c} | {v['measured']['mean_pct']} | {v['measured']['max_pct']} | "
              f"{v['simulated']['mean_pct']} | {v['simulated']['max_pct']} |"
              for c, v in eff["classes"].items()]
    lines += ["", f"The best measured shape ({'x'.join(map(str, best['shape']))}) reaches "
              f"{best['pct']}% of one core's single-pass peak: at least {best['min_bf16_passes']} "
              "bf16-pass equivalents per fp16 product even at full MXU occupancy.", "",
              f"The preset predicting one core's half of each GEMM (overhead "
              f"{half['overhead_us']} us by the same rule): **MAPE {half['mape_pct']}%** (mean "
              f"signed {half['mean_signed_pct']}%).", "",
              "| class | shapes | MAPE % | mean signed % |", "|---|---:|---:|---:|"]
    lines += [f"| {c} | {v['shapes']} | {v['mape_pct']} | {v['mean_signed_pct']} |"
              for c, v in half["classes"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="about this many shapes, evenly spread")
    args = ap.parse_args(argv)
    result = evaluate(args.limit)
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if not args.limit else "_sample"
    (RESULTS / f"hw_validation{suffix}.json").write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    (RESULTS / f"hw_validation{suffix}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
