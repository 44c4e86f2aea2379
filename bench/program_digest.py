"""Fingerprints of compiled programs, to show a compiler change leaves its output unchanged.

    python bench/program_digest.py [--nets a,b] [--configs c,d] [--out F.json] [--compare F.json]

For every bench network and config: the SHA-256 of the encoded program (.npub: every command,
its dependencies, the layers, memories and constant image), its command count, the
--timing-only cycles it simulates to, and the compile's wall time. --compare exits 1 when a
digest or cycle count differs from an earlier --out file (a speed-up of the compiler must
emit the same program), printing each difference.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from networks import NETWORKS, prepare  # noqa: E402

from npu_sim import api  # noqa: E402
from npu_sim.isa.encoding import encode  # noqa: E402
from npu_sim.isa.errors import NpuSimError  # noqa: E402

CONFIGS = ("default", "edge-256", "large-8k")


def digest(model: Path, config: str) -> dict:
    cfg = api.load_config(config)
    t0 = time.perf_counter()
    try:
        program = api.compile_model(model, cfg, use_cache=False)
    except NpuSimError as exc:              # a refused compile must stay refused, alike
        return {"refused": str(exc)}
    seconds = time.perf_counter() - t0
    cycles = api.simulate(program, cfg, timing_only=True).report.cycles
    for layer in program.layers:        # built from a set: its order varies with the hash seed
        layer.min_bytes = dict(sorted(layer.min_bytes.items()))
    return {"sha256": hashlib.sha256(encode(program)).hexdigest(),
            "commands": len(program.commands), "cycles": cycles, "compile_s": round(seconds, 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default=",".join(NETWORKS))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--cache-dir", type=Path,
                    default=Path(__file__).resolve().parent / ".cache")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", type=Path)
    args = ap.parse_args(argv)
    results = {}
    for key in args.nets.split(","):
        net = prepare(key, args.cache_dir, log=lambda *a: None)
        for config in args.configs.split(","):
            r = results[f"{key} {config}"] = digest(net.tosa, config)
            print(f"{key:20s} {config:9s} " + (f"refused: {r['refused'][:60]}" if "refused" in r
                  else f"{r['sha256'][:16]} {r['commands']:>7,} cmds {r['cycles']:>11,} cycles "
                       f"compile {r['compile_s']:6.2f} s"), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    if args.compare:
        before = json.loads(args.compare.read_text())
        bad = [k for k in results if k in before and
               {f: v for f, v in before[k].items() if f != "compile_s"} !=
               {f: v for f, v in results[k].items() if f != "compile_s"}]
        for k in bad:
            print(f"DIFFERS {k}: {before[k]} -> {results[k]}")
        speed = [(before[k]["compile_s"], results[k]["compile_s"]) for k in results
                 if "compile_s" in results[k] and "compile_s" in before.get(k, {})]
        print(f"{len(results) - len(bad)} of {len(results)} identical; compile time "
              f"{sum(b for b, _ in speed):.2f} s -> {sum(a for _, a in speed):.2f} s")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
