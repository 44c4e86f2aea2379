#!/usr/bin/env python3
"""The int8 TFLite models of tests/data/tflite/ on every preset: simulated cycles against the
roofline and attainable bounds, outputs against TFLite's reference kernels (the stored
ref-output-0.npy), and on edge-256 Vela's estimate for the same .tflite on ethos-u55-256.
The models with float32 edges (QUANTIZE in, DEQUANTIZE out) need PRO-FP: edge-256 refuses
them, and their row says so.

    python bench/tflite_models.py             # writes bench/results/tflite.{json,md}

Vela reads .tflite natively (its home ground), so the comparison is like for like: same
file, same weights, no TOSA in between.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from run import CONFIGS, VELA_ACCEL, VELA_SYSTEM, parse_vela  # noqa: E402

from npu_sim.isa.errors import UnsupportedError  # noqa: E402

MODELS = REPO / "tests" / "data" / "tflite"
INT8_MODELS = ("audio_example1", "tflite_micro_speech", "image_example1", "autoencoder_example")


def vela_estimate(model: Path) -> dict:
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run(["vela", str(model), "--accelerator-config", VELA_ACCEL,
                               *VELA_SYSTEM, "--output-dir", out],
                              capture_output=True, text=True)
        if proc.returncode:
            return {"error": proc.stderr.strip().splitlines()[-1:] or ["vela failed"]}
        return parse_vela(Path(out), model.stem, proc.stdout)


def main() -> int:
    from npu_sim import api
    rows = []
    for name in INT8_MODELS:
        model = MODELS / name / "model.tflite"
        info = json.loads((MODELS / name / "info.json").read_text())
        x = np.load(MODELS / name / "input-0.npy")
        ref = np.load(MODELS / name / "ref-output-0.npy")
        vela = vela_estimate(model)
        for cfg in CONFIGS:
            try:
                result = api.run(model, cfg, inputs={info["inputs"][0]["name"]: x})
            except UnsupportedError as refusal:     # the preset lacks what the model needs
                rows.append({"model": name, "config": cfg, "refused": str(refusal)})
                continue
            rep = result.report
            out = result.outputs[info["outputs"][0]["name"]]
            row = {"model": name, "config": cfg, "cycles": rep.cycles,
                   "roofline": rep.roofline["cycles"], "bound_by": rep.roofline["bound_by"],
                   "attainable": rep.roofline["attainable"]["cycles"],
                   "macs": rep.total_macs, "mac_utilization": rep.mac_utilization,
                   "bit_exact": bool(np.array_equal(out, ref))}
            if cfg == "edge-256":
                row["vela_cycles"] = vela.get("cycles_total")
                row["vela_error"] = vela.get("error")
            rows.append(row)
    out_dir = BENCH / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "tflite.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["| model | config | cycles | / roofline | / attainable | MAC util | bit-exact "
             "| Vela ethos-u55-256 cycles | / Vela |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "refused" in r:
            lines.append(f"| {r['model']} | {r['config']} | refused: {r['refused']} |" + " |" * 6)
            continue
        vela = r.get("vela_cycles")
        ratio = f"{r['cycles'] / vela:.2f}" if vela else ""
        lines.append(f"| {r['model']} | {r['config']} | {r['cycles']:,} | "
                     f"{r['cycles'] / r['roofline']:.2f} ({r['bound_by']}) | "
                     f"{r['cycles'] / r['attainable']:.2f} | {r['mac_utilization']:.1%} | "
                     f"{'yes' if r['bit_exact'] else 'NO'} | {f'{vela:,}' if vela else ''} | "
                     f"{ratio} |")
    (out_dir / "tflite.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r.get("bit_exact", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
