#!/usr/bin/env python3
"""Float networks end to end: the zoo's MobileNetV2 (1.0, 224x224) and transformer encoder
built in fp16 and in bf16, and the float32 TFLite models of tests/data/tflite/, on every preset
that runs floating point. Each run reports cycles, energy and its per-layer rows; every float
operator of each zoo network is judged against the TOSA reference model in precise mode by
Arm's compliance checker (tests/fp_check.py: each operator on the simulator's own inputs), and
each TFLite model against TFLite's reference kernels (its stored ref-output-0.npy).

    python bench/float_networks.py [--small]     # writes bench/results/float.{json,md}

`--small` runs the test suite's small variants (a smoke run).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "tests"))

import fp_check  # noqa: E402

from npu_sim import api, zoo  # noqa: E402
from npu_sim.isa.errors import NpuSimError  # noqa: E402

PRESETS = ("default", "edge-256", "large-8k", "tpu-v4-core")
FULL = {"mobilenet_v2": dict(width=1.0, resolution=224, num_classes=1000),
        "transformer": dict(tokens=16, d_model=64, heads=2, d_ff=128, layers=1)}
SMALL = {"mobilenet_v2": dict(width=0.35, resolution=32, num_classes=16),
         "transformer": dict(tokens=8, d_model=32, heads=2, d_ff=64, layers=1)}
TFLITE = ("image_example1_float32", "autoencoder_example_float32")
NUMPY = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


def _row(name, cfg, rep, wall, **extra) -> dict:
    return {"network": name, "config": cfg, "cycles": rep.cycles,
            "energy_uj": round(rep.energy_uj["total"], 3),
            "attainable": rep.roofline["attainable"]["cycles"], "macs": rep.total_macs,
            "mac_utilization": round(rep.mac_utilization, 4), "wall_s": round(wall, 2),
            "layers": [{"name": r.name, "ops": r.ops, "cycles": r.cycles,
                        "energy_uj": round(r.energy_uj, 4)} for r in rep.layers], **extra}


def zoo_runs(sizes: dict) -> list[dict]:
    rows = []
    for net, kw in sizes.items():
        for dtype, npdt in NUMPY.items():
            spec = zoo.spec(net, dtype=dtype, **kw)
            fctx = spec.calibrate()
            data, meta = spec.emit_float(fctx)
            x = np.random.default_rng(0).uniform(-1, 1, spec.input_shape).astype(npdt)
            e = spec.float_graph(fctx).e
            checked = fp_check.graph_with_every_output(e)
            name = f"{net}_{dtype}"
            for cfg in PRESETS:
                t = time.time()
                try:
                    result = api.run(api.load_graph(data, f"{name}.tosa"), cfg, inputs={"input": x})
                except NpuSimError as exc:
                    rows.append({"network": name, "config": cfg, "refused": str(exc)})
                    continue
                wall = time.time() - t
                # every operator's value, from a run of the same graph with each result an output
                full = api.run(api.load_graph(checked, f"{name}-all.tosa"), cfg,
                               inputs={"input": x}).outputs
                full["input"] = x
                verdicts = fp_check.check_operators(e, full)
                same = bool(np.array_equal(full[meta["output_names"][0]],
                                           result.outputs[meta["output_names"][0]]))
                rows.append(_row(name, cfg, result.report, wall, operators=len(verdicts),
                                 compliant=sum(v["ok"] for v in verdicts),
                                 non_compliant=[v["output"] for v in verdicts if not v["ok"]],
                                 output_as_in_checked_run=same))
    return rows


def tflite_runs() -> list[dict]:
    rows = []
    for name in TFLITE:
        d = REPO / "tests" / "data" / "tflite" / name
        info = json.loads((d / "info.json").read_text())
        x, ref = np.load(d / "input-0.npy"), np.load(d / "ref-output-0.npy")
        for cfg in PRESETS:
            t = time.time()
            try:
                result = api.run(d / "model.tflite", cfg, inputs={info["inputs"][0]["name"]: x})
            except NpuSimError as exc:
                rows.append({"network": name, "config": cfg, "refused": str(exc)})
                continue
            got = result.outputs[info["outputs"][0]["name"]].astype(np.float64)
            err = float(np.abs(got - ref).max() / np.ptp(ref))
            rows.append(_row(name, cfg, result.report, time.time() - t, rel_error=err))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="the tests' small zoo variants")
    args = ap.parse_args(argv)
    rows = zoo_runs(SMALL if args.small else FULL) + tflite_runs()
    out = BENCH / "results"
    out.mkdir(exist_ok=True)
    suffix = "-small" if args.small else ""
    (out / f"float{suffix}.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["| network | config | cycles | / attainable | energy uJ | MAC util | check |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "refused" in r:
            lines.append(f"| {r['network']} | {r['config']} | refused: {r['refused'][:90]} "
                         "| | | | |")
            continue
        check = (f"{r['compliant']}/{r['operators']} operators compliant" if "operators" in r
                 else f"{r['rel_error']:.1e} of the output range vs TFLite")
        lines.append(f"| {r['network']} | {r['config']} | {r['cycles']:,} | "
                     f"{r['cycles'] / r['attainable']:.2f} | {r['energy_uj']:.2f} | "
                     f"{r['mac_utilization']:.1%} | {check} |")
    (out / f"float{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    bad = [r for r in rows if r.get("non_compliant") or r.get("rel_error", 0) > 1e-5]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
