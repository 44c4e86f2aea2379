"""Bounded compilation: every bench network on adversarial configs compiles or is refused (exit
status 2, one line) within a bounded time and memory; the README's "Compilation is bounded"
states the worst case this measures.

    python bench/bounded_compile.py [--nets a,b] [--json F] [--timeout 300]

Each point is one whole `npu-sim compile` process (NPU_SIM_CACHE=off) under GNU time, on the
default preset with a 1 KiB single-bank, 2, 4 or 8 KiB buffer, a 4096x256 or a 1x4096 MAC array,
and on the presets. Exit status 1 if any point crashes, times out or exits other than 0 or 2.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import measure  # noqa: E402
from networks import NETWORKS, prepare  # noqa: E402

CONFIGS = {
    "1 KiB 1-bank": ("default", ["sram.size=1 KiB", "sram.banks=1"]),
    "2 KiB": ("default", ["sram.size=2 KiB"]),
    "4 KiB": ("default", ["sram.size=4 KiB"]),
    "8 KiB": ("default", ["sram.size=8 KiB"]),
    "4096x256 array": ("default", ["mac_array.rows=4096", "mac_array.cols=256"]),
    "1x4096 array": ("default", ["mac_array.rows=1", "mac_array.cols=4096"]),
    "default": ("default", []),
    "edge-256": ("edge-256", []),
    "large-8k": ("large-8k", []),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default=",".join(NETWORKS))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--cache-dir", type=Path, default=BENCH / ".cache")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    exe = shutil.which("npu-sim", path=str(Path(sys.executable).parent)) or "npu-sim"
    env = {**os.environ, "NPU_SIM_CACHE": "off", "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    rows, bad = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.nets.split(","):
            net = prepare(key, args.cache_dir, log=lambda *a: None)
            for label in args.configs.split(","):
                preset, sets = CONFIGS[label]
                cmd = [exe, "compile", str(net.tosa), "--config", preset, "-o", f"{tmp}/p.npub"]
                for s in sets:
                    cmd += ["--set", s]
                s = measure.run(cmd, env, Path(tmp), Path(tmp) / "log", args.timeout)
                outcome = {0: "compiled", 2: "refused"}.get(s.rc, "FAILED")
                bad += outcome == "FAILED"
                why = s.stderr_tail.splitlines()[-1][:110] if s.rc else ""
                rows.append({"network": key, "config": label, "outcome": outcome,
                             "wall_s": round(s.wall_s, 2), "cpu_s": round(s.cpu_s, 2),
                             "peak_mib": round(s.maxrss_kib / 1024), "why": why})
                print(f"{key:20s} {label:15s} {outcome:8s} {s.wall_s:6.2f} s {s.cpu_s:6.2f} s CPU "
                      f"{s.maxrss_kib / 1024:5.0f} MiB {why}", flush=True)
    worst = max(rows, key=lambda r: r["wall_s"])
    heavy = max(rows, key=lambda r: r["peak_mib"])
    print(f"worst: {worst['wall_s']} s ({worst['network']} on {worst['config']}, "
          f"{worst['outcome']}); peak {heavy['peak_mib']} MiB ({heavy['network']} on "
          f"{heavy['config']}); {bad} failed")
    if args.json:
        args.json.write_text(json.dumps({"points": rows, "worst": worst, "peak": heavy}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
