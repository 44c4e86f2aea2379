"""Sweep files: which base config, which networks, which axes, objectives, constraints, strategy.

    name: edge-sizing                      # optional, titles the report
    base: edge-256                         # preset name, or a config path relative to this file
    networks: [default, zoo:ds_cnn, zoo:resnet?resolution=56, models/net.tosa]
    axes:                                  # dotted config keys -> value lists (the grid)
      sram.size: [32 KiB, 64 KiB, 128 KiB]
      mac_array.rows,mac_array.cols: [[32, 32], [16, 64], [64, 16]]   # linked: values move together
    fixed: {dma.channels: 2}               # optional overrides applied to every point
    objectives: {latency_ms: min, area_mm2: min}
    constraints: ["power_mw <= 300", "latency_ms <= 10"]
    strategy: {kind: random, budget: 20, seed: 0}   # grid | random | nsga2 (budget, seed, population)
    timeout_s: 600                         # optional: a point still simulating then is recorded as failed

Mistakes are ConfigErrors naming the sweep file and key path, like hardware config errors.
"""
from __future__ import annotations

import itertools
import math
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path

from npu_sim.isa.errors import ConfigError, NpuSimError

from ..config import HardwareConfig, load_config, read_yaml
from ..config_checks import Checker

# name -> (sense of "better", unit); per network and, over several networks, per design (pareto.aggregate)
METRICS = {
    "latency_ms": ("min", "ms"),
    "energy_uj": ("min", "uJ"),
    "power_mw": ("min", "mW"),
    "area_mm2": ("min", "mm²"),
    "edp": ("min", "uJ·ms"),
    "throughput_per_mm2": ("max", "inf/s/mm²"),
    "cycles": ("min", "cycles"),
    "mac_utilization": ("max", ""),
}
OBJECTIVES = ("latency_ms", "energy_uj", "power_mw", "area_mm2", "edp", "throughput_per_mm2")
DEFAULT_OBJECTIVES = {"latency_ms": "min", "energy_uj": "min", "area_mm2": "min"}
STRATEGIES = ("grid", "random", "nsga2")
MAX_POINTS = 1_000_000          # designs a grid or a budget may ask for: more is a mistake, not a sweep
MAX_POPULATION = 10_000
MAX_TIMEOUT_S = 7 * 24 * 3600
MIN_TIMEOUT_S = 0.01            # below the time a point takes to start: every point would time out
_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_CONSTRAINT_RE = re.compile(r"^\s*([a-z_0-9]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$")
_FREE_MAPPINGS = ("memories", "energy.memories")  # where an override may add a new key


@dataclass(frozen=True)
class Axis:
    keys: tuple[str, ...]  # one key, or several linked keys
    values: tuple  # one value per point; a tuple of values when linked

    @property
    def name(self) -> str:
        return ",".join(self.keys)

    def overrides(self, index: int) -> dict:
        value = self.values[index]
        return dict(zip(self.keys, value)) if len(self.keys) > 1 else {self.keys[0]: value}

    def label(self, index: int) -> str:
        value = self.values[index]
        return "×".join(map(str, value)) if len(self.keys) > 1 else str(value)


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    bound: float

    def ok(self, row: dict) -> bool:
        value = row.get(self.metric)
        return value is not None and _OPS[self.op](value, self.bound)

    def violation(self, row: dict) -> float:
        """<= 0 when met; how far off otherwise (for NSGA-II's constrained domination)."""
        value = row[self.metric]
        return value - self.bound if self.op in ("<=", "<") else self.bound - value

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g}"


@dataclass
class Sweep:
    source: str
    name: str
    base: HardwareConfig
    networks: list[str]  # "default", "zoo:NAME?k=v", or absolute .tosa paths
    axes: list[Axis]
    fixed: dict = field(default_factory=dict)
    objectives: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_OBJECTIVES))
    constraints: list[Constraint] = field(default_factory=list)
    strategy: str = "grid"
    budget: int | None = None
    seed: int = 0
    population: int = 8
    timeout_s: float | None = None   # per (design, network) point

    @property
    def grid_size(self) -> int:
        return math.prod(len(a.values) for a in self.axes)

    def design(self, flat: int) -> tuple[int, ...]:
        """The grid point numbered `flat` (row-major over the axes in file order)."""
        out = []
        for axis in reversed(self.axes):
            flat, i = divmod(flat, len(axis.values))
            out.append(i)
        return tuple(reversed(out))

    def grid(self):
        return itertools.product(*(range(len(a.values)) for a in self.axes))

    def overrides(self, design: tuple[int, ...]) -> dict:
        out = dict(self.fixed)
        for axis, i in zip(self.axes, design):
            out.update(axis.overrides(i))
        return out

    def labels(self, design: tuple[int, ...]) -> dict[str, str]:
        return {a.name: a.label(i) for a, i in zip(self.axes, design)}


def _key_exists(data: dict, key: str) -> bool:
    node, parts = data, key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or not part:
            return False
        if part not in node:
            return i == len(parts) - 1 and ".".join(parts[:-1]) in _FREE_MAPPINGS
        node = node[part]
    return True


def _network(spec, where: str, c: Checker, root: Path) -> str:
    spec = c.text(spec, where)
    if spec.startswith("zoo:"):
        from .evaluate import zoo_spec
        try:
            zoo_spec(spec)      # its arguments are checked here, the network built once, later
        except NpuSimError as exc:
            raise c.fail(where, str(exc)) from None
    if spec == "default" or spec.startswith("zoo:"):
        return spec
    return str((root / spec).resolve())  # workers may run elsewhere: no relative paths


def sweep_from_dict(data, source: str = "<dict>", root: Path | None = None) -> Sweep:
    c = Checker(source)
    root = root or Path.cwd()
    keys = ("name", "base", "networks", "axes", "fixed", "objectives", "constraints", "strategy", "timeout_s")
    top = c.section(data, "", keys, ("name", "fixed", "objectives", "constraints", "strategy", "timeout_s"))
    base_spec = c.text(top["base"], "base")
    if re.search(r"[/\\]|\.ya?ml$", base_spec):
        base_spec = str((root / base_spec).resolve())
    try:
        base = load_config(base_spec)
    except ConfigError as exc:
        raise c.fail("base", str(exc)) from None
    plain = base.to_dict()

    nets = top["networks"]
    if not isinstance(nets, list) or not nets:
        raise c.fail("networks", f"expected a non-empty list of networks, got {nets!r}")
    networks = [_network(n, f"networks[{i}]", c, root) for i, n in enumerate(nets)]
    if len(set(networks)) != len(networks):
        raise c.fail("networks", "expected no duplicates")

    seen: set[str] = set()

    def check_key(key, where):
        if not isinstance(key, str) or not _key_exists(plain, key):
            raise c.fail(where, f"not a key of the base config {base.name!r} (dotted, e.g. sram.size)")
        if key in seen:
            raise c.fail(where, "key set twice (in axes or fixed)")
        seen.add(key)

    axes = []
    for name, values in c.mapping(top["axes"], "axes").items():
        where = f"axes.{name}"
        keys = tuple(k.strip() for k in str(name).split(","))
        for k in keys:
            check_key(k, where)
        if not isinstance(values, list) or not values:
            raise c.fail(where, f"expected a non-empty list of values, got {values!r}")
        if len(keys) > 1:
            for i, v in enumerate(values):
                if not isinstance(v, list) or len(v) != len(keys):
                    raise c.fail(f"{where}[{i}]", f"expected a list of {len(keys)} values (one per linked key), got {v!r}")
            values = [tuple(v) for v in values]
        axes.append(Axis(keys, tuple(values)))
    if not axes:
        raise c.fail("axes", "expected at least one axis")
    fixed = c.mapping(top.get("fixed", {}), "fixed")
    for k in fixed:
        check_key(k, f"fixed.{k}")
    try:                        # refused here, not as every point's reason
        base.with_overrides(fixed)
    except ConfigError as exc:
        raise c.fail("fixed", str(exc)) from None

    objectives = {}
    for name, sense in c.mapping(top.get("objectives", DEFAULT_OBJECTIVES), "objectives").items():
        objectives[c.choice(name, f"objectives.{name}", OBJECTIVES)] = c.choice(sense, f"objectives.{name}", ("min", "max"))
    if not objectives:
        raise c.fail("objectives", "expected at least one objective")

    constraints = []
    raw = top.get("constraints", [])
    if not isinstance(raw, list):
        raise c.fail("constraints", f"expected a list like ['power_mw <= 300'], got {raw!r}")
    for i, text in enumerate(raw):
        m = _CONSTRAINT_RE.match(text) if isinstance(text, str) else None
        if not m or m.group(1) not in METRICS:
            raise c.fail(f"constraints[{i}]", f"expected 'METRIC OP NUMBER' with METRIC one of {', '.join(METRICS)} "
                                              f"and OP one of <=, <, >=, >, got {text!r}")
        try:
            constraints.append(Constraint(m.group(1), m.group(2), float(m.group(3))))
        except ValueError:
            raise c.fail(f"constraints[{i}]", f"bad number in {text!r}") from None
    if base.area is None and any(n in ("area_mm2", "throughput_per_mm2") for n in
                                 [*objectives, *(k.metric for k in constraints)]):
        raise c.fail("objectives", f"area metrics need an area section in the base config {base.source}")

    st = top.get("strategy", "grid")
    st = {"kind": st} if isinstance(st, str) else st
    st = c.section(st, "strategy", ("kind", "budget", "seed", "population"), ("budget", "seed", "population"))
    kind = c.choice(st["kind"], "strategy.kind", STRATEGIES)
    budget = c.number(st["budget"], "strategy.budget", integer=True) if "budget" in st else None
    if kind != "grid" and budget is None:
        raise c.fail("strategy.budget", f"the {kind} strategy needs a budget (number of configurations)")
    if budget is not None and budget > MAX_POINTS:
        raise c.fail("strategy.budget", f"expected at most {MAX_POINTS:,} configurations, got {budget}")
    seed = c.number(st.get("seed", 0), "strategy.seed", integer=True, zero_ok=True)
    if seed >= 1 << 32:
        raise c.fail("strategy.seed", f"expected an integer below 2**32, got {seed}")
    population = c.number(st.get("population", 8), "strategy.population", integer=True)
    if not 2 <= population <= MAX_POPULATION:
        raise c.fail("strategy.population", f"expected 2 to {MAX_POPULATION:,}, got {population}")
    grid = math.prod(len(a.values) for a in axes)
    if kind == "grid" and grid > MAX_POINTS:
        raise c.fail("axes", f"a grid of {grid:,} designs (at most {MAX_POINTS:,}); use the random or "
                             "nsga2 strategy with a budget")
    for axis in axes:           # a value its own key refuses is a typo, not a design to try
        if len(axis.keys) > 1:
            continue
        key = axis.keys[0]
        for i, value in enumerate(axis.values):
            try:
                base.with_overrides({**fixed, key: value})
            except ConfigError as exc:
                if f"{key}:" in str(exc):
                    raise c.fail(f"axes.{key}[{i}]", str(exc)) from None
    timeout = None
    if "timeout_s" in top:
        timeout = c.number(top["timeout_s"], "timeout_s")
        if not MIN_TIMEOUT_S <= timeout <= MAX_TIMEOUT_S:
            raise c.fail("timeout_s", f"expected {MIN_TIMEOUT_S} s to {MAX_TIMEOUT_S:,} s (a week), got {timeout:g}")
    name = c.text(top.get("name", Path(source).stem), "name")
    return Sweep(source, name, base, networks, axes, dict(fixed), objectives, constraints, kind, budget, seed,
                 population, timeout)


def load_sweep(path) -> Sweep:
    path = Path(path)
    data = read_yaml(path, "sweep file")
    return sweep_from_dict(data, str(path), path.resolve().parent)
