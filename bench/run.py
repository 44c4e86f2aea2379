#!/usr/bin/env python3
"""npu-sim benchmark suite: npu-sim against the TOSA reference model and Arm's Vela.

    python bench/run.py                      # full run: 4 networks x 3 configs, 5 reps
    python bench/run.py --quick              # smoke run, under a minute
    python bench/run.py --networks mobilenet,ds_cnn --configs default,edge-256 --reps 3

For every network (cached as bench/.cache/<net>.tosa with a seeded int8 input) and config it
times, as whole processes with their peak memory, interleaved over several repetitions:
  full        npu-sim run M --config C --input N=in.npy --output-dir D --report R.json
  ref         tosa_reference_model --tosa_file M --ifm_name N --ifm_file in.npy
                                   --ofm_name O --ofm_file out.npy   (outputs compared bit for bit)
  ref_native  the same, calling the native binary behind tosa-tools' Python shim directly
  timing_only npu-sim run M --config C --timing-only --report R.json
and once per network and repetition
  vela        vela M --accelerator-config ethos-u55-256 --system-config
                   Ethos_U55_High_End_Embedded --memory-mode Shared_Sram --output-dir D
It then compares simulated cycles with the roofline bound (per layer and in total) and with
Vela's estimate (edge-256 vs ethos-u55-256), and the scaling of wall time and peak memory.
Results: bench/results/latest.{json,md} (a --quick run writes quick.{json,md} instead).
See bench/README.md.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import re
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

import machine  # noqa: E402
import measure  # noqa: E402
import networks  # noqa: E402
import report  # noqa: E402
import source  # noqa: E402

CONFIGS = ("default", "edge-256", "large-8k")
VELA_ACCEL = "ethos-u55-256"
VELA_SYSTEM = ["--system-config", "Ethos_U55_High_End_Embedded", "--memory-mode", "Shared_Sram"]
EDGE_CONFIG = "edge-256"          # the preset sized like Vela's ethos-u55-256 system
QUICK_NETWORKS = ("ds_cnn", "transformer")
KINDS = ("full", "ref", "ref_native", "timing_only", "timing_uncached")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: networks {','.join(QUICK_NETWORKS)} (unless --networks), "
                        "1 repetition, results to quick.{json,md}")
    p.add_argument("--networks", help="comma list from " + ", ".join(networks.NETWORKS) +
                   " (aliases: mobilenet, resnet, ...); default: all")
    p.add_argument("--configs", help=f"comma list of presets; default: {','.join(CONFIGS)}")
    p.add_argument("--reps", type=int, help="repetitions of each timed command (default 5, "
                                            "--quick 1)")
    p.add_argument("--threads", type=int, default=1,
                   help="OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = MKL_NUM_THREADS for every "
                        "timed process (default 1; 0 leaves them unset)")
    p.add_argument("--rev", default="HEAD",
                   help="measure this committed revision of npu-sim, exported with git archive "
                        "into the cache and put first on npu-sim's PYTHONPATH (default HEAD)")
    p.add_argument("--worktree", action="store_true",
                   help="measure the live work tree (uncommitted edits included) instead")
    p.add_argument("--seed", type=int, default=0, help="seed of the int8 input data")
    p.add_argument("--no-vela", action="store_true", help="skip Vela")
    p.add_argument("--cache-dir", type=Path, default=BENCH / ".cache")
    p.add_argument("--out", type=Path, help="results file stem (default "
                   "bench/results/latest, or bench/results/quick with --quick)")
    p.add_argument("--update-readme", action="store_true",
                   help="also rewrite the generated part of README.md's Benchmarks section")
    p.add_argument("--timeout", type=float, default=900, help="per-command timeout, seconds")
    p.add_argument("--dse", action=argparse.BooleanOptionalAction, default=None,
                   help="time the example DSE sweep on one worker (default: on, off with --quick)")
    return p.parse_args(argv)


def log(msg=""):
    print(msg, flush=True)


def native_ref_binary() -> str | None:
    try:
        f = Path(metadata.distribution("tosa-tools").locate_file("bin/tosa_reference_model"))
    except metadata.PackageNotFoundError:
        return None
    return str(f) if f.is_file() else None


def compare_outputs(sim_dir: Path, ref_files: dict[str, Path]) -> list[str]:
    """Differences between npu-sim's outputs and the reference model's ([] = bit-identical)."""
    from npu_sim.cli_files import output_paths      # the file names `npu-sim run` writes
    diffs = []
    for name, rf in ref_files.items():
        sf = output_paths([name], sim_dir)[0]
        if not sf.exists() or not rf.exists():
            diffs.append(f"{name}: missing {'npu-sim' if not sf.exists() else 'reference'} "
                         "output")
            continue
        a, b = np.load(sf), np.load(rf)
        if a.dtype != b.dtype or a.shape != b.shape:
            diffs.append(f"{name}: npu-sim {a.dtype}{list(a.shape)} vs reference "
                         f"{b.dtype}{list(b.shape)}")
        elif not np.array_equal(a, b):
            d = np.abs(a.astype(np.int64) - b.astype(np.int64))
            diffs.append(f"{name}: {int((d != 0).sum())} of {d.size} elements differ "
                         f"(max |diff| {int(d.max())})")
    return diffs


def summarize_report(path: Path) -> dict | None:
    try:
        r = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    layers = []
    for lay in r.get("layers", []):
        rc = lay.get("roofline_cycles")
        layers.append({"name": lay.get("name"), "ops": lay.get("ops"), "unit": lay.get("unit"),
                       "cycles": lay.get("cycles"), "roofline_cycles": rc,
                       "ratio": (lay["cycles"] / rc) if rc else None,
                       "macs": lay.get("macs"), "mac_utilization": lay.get("mac_utilization")})
    roof = r.get("roofline", {})
    return {"model": r.get("model"), "config": r.get("config"), "clock_mhz": r.get("clock_mhz"),
            "cycles": r.get("cycles"), "seconds": r.get("seconds"),
            "total_macs": r.get("total_macs"), "mac_utilization": r.get("mac_utilization"),
            "roofline": roof,
            "roofline_ratio": measure.ratio(r.get("cycles"), roof.get("cycles")),
            "attainable_ratio": measure.ratio(r.get("cycles"),
                                              (roof.get("attainable") or {}).get("cycles")),
            "energy_uj": (r.get("energy_uj") or {}).get("total"),
            "operators": r.get("operators"), "engines": r.get("engines"),
            "layers_cycles_sum": sum(x["cycles"] or 0 for x in layers),
            "layers_roofline_sum": sum(x["roofline_cycles"] or 0 for x in layers),
            "layers": layers}


def parse_vela(out_dir: Path, stem: str, stdout: str) -> dict:
    found = sorted(out_dir.glob(f"{stem}_summary_*.csv"))
    if not found:
        return {"error": f"no {stem}_summary_*.csv in Vela's output dir"}
    with open(found[0], newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return {"error": f"{found[0].name} is empty"}
    row = rows[0]
    keep = ("accelerator_configuration", "system_config", "memory_mode", "core_clock",
            "cycles_total", "cycles_npu", "cycles_sram_access", "cycles_off_chip_flash_access",
            "inference_time", "nn_macs", "sram_memory_used", "off_chip_flash_memory_used")
    out = {}
    for k in keep:
        v = row.get(k)
        try:
            out[k] = float(v) if v is not None and k not in (
                "accelerator_configuration", "system_config", "memory_mode") else v
        except ValueError:
            out[k] = v
    for k in ("cycles_total", "cycles_npu", "nn_macs"):
        if isinstance(out.get(k), float):
            out[k] = int(round(out[k]))
    m = re.search(r"CPU operators\s*=\s*(\d+)", stdout)
    out["cpu_operators"] = int(m.group(1)) if m else None
    m = re.search(r"NPU operators\s*=\s*(\d+)", stdout)
    out["npu_operators"] = int(m.group(1)) if m else None
    out["summary_csv"] = found[0].name
    return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.env = measure.child_env(args.threads)     # every timed process
        self.sim_env = self.env                          # npu-sim's (+ PYTHONPATH)
        self.npu_sim = measure.find_tool("npu-sim")
        self.ref = measure.find_tool("tosa_reference_model")
        self.ref_native = native_ref_binary()
        self.vela = None if args.no_vela else measure.find_tool("vela")
        self.runs = args.cache_dir / "runs"
        self.step = 0
        self.total_steps = 0

    def timed(self, label: str, cmd: list[str], log_base: Path, sim=False) -> measure.Sample:
        self.step += 1
        s = measure.run(cmd, self.sim_env if sim else self.env, self.args.cache_dir, log_base,
                        self.args.timeout)
        status = "ok" if s.rc == 0 else f"FAILED (exit {s.rc})"
        log(f"  [{self.step}/{self.total_steps}] {label}: {s.wall_s:.2f} s wall, "
            f"{s.cpu_s:.2f} s CPU, {s.maxrss_kib / 1024:.0f} MiB peak  {status}")
        if s.rc != 0:
            log("      " + s.stderr_tail.replace("\n", "\n      "))
        return s

    # --- one command of each kind -------------------------------------------------------------
    def run_full(self, net, cfg, rep):
        d = self.runs / net.key / cfg
        out_dir = d / "sim-out"
        shutil.rmtree(out_dir, ignore_errors=True)
        cmd = [self.npu_sim, "run", str(net.tosa), "--config", cfg]
        for t, f in zip(net.inputs, net.input_files):
            cmd += ["--input", f"{t.name}={f}"]
        cmd += ["--output-dir", str(out_dir), "--report", str(d / "full.json")]
        s = self.timed(f"{net.key} {cfg} rep {rep} npu-sim full run", cmd, d / "full", sim=True)
        s.extra["out_dir"] = str(out_dir)
        s.extra["cycles"] = _cycles(d / "full.json") if s.rc == 0 else None
        return s

    def ref_cmd(self, exe, net, out_dir):
        outs = {t.name: out_dir / f"{networks._safe(t.name)}.npy" for t in net.outputs}
        cmd = [exe, "--tosa_file", str(net.tosa),
               "--ifm_name", ",".join(t.name for t in net.inputs),
               "--ifm_file", ",".join(str(f) for f in net.input_files),
               "--ofm_name", ",".join(outs), "--ofm_file", ",".join(str(f) for f in outs.values())]
        return cmd, outs

    def run_ref(self, net, cfg, rep, native=False):
        kind = "ref_native" if native else "ref"
        d = self.runs / net.key / cfg
        out_dir = d / f"{kind}-out"
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        cmd, outs = self.ref_cmd(self.ref_native if native else self.ref, net, out_dir)
        label = "tosa_reference_model" + (" (native binary)" if native else "")
        s = self.timed(f"{net.key} {cfg} rep {rep} {label}", cmd, d / kind)
        s.extra["outs"] = {k: str(v) for k, v in outs.items()}
        return s

    def run_timing(self, net, cfg, rep, uncached=False):
        """--timing-only from the bench's program cache, or (`uncached`) with NPU_SIM_CACHE=off:
        compile + simulate, what Vela's compile + estimate is compared with."""
        d = self.runs / net.key / cfg
        tag = "timing_uncached" if uncached else "timing"
        cmd = [self.npu_sim, "run", str(net.tosa), "--config", cfg, "--timing-only",
               "--report", str(d / f"{tag}.json")]
        label = f"{net.key} {cfg} rep {rep} npu-sim --timing-only" + (
            " (NPU_SIM_CACHE=off)" if uncached else "")
        if uncached:
            saved, self.sim_env = self.sim_env, {**self.sim_env, "NPU_SIM_CACHE": "off"}
        try:
            s = self.timed(label, cmd, d / tag, sim=True)
        finally:
            if uncached:
                self.sim_env = saved
        s.extra["cycles"] = _cycles(d / f"{tag}.json") if s.rc == 0 else None
        return s

    def run_vela(self, net, rep):
        d = self.runs / net.key / "vela"
        out_dir = d / "out"
        shutil.rmtree(out_dir, ignore_errors=True)
        cmd = [self.vela, str(net.tosa), "--accelerator-config", VELA_ACCEL, *VELA_SYSTEM,
               "--output-dir", str(out_dir)]
        s = self.timed(f"{net.key} rep {rep} vela {VELA_ACCEL}", cmd, d / "vela")
        stdout = Path(f"{d / 'vela'}.out").read_text(errors="replace")
        parsed = parse_vela(out_dir, net.tosa.stem, stdout)
        if "error" in parsed and s.rc == 0:
            # Vela can print an error and still exit 0; keep what it said
            err = Path(f"{d / 'vela'}.err").read_text(errors="replace").strip()
            parsed["error"] += ("; stderr: " + err[-2000:]) if err else \
                ("; stdout: " + stdout.strip()[-2000:])
            s.rc = -1
            s.stderr_tail = parsed["error"]
        s.extra["parsed"] = parsed
        return s

    # --- one network ----------------------------------------------------------------------------
    def bench_network(self, net, configs, reps):
        res = {"description": net.description, "tosa": str(net.tosa.relative_to(REPO))
               if net.tosa.is_relative_to(REPO) else str(net.tosa),
               "size_bytes": net.size_bytes, "build_seconds": net.build_seconds,
               "inputs": [vars(t) for t in net.inputs], "outputs": [vars(t) for t in net.outputs],
               "configs": {}}
        samples = {cfg: {k: [] for k in KINDS} for cfg in configs}
        mismatches = {cfg: [] for cfg in configs}
        vela_samples = []
        tasks = [("vela", None)] if self.vela else []
        for cfg in configs:
            tasks.append(("full", cfg))
            if not net.tflite:         # the reference model reads TOSA only
                tasks.append(("ref", cfg))
                if self.ref_native:
                    tasks.append(("ref_native", cfg))
            tasks += [("timing_only", cfg), ("timing_uncached", cfg)]
        for rep in range(1, reps + 1):
            pending = {}
            # alternate the order every repetition so drifting load hits both sides alike
            for kind, cfg in (tasks if rep % 2 else list(reversed(tasks))):
                if kind == "vela":
                    vela_samples.append(self.run_vela(net, rep))
                    continue
                fn = {"full": lambda: self.run_full(net, cfg, rep),
                      "ref": lambda: self.run_ref(net, cfg, rep),
                      "ref_native": lambda: self.run_ref(net, cfg, rep, native=True),
                      "timing_only": lambda: self.run_timing(net, cfg, rep),
                      "timing_uncached": lambda: self.run_timing(net, cfg, rep, True)}[kind]
                s = fn()
                samples[cfg][kind].append(s)
                pending.setdefault(cfg, {})[kind] = s
            for cfg, got in pending.items():     # this repetition's outputs, bit for bit
                full, ref = got.get("full"), got.get("ref")
                if net.reference and full and full.rc == 0:
                    ref = measure.Sample(0.0, 0.0, 0, 0, extra={"outs": net.reference})
                if full and ref and full.rc == 0 and ref.rc == 0:
                    refs = {k: Path(v) for k, v in ref.extra["outs"].items()}
                    diffs = compare_outputs(Path(full.extra["out_dir"]), refs)
                    full.extra["bit_exact"] = not diffs
                    if diffs:
                        mismatches[cfg].append({"rep": rep, "diffs": diffs})
                        log(f"  !! {net.key} {cfg} rep {rep}: outputs differ: {diffs}")
                    nat = got.get("ref_native")
                    if nat and nat.rc == 0:
                        nd = compare_outputs(Path(full.extra["out_dir"]),
                                             {k: Path(v) for k, v in nat.extra["outs"].items()})
                        nat.extra["bit_exact_vs_sim"] = not nd
        # summaries
        vela = None
        if self.vela:
            ok = [s for s in vela_samples if s.rc == 0]
            vela = {"cmd": ["vela", net.tosa.name, "--accelerator-config", VELA_ACCEL,
                            *VELA_SYSTEM, "--output-dir", "D"],
                    "time": measure.summarize(vela_samples),
                    "estimate": ok[-1].extra["parsed"] if ok else None,
                    "error": None if ok else (vela_samples[-1].stderr_tail if vela_samples
                                              else "not run"),
                    "samples": [s.to_dict() for s in vela_samples]}
        res["vela"] = vela
        for cfg in configs:
            c = {k: measure.summarize(v) for k, v in samples[cfg].items()}
            c["samples"] = {k: [s.to_dict() for s in v] for k, v in samples[cfg].items()}
            checked = [s for s in samples[cfg]["full"] if "bit_exact" in s.extra]
            c["bit_exact"] = (all(s.extra["bit_exact"] for s in checked) if checked else None)
            c["bit_exact_checked_reps"] = len(checked)
            c["mismatches"] = mismatches[cfg]
            errors = [f"{k}: {s.stderr_tail}" for k, v in samples[cfg].items() for s in v
                      if s.rc != 0]
            ran = [s for v in samples[cfg].values() for s in v]
            # A preset without what the model needs (edge-256 has no PRO-FP for a TFLite
            # model's float edges) refuses it as unsupported, exit status 2, every time; any
            # other failure (a model that does not fit, say) stays an error.
            c["refused"] = (_last_line(ran[0].stderr_tail) if ran and all(
                s.rc == 2 and _last_line(s.stderr_tail).startswith("npu-sim: unsupported:")
                for s in ran) else None)
            c["errors"] = [] if c["refused"] else sorted(set(errors))
            vt = (vela or {}).get("time") or {}
            for what, suffix in (("wall_s", ""), ("cpu_s", "_cpu")):
                w = lambda k: (c[k] or {}).get(what)   # noqa: E731
                c["full_vs_ref" + suffix] = measure.ratio(w("full"), w("ref"))
                c["full_vs_ref_native" + suffix] = measure.ratio(w("full"), w("ref_native"))
                c["timing_only_vs_vela" + suffix] = measure.ratio(w("timing_only"),
                                                                  vt.get(what))
                c["uncached_vs_vela" + suffix] = measure.ratio(w("timing_uncached"),
                                                               vt.get(what))
            d = self.runs / net.key / cfg
            full_rep = summarize_report(d / "full.json") if c["full"] else None
            timing_rep = summarize_report(d / "timing.json") if c["timing_only"] else None
            rep_ = full_rep or timing_rep
            c["report"] = rep_
            c["timing_only_cycles"] = timing_rep["cycles"] if timing_rep else None
            c["cycles_consistent"] = (full_rep["cycles"] == timing_rep["cycles"]
                                      if full_rep and timing_rep else None)
            per_rep = {k: [s.extra.get("cycles") for s in samples[cfg][k] if s.rc == 0]
                       for k in ("full", "timing_only", "timing_uncached")}
            c["cycles_per_rep"] = per_rep
            c["cycles_stable"] = len({x for v in per_rep.values() for x in v}) <= 1
            est = (vela or {}).get("estimate") or {}
            if cfg == EDGE_CONFIG and rep_ and est.get("cycles_total"):
                c["vela_cycles_total"] = est["cycles_total"]
                c["cycles_vs_vela"] = rep_["cycles"] / est["cycles_total"]
            res["configs"][cfg] = c
        return res


DSE_SWEEP = REPO / "examples" / "sweep-edge.yaml"


def dse_throughput(bench) -> dict:
    """The example sweep on one worker process, timed whole: design points (design x network,
    each compiled and simulated timing-only) per second per core."""
    out = bench.runs / "dse"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [bench.npu_sim, "dse", str(DSE_SWEEP), "-j", "1", "-o", str(out), "--no-plots", "-q"]
    s = bench.timed("npu-sim dse examples/sweep-edge.yaml -j 1", cmd, bench.runs / "dse-run",
                    sim=True)
    rows = out / "results.jsonl"
    points = sum(1 for line in rows.read_text().splitlines() if line.strip()) \
        if rows.exists() else 0
    if s.rc or not points:
        return {"error": f"npu-sim dse failed (exit {s.rc}): {_first_line(s.stderr_tail)}"}
    return {"cmd": " ".join(["npu-sim", "dse", "examples/sweep-edge.yaml", "-j", "1"]),
            "points": points, "jobs": 1, "wall_s": s.wall_s, "cpu_s": s.cpu_s,
            "points_per_s_per_core": points / s.wall_s}


def _first_line(text: str) -> str:
    return next((x for x in str(text).splitlines() if x.strip()), "")


def _last_line(text: str) -> str:
    return next((x for x in reversed(str(text).splitlines()) if x.strip()), "")


def _cycles(report_json: Path):
    try:
        return json.loads(report_json.read_text()).get("cycles")
    except (OSError, ValueError):
        return None


def scaling(results: dict, startup: dict | None, fixed_rss: float | None = None) -> dict:
    """Wall time per million MACs and peak memory vs model size, per network and config;
    `fixed_rss`: the peak of the smallest run, subtracted for the *fixed* peak ratios."""
    base = {"wall_s": (startup or {}).get("wall_s") or 0.0,
            "cpu_s": (startup or {}).get("cpu_s") or 0.0}
    base_rss = (startup or {}).get("peak_rss_mib") or 0.0
    rows = []
    for key, r in results["networks"].items():
        for cfg, c in r["configs"].items():
            macs = (c.get("report") or {}).get("total_macs")
            if not macs:
                continue
            mm = macs / 1e6
            row = {"network": key, "config": cfg, "macs": macs, "model_bytes": r["size_bytes"]}
            for k in ("full", "timing_only"):
                s = c.get(k) or {}
                if s.get("wall_s") is None:
                    continue
                row[f"{k}_wall_s"] = s["wall_s"]
                row[f"{k}_cpu_s"] = s["cpu_s"]
                row[f"{k}_ms_per_mmac"] = 1000 * s["wall_s"] / mm
                row[f"{k}_net_ms_per_mmac"] = 1000 * max(s["wall_s"] - base["wall_s"], 0) / mm
                row[f"{k}_cpu_ms_per_mmac"] = 1000 * s["cpu_s"] / mm
                row[f"{k}_peak_mib"] = s["peak_rss_mib"]
                row[f"{k}_peak_over_model"] = s["peak_rss_mib"] * 2 ** 20 / r["size_bytes"]
                row[f"{k}_net_peak_over_model"] = (max(s["peak_rss_mib"] - base_rss, 0)
                                                   * 2 ** 20 / r["size_bytes"])
                if fixed_rss is not None:
                    row[f"{k}_fixed_peak_over_model"] = (max(s["peak_rss_mib"] - fixed_rss, 0)
                                                         * 2 ** 20 / r["size_bytes"])
            rows.append(row)
    slopes = {}
    for cfg in dict.fromkeys(row["config"] for row in rows):
        for k in ("full", "timing_only"):
            for what, tag in (("wall_s", ""), ("cpu_s", "_cpu")):
                col = f"{k}_{what.split('_')[0]}_s"
                got = [(row["macs"], row[col]) for row in rows
                       if row["config"] == cfg and row.get(col) is not None]
                net = [(m, t - base[what]) for m, t in got if t - base[what] > 0]
                if len(got) >= 2:
                    slopes.setdefault(cfg, {})[k + tag] = _loglog_slope(got)
                if len(net) >= 2:
                    slopes.setdefault(cfg, {})[f"{k}{tag}_net"] = _loglog_slope(net)
    return {"startup_wall_s": base["wall_s"], "startup_cpu_s": base["cpu_s"],
            "startup_peak_mib": base_rss, "fixed_peak_mib": fixed_rss, "rows": rows,
            "loglog_slope": slopes}


def _loglog_slope(pts):
    x = np.log([p[0] for p in pts])
    y = np.log([p[1] for p in pts])
    if np.ptp(x) == 0:
        return None
    return float(np.polyfit(x, y, 1)[0])


def main(argv=None) -> int:
    args = parse_args(argv)
    nets = networks.resolve(args.networks.split(",")) if args.networks else \
        list(QUICK_NETWORKS if args.quick else networks.NETWORKS)
    configs = [c.strip() for c in args.configs.split(",")] if args.configs else list(CONFIGS)
    reps = args.reps or (1 if args.quick else 5)
    out = args.out or (BENCH / "results" / ("quick" if args.quick else "latest"))
    bench = Bench(args)
    if not bench.npu_sim:
        raise SystemExit("bench: npu-sim not found (pip install -e . in the repo)")
    if not bench.ref:
        raise SystemExit("bench: tosa_reference_model not found (it comes with tosa-tools)")
    if not args.no_vela and not bench.vela:
        log("bench: vela not found: pip install -r bench/requirements.txt (continuing without)")

    started = dt.datetime.now(dt.timezone.utc)
    t_start = time.perf_counter()
    log(f"npu-sim bench: networks {', '.join(nets)}; configs {', '.join(configs)}; "
        f"{reps} rep(s); {args.threads} BLAS/OpenMP thread(s) per process")
    mach = machine.describe(REPO, bench.env)
    load0 = machine.loadavg()
    log(f"machine: {mach['cpu_model']}, {mach['cores']} cores, Python {mach['python']}, "
        f"numpy {mach['numpy']}, load average {load0}")
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    if args.worktree:
        src = {"mode": "worktree", "path": str(REPO), "commit": mach.get("git_commit"),
               "uncommitted_files": mach.get("git_dirty_files")}
        src_root = REPO
    else:
        sha, src_root = source.snapshot(REPO, args.rev, args.cache_dir)
        bench.sim_env = source.use(src_root, bench.env)
        src = {"mode": "snapshot", "rev": args.rev, "commit": sha, "path": str(src_root)}
    src["imports_from"] = source.check(bench.sim_env, args.cache_dir)
    if not src["imports_from"].startswith(str(src_root)):
        raise SystemExit(f"bench: npu-sim would import npu_sim from {src['imports_from']}, "
                         f"not {src_root}")
    src["fingerprint_start"] = source.fingerprint(src_root)
    log(f"npu-sim source: {src['mode']} at {src['commit'][:12]} ({src_root})")
    # A program cache of the bench's own, emptied: every measured run then reuses the program
    # the warm-up below compiled, whatever the user's cache held (peaks used to depend on it).
    programs = args.cache_dir / "programs"
    shutil.rmtree(programs, ignore_errors=True)
    bench.sim_env = {**bench.sim_env, "NPU_SIM_CACHE": str(programs)}
    log("preparing networks ...")
    prepared = [networks.prepare(k, args.cache_dir, args.seed, log) for k in nets]

    probe = networks.prepare("probe", args.cache_dir, args.seed, log)
    per_net = [bool(bench.vela) + len(configs) * (3 + (0 if n.tflite else
                                                       1 + bool(bench.ref_native)))
               for n in prepared]
    bench.total_steps = 2 * reps + sum(per_net) * reps
    fl = measure.floor(bench.env, args.cache_dir, bench.runs / "floor")
    log(f"measuring with {measure.METHOD}: floor (`true`) {fl.wall_s * 1000:.0f} ms, "
        f"{fl.maxrss_kib / 1024:.1f} MiB")
    log("compiling every network for every config (untimed: the measured runs reuse the "
        "programs, as a user's repeated runs do)")
    compiled = {}
    for net, cfgs in [(n, configs) for n in prepared] + [(probe, ["default"])]:
        for cfg in cfgs:
            s = measure.run([bench.npu_sim, "run", str(net.tosa), "--config", cfg,
                             "--timing-only"], bench.sim_env, args.cache_dir,
                            bench.runs / net.key / cfg / "compile", args.timeout)
            compiled.setdefault(net.key, {})[cfg] = {
                "rc": s.rc, "wall_s": s.wall_s, "peak_rss_mib": s.maxrss_kib / 1024}
            log(f"  {net.key} {cfg}: {s.wall_s:.2f} s, {s.maxrss_kib / 1024:.0f} MiB peak"
                + ("" if s.rc == 0 else f"  FAILED (exit {s.rc})"))
    log("start-up: npu-sim --help")
    startup = [bench.timed(f"npu-sim --help rep {i + 1}", [bench.npu_sim, "--help"],
                           bench.runs / "startup", sim=True) for i in range(reps)]
    log(f"fixed cost of a run: npu-sim run on an {probe.description.split(' (')[0]} "
        f"({probe.size_bytes:,} bytes)")
    fixed = [bench.run_full(probe, "default", i + 1) for i in range(reps)]
    results = {
        "date": started.isoformat(timespec="seconds"),
        "machine": mach,
        "source": src,
        "settings": {
            "quick": args.quick, "reps": reps, "threads": args.threads, "seed": args.seed,
            "networks": nets, "configs": configs,
            "tools": {"npu-sim": bench.npu_sim, "tosa_reference_model": bench.ref,
                      "tosa_reference_model_native": bench.ref_native, "vela": bench.vela},
            "vela_args": ["--accelerator-config", VELA_ACCEL, *VELA_SYSTEM],
            "measurement": {"method": measure.METHOD, "floor_wall_s": fl.wall_s,
                            "floor_peak_mib": fl.maxrss_kib / 1024},
            "command_line": " ".join(["python", "bench/run.py", *(argv or sys.argv[1:])]),
        },
        "startup": {"cmd": "npu-sim --help", "time": measure.summarize(startup)},
        "compile": compiled,         # the first (compiling) timing-only run of each, untimed
        "fixed_cost": {"cmd": f"npu-sim run {probe.tosa.name} ({probe.description})",
                       "model_bytes": probe.size_bytes, "time": measure.summarize(fixed)},
        "networks": {},
    }
    for net in prepared:
        log(f"== {net.key}: {net.description}, {net.size_bytes:,} bytes")
        results["networks"][net.key] = bench.bench_network(net, configs, reps)
    if args.dse if args.dse is not None else not args.quick:
        log("== DSE throughput: the example sweep on one worker")
        bench.total_steps += 1
        results["dse"] = dse_throughput(bench)
    results["load_average"] = {"start": load0, "end": machine.loadavg()}
    src["fingerprint_end"] = source.fingerprint(src_root)
    src["changed_during_run"] = src["fingerprint_end"] != src["fingerprint_start"]
    if src["changed_during_run"]:
        log("WARNING: npu-sim's sources changed during the run: results mix code versions")
    results["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    # The same statistic as the networks' (the largest peak of the repetitions, a first run
    # that compiles included), so the two compare like with like.
    results["scaling"] = scaling(results, results["startup"]["time"],
                                 (results["fixed_cost"]["time"] or {}).get("peak_rss_mib"))
    results["goals"] = report.goals(results)

    out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out.with_suffix(".json"), out.with_suffix(".md")
    json_path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    md = report.markdown(results)
    md_path.write_text(md)
    log()
    log(md)
    log(f"wrote {json_path} and {md_path} ({results['elapsed_s']:.0f} s)")
    if args.update_readme:
        changed = report.update_readme(REPO / "README.md", results, md_path)
        log("README.md Benchmarks section " + ("updated" if changed else "unchanged"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
