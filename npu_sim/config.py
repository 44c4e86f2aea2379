"""Hardware configuration: one YAML file describes one NPU, validated strictly at load time.

Every mistake in a config becomes a ConfigError naming the file, the key path and what was
expected, so a typo fails loudly here instead of silently skewing simulated cycles later.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import fields
from decimal import Decimal
from pathlib import Path
from typing import Any

from npu_sim import configs as _presets
from npu_sim.isa.errors import ConfigError
from npu_sim.isa.operators import FLOAT_CLASSES, VECTOR_CLASSES

import yaml

from .config_types import (DATAFLOWS, EXTENSIONS, FLOAT_ACC, FLOAT_PAIRS, INT_PAIRS, LEVELS,
                           MAC_DTYPES, MAX_SIZE, MIN_SRAM, PORTS, PROFILES, _DTYPE_EXTENSION,
                           _EXTENSION_PROFILE, AreaConfig, CpuBaselineConfig, DmaConfig,
                           EnergyConfig, HardwareConfig, MacArrayConfig, MemoryConfig,
                           MemoryEnergy, OperatingPoint, PlacementConfig, ScheduleConfig,
                           SramConfig, TosaTarget, VectorUnitConfig, _show)
from .yamlread import parse_yaml, read_yaml

PRESET_DIR = Path(_presets.__file__).parent     # the repository's configs/, installed as package data

# Physically plausible range of every figure (inclusive; `*` stands for a memory or dtype name).
# Wide enough for any design-space sweep, narrow enough that no product of figures in the
# simulator or the report overflows; outside it, or NaN/inf, a value is refused.
RANGES: dict[str, tuple[float, float]] = {
    "clock_mhz": (1, 10_000),
    "mac_array.rows": (1, 4096), "mac_array.cols": (1, 4096), "mac_array.arrays": (1, 64),
    "mac_array.precision.*": (1 / 64, 1), "mac_array.precision.*.rate": (1 / 64, 1),
    "mac_array.ports.*": (0.01, 1 << 30),
    "mac_array.accumulators": (1, 1 << 24), "mac_array.output_stage": (0.01, 65_536),
    "vector_unit.cycles_per_lane.*": (0.01, 10_000),
    "vector_unit.lanes": (1, 65_536),
    "sram.size": (MIN_SRAM, 4 << 30), "sram.banks": (1, 1024), "sram.bytes_per_cycle": (1, 65_536),
    "sram.interleave": (1, 4 << 30),
    "dma.channels": (1, 64), "dma.bytes_per_cycle": (0.01, 65_536), "dma.setup_cycles": (0, 1_000_000),
    "memories.*.size": (1, 1 << 40), "memories.*.bandwidth_gbps": (0.001, 100_000),
    "memories.*.latency_ns": (0, 1_000_000),
    "energy.mac_pj.*": (0, 10_000), "energy.vector_op_pj.*": (0, 10_000),
    "energy.sram_read_pj_per_byte": (0, 10_000), "energy.sram_write_pj_per_byte": (0, 10_000),
    "energy.memories.*.read_pj_per_byte": (0, 100_000), "energy.memories.*.write_pj_per_byte": (0, 100_000),
    "energy.dma_pj_per_byte": (0, 10_000), "energy.leakage_mw": (0, 1_000_000),
    "cpu_baseline.clock_mhz": (1, 10_000), "cpu_baseline.macs_per_cycle": (0.01, 1_000_000),
    "cpu_baseline.ops_per_cycle": (0.01, 1_000_000), "cpu_baseline.power_mw": (0.001, 1_000_000),
    "cpu_baseline.bytes_per_cycle": (0.01, 1_000_000),
    "driver_overhead_us": (0, 10_000_000),
    "schedule.resident_fraction": (0.05, 1), "schedule.tile_floor": (1, 1 << 30),
    "schedule.room_slack": (1, 16),
    "operating_points.*.clock_mhz": (1, 10_000), "operating_points.*.voltage_scale": (0.3, 1.5),
    "area.mac_mm2.*": (0, 1), "area.sram_mm2_per_kib": (0, 1), "area.sram_bank_overhead_mm2": (0, 100),
    "area.vector_lane_mm2": (0, 10), "area.vector_fp_lane_mm2": (0, 10), "area.dma_channel_mm2": (0, 100), "area.fixed_mm2": (0, 10_000),
}
MAX_MACS = 1 << 20  # rows x cols
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 10**3, "MB": 10**6, "GB": 10**9}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(" + "|".join(_UNITS) + r")\s*$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # no dots: names appear in dotted override keys


_BIG_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def _bound(value: float, path: str) -> str:
    if path.endswith(".size"):
        unit, n = next(((u, n) for u, n in _BIG_UNITS if value >= n and value % n == 0), ("B", 1))
        return f"{value // n} {unit}"
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _range_key(path: str) -> str:
    parts = path.split(".")
    if parts[0] in ("memories", "energy", "operating_points") and len(parts) >= 3:
        index = 2 if parts[0] == "energy" else 1
        if parts[0] != "energy" or parts[1] == "memories":
            parts[index] = "*"
    if parts[:2] in (["energy", "mac_pj"], ["area", "mac_mm2"], ["energy", "vector_op_pj"],
                     ["mac_array", "precision"], ["mac_array", "ports"],
                     ["vector_unit", "cycles_per_lane"]) and len(parts) == 3:
        parts[2] = "*"
    if parts[:2] == ["mac_array", "precision"] and len(parts) == 4:     # a float pair's rate
        parts[2] = "*"
    return ".".join(parts)


class _Checker:
    """Type and range checks that phrase every failure as '<source>: <key path>: <expected>'."""

    def __init__(self, source: str, ranged: bool = False):
        self.source = source
        self.ranged = ranged

    def fail(self, path: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {path or '(top level)'}: {message}")

    def mapping(self, data: Any, path: str) -> dict:
        if not isinstance(data, dict):
            raise self.fail(path, f"expected a mapping, got {_show(data)}")
        return data

    def section(self, data: Any, path: str, keys: tuple, optional: tuple = (), missing: str = "") -> dict:
        """A mapping with exactly `keys` (schema order), of which `optional` may be absent."""
        self.mapping(data, path)
        for key in data:
            if key not in keys:
                listed = ", ".join(map(str, keys)) or "nothing"
                raise self.fail(_join(path, key), f"unknown key (expected one of: {listed})")
        for key in keys:
            if key not in data and key not in optional:
                raise self.fail(_join(path, key), missing or "missing required key")
        return data

    def number(self, value: Any, path: str, *, integer: bool = False, zero_ok: bool = False) -> Any:
        ok = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
        if ok and not integer:
            try:
                value = float(value)
            except OverflowError:  # an int beyond float range
                ok = False
        if (not ok or (isinstance(value, float) and not math.isfinite(value))
                or value < 0 or (value == 0 and not zero_ok)):
            adjective = "non-negative" if zero_ok else "positive"
            raise self.fail(path, f"expected a {adjective} {'integer' if integer else 'number'}, got {_show(value)}")
        return self.in_range(value, path)

    def in_range(self, value, path: str):
        """Figures of a hardware config have a documented range (RANGES); other files' numbers do not."""
        bounds = RANGES.get(_range_key(path)) if self.ranged else None
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            lo, hi = (_bound(b, path) for b in bounds)
            side = f"at least {lo}" if value < bounds[0] else f"at most {hi}"
            raise self.fail(path, f"expected {side} (range {lo} to {hi}), got {_show(value)}")
        return value

    def flag(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {_show(value)}")
        return value

    def text(self, value: Any, path: str, allow_empty: bool = False) -> str:
        if not isinstance(value, str) or not (value.strip() or allow_empty):
            raise self.fail(path, f"expected a{'' if allow_empty else ' non-empty'} string, got {_show(value)}")
        return value

    def choice(self, value: Any, path: str, options: tuple) -> str:
        if not isinstance(value, str) or value not in options:
            raise self.fail(path, f"expected one of: {', '.join(options)}, got {_show(value)}")
        return value

    def subset(self, value: Any, path: str, options: tuple) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list drawn from: {', '.join(options)}, got {_show(value)}")
        items = tuple(self.choice(v, f"{path}[{i}]", options) for i, v in enumerate(value))
        if len(set(items)) != len(items):
            raise self.fail(path, f"expected no duplicates, got {_show(value)}")
        return items

    def size(self, value: Any, path: str) -> int:
        nbytes: Any = None
        if isinstance(value, int) and not isinstance(value, bool):
            nbytes = value
        elif isinstance(value, str) and (m := _SIZE_RE.match(value)):
            nbytes = Decimal(m.group(1)) * _UNITS[m.group(2)]  # Decimal: "1.5 KiB" is exactly 1536
        if nbytes is not None and 0 < nbytes < MAX_SIZE and nbytes == int(nbytes):
            return self.in_range(int(nbytes), path)
        raise self.fail(path, "expected a whole number of bytes in [1, 2**64), as an integer or a string like "
                              f"'256 KiB' (units: {', '.join(_UNITS)}), got {_show(value)}")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


_TOP_KEYS = ("name", "description", "clock_mhz", "tosa", "mac_array", "vector_unit", "sram", "dma", "memories",
                 "placement", "energy", "cpu_baseline", "driver_overhead_us", "area", "schedule",
             "operating_points")


def _classes(c: _Checker, data: Any, path: str, classes: tuple) -> dict:
    section = c.section(data, path, classes, FLOAT_CLASSES)
    for key in classes:
        if key not in section:
            raise c.fail(f"{path}.{key}", "missing entry for a float op class (tosa.profiles has PRO-FP)")
    return section


def _tosa(c: _Checker, data: Any) -> TosaTarget:
    """tosa: `profiles: [PRO-INT, PRO-FP]` (or the single-profile spelling `profile: PRO-INT`)."""
    t = c.section(data, "tosa", ("profiles", "profile", "extensions", "level"),
                  ("profiles", "profile", "extensions", "level"))
    if ("profile" in t) == ("profiles" in t):
        raise c.fail("tosa.profiles", "expected exactly one of profiles (a list) and profile (one name)")
    profiles = ((c.choice(t["profile"], "tosa.profile", PROFILES),) if "profile" in t
                else c.subset(t["profiles"], "tosa.profiles", PROFILES))
    if "PRO-INT" not in profiles:
        # the integer datapath (RESCALE, int8 MACs, index arithmetic) is always part of the machine
        raise c.fail("tosa.profiles", f"expected PRO-INT among the profiles, got {_show(list(profiles))}")
    extensions = c.subset(t.get("extensions", []), "tosa.extensions", EXTENSIONS)
    for i, ext in enumerate(extensions):
        if _EXTENSION_PROFILE.get(ext, "PRO-INT") not in profiles:
            raise c.fail(f"tosa.extensions[{i}]", f"{ext} extends {_EXTENSION_PROFILE[ext]}, which "
                                                  "tosa.profiles does not list")
    return TosaTarget(profiles=tuple(p for p in PROFILES if p in profiles), extensions=extensions,
                      level=c.choice(t.get("level", "8K"), "tosa.level", LEVELS))


def _precision(c: _Checker, prec: dict, pairs: tuple) -> tuple[dict, dict]:
    """mac_array.precision: an integer pair's rate (MACs per PE per cycle), a float pair's
    {rate, acc}, its rate and the type its PEs accumulate in."""
    rates, float_acc = {}, {}
    for pair in (p for p in pairs if p in prec):
        path = f"mac_array.precision.{pair}"
        if pair in INT_PAIRS:
            rates[pair] = c.number(prec[pair], path)
            continue
        operand = pair.split("x")[0]
        accs = FLOAT_ACC[operand]
        if not isinstance(prec[pair], dict):
            raise c.fail(path, f"expected a mapping {{rate: MACs per PE per cycle, acc: "
                               f"{' or '.join(accs)}}}, got {_show(prec[pair])}")
        entry = c.section(prec[pair], path, ("rate", "acc"))
        rates[pair] = c.number(entry["rate"], f"{path}.rate")
        float_acc[pair] = c.choice(entry["acc"], f"{path}.acc", accs)
    return rates, float_acc


def _build(data: Any, source: str, keep_source: str | None = None) -> HardwareConfig:
    c = _Checker(source, ranged=True)
    top = c.section(data, "", _TOP_KEYS, ("description", "area", "schedule", "operating_points"))
    num = c.number

    tosa = _tosa(c, top["tosa"])

    m = c.section(top["mac_array"], "mac_array", ("rows", "cols", "dataflow", "fold_overlap", "dtypes",
                                                  "precision", "ports", "accumulators", "output_stage",
                                                  "arrays"), ("arrays",))
    dtypes = c.subset(m["dtypes"], "mac_array.dtypes", MAC_DTYPES)
    pairs = INT_PAIRS + FLOAT_PAIRS
    prec = c.section(m["precision"], "mac_array.precision", pairs, pairs)
    if not prec:
        raise c.fail("mac_array.precision", f"expected at least one operand pair of: {', '.join(pairs)}")
    for pair in prec:
        for t in pair.split("x"):
            # int4 weights may run sign-extended on int8 PEs (no int4 PE of their own)
            if t not in dtypes and not (t == "int4" and pair.endswith("x" + t) and "int8" in dtypes):
                raise c.fail(f"mac_array.precision.{pair}", f"{t} is not in mac_array.dtypes {list(dtypes)}")
    rates, float_acc = _precision(c, prec, pairs)
    po = c.section(m["ports"], "mac_array.ports", PORTS)
    mac = MacArrayConfig(rows=num(m["rows"], "mac_array.rows", integer=True),
                         cols=num(m["cols"], "mac_array.cols", integer=True),
                         dataflow=c.choice(m["dataflow"], "mac_array.dataflow", DATAFLOWS),
                         fold_overlap=c.flag(m["fold_overlap"], "mac_array.fold_overlap"),
                         dtypes=dtypes,
                         precision=rates, float_acc=float_acc,
                         ports={k: num(po[k], f"mac_array.ports.{k}") for k in PORTS},
                         accumulators=num(m["accumulators"], "mac_array.accumulators", integer=True),
                         output_stage=num(m["output_stage"], "mac_array.output_stage"),
                         arrays=num(m.get("arrays", 1), "mac_array.arrays", integer=True))
    if mac.macs_per_cycle > MAX_MACS:
        raise c.fail("mac_array", f"expected at most {MAX_MACS:,} MACs (rows x cols x arrays), got "
                                  f"{mac.rows} x {mac.cols} x {mac.arrays} = {mac.macs_per_cycle:,}")
    if "int8" not in mac.dtypes:
        raise c.fail("mac_array.dtypes", f"expected int8 among the dtypes (PRO-INT's base type), got {list(mac.dtypes)}")
    for dtype in mac.dtypes:
        need = _DTYPE_EXTENSION.get(dtype)
        if need is not None and need not in tosa.extensions + tosa.profiles:
            where = "tosa.profiles" if need.startswith("PRO-") else "tosa.extensions"
            raise c.fail("mac_array.dtypes", f"{dtype} needs {need} in {where}")

    # The float classes are figures of a float datapath: required with PRO-FP, refused without.
    classes = VECTOR_CLASSES + (FLOAT_CLASSES if "PRO-FP" in tosa.profiles else ())
    v = c.section(top["vector_unit"], "vector_unit", ("lanes", "cycles_per_lane"))
    cpl = _classes(c, v["cycles_per_lane"], "vector_unit.cycles_per_lane", classes)
    vector = VectorUnitConfig(lanes=num(v["lanes"], "vector_unit.lanes", integer=True),
                              cycles_per_lane={k: num(cpl[k], f"vector_unit.cycles_per_lane.{k}")
                                               for k in classes})

    s = c.section(top["sram"], "sram", ("size", "banks", "bytes_per_cycle", "interleave"))
    sram = SramConfig(size=c.size(s["size"], "sram.size"), banks=num(s["banks"], "sram.banks", integer=True),
                      bytes_per_cycle=num(s["bytes_per_cycle"], "sram.bytes_per_cycle"),
                      interleave=c.size(s["interleave"], "sram.interleave"))
    if sram.size % sram.banks:
        raise c.fail("sram.size", f"expected a multiple of sram.banks ({sram.banks}) so banks are equal, "
                                  f"got {sram.size} bytes")

    d = c.section(top["dma"], "dma", ("channels", "bytes_per_cycle", "setup_cycles"))
    dma = DmaConfig(channels=num(d["channels"], "dma.channels", integer=True),
                    bytes_per_cycle=num(d["bytes_per_cycle"], "dma.bytes_per_cycle"),
                    setup_cycles=num(d["setup_cycles"], "dma.setup_cycles", integer=True, zero_ok=True))

    mems = c.mapping(top["memories"], "memories")  # keys are free names, checked below
    if not mems:
        raise c.fail("memories", "expected at least one memory, got none")
    memories: dict[str, MemoryConfig] = {}
    for name, spec in mems.items():
        p = f"memories.{name}"
        if not isinstance(name, str) or not _IDENT_RE.match(name):
            raise c.fail(p, f"expected an identifier name like dram or system_sram, got {_show(name)}")
        e = c.section(spec, p, ("size", "bandwidth_gbps", "latency_ns"))
        memories[name] = MemoryConfig(name=name, size=c.size(e["size"], f"{p}.size"),
                                      bandwidth_gbps=num(e["bandwidth_gbps"], f"{p}.bandwidth_gbps"),
                                      latency_ns=num(e["latency_ns"], f"{p}.latency_ns", zero_ok=True))
    names = tuple(memories)

    pl = c.section(top["placement"], "placement", ("weights", "feature_maps"))
    placement = PlacementConfig(weights=c.choice(pl["weights"], "placement.weights", names),
                                feature_maps=c.choice(pl["feature_maps"], "placement.feature_maps", names))

    en = c.section(top["energy"], "energy", ("mac_pj", "vector_op_pj", "sram_read_pj_per_byte",
                                             "sram_write_pj_per_byte", "memories", "dma_pj_per_byte", "leakage_mw"))
    # Figures for dtypes the array lacks may stay, as in area.mac_mm2 (a sweep toggles dtypes).
    pj = c.section(en["mac_pj"], "energy.mac_pj", MAC_DTYPES, tuple(t for t in MAC_DTYPES if t not in mac.dtypes),
                   missing="missing entry for a dtype in mac_array.dtypes")
    vpj = _classes(c, en["vector_op_pj"], "energy.vector_op_pj", classes)
    em = c.section(en["memories"], "energy.memories", names, missing="missing entry for a memory in memories")
    mem_energy = {}
    for name in names:  # memory order, so to_dict output is stable whatever the YAML order
        e = c.section(em[name], f"energy.memories.{name}", ("read_pj_per_byte", "write_pj_per_byte"))
        mem_energy[name] = MemoryEnergy(
            read_pj_per_byte=num(e["read_pj_per_byte"], f"energy.memories.{name}.read_pj_per_byte", zero_ok=True),
            write_pj_per_byte=num(e["write_pj_per_byte"], f"energy.memories.{name}.write_pj_per_byte", zero_ok=True))
    energy = EnergyConfig(
        mac_pj={k: num(pj[k], f"energy.mac_pj.{k}", zero_ok=True) for k in MAC_DTYPES if k in pj},
        vector_op_pj={k: num(vpj[k], f"energy.vector_op_pj.{k}", zero_ok=True) for k in classes},
        sram_read_pj_per_byte=num(en["sram_read_pj_per_byte"], "energy.sram_read_pj_per_byte", zero_ok=True),
        sram_write_pj_per_byte=num(en["sram_write_pj_per_byte"], "energy.sram_write_pj_per_byte", zero_ok=True),
        memories=mem_energy,
        dma_pj_per_byte=num(en["dma_pj_per_byte"], "energy.dma_pj_per_byte", zero_ok=True),
        leakage_mw=num(en["leakage_mw"], "energy.leakage_mw", zero_ok=True))

    cpu_keys = ("name", "clock_mhz", "macs_per_cycle", "ops_per_cycle", "power_mw", "bytes_per_cycle")
    cp = c.section(top["cpu_baseline"], "cpu_baseline", cpu_keys)
    cpu = CpuBaselineConfig(c.text(cp["name"], "cpu_baseline.name"),
                            *(num(cp[k], f"cpu_baseline.{k}") for k in cpu_keys[1:]))

    area = None
    if "area" in top:
        area_keys = ("mac_mm2", "sram_mm2_per_kib", "sram_bank_overhead_mm2", "vector_lane_mm2",
                     "dma_channel_mm2", "fixed_mm2")
        fp = "PRO-FP" in tosa.profiles
        a = c.section(top["area"], "area", area_keys + ("vector_fp_lane_mm2",), ("vector_fp_lane_mm2",))
        if fp and "vector_fp_lane_mm2" not in a:
            raise c.fail("area.vector_fp_lane_mm2", "missing entry for the float lanes (tosa.profiles has PRO-FP)")
        # Figures for dtypes the array lacks may stay (handy when a sweep toggles dtypes).
        am = c.section(a["mac_mm2"], "area.mac_mm2", MAC_DTYPES, tuple(t for t in MAC_DTYPES if t not in mac.dtypes),
                       missing="missing entry for a dtype in mac_array.dtypes")
        area = AreaConfig(mac_mm2={k: num(am[k], f"area.mac_mm2.{k}", zero_ok=True) for k in MAC_DTYPES if k in am},
                          **{k: num(a[k], f"area.{k}", zero_ok=True) for k in area_keys[1:]},
                          vector_fp_lane_mm2=num(a.get("vector_fp_lane_mm2", 0), "area.vector_fp_lane_mm2",
                                                 zero_ok=True))

    keys = tuple(f.name for f in fields(ScheduleConfig))
    s = c.section(top.get("schedule", {}), "schedule", keys, keys)
    defaults = ScheduleConfig()
    schedule = ScheduleConfig(
        resident_fraction=num(s.get("resident_fraction", defaults.resident_fraction),
                              "schedule.resident_fraction"),
        tile_floor=c.size(s.get("tile_floor", defaults.tile_floor), "schedule.tile_floor"),
        room_slack=num(s.get("room_slack", defaults.room_slack), "schedule.room_slack"))

    points = {}
    for name, spec in c.mapping(top.get("operating_points", {}), "operating_points").items():
        p = f"operating_points.{name}"
        if not isinstance(name, str) or not _IDENT_RE.match(name):
            raise c.fail(p, f"expected an identifier name like low_power, got {_show(name)}")
        e = c.section(spec, p, ("clock_mhz", "voltage_scale"))
        points[name] = OperatingPoint(num(e["clock_mhz"], f"{p}.clock_mhz"),
                                      num(e["voltage_scale"], f"{p}.voltage_scale"))

    return HardwareConfig(
        name=c.text(top["name"], "name"), description=c.text(top.get("description", ""), "description", True),
        clock_mhz=num(top["clock_mhz"], "clock_mhz"), tosa=tosa, mac_array=mac, vector_unit=vector, sram=sram,
        dma=dma, memories=memories, placement=placement, energy=energy, cpu_baseline=cpu,
        driver_overhead_us=num(top["driver_overhead_us"], "driver_overhead_us", zero_ok=True), area=area,
        schedule=schedule, operating_points=points,
        source=keep_source if keep_source is not None else source)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` arguments as with_overrides() takes them; each VALUE is read as YAML
    (64, true, "2 MiB", {int8xint8: 1}), so it is validated like the same text in a file."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {_show(pair)}: expected KEY=VALUE, e.g. mac_array.rows=64")
        try:
            value = parse_yaml(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {key.strip()}: value {_show(text)} is not YAML "
                              f"({' '.join(str(e).split())[:80]})") from None
        out[key.strip()] = value
    return out


def config_from_dict(data: dict, source: str = "<dict>") -> HardwareConfig:
    return _build(data, source)


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def preset_path(name: str) -> Path:
    if name not in preset_names():
        raise ConfigError(f"{name}: unknown preset (expected one of: {', '.join(preset_names())})")
    return PRESET_DIR / f"{name}.yaml"


def load_config(path_or_name: str | os.PathLike | None = None) -> HardwareConfig:
    """None -> the default preset; a bare name ("edge-256") -> that preset; anything else -> a file path."""
    if path_or_name is None:
        path_or_name = "default"
    if not isinstance(path_or_name, (str, os.PathLike)):
        raise ConfigError(f"{path_or_name!r}: expected a preset name or a config file path")
    if isinstance(path_or_name, str) and not re.search(r"[/\\]|\.ya?ml$", path_or_name):
        path = preset_path(path_or_name)
    else:
        path = Path(path_or_name)
    return _build(read_yaml(path, "config file"), str(path))
