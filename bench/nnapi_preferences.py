#!/usr/bin/env python3
"""NNAPI ExecutionPreference on the int8 TFLite models of tests/data/tflite/ (mapped to NNAPI as
TFLite's NNAPI delegate maps them) and on the capabilities' quant8 reference workload, on every
preset: per preference the schedule the device prepares, its clock, and per execution its
cycles, time, energy and the back-to-back rate (SUSTAINED_SPEED: executions run in pairs).

    python bench/nnapi_preferences.py          # writes bench/results/nnapi_preferences.{json,md}
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
MODELS = REPO / "tests" / "data" / "tflite"


def main() -> int:
    from npu_sim import api
    from npu_sim.nnapi.capabilities import conv_block
    from npu_sim.nnapi.cli import load_model, preference_table
    models = [(m, load_model(str(MODELS / m / "model.tflite")))
              for m in ("audio_example1", "tflite_micro_speech")]
    models.append(("reference_quant8_block", conv_block()))
    rows = []
    for name, model in models:
        for preset in ("default", "edge-256", "large-8k"):
            for r in preference_table(model, api.load_config(preset)):
                rows.append({"model": name, "config": preset, **r})
    out = BENCH / "results"
    (out / "nnapi_preferences.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["| model | config | preference | point | MHz | cycles / execution | us / execution "
             "| uJ / execution | executions / s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['config']} | {r['preference']} | {r['point']} | "
                     f"{r['clock_mhz']:.0f} | {r['cycles_per_execution']:,.0f} | "
                     f"{r['us_per_execution']:.2f} | {r['uj_per_execution']:.3f} | "
                     f"{r['executions_per_s']:,.0f} |")
    (out / "nnapi_preferences.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
