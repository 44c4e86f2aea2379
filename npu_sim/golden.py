"""Golden per-layer cycle summaries of the embedded MobileNetV2-224 on every preset config.

traces/mobilenet_v2_224.<config>.json holds {index, name, ops, start, end, cycles} per layer and
the totals of a timing-only run (a rendering of the Report). tests/test_golden.py fails with a
per-layer diff when cycles change; after an intended change, regenerate them with

    python -m npu_sim.golden --update          # all presets; --config NAME for one
    python -m npu_sim.golden                   # compare only; exit status 1 on a difference
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PRESETS = ("default", "edge-256", "large-8k")
MODEL = "mobilenet_v2_224"
GOLDEN_DIR = Path("traces")     # the repository's traces/: run from the repository root


def summary_of(report) -> dict:
    layers = [{"index": r.index, "name": r.name, "ops": "+".join(r.ops), "start": r.start,
               "end": r.end, "cycles": r.cycles} for r in report.layers]
    return {"model": report.model, "config": report.config, "clock_mhz": report.clock_mhz,
            "totals": {"cycles": report.cycles, "layers": len(layers), "macs": report.total_macs,
                       "layer_cycles": sum(r["cycles"] for r in layers)},
            "layers": layers}


def summary(config: str) -> dict:
    """Timing-only run of the embedded default on a preset."""
    from . import api
    cfg = api.load_config(config)
    program = api.compile_model(api.default_model(), cfg)
    return summary_of(api.simulate(program, cfg, timing_only=True).report)


def golden_path(config: str, directory: Path = GOLDEN_DIR) -> Path:
    return Path(directory) / f"{MODEL}.{config}.json"


def dumps(data: dict) -> str:
    """Indented JSON with one layer per line: small, readable diffs in review."""
    head = {k: v for k, v in data.items() if k != "layers"}
    text = json.dumps(head, indent=2)[:-2]
    rows = ",\n".join("    " + json.dumps(r) for r in data["layers"])
    return text + ',\n  "layers": [\n' + rows + "\n  ]\n}\n"


def _pct(expected: int, got: int) -> str:
    return f"{(got - expected) / expected:+.1%}" if expected else "new"


def compare(expected: dict, got: dict) -> list[str]:
    """Readable differences in cycles (per layer and total), or [] when they agree."""
    lines = []
    exp_rows = {r["index"]: r for r in expected["layers"]}
    got_rows = {r["index"]: r for r in got["layers"]}
    for i in sorted(set(exp_rows) | set(got_rows)):
        e, g = exp_rows.get(i), got_rows.get(i)
        if e is None or g is None:
            r = g or e
            lines.append(f"  {i:>4} {r['name']:<32} {'added' if e is None else 'removed'} "
                         f"({r['ops']}, {r['cycles']:,} cycles)")
        elif e["name"] != g["name"] or e["ops"] != g["ops"]:
            lines.append(f"  {i:>4} {e['name']} ({e['ops']}) is now {g['name']} ({g['ops']}); "
                         f"cycles {e['cycles']:,} -> {g['cycles']:,}")
        elif e["cycles"] != g["cycles"]:
            lines.append(f"  {i:>4} {e['name']:<32} {e['cycles']:>12,} {g['cycles']:>12,} "
                         f"{_pct(e['cycles'], g['cycles']):>8}")
    et, gt = expected["totals"]["cycles"], got["totals"]["cycles"]
    if not lines and et == gt:
        return []
    head = [f"{got['model']} on {got['config']}: total cycles {et:,} -> {gt:,} ({_pct(et, gt)})",
            f"  {'#':>4} {'layer':<32} {'expected':>12} {'got':>12} {'delta':>8}"]
    return head + lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m npu_sim.golden", description=__doc__.split("\n")[0])
    p.add_argument("--update", action="store_true", help="rewrite the golden files")
    p.add_argument("--config", action="append", choices=PRESETS, help="preset (default: all)")
    p.add_argument("--dir", type=Path, default=GOLDEN_DIR, help=f"default {GOLDEN_DIR}")
    args = p.parse_args(argv)
    status = 0
    for config in args.config or PRESETS:
        got, path = summary(config), golden_path(config, args.dir)
        if args.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dumps(got))
            print(f"wrote {path} ({got['totals']['cycles']:,} cycles, "
                  f"{got['totals']['layers']} layers)")
            continue
        if not path.exists():
            print(f"{path}: missing; create it with --update")
            status = 1
            continue
        diff = compare(json.loads(path.read_text()), got)
        print("\n".join(diff) if diff else f"{config}: matches {path}")
        status |= bool(diff)
    return status


if __name__ == "__main__":
    sys.exit(main())
