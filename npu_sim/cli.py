"""Command line: npu-sim run | compile | disasm.

Every user error ends as one line on stderr and exit status 2; no partial outputs are left.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys
from pathlib import Path

from npu_sim.isa.errors import InputError, NpuSimError

from . import cli_files as files

EXIT_USAGE = 2
# Further subcommands live in their own modules, each with add_parser(subparsers) that sets
# `func` to a handler returning the exit status (errors raised as NpuSimError).
SUBCOMMAND_MODULES: list[str] = ["npu_sim.viewer", "npu_sim.dse.cli", "npu_sim.conformance",
                                   "npu_sim.operator_info", "npu_sim.nnapi.cli"]


def _is_program(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"NPUB"
    except OSError:
        return False


def _config(config_arg: str | None, sets: list[str] | None):
    """The --config preset or file with the --set overrides applied, validated like the YAML."""
    from . import api
    from .config import parse_overrides
    cfg = api.load_config(config_arg)
    return cfg.with_overrides(parse_overrides(sets)) if sets else cfg


def _load_program_or_compile(model: str | None, config_arg: str | None,
                             sets: list[str] | None = None):
    from . import api
    if model is not None:
        files.check_model_path(model)
    if model is not None and (_is_program(model) or model.endswith(".npub")):
        program = api.load_program(model)
        given = None
        if config_arg or sets:      # --set alone changes the config the program holds
            from .config import parse_overrides
            given = api.load_config(config_arg) if config_arg else \
                api.config_for_program(program, None)
            given = given.with_overrides(parse_overrides(sets)) if sets else given
        return program, api.config_for_program(program, given)
    cfg = _config(config_arg, sets)
    path = model if model is not None else str(api.default_model())
    return api.compile_model(path, cfg), cfg


def cmd_run(args) -> int:
    if args.own_process:
        # In npu-sim's own process (not a caller's of main()) what a run makes lives to its
        # end, the modules and the program most of it, and compiling and simulating make
        # little cyclic garbage (the same peak RSS without collections): the cyclic collector
        # stays off, and freezing the loaded program keeps the collection at exit from
        # walking it. Its passes were a twentieth of a cached timing-only run.
        gc.disable()
    from . import api
    if args.trace_coarse and not args.trace:
        raise InputError("--trace-coarse: give the trace file with --trace FILE.json")
    if args.state is not None and args.timing_only:
        raise InputError("--state: a --timing-only run computes no variables, so it would "
                         "neither start from the state nor save it: run without one of them")
    for flag in ("output_dir", "report", "csv", "trace", "state"):
        if getattr(args, flag) == "":
            raise InputError(f"--{flag.replace('_', '-')}: an empty path")
    if args.preference:
        _refuse_beside_preference(args)
        from .nnapi.cli import run_preference
        return run_preference(args, _config(args.config, args.set))
    program, cfg = _load_program_or_compile(args.model, args.config, args.set)
    if args.own_process:
        gc.freeze()
    inputs = files.load_inputs(args.input or [], program.inputs)
    state = files.load_state(args.state, program.variables) if args.state else None
    if not args.timing_only:        # refused before anything is written
        files.output_paths([b.name for b in program.outputs], Path(args.output_dir))
    result = api.simulate(program, cfg, inputs, timing_only=args.timing_only, seed=args.seed,
                          state=state, check_hazards=args.check_hazards or None)
    report = result.report
    reads = [args.model, *(pair.partition("=")[2] for pair in args.input or [])]
    with files.Staged(reads) as staged:   # every file or none
        if args.report is not None:
            staged.text(args.report, report.to_json())
        if args.csv is not None:
            staged.text(args.csv, report.layers_csv())
        if args.trace is not None:
            from .trace import write_trace
            trace_size = write_trace(staged.path(args.trace), program, cfg, result.sim, report,
                                     args.trace_coarse)
        written = [] if args.timing_only else staged.outputs(result.outputs, Path(args.output_dir))
        if args.state and result.state:
            staged.state(result.state, args.state)
        staged.commit()
    sys.stdout.write(report.to_text())
    if args.timeline:
        from .timeline import render_timeline
        sys.stdout.write(render_timeline(report))
    if args.trace:
        print(f"  trace             {args.trace} ({trace_size:,} B; npu-sim view {args.trace})")
    made_up = [b.name for b in program.inputs if b.name not in inputs]
    if made_up and not args.timing_only:
        print(f"  input             seeded random data (--seed {args.seed}) for "
              f"{', '.join(made_up)}; give one with --input NAME=FILE.npy")
    for path in written:
        print(f"  output            {path}")
    return 0


OUTPUT_DIR = "npu-sim-out"          # run's default --output-dir
# What a run computes or writes; --preference only compares the three schedules' timing.
_RUN_ONLY = (("input", "--input"), ("report", "--report"), ("csv", "--csv"),
             ("timing_only", "--timing-only"), ("state", "--state"), ("trace", "--trace"),
             ("timeline", "--timeline"), ("check_hazards", "--check-hazards"))


def _refuse_beside_preference(args) -> None:
    given = [flag for attr, flag in _RUN_ONLY if getattr(args, attr)]
    if args.output_dir != OUTPUT_DIR:
        given.append("--output-dir")
    if args.seed:
        given.append("--seed")
    if given:
        raise InputError(f"--preference compares the NNAPI device's schedules and writes "
                         f"nothing; {', '.join(given)} would be ignored: run without --preference")


def cmd_compile(args) -> int:
    from . import api
    cfg = _config(args.config, args.set)
    files.check_model_path(args.model)
    program = api.compile_model(args.model, cfg)
    with files.Staged([args.model]) as staged:
        api.save_program(program, staged.path(args.output))
        staged.commit()
    print(f"npu-sim: wrote {args.output} ({len(program.commands)} commands, "
          f"{len(program.layers)} layers)")
    return 0


def cmd_disasm(args) -> int:
    from npu_sim.isa.asm import disassemble
    from . import api
    sys.stdout.write(disassemble(api.load_program(args.program)))
    return 0


def _seed(text: str) -> int:
    # ASCII digits only: int() would also take '１', ' 1_0 ' and '+1'
    value = int(text) if text.isascii() and text.isdigit() else -1
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**64), got {text[:40]!r}")
    return value


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size() finds it: $COLUMNS, else stdout's
    terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, given the width: finding it itself imports shutil, with
    bz2 and lzma, a fortieth of a cached run's start-up (every add_argument makes one)."""

    def __init__(self, prog, **kwargs):
        kwargs.setdefault("width", _columns() - 2)
        super().__init__(prog, **kwargs)


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line and exit status 2, like every other error."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        text = " ".join(message.split())
        self.exit(EXIT_USAGE, f"npu-sim: usage error: {text} (see {self.prog} --help)\n")


SET_HELP = ("override a config figure, validated like the YAML (repeatable): --set "
            "mac_array.rows=64 --set sram.size='2 MiB'")


BUILT_IN = ("run", "compile", "disasm")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; for a command line naming a built-in command, without the other
    subcommands' modules (importing them all took a run's start-up tens of ms)."""
    p = _Parser(prog="npu-sim", description="Simulate a TOSA, TFLite or NNAPI model on a "
                                "modelled NPU: its outputs, cycles, energy.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="compile (if needed) and simulate a model")
    r.add_argument("model", nargs="?", help=".tosa, .tflite or compiled .npub (default: the "
                   "embedded int8 MobileNetV2-224)")
    r.add_argument("--config", help="preset name or YAML path (default: default)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="graph input value (missing inputs get seeded random data)")
    r.add_argument("--output-dir", default=OUTPUT_DIR, help="where output .npy files go "
                   f"(default: {OUTPUT_DIR})")
    r.add_argument("--report", metavar="R.json", help="write the full report as JSON")
    r.add_argument("--csv", metavar="LAYERS.csv", help="write the per-layer table as CSV")
    r.add_argument("--timing-only", action="store_true", help="simulate timing and energy "
                   "without computing values")
    r.add_argument("--preference", choices=["LOW_POWER", "FAST_SINGLE_ANSWER", "SUSTAINED_SPEED"],
                   help="prepare a .tflite or .json NNAPI case on the NNAPI device with this "
                        "ExecutionPreference and compare the three schedules")
    r.add_argument("--seed", type=_seed, default=0, help="seed for random inputs (default 0)")
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
    c = sub.add_parser("compile", help="compile a .tosa or .tflite model into a program "
                       "(.npub)")
    c.add_argument("model")
    c.add_argument("--config", help="preset name or YAML path (default: default)")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    c.add_argument("-o", "--output", required=True, help="program file to write")
    c.set_defaults(func=cmd_compile)
    d = sub.add_parser("disasm", help="print a compiled program as text")
    d.add_argument("program")
    d.set_defaults(func=cmd_disasm)
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    if not (words and words[0] in BUILT_IN):       # --help, another or an unknown command
        for module in SUBCOMMAND_MODULES:
            importlib.import_module(module).add_parser(sub)
    return p


class _Terminated(BaseException):
    """SIGTERM or SIGHUP, raised where the run is, so that its staged files are removed."""


def _terminate(signum, frame):
    raise _Terminated(signum)


def main(argv=None) -> int:
    args = build_parser(argv).parse_args(argv)
    args.own_process = argv is None          # the console script's call
    if args.own_process:
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                signal.signal(sig, _terminate)
    try:
        return args.func(args)
    except _Terminated as exc:
        name = signal.Signals(exc.args[0]).name
        print(f"npu-sim: stopped by {name}", file=sys.stderr)
        return 128 + exc.args[0]
    except NpuSimError as exc:
        print(exc.one_line(), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("npu-sim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:         # before OSError, of which it is one
        return 0
    except OSError as exc:          # an output path that cannot be written, a full disk, ...
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"npu-sim: file error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:            # a last resort: inputs are checked so that this stays rare
        print("npu-sim: out of memory", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
