"""One design point on one network: timing-only simulation -> a flat, JSON-able result row.

This is the function worker processes (local or Dask) run. It must never raise for a bad
point: configs that are invalid or cannot hold the network come back as status "infeasible"
with the reason, and anything unexpected as status "error", so the sweep goes on.
"""
from __future__ import annotations

import functools
import json
import multiprocessing
import signal
import threading
import time
import urllib.parse
from pathlib import Path

from npu_sim.isa.errors import ModelError, NpuSimError

from .. import api
from ..area import area_mm2
from ..config import HardwareConfig
from ..digest import hexdigest

# Row fields, in CSV column order (overrides and area parts are nested in JSON lines).
METRIC_FIELDS = ("cycles", "latency_ms", "energy_uj", "power_mw", "area_mm2", "edp",
                 "throughput_per_mm2", "mac_utilization")


def _zoo_value(text: str):
    """'56' -> 56, '0.5' or '1e9' -> a float, 'double' stays text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_zoo(spec: str) -> tuple[str, dict]:
    """'zoo:resnet?resolution=56&depth=10' -> ('resnet', {'resolution': 56, 'depth': 10})."""
    name, _, query = spec[len("zoo:"):].partition("?")
    kwargs = {}
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        kwargs[k] = _zoo_value(v)
    return name, kwargs


def zoo_spec(spec: str):
    """The checked, not yet built, zoo network of 'zoo:NAME?k=v' (npu_sim.zoo.limits bounds its
    arguments); a ModelError naming the spec and the argument otherwise."""
    from .. import zoo
    try:
        name, kwargs = parse_zoo(spec)
        return zoo.spec(name, **kwargs)
    except ValueError as exc:
        raise ModelError(f"{spec}: cannot build zoo network ({exc})") from None


@functools.lru_cache(maxsize=16)
def network_bytes(spec: str) -> bytes:
    """The TOSA flatbuffer for a network spec; cached per process (zoo builds take a moment)."""
    if spec == "default":
        spec = str(api.default_model())
    if spec.startswith("zoo:"):
        return zoo_spec(spec).build()[0]
    try:
        return Path(spec).read_bytes()
    except OSError as exc:
        raise ModelError(f"{spec}: cannot read ({exc.strerror or exc})") from None


@functools.lru_cache(maxsize=16)
def network_graph(spec: str):
    """The loaded graph of a network, kept per process: each point compiles a copy of it
    (parsing the flatbuffer took a fifth of a small network's point). A .tosa or a .tflite."""
    return api.load_graph(network_bytes(spec), spec)


# (network, profiles, extensions, level) -> None, or the error validate() raised. Each point
# compiles a copy of one loaded graph, and validating it again for every design took a tenth
# of a point; a sweep's designs rarely change the TOSA target, so the answer is kept.
_VALIDATION: dict[tuple, NpuSimError | None] = {}


def _validate_network(spec: str, tosa) -> None:
    """Raise what npu_sim.compiler.validate.validate raises for the network on this target."""
    from npu_sim.compiler.validate import validate
    key = (spec, tosa.profiles, tosa.extensions, tosa.level)
    if key not in _VALIDATION:
        try:
            validate(network_graph(spec).copy(), tosa.profiles, tosa.extensions, tosa.level)
            _VALIDATION[key] = None
        except NpuSimError as exc:
            _VALIDATION[key] = exc
    error = _VALIDATION[key]
    if error is not None:
        raise error.with_traceback(None)


def network_id(spec: str) -> str:
    """Content hash: a rebuilt zoo network or an edited file is a different point."""
    return hexdigest(network_bytes(spec))[:16]


def point_key(base: HardwareConfig, net_id: str, overrides: dict) -> str:
    text = json.dumps({"base": base.fingerprint(), "network": net_id, "overrides": overrides},
                      sort_keys=True, default=str)
    return hexdigest(text.encode())[:16]


def design_key(base: HardwareConfig, overrides: dict) -> str:
    return point_key(base, "", overrides)


def network_name(spec: str) -> str:
    return spec if spec == "default" or spec.startswith("zoo:") else Path(spec).name


@functools.lru_cache(maxsize=4)
def _load_base(base: str) -> HardwareConfig:
    return api.load_config(base)


def evaluate_point(base: str | HardwareConfig, overrides: dict, network: str = "default") -> dict:
    """Compile and timing-simulate `network` on `base` with dotted-key `overrides`.

    network: "default" (embedded MobileNetV2), "zoo:NAME?arg=value&..." or a .tosa path.
    Returns a row: key, network, overrides, status ("ok" | "infeasible" | "error"), error,
    metrics (METRIC_FIELDS; None where unknown), area breakdown and wall seconds.
    """
    t0 = time.perf_counter()
    cfg0 = base if isinstance(base, HardwareConfig) else _load_base(base)
    overrides = dict(overrides)
    row = {"key": None, "design": design_key(cfg0, overrides), "network": network_name(network),
           "overrides": overrides, "status": "ok", "error": None, **dict.fromkeys(METRIC_FIELDS), "area": None}
    try:
        row["key"] = point_key(cfg0, network_id(network), overrides)
        cfg = cfg0.with_overrides(overrides)
        if cfg.area is not None:  # known even when the network does not fit
            row["area"] = area_mm2(cfg)
            row["area_mm2"] = row["area"]["total"]
        _validate_network(network, cfg.tosa)
        program = api.compile_model(network_graph(network).copy(), cfg, validated=True)
        rep = api.simulate(program, cfg, timing_only=True).report
        row.update(cycles=rep.cycles, latency_ms=rep.seconds * 1e3, energy_uj=rep.energy_uj["total"],
                   power_mw=rep.average_power_mw, mac_utilization=rep.mac_utilization)
        row["edp"] = row["energy_uj"] * row["latency_ms"]
        if row["area_mm2"]:
            row["throughput_per_mm2"] = 1.0 / rep.seconds / row["area_mm2"]
    except NpuSimError as exc:  # invalid config, does not fit, unsupported...: a fact about the point
        row.update(status="infeasible", error=f"{exc.kind}: {' '.join(str(exc).split())}")
        if isinstance(exc, ModelError) and row["key"] is None:
            row["status"] = "error"  # the network itself is unreadable: not this design's fault
    except Exception as exc:  # a simulator bug must not end a long sweep; resume retries it
        row.update(status="error", error=f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500])
    row["wall_s"] = round(time.perf_counter() - t0, 3)
    return row


class _PointTimeout(BaseException):
    """Raised by the per-point alarm; not an Exception, so evaluate_point's catch-all for
    simulator bugs does not record it as one."""


def _within(timeout_s: float, fn, *args):
    """fn(*args), or None once it has run timeout_s seconds. In a worker process's main thread
    an alarm interrupts it; elsewhere (a Dask worker's task thread) it runs in a forked child
    that is killed."""
    if threading.current_thread() is threading.main_thread():
        done = []

        def on_alarm(signum, frame):
            if not done:        # the one alarm stops fn however early it fires; once fn returned, moot
                raise _PointTimeout

        previous = signal.signal(signal.SIGALRM, on_alarm)
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            done.append(fn(*args))
        except _PointTimeout:
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return done[0] if done else None
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=lambda: send.send(fn(*args)), daemon=True)
    child.start()
    send.close()
    try:
        return receive.recv() if receive.poll(timeout_s) else None
    except EOFError:            # the child died: report it like a lost worker
        raise RuntimeError(f"the point's process died (exit {child.exitcode})") from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()


def evaluate_task(base: HardwareConfig, overrides: dict, network: str, key: str,
                  timeout_s: float | None = None) -> dict:
    """Worker entry point: like evaluate_point, but the row keeps the key the runner expects,
    and a point still running after timeout_s seconds is recorded as failed."""
    if timeout_s:
        row = _within(timeout_s, evaluate_point, base, overrides, network)
        if row is None:
            return {"key": key, "status": "error", "wall_s": timeout_s,
                    "error": f"timeout: still simulating after timeout_s = {timeout_s:g} s"}
    else:
        row = evaluate_point(base, overrides, network)
    if row["key"] not in (None, key):  # the worker read or built different bytes than the runner
        row.update(status="error", error=f"{network}: the worker's copy of the network differs from the runner's")
    row["key"] = key
    return row


__all__ = ["evaluate_point", "evaluate_task", "point_key", "design_key", "network_id", "network_bytes",
           "parse_zoo", "METRIC_FIELDS"]
