"""npu-sim's per-layer cycles on edge-256 beside Vela's per-layer estimates for Ethos-U55-256.

    python bench/vela_layers.py [NETWORK ...]     # default: every bench network

Vela runs with `--verbose-performance` in the bench's system config (bench/run.py) and writes
its per-layer CSV; npu-sim runs timing-only on edge-256. npu-sim fuses more than Vela (a 1x1
conv cascaded into the depthwise that reads it is one layer), so layers are matched by output
tensor name (Vela names a layer by its output tensor too): a layer whose name only one tool has
joins the next shared one in that tool's own order, and each shared name is one row. Writes
bench/results/vela_layers.{json,md}; groups more than 2x apart are listed for bench/README.md.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import networks  # noqa: E402
from run import VELA_ACCEL, VELA_SYSTEM  # noqa: E402

from npu_sim import api  # noqa: E402
from npu_sim.isa.errors import UnsupportedError  # noqa: E402

RESULTS = Path(__file__).parent / "results"
CACHE = Path(__file__).parent / ".cache" / "networks"
FAR = 2.0


def vela_layers(tosa: Path) -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["vela", str(tosa), "--accelerator-config", VELA_ACCEL, *VELA_SYSTEM,
                        "--output-dir", d, "--verbose-performance"],
                       check=True, capture_output=True, text=True)
        with open(next(Path(d).glob("*_per-layer.csv")), newline="") as f:
            return [{"name": r["Name"], "op": r["NNG Operator"], "cycles": int(float(r["Op Cycles"])),
                     "macs": int(float(r["MAC Count"]))} for r in csv.DictReader(f)]


def compare(key: str) -> list[dict]:
    net = networks.prepare(key, CACHE, log=lambda *a: None)
    cfg = api.load_config("edge-256")
    ours = api.run(net.tosa, cfg, timing_only=True).report.layers
    theirs = vela_layers(net.tosa)
    common = {r.name for r in ours} & {v["name"] for v in theirs}
    mine, vela = _grouped(ours, lambda r: r.name, common), _grouped(theirs, lambda v: v["name"], common)
    groups = []
    for name, merged in mine.items():
        rows = vela[name]
        groups.append({"npu_layers": [r.name for r in merged],
                       "npu_ops": [op for r in merged for op in r.ops],
                       "npu_cycles": sum(r.cycles for r in merged),
                       "npu_fill": sum(r.mac_fill_cycles for r in merged),
                       "npu_stall": sum(r.mac_stall_cycles for r in merged),
                       "vela_layers": [v["name"] for v in rows], "vela_ops": [v["op"] for v in rows],
                       "vela_cycles": sum(v["cycles"] for v in rows),
                       "macs": sum(v["macs"] for v in rows)})
    for g in groups:
        g["ratio"] = g["npu_cycles"] / g["vela_cycles"] if g["vela_cycles"] else float("inf")
    return groups


def _grouped(layers, name, common) -> dict[str, list]:
    """Layers by the next layer (in their own order) whose name both tools share; trailing
    unshared layers join the last group."""
    out, pending = {}, []
    for layer in layers:
        pending.append(layer)
        if name(layer) in common:
            out[name(layer)], pending = pending, []
    if pending and out:
        out[next(reversed(out))] += pending
    return out


def main(argv=None) -> int:
    keys = networks.resolve(argv or list(networks.NETWORKS))
    out, lines = {}, ["# npu-sim (edge-256) vs Vela (ethos-u55-256), layer by layer", "",
                      "npu-sim: `cycles` of each layer (how far it pushed the run's end; they add up "
                      "to the total). Vela: `Op Cycles` of its per-layer CSV. Groups more than "
                      f"{FAR:g}x apart in bold.", ""]
    for key in keys:
        try:
            groups = compare(key)
        except UnsupportedError as refused:      # the float-edged TFLite graphs: no PRO-FP
            lines += [f"## {key}: refused by edge-256", "", f"{refused}", ""]
            continue
        out[key] = groups
        total_n, total_v = sum(g["npu_cycles"] for g in groups), sum(g["vela_cycles"] for g in groups)
        lines += [f"## {key}: npu-sim {total_n:,} vs Vela {total_v:,} ({total_n / total_v:.2f}x)", "",
                  "| npu-sim layer | ops | MACs | npu-sim | fill | stall | Vela | ratio |",
                  "|---|---|---|---|---|---|---|---|"]
        for g in groups:
            far = g["ratio"] > FAR or g["ratio"] < 1 / FAR
            cell = f"**{g['ratio']:.2f}x**" if far else f"{g['ratio']:.2f}x"
            lines.append(f"| {' + '.join(g['npu_layers'])} | {'+'.join(g['npu_ops'])} | {g['macs']:,} | "
                         f"{g['npu_cycles']:,} | {g['npu_fill']:,} | {g['npu_stall']:,} | "
                         f"{g['vela_cycles']:,} | {cell} |")
        lines.append("")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "vela_layers.json").write_text(json.dumps(out, indent=1))
    (RESULTS / "vela_layers.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
