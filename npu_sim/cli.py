"""Command line: npu-sim run | compile | disasm.

Every user error ends as one line on stderr and exit status 2; no partial outputs are left.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from npu_sim.isa.errors import InputError, ModelError, NpuSimError

EXIT_USAGE = 2
# Further subcommands live in their own modules, each with add_parser(subparsers) that sets
# `func` to a handler returning the exit status (errors raised as NpuSimError).
SUBCOMMAND_MODULES: list[str] = ["npu_sim.viewer", "npu_sim.dse.cli", "npu_sim.conformance"]


def _parse_inputs(pairs: list[str]) -> dict[str, np.ndarray]:
    inputs = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--input '{pair}': expected NAME=FILE.npy")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"--input {name}: cannot read {path} as .npy ({exc})") from None
    return inputs


def _load_state(path: str) -> dict[str, np.ndarray] | None:
    """Variables saved by an earlier `run --state`; none yet means the initial values."""
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (OSError, ValueError) as exc:
        raise InputError(f"--state {path}: cannot read as .npz ({exc})") from None


def _save_state(state: dict[str, np.ndarray], path: Path) -> None:
    tmp = path.with_name(path.name + ".part.npz")
    np.savez(tmp, **state)
    os.replace(tmp, path)


def _is_program(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"NPUB"
    except OSError:
        return False


def _write_outputs(outputs: dict[str, np.ndarray], out_dir: Path) -> list[Path]:
    """Write every output or none: files appear only after all were written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    staged = []
    try:
        for name, value in outputs.items():
            safe = name.replace(os.sep, "_").replace("/", "_")
            fd, tmp = tempfile.mkstemp(prefix=f".{safe}.", suffix=".npy.part", dir=out_dir)
            with os.fdopen(fd, "wb") as f:
                np.save(f, value, allow_pickle=False)
            staged.append((tmp, out_dir / f"{safe}.npy"))
    except BaseException:
        for tmp, _ in staged:
            os.unlink(tmp)
        raise
    for tmp, final in staged:
        os.replace(tmp, final)
    return [final for _, final in staged]


def _load_program_or_compile(model: str | None, config_arg: str | None):
    from . import api
    if model is not None and _is_program(model):
        program = api.load_program(model)
        cfg = api.config_for_program(program, api.load_config(config_arg) if config_arg else None)
        return program, cfg
    cfg = api.load_config(config_arg)
    path = model if model is not None else str(api.default_model())
    if model is not None and not os.path.exists(model):
        raise ModelError(f"{model}: no such file")
    return api.compile_model(path, cfg), cfg


def cmd_run(args) -> int:
    from . import api
    program, cfg = _load_program_or_compile(args.model, args.config)
    inputs = _parse_inputs(args.input or [])
    known = {b.name for b in program.inputs}
    for name in inputs:
        if name not in known:
            raise InputError(f"--input {name}: the graph has no input of that name (inputs: "
                             f"{', '.join(sorted(known))})")
    if args.trace_coarse and not args.trace:
        raise InputError("--trace-coarse: give the trace file with --trace FILE.json")
    state = _load_state(args.state) if args.state else None
    result = api.simulate(program, cfg, inputs, timing_only=args.timing_only, seed=args.seed,
                          state=state, check_hazards=args.check_hazards or None)
    report = result.report
    if args.report:
        Path(args.report).write_text(report.to_json())
    if args.csv:
        Path(args.csv).write_text(report.layers_csv())
    if args.trace:
        from .trace import write_trace
        trace_size = write_trace(args.trace, program, cfg, result.sim, report, args.trace_coarse)
    written = [] if args.timing_only else _write_outputs(result.outputs, Path(args.output_dir))
    if args.state and not args.timing_only and result.state:
        _save_state(result.state, Path(args.state))
    sys.stdout.write(report.to_text())
    if args.timeline:
        from .timeline import render_timeline
        sys.stdout.write(render_timeline(report))
    if args.trace:
        print(f"  trace             {args.trace} ({trace_size:,} B; npu-sim view {args.trace})")
    for path in written:
        print(f"  output            {path}")
    return 0


def cmd_compile(args) -> int:
    from . import api
    cfg = api.load_config(args.config)
    if not os.path.exists(args.model):
        raise ModelError(f"{args.model}: no such file")
    program = api.compile_model(args.model, cfg)
    out = Path(args.output)
    tmp = out.with_name(out.name + ".part")
    api.save_program(program, tmp)
    os.replace(tmp, out)
    print(f"npu-sim: wrote {out} ({len(program.commands)} commands, {len(program.layers)} layers)")
    return 0


def cmd_disasm(args) -> int:
    from npu_sim.isa.asm import disassemble
    from . import api
    sys.stdout.write(disassemble(api.load_program(args.program)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="npu-sim", description="Simulate a TOSA int8 network on a "
                                "modelled NPU: bit-exact outputs, cycles, energy.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="compile (if needed) and simulate a model")
    r.add_argument("model", nargs="?", help=".tosa or compiled .npub (default: the embedded "
                   "int8 MobileNetV2-224)")
    r.add_argument("--config", help="preset name or YAML path (default: default)")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="graph input value (missing inputs get seeded random data)")
    r.add_argument("--output-dir", default="npu-sim-out", help="where output .npy files go "
                   "(default: npu-sim-out)")
    r.add_argument("--report", metavar="R.json", help="write the full report as JSON")
    r.add_argument("--csv", metavar="LAYERS.csv", help="write the per-layer table as CSV")
    r.add_argument("--timing-only", action="store_true", help="simulate timing and energy "
                   "without computing values")
    r.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    r.add_argument("--state", metavar="STATE.npz", help="variables (EXT-VARIABLE) to start from, "
                   "if the file exists, and where to save them after the run")
    r.add_argument("--trace", metavar="TRACE.json", help="write a Chrome/Perfetto trace: one "
                   "slice per command on each engine (ui.perfetto.dev, or npu-sim view)")
    r.add_argument("--trace-coarse", action="store_true", help="with --trace: one slice per "
                   "layer and engine instead of per command, for huge networks")
    r.add_argument("--timeline", action="store_true", help="print a per-layer Gantt chart")
    r.add_argument("--check-hazards", action="store_true", help="verify as it runs that the "
                   "program's dependencies order every two commands touching the same bytes "
                   "(also NPU_SIM_CHECK_HAZARDS=1)")
    r.set_defaults(func=cmd_run)
    c = sub.add_parser("compile", help="compile a .tosa model into a program (.npub)")
    c.add_argument("model")
    c.add_argument("--config", help="preset name or YAML path (default: default)")
    c.add_argument("-o", "--output", required=True, help="program file to write")
    c.set_defaults(func=cmd_compile)
    d = sub.add_parser("disasm", help="print a compiled program as text")
    d.add_argument("program")
    d.set_defaults(func=cmd_disasm)
    for module in SUBCOMMAND_MODULES:
        importlib.import_module(module).add_parser(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except NpuSimError as exc:
        print(exc.one_line(), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("npu-sim: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:          # an output path that cannot be written, a full disk, ...
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"npu-sim: file error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
