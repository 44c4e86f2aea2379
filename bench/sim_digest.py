"""Fingerprints of simulated schedules, to show a simulator change leaves every cycle unchanged.

    python bench/sim_digest.py --programs DIR [--nets a,b] [--configs c,d] [--values a,b]
                               [--out F.json] [--compare F.json]

Programs are compiled once into DIR (.npub, reused when present), so two source trees are
compared on the same commands whatever their compilers: run it with one tree's npu_sim first
on PYTHONPATH and --out, then with the other's and --compare. For every bench network and
config: the SHA-256 of every command's start and end, of the costs' figures and of the whole
JSON report (cycles, energy, layers), from a --timing-only run, and for the networks named by
--values from a run computing values too. --compare exits 1 when any differs, printing each
difference with the first command whose start or end moved.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from networks import prepare  # noqa: E402

from npu_sim import api  # noqa: E402
from npu_sim.isa.errors import NpuSimError  # noqa: E402

NETS = ("mobilenet_v2_224", "resnet18_112", "bert_base_layer", "et_mbv2_050_128", "transformer")
CONFIGS = ("default", "edge-256", "large-8k")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def program_for(model: Path, config: str, programs: Path):
    path = programs / f"{model.stem}.{config}.npub"
    if not path.exists():
        program = api.compile_model(model, api.load_config(config), use_cache=False)
        tmp = path.with_suffix(".part")
        api.save_program(program, tmp)
        tmp.replace(path)
    program = api.load_program(path)
    return program, api.config_for_program(program, None)


def digest(program, cfg, timing_only: bool) -> tuple[dict, np.ndarray]:
    result = api.simulate(program, cfg, timing_only=timing_only)
    sim, report = result.sim, result.report
    costs = [(c.setup, c.busy, c.ports, c.macs, c.elements, c.latency, c.fill, c.stall,
              sorted((c.vector or {}).items()), c.banks, c.bank_cycles, c.reread, c.traffic)
             for c in sim.costs]
    out = {"cycles": report.cycles, "energy_uj": report.energy_uj["total"],
           "schedule": _sha(sim.start.tobytes() + sim.end.tobytes()),
           "costs": _sha(repr(costs).encode()), "report": _sha(report.to_json().encode())}
    if not timing_only:
        out["outputs"] = _sha(b"".join(np.ascontiguousarray(v).tobytes()
                                       for _, v in sorted(sim.outputs.items())))
    return out, np.stack([sim.start, sim.end])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=Path, required=True, help="compiled programs' folder")
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--values", default="", help="networks also run computing values")
    ap.add_argument("--cache-dir", type=Path,
                    default=Path(__file__).resolve().parent / ".cache")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", type=Path)
    args = ap.parse_args(argv)
    args.programs.mkdir(parents=True, exist_ok=True)
    values = set(filter(None, args.values.split(",")))
    results, schedules = {}, {}
    for key in args.nets.split(","):
        net = prepare(key, args.cache_dir, log=lambda *a: None)
        for config in args.configs.split(","):
            try:
                program, cfg = program_for(net.tosa, config, args.programs)
            except NpuSimError as exc:
                results[f"{key} {config}"] = {"refused": str(exc)}
                continue
            for timing_only in (True, False) if key in values else (True,):
                k = f"{key} {config}" + ("" if timing_only else " values")
                results[k], schedules[k] = digest(program, cfg, timing_only)
                r = results[k]
                print(f"{k:34s} {r['cycles']:>11,} cycles  schedule {r['schedule'][:12]} "
                      f"report {r['report'][:12]}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
        np.savez_compressed(args.out.with_suffix(".npz"), **schedules)
    if args.compare:
        before = json.loads(args.compare.read_text())
        old = np.load(args.compare.with_suffix(".npz"))
        bad = [k for k in results if before.get(k) != results[k]]
        for k in bad:
            print(f"DIFFERS {k}: {before.get(k)} -> {results[k]}")
            if k in old.files and k in schedules and old[k].shape == schedules[k].shape:
                moved = np.nonzero((old[k] != schedules[k]).any(axis=0))[0]
                if len(moved):
                    i = moved[0]
                    print(f"  first moved command {i}: start/end {old[k][:, i].tolist()} -> "
                          f"{schedules[k][:, i].tolist()} ({len(moved)} commands moved)")
        print(f"{len(results) - len(bad)} of {len(results)} identical")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
