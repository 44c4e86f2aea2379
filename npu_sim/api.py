"""The Python API: load a config, compile a model, simulate it, get a report.

    from npu_sim import api
    cfg = api.load_config("edge-256").with_overrides({"sram.size": "96 KiB"})
    result = api.run("model.tosa", cfg)
    print(result.report.cycles, result.outputs)
"""
from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from npu_sim.isa.dtypes import DTYPES, STORAGE
from npu_sim.isa.encoding import decode, encode
from npu_sim.isa.errors import (ConfigError, InputError, ModelError, NpuSimError, ProgramError,
                                UnsupportedError)
from npu_sim.isa.program import Program
from npu_sim.isa.records import record

from . import cache, seeded
from .config import HardwareConfig, config_from_dict, load_config
from .report import Report, build_report
from .paths import os_reason, why_unreadable
from .simulator import Machine, SimResult
from .verify import verify

if TYPE_CHECKING:                                  # a cached run imports no compiler
    from npu_sim.compiler.ir import Graph

__all__ = ["load_config", "compile_model", "simulate", "run", "random_inputs", "default_model",
           "load_program", "save_program", "RunResult"]

DEFAULT_MODEL = Path(__file__).parent / "data" / "mobilenet_v2_224.tosa"


def default_model() -> Path:
    return DEFAULT_MODEL


@record
class RunResult:
    """What api.run and api.simulate return: outputs, report, program, schedule."""

    outputs: dict[str, np.ndarray]
    report: Report
    program: Program
    sim: SimResult | None = None       # per-command start/end/costs, for traces

    @property
    def state(self) -> dict[str, np.ndarray]:
        """Variables (EXT-VARIABLE) after the run; pass to simulate(state=...) to continue."""
        return self.sim.state if self.sim is not None else {}


def compile_model(model: str | os.PathLike | Graph, config: HardwareConfig,
                  use_cache: bool = True, validated: bool = False) -> Program:
    """Compile a .tosa or .tflite file (or a loaded Graph) for `config`. Files go through the
    program cache (npu_sim/cache.py) unless use_cache is False. `validated` (a Graph only):
    it has passed npu_sim.compiler.validate.validate for config's TOSA target already."""
    if not isinstance(model, (str, os.PathLike)):
        from npu_sim.compiler.ir import Graph      # only here: a cached run needs no compiler
        if isinstance(model, Graph):
            return _compile(model, config, validated)
    data = program = None
    use_cache = use_cache and cache.cache_dir() is not None     # off: no digest to work out
    if use_cache:               # a cached program's model is known by its kept digest
        digest, st = cache.kept_digest(model)
        if digest is None:
            data = read_model_file(model, "a .tosa file", ((4, b"TOSA"), (4, b"TFL3")))
            digest = cache.model_digest(data, st)
        k = cache.key(digest, config)
        program = cache.load(k)
    if program is None:
        if data is None:
            data = read_model_file(model, "a .tosa file", ((4, b"TOSA"), (4, b"TFL3")))
        program = _compile(load_graph(data, str(model)), config)
        if use_cache:
            cache.store(k, program)
    program.meta["model"] = Path(model).stem
    return program


def load_graph(data: bytes, source: str) -> Graph:
    """The graph of a .tosa or .tflite file's bytes (told apart by the file identifier or the
    suffix); the frontends are imported only when a program is not cached."""
    if data[4:8] == b"TFL3" or source.lower().endswith(".tflite"):
        try:
            import tflite  # noqa: F401  (the schema the TFLite frontend reads with)
        except ImportError:
            raise UnsupportedError(f"{source}: reading TFLite models needs the tflite extra: "
                                   "pip install 'npu-sim[tflite]'") from None
        from npu_sim.compiler.frontends.tflite import load_tflite_bytes
        return load_tflite_bytes(data, source)
    from npu_sim.compiler.loader import load_bytes
    return load_bytes(data, source)


def _compile(graph: Graph, config: HardwareConfig, validated: bool = False) -> Program:
    from npu_sim.compiler.driver import compile_graph
    name = Path(graph.source).stem if graph.source else "model"
    program = compile_graph(graph, config, model_name=name, validated=validated)
    program.meta["config_dict"] = config.to_dict()
    return program


def save_program(program: Program, path: str | os.PathLike):
    Path(path).write_bytes(encode(program))


def load_program(path: str | os.PathLike) -> Program:
    """A program from a .npub file: checksums verified, then its whole structure
    (npu_sim/verify.py), so a damaged or foreign program fails here, never mid-run."""
    program = decode(read_model_file(path, "a .npub program", ((0, b"NPUB"),)), str(path))
    verify(program, _embedded_config(program, str(path)).dma.channels, str(path))
    _FROM_FILES[id(program)] = (weakref.ref(program), str(path))
    return program


# Programs read from files, by id: what their checks let through and the machine then
# refuses is the file's fault, reported as a ProgramError naming the command.
_FROM_FILES: dict[int, tuple] = {}


def _source_file(program: Program) -> str | None:
    ref, path = _FROM_FILES.get(id(program), (None, None))
    return path if ref is not None and ref() is program else None


_HEAD = 64


def read_model_file(path, expected: str, magics: tuple = ()) -> bytes:
    """The file's bytes; of a large file without any of the (offset, bytes) `magics`, only its
    head, which the loader refuses as it would the whole, without reading gigabytes first."""
    why = why_unreadable(path)
    if why:
        raise ModelError(f"{path}: {why}, expected {expected}")
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
            if magics and os.fstat(f.fileno()).st_size > 16 << 20 and not any(
                    head[o:o + len(m)] == m for o, m in magics):
                return head
            return head + f.read()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({os_reason(exc)})") from None


def _embedded_config(program: Program, source: str) -> HardwareConfig:
    try:
        return config_from_dict(program.meta["config_dict"], source="<program>")
    except KeyError:
        raise ProgramError(f"{source}: the program holds no config (meta.config_dict)") from None
    except ConfigError as exc:
        raise ProgramError(f"{source}: the config it holds is invalid ({exc})") from None


def config_for_program(program: Program, config: HardwareConfig | None) -> HardwareConfig:
    """The config a program was compiled for; a different one given explicitly is an error."""
    embedded = _embedded_config(program, "<program>")
    if config is not None and config.fingerprint() != embedded.fingerprint():
        if config.name != embedded.name:
            given = f"'{config.name}'"
        else:       # the same preset with other figures (--set, an edited copy)
            key, theirs, ours = _first_difference(embedded.to_dict(), config.to_dict())
            given = f"one with {key} {_figure(ours)} (it has {_figure(theirs)})"
        raise ConfigError(f"the program was compiled for config '{embedded.name}', not "
                          f"{given}; recompile it with npu-sim compile --config")
    return embedded


def _first_difference(a, b, path: str = ""):
    """(dotted key, a's value, b's value) of the first figure in which two configs' to_dict()
    data differ, in their keys' order."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else k)
    return path, a, b


def _figure(value) -> str:
    return "(none)" if value is None else repr(value)[:60]


def _check_seed(seed) -> None:
    if not (hasattr(seed, "__index__") and 0 <= seed.__index__() < 1 << 64):
        raise InputError(f"seed {str(seed)[:40]}: expected an integer in [0, 2**64)")


def random_inputs(program: Program, seed: int = 0,
                  names: set[str] | None = None) -> dict[str, np.ndarray]:
    """Seeded data for every graph input, or those in `names` (npu_sim/seeded.py, the same on
    every machine; each input's data is the same whichever others are made): integers uniform
    over their type's range, floats about standard normal (rounded to the type), booleans
    even."""
    _check_seed(seed)
    out = {}
    for stream, b in enumerate(program.inputs):
        if names is not None and b.name not in names:
            continue
        t, shape = DTYPES[b.view.dtype], tuple(b.view.shape)
        dtype = np.dtype(STORAGE[b.view.dtype])
        if t.kind == "float":
            out[b.name] = seeded.normal(seed, stream, shape).astype(dtype)
        elif t.kind == "bool":
            out[b.name] = seeded.integers(seed, stream, shape, 1) != 0
        else:
            out[b.name] = seeded.integers(seed, stream, shape, t.bits).astype(dtype)
    return out


def simulate(program: Program, config: HardwareConfig, inputs: dict | None = None,
             timing_only: bool = False, seed: int = 0,
             state: dict[str, np.ndarray] | None = None,
             check_hazards: bool | None = None) -> RunResult:
    """Run a program once. `state` carries variables over from an earlier run's result.state
    (a Machine run repeatedly keeps them by itself). `check_hazards` verifies the program's
    dependencies as it runs (npu_sim/hazards.py; None: the NPU_SIM_CHECK_HAZARDS variable)."""
    machine = Machine(program, config, check_hazards=check_hazards)
    machine.state = dict(state or {})
    values = None
    if not timing_only:
        _check_seed(seed)
        given = dict(inputs or {})
        missing = {b.name for b in program.inputs} - set(given)
        values = {**random_inputs(program, seed, missing), **given} if missing else given
    try:
        sim = machine.run(values, compute_values=not timing_only)
        return RunResult(sim.outputs, build_report(program, config, sim, timing_only), program, sim)
    except (ArithmeticError, LookupError, TypeError, ValueError) as exc:
        source = _source_file(program)
        if source is None or isinstance(exc, NpuSimError):     # ours: a bug, shown whole
            raise
        # simpy raises a copy of a process's exception, the original as its cause
        cmd = getattr(exc, "command", None) or getattr(exc.__cause__, "command", None)
        where = f"command {cmd.id} ({getattr(cmd, 'op', type(cmd).__name__)}, layer " \
                f"{cmd.layer})" if cmd is not None else "its layer table"
        raise ProgramError(f"{source}: {where} does not run: {type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:160]}") from None


def run(model: str | os.PathLike | Graph | None = None, config: HardwareConfig | str | None = None,
        inputs: dict | None = None, timing_only: bool = False, seed: int = 0) -> RunResult:
    cfg = config if isinstance(config, HardwareConfig) else load_config(config)
    program = compile_model(model if model is not None else DEFAULT_MODEL, cfg)
    return simulate(program, cfg, inputs, timing_only, seed)
