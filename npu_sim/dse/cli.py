"""`npu-sim dse SWEEP.yaml [-j N] [--scheduler ADDRESS] [--resume] [-o OUTDIR]`."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from npu_sim.isa.errors import ConfigError


def cmd_dse(args) -> int:
    from .report import summary_text, write_report
    from .runner import check_jobs, run_sweep
    from .sweep import load_sweep
    check_jobs(args.jobs)
    sweep = load_sweep(args.sweep)
    if args.set:
        sweep = with_sets(sweep, args.set)
    outdir = Path(args.output_dir or f"dse-{Path(args.sweep).stem}")
    t0 = time.perf_counter()
    result = run_sweep(sweep, outdir, jobs=args.jobs, scheduler=args.scheduler, resume=args.resume,
                       progress=not args.quiet and sys.stderr.isatty() or args.progress)
    plots = []
    if not args.no_plots:
        from .plots import make_plots
        plots = make_plots(result)
    files = write_report(result, plots)
    if plots:
        files["plots"] = plots[0].parent
    sys.stdout.write(summary_text(result, files))
    print(f"wall time {time.perf_counter() - t0:.1f} s")
    return 0


def with_sets(sweep, sets: list[str]):
    """The sweep with --set overrides added to its fixed ones, checked against the base config."""
    import dataclasses

    from ..config import parse_overrides
    extra = parse_overrides(sets)
    for key in extra:
        if any(key in axis.keys for axis in sweep.axes):
            raise ConfigError(f"--set {key}: the sweep varies it (axes)")
    fixed = {**sweep.fixed, **extra}
    sweep.base.with_overrides(fixed)           # refused here, not point by point
    return dataclasses.replace(sweep, fixed=fixed)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("dse", help="design-space exploration: sweep configs over networks, "
                              "Pareto front, plots and a report")
    p.add_argument("sweep", help="sweep file (YAML): base config, networks, axes, objectives, "
                   "constraints, strategy")
    p.add_argument("-j", "--jobs", type=int, help="local worker processes (default: all cores)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="run on a Dask cluster, e.g. tcp://host:8786 "
                   "(workers need npu-sim installed and the sweep's .tosa paths)")
    p.add_argument("--resume", action="store_true", help="keep OUTDIR/results.jsonl and evaluate only "
                   "the points missing from it (otherwise it is started afresh)")
    p.add_argument("-o", "--output-dir", metavar="OUTDIR", help="where results, tables, plots and the "
                   "report go (default: dse-<sweep file name>)")
    p.add_argument("--no-plots", action="store_true", help="skip the matplotlib plots")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a figure of "
                   "every design, like the sweep's fixed section (repeatable; not an axis key)")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    bar.add_argument("--progress", action="store_true", help="progress bar even when stderr is not a terminal")
    p.set_defaults(func=cmd_dse)
