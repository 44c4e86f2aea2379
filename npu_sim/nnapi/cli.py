"""npu-sim capabilities | supported-ops | nnapi-cts, and `run --preference`."""
from __future__ import annotations

import json
import sys

from npu_sim.isa.errors import InputError, ModelError

from ..paths import why_unreadable


def load_model(path: str, case_name: str | None = None,
               pick: str = "name the case with --case NAME"):
    """An NNAPI model from a .tflite (mapped as the NNAPI delegate does), a JSON case, or the
    case named `case_name` of a CTS .jsonl[.gz] file (else InputError '<path>: <pick>')."""
    why = why_unreadable(path)
    if why:
        raise InputError(f"{path}: {why}")
    if path.lower().endswith((".jsonl", ".jsonl.gz")):
        from npu_sim.compiler.frontends.nnapi.model import model_from_dict
        from .cts import read_cases
        if not case_name:
            raise InputError(f"{path}: {pick}")
        for n, case in read_cases(path):
            if case.get("name") == case_name:
                return model_from_dict(case, f"{path}:{n}")
        raise InputError(f"{path}: no case named {case_name!r}")
    if path.lower().endswith(".tflite"):
        try:
            import tflite  # noqa: F401
        except ImportError:
            raise InputError(f"{path}: reading TFLite models needs the tflite extra: "
                             "pip install 'npu-sim[tflite]'") from None
        from npu_sim.compiler.frontends.nnapi.from_tflite import model_from_tflite
        with open(path, "rb") as f:
            try:
                return model_from_tflite(f.read(), path)
            except ModelError as exc:
                raise ModelError(f"{path}: {exc}") from None
    if not path.lower().endswith(".json"):
        raise InputError(f"{path}: expected a .tflite model, a .json NNAPI case or a "
                         ".jsonl[.gz] CTS file with --case")
    from npu_sim.compiler.frontends.nnapi.model import model_from_dict
    from .cts import json_why
    try:
        with open(path, encoding="utf-8") as f:
            case = json.load(f)
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: not a JSON NNAPI case (not UTF-8: {exc.reason})") from None
    except (ValueError, RecursionError) as exc:
        raise ModelError(f"{path}: not a JSON NNAPI case ({json_why(exc, True)})") from None
    return model_from_dict(case, path)


def _config(name, sets=None):
    from ..config import load_config, parse_overrides
    cfg = load_config(name)
    return cfg.with_overrides(parse_overrides(sets)) if sets else cfg


def _device(args):
    from .device import Device
    return Device(_config(args.config, getattr(args, "set", None)))


def _fmt(info) -> str:
    from .hal import FLT_MAX
    if info.execTime >= FLT_MAX:
        return "FLT_MAX (unsupported)"
    return f"execTime {info.execTime:.4f}  powerUsage {info.powerUsage:.4f}"


def cmd_capabilities(args) -> int:
    _, caps = _device(args).getCapabilities()
    if args.json:
        sys.stdout.write(json.dumps(caps.to_dict(), indent=2) + "\n")
        return 0
    print(f"npu-sim NNAPI capabilities on {args.config or 'default'} (vs the config's CPU baseline; "
          "lower is better)")
    print(f"  relaxedFloat32toFloat16PerformanceScalar  {_fmt(caps.relaxedFloat32toFloat16PerformanceScalar)}")
    print(f"  relaxedFloat32toFloat16PerformanceTensor  {_fmt(caps.relaxedFloat32toFloat16PerformanceTensor)}")
    print("  operandPerformance")
    for p in caps.operandPerformance:
        print(f"    {p.type.name:<34}{_fmt(p.info)}")
    print(f"  ifPerformance                             {_fmt(caps.ifPerformance)}")
    print(f"  whilePerformance                          {_fmt(caps.whilePerformance)}")
    return 0


def cmd_supported_ops(args) -> int:
    model = load_model(args.model, args.case)
    try:
        verdicts = _device(args).supported_operations(model)
    except ModelError as exc:
        raise ModelError(f"{args.model}: INVALID_ARGUMENT: {exc}") from None
    for i, (op, (ok, why)) in enumerate(zip(model.main.operations, verdicts)):
        why = why.removeprefix(f"operation #{i} {op.type.name}: ")
        print(f"  #{i:<3} {op.type.name:<28} {'supported' if ok else 'unsupported'}"
              f"{'  ' + why if why else ''}")
    print(f"{sum(ok for ok, _ in verdicts)} of {len(verdicts)} operations supported")
    return 0


def cmd_cts(args) -> int:
    from . import cts
    if not 1 <= args.jobs <= 512:           # as npu-sim dse: more only spawn idle processes
        raise InputError(f"-j {args.jobs}: expected 1 to 512 worker processes")
    _config(args.config)                      # a bad config fails before any case runs
    from ..cli_files import Staged
    with Staged(args.files) as staged:
        report = staged.path(args.json) if args.json else None     # as early: a bad path too
        results = cts.run_files(args.files, args.config, args.jobs)
        if report is not None:
            report.write_text(json.dumps(
                [{k: r[k] for k in ("case", "file", "status", "message")} for r in results],
                indent=1) + "\n")
            staged.commit()
    sys.stdout.write(cts.table(results))
    # 1, as pytest's failures and errors; unsupported (skipped) and expected failures are not
    return 1 if any(r["status"] in ("fail", "invalid") for r in results) else 0


def preference_table(model, cfg) -> list[dict]:
    """Every preference's schedule of the model: cycles, time and energy per execution."""
    from . import schedule
    from .lowering import lower
    from .hal import ExecutionPreference
    graph = lower(model, cfg)
    rows = []
    for pref in ExecutionPreference:
        single, pair = schedule.choose(graph, cfg, pref)
        s = pair or single
        rows.append({"preference": pref.name, "point": s.point,
                     "clock_mhz": s.config.clock_mhz,
                     "cycles_per_execution": s.cycles / s.executions,
                     "us_per_execution": s.seconds_per_execution * 1e6,
                     "uj_per_execution": s.energy_per_execution,
                     "executions_per_s": 1 / s.seconds_per_execution})
    return rows


def run_preference(args, cfg) -> int:
    from .hal import ExecutionPreference
    model = load_model(args.model, pick="a CTS file; --preference takes one model: a .tflite, "
                       "or a case's line saved as a .json file") if args.model else None
    if model is None:
        raise InputError("--preference: give a .tflite model or a .json NNAPI case")
    rows = preference_table(model, cfg)
    chosen = ExecutionPreference[args.preference].name
    print(f"npu-sim: {model.name} on {cfg.name} through the NNAPI device, preference {chosen}")
    print(f"  {'preference':<20}{'point':<12}{'MHz':>6}{'cycles/exec':>14}{'us/exec':>10}"
          f"{'uJ/exec':>10}{'exec/s':>10}")
    for r in rows:
        mark = "*" if r["preference"] == chosen else " "
        print(f"{mark} {r['preference']:<20}{r['point']:<12}{r['clock_mhz']:>6.0f}"
              f"{r['cycles_per_execution']:>14,.0f}{r['us_per_execution']:>10.2f}"
              f"{r['uj_per_execution']:>10.3f}{r['executions_per_s']:>10,.0f}")
    return 0


def add_parser(sub) -> None:
    c = sub.add_parser("capabilities", help="the NNAPI Capabilities of a config")
    c.add_argument("--config", help="preset name or YAML path (default: default)")
    c.add_argument("--json", action="store_true", help="types.spec's field names, as JSON")
    c.set_defaults(func=cmd_capabilities)
    s = sub.add_parser("supported-ops", help="getSupportedOperations of a .tflite or NNAPI case")
    s.add_argument("model", help=".tflite model, .json NNAPI case, or CTS .jsonl[.gz] with --case")
    s.add_argument("--case", metavar="NAME", help="the case of a CTS file")
    s.add_argument("--config", help="preset name or YAML path (default: default)")
    s.set_defaults(func=cmd_supported_ops)
    n = sub.add_parser("nnapi-cts", help="run NNAPI CTS cases (.jsonl or .jsonl.gz); exit "
                       "status 1 if a case fails or is invalid")
    n.add_argument("files", nargs="+", metavar="FILE.jsonl[.gz]")
    n.add_argument("--config", help="preset name or YAML path (default: default)")
    n.add_argument("--json", metavar="R.json", help="write [{case, file, status, message}]")
    n.add_argument("-j", "--jobs", type=int, default=1, help="worker processes (default 1)")
    n.set_defaults(func=cmd_cts)
