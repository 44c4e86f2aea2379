"""Hardware configuration: one YAML file describes one NPU, validated strictly at load time.

Every mistake in a config becomes a ConfigError naming the file, the key path and what was
expected, so a typo fails loudly here instead of silently skewing simulated cycles later.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import field, fields, is_dataclass
from pathlib import Path
from typing import Any

from npu_sim import configs as _presets
from npu_sim.isa.errors import ConfigError
from npu_sim.isa.operators import FLOAT_CLASSES, VECTOR_CLASSES
from npu_sim.isa.records import record

from .config_checks import MAX_MACS, IDENT_RE, Checker, show_value
from .digest import hexdigest
from .yamlread import parse_yaml, read_yaml

PRESET_DIR = Path(_presets.__file__).parent     # the repository's configs/, installed as package data

PROFILES = ("PRO-INT", "PRO-FP")
EXTENSIONS = ("EXT-INT16", "EXT-INT4", "EXT-DOUBLEROUND", "EXT-INEXACTROUND", "EXT-CONTROLFLOW", "EXT-VARIABLE",
              "EXT-BF16", "EXT-FP8E4M3", "EXT-FP8E5M2", "EXT-FFT",
              "EXT-SHAPE")     # EXT-SHAPE: TOSA 1.1 draft, experimental (graphs declaring the draft)
# The profile an extension extends ([SPEC] tosa.xml <profile_extensions>); the others extend both.
_EXTENSION_PROFILE = {"EXT-INT16": "PRO-INT", "EXT-INT4": "PRO-INT", "EXT-DOUBLEROUND": "PRO-INT",
                      "EXT-INEXACTROUND": "PRO-INT", "EXT-BF16": "PRO-FP", "EXT-FP8E4M3": "PRO-FP",
                      "EXT-FP8E5M2": "PRO-FP", "EXT-FFT": "PRO-FP"}
LEVELS = ("8K", "none")
DATAFLOWS = ("weight_stationary", "output_stationary", "input_stationary")
PORTS = ("activations", "weights", "outputs")   # the MAC array's operand ports, bytes/cycle
MAC_DTYPES = ("int8", "int16", "int4", "fp16", "bf16", "fp32", "fp8e4m3", "fp8e5m2")
# A MAC dtype beyond int8 is only reachable through the TOSA profile or extension that introduces it.
_DTYPE_EXTENSION = {"int16": "EXT-INT16", "int4": "EXT-INT4", "fp16": "PRO-FP", "fp32": "PRO-FP",
                    "bf16": "EXT-BF16", "fp8e4m3": "EXT-FP8E4M3", "fp8e5m2": "EXT-FP8E5M2"}
# Float pairs (both operands of one type, as TOSA's float MAC modes are) and the accumulators
# their PEs may have: TOSA's acc_t for the type, or a wider one (fp8 and fp16 may sum in fp32).
FLOAT_ACC = {"fp16": ("fp16", "fp32"), "bf16": ("fp32",), "fp32": ("fp32",),
             "fp8e4m3": ("fp16", "fp32"), "fp8e5m2": ("fp16", "fp32")}
INT_PAIRS = tuple(f"{a}x{w}" for a in ("int8", "int16", "int4") for w in ("int8", "int16", "int4"))
FLOAT_PAIRS = tuple(f"{t}x{t}" for t in FLOAT_ACC)




@record(frozen=True)
class MacArrayConfig:
    """The MAC array (YAML `mac_array`): shape, dataflow, precisions, operand ports."""

    rows: int
    cols: int
    dataflow: str
    fold_overlap: bool        # the next fold's preload hides behind the current fold
    dtypes: tuple[str, ...]   # operand types the PEs implement (area, energy)
    # "<activation>x<weight>" -> MACs per PE per cycle (1: full rate, 0.5: two passes)
    precision: dict[str, float] = field(default_factory=lambda: {"int8xint8": 1.0})
    # float pair ("fp16xfp16") -> the dtype its PEs accumulate in (YAML: {rate: .., acc: ..})
    float_acc: dict[str, str] = field(default_factory=dict)
    ports: dict[str, float] = field(default_factory=dict)   # PORTS -> bytes/cycle
    accumulators: int = 1 << 24   # accumulator entries per column
    output_stage: float = 1 << 16  # output-stage elements (bias, RESCALE, clamp) per cycle
    arrays: int = 1               # identical arrays sharing the ports (a TPU core's MXUs)

    @property
    def macs_per_cycle(self) -> int:
        return self.rows * self.cols * self.arrays

    def __hash__(self) -> int:
        return hash(json.dumps(_plain(self), sort_keys=True))


@record(frozen=True)
class VectorUnitConfig:
    """The vector unit (YAML `vector_unit`): lanes and cycles per op class."""

    lanes: int
    cycles_per_lane: dict[str, float] = field(default_factory=dict)   # op class -> cycles

    def __hash__(self) -> int:
        return hash(json.dumps(_plain(self), sort_keys=True))


@record(frozen=True)
class SramConfig:
    """The on-chip buffer (YAML `sram`): size, banks and their interleave."""

    size: int
    banks: int
    bytes_per_cycle: float  # per bank
    interleave: int = 1 << 62  # address-to-bank mapping: bank = addr // interleave % banks

    @property
    def bank_size(self) -> int:
        return self.size // self.banks


@record(frozen=True)
class DmaConfig:
    """The DMA engines (YAML `dma`): channels, rate and setup."""

    channels: int
    bytes_per_cycle: float  # per channel
    setup_cycles: int


@record(frozen=True)
class MemoryConfig:
    """One external memory (YAML `memories.NAME`): size, bandwidth, latency."""

    name: str
    size: int
    bandwidth_gbps: float
    latency_ns: float


@record(frozen=True)
class PlacementConfig:
    """Which external memory holds the weights and which the feature maps."""

    weights: str
    feature_maps: str


@record(frozen=True)
class ScheduleConfig:
    """The compiler's planning trade-offs (optional section `schedule`; these are the defaults).

    resident_fraction: at most this share of the on-chip buffer holds tensors that live across
    steps, and tile_floor: it leaves tiles at least that many bytes unless that is under half the
    buffer; room_slack: among near-fastest tile plans, the fewest tiles whose working set is
    within this factor of the smallest (more room for far fewer commands)."""

    resident_fraction: float = 0.85
    tile_floor: int = 16 * 1024
    room_slack: float = 1.25


@record(frozen=True)
class OperatingPoint:
    """A lower clock and supply the NPU may run at (optional section `operating_points`, by
    name; the config's own figures are the nominal point): on-chip energy per event scales with
    voltage_scale squared, leakage power with voltage_scale; external memories keep theirs."""
    clock_mhz: float
    voltage_scale: float


@record(frozen=True)
class MemoryEnergy:
    """An external memory's energy per byte read and written."""

    read_pj_per_byte: float
    write_pj_per_byte: float


@record(frozen=True)
class EnergyConfig:
    """Energy per event (YAML `energy`), pJ, and leakage power."""

    mac_pj: dict[str, float]
    vector_op_pj: dict[str, float]   # per op class (isa.operators.VECTOR_CLASSES)
    sram_read_pj_per_byte: float
    sram_write_pj_per_byte: float
    memories: dict[str, MemoryEnergy]
    dma_pj_per_byte: float
    leakage_mw: float

    def __hash__(self) -> int:  # dict fields are not hashable; their contents are
        return hash(json.dumps(_plain(self), sort_keys=True))


@record(frozen=True)
class CpuBaselineConfig:
    """The host CPU (YAML `cpu_baseline`): runs fallback ops; NNAPI's baseline."""

    name: str
    clock_mhz: float
    macs_per_cycle: float
    ops_per_cycle: float
    power_mw: float
    bytes_per_cycle: float


@record(frozen=True)
class AreaConfig:
    """Silicon area figures (mm²) for npu_sim.area; they do not affect timing or energy."""
    mac_mm2: dict[str, float]  # per MAC unit, summed over mac_array.dtypes (int8 = base MAC, others = add-on)
    sram_mm2_per_kib: float
    sram_bank_overhead_mm2: float  # per bank: decoders, sense amps, port logic
    vector_lane_mm2: float
    dma_channel_mm2: float
    fixed_mm2: float  # control, command queue, interconnect
    vector_fp_lane_mm2: float = 0.0  # PRO-FP: each lane's fp32 adder, multiplier and its share of the SFU

    def __hash__(self) -> int:
        return hash(json.dumps(_plain(self), sort_keys=True))


@record(frozen=True)
class TosaTarget:
    """The TOSA profiles, extensions and level the machine implements."""

    profiles: tuple[str, ...]   # PRO-INT, and PRO-FP when the machine has a float datapath
    extensions: tuple[str, ...]
    level: str  # "8K" or "none"


@record(frozen=True)
class HardwareConfig:
    """One NPU, as a YAML config describes it (load_config)."""

    name: str
    description: str
    clock_mhz: float
    tosa: TosaTarget
    mac_array: MacArrayConfig
    vector_unit: VectorUnitConfig
    sram: SramConfig
    dma: DmaConfig
    memories: dict[str, MemoryConfig]  # insertion-ordered; treat as read-only
    placement: PlacementConfig
    energy: EnergyConfig
    cpu_baseline: CpuBaselineConfig
    driver_overhead_us: float
    area: AreaConfig | None = None  # optional section: only design-space exploration needs it
    # The MAC array and the vector unit hand data over row by row (npu_sim/handoff.py): a
    # command reading the other's output starts on the rows already finished.
    row_handoff: bool = False
    schedule: ScheduleConfig = ScheduleConfig()
    operating_points: dict[str, OperatingPoint] = field(default_factory=dict)
    source: str = field(default="<dict>", compare=False)  # where it came from, not what it is

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def _memory(self, name: str) -> MemoryConfig:
        if name not in self.memories:
            raise ConfigError(f"{self.source}: memories.{name}: unknown memory "
                              f"(expected one of: {', '.join(self.memories)})")
        return self.memories[name]

    def memory_bytes_per_cycle(self, name: str) -> float:
        """Bytes the named memory delivers per NPU clock cycle."""
        return self._memory(name).bandwidth_gbps * 1e9 / (self.clock_mhz * 1e6)

    def memory_latency_cycles(self, name: str) -> int:
        # round() first so 30 ns * 500 MHz = 15.000000000000002 does not become 16 cycles
        return math.ceil(round(self._memory(name).latency_ns * self.clock_mhz / 1000, 9))

    def to_dict(self) -> dict:
        """Plain, JSON-able data in the YAML schema (sizes in bytes); config_from_dict inverts it."""
        d = _plain(self)
        del d["source"]
        if d["area"] is None:
            del d["area"]
        for mem in d["memories"].values():
            del mem["name"]  # the mapping key already is the name
        mac = d["mac_array"]
        for pair, acc in mac.pop("float_acc").items():
            mac["precision"][pair] = {"rate": mac["precision"][pair], "acc": acc}
        return d

    def with_overrides(self, overrides: dict[str, object]) -> HardwareConfig:
        """A copy with dotted keys replaced, e.g. {"mac_array.rows": 64}; validated like a file."""
        src = f"{self.source} (overrides)"
        d = self.to_dict()
        if not isinstance(overrides, dict):
            raise ConfigError(f"{src}: expected a mapping of dotted keys to values, "
                              f"got {show_value(overrides)}")
        for key, value in overrides.items():
            parts = key.split(".") if isinstance(key, str) else []
            if not parts or not all(parts):
                raise ConfigError(f"{src}: {key!r}: expected a dotted key like mac_array.rows")
            node = d
            for i, part in enumerate(parts[:-1]):
                if not isinstance(node, dict) or part not in node:
                    where = ".".join(parts[: i + 1])
                    expected = f" (expected one of: {', '.join(node)})" if isinstance(node, dict) else ""
                    raise ConfigError(f"{src}: {where}: unknown key{expected}")
                node = node[part]
            if not isinstance(node, dict):
                raise ConfigError(f"{src}: {key}: {'.'.join(parts[:-1])} is not a section")
            node[parts[-1]] = value  # a new leaf is caught by validation as an unknown key
        return _build(d, src, self.source)

    def fingerprint(self) -> str:
        """Stable digest of the configuration's content (not of its source path), for caching."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hexdigest(text.encode())


def _plain(obj: Any) -> Any:
    if is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj




_TOP_KEYS = ("name", "description", "clock_mhz", "tosa", "mac_array", "vector_unit", "sram", "dma", "memories",
                 "placement", "energy", "cpu_baseline", "driver_overhead_us", "area", "schedule",
             "operating_points", "row_handoff")


def _classes(c: Checker, data: Any, path: str, classes: tuple) -> dict:
    section = c.section(data, path, classes, FLOAT_CLASSES)
    for key in classes:
        if key not in section:
            raise c.fail(f"{path}.{key}", "missing entry for a float op class (tosa.profiles has PRO-FP)")
    return section


def _tosa(c: Checker, data: Any) -> TosaTarget:
    """tosa: `profiles: [PRO-INT, PRO-FP]` (or the single-profile spelling `profile: PRO-INT`)."""
    t = c.section(data, "tosa", ("profiles", "profile", "extensions", "level"),
                  ("profiles", "profile", "extensions", "level"))
    if ("profile" in t) == ("profiles" in t):
        raise c.fail("tosa.profiles", "expected exactly one of profiles (a list) and profile (one name)")
    profiles = ((c.choice(t["profile"], "tosa.profile", PROFILES),) if "profile" in t
                else c.subset(t["profiles"], "tosa.profiles", PROFILES))
    if "PRO-INT" not in profiles:
        # the integer datapath (RESCALE, int8 MACs, index arithmetic) is always part of the machine
        raise c.fail("tosa.profiles", f"expected PRO-INT among the profiles, "
                                      f"got {show_value(list(profiles))}")
    extensions = c.subset(t.get("extensions", []), "tosa.extensions", EXTENSIONS)
    for i, ext in enumerate(extensions):
        if _EXTENSION_PROFILE.get(ext, "PRO-INT") not in profiles:
            raise c.fail(f"tosa.extensions[{i}]", f"{ext} extends {_EXTENSION_PROFILE[ext]}, which "
                                                  "tosa.profiles does not list")
    return TosaTarget(profiles=tuple(p for p in PROFILES if p in profiles), extensions=extensions,
                      level=c.choice(t.get("level", "8K"), "tosa.level", LEVELS))


def _precision(c: Checker, prec: dict, pairs: tuple) -> tuple[dict, dict]:
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
                               f"{' or '.join(accs)}}}, got {show_value(prec[pair])}")
        entry = c.section(prec[pair], path, ("rate", "acc"))
        rates[pair] = c.number(entry["rate"], f"{path}.rate")
        float_acc[pair] = c.choice(entry["acc"], f"{path}.acc", accs)
    return rates, float_acc


def _build(data: Any, source: str, keep_source: str | None = None) -> HardwareConfig:
    c = Checker(source, ranged=True)
    top = c.section(data, "", _TOP_KEYS, ("description", "area", "schedule", "operating_points",
                                          "row_handoff"))
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
        if not isinstance(name, str) or not IDENT_RE.match(name):
            raise c.fail(p, f"expected an identifier name like dram or system_sram, "
                            f"got {show_value(name)}")
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
        if not isinstance(name, str) or not IDENT_RE.match(name):
            raise c.fail(p, f"expected an identifier name like low_power, got {show_value(name)}")
        e = c.section(spec, p, ("clock_mhz", "voltage_scale"))
        points[name] = OperatingPoint(num(e["clock_mhz"], f"{p}.clock_mhz"),
                                      num(e["voltage_scale"], f"{p}.voltage_scale"))

    return HardwareConfig(
        name=c.text(top["name"], "name"), description=c.text(top.get("description", ""), "description", True),
        clock_mhz=num(top["clock_mhz"], "clock_mhz"), tosa=tosa, mac_array=mac, vector_unit=vector, sram=sram,
        dma=dma, memories=memories, placement=placement, energy=energy, cpu_baseline=cpu,
        driver_overhead_us=num(top["driver_overhead_us"], "driver_overhead_us", zero_ok=True), area=area,
        row_handoff=c.flag(top.get("row_handoff", False), "row_handoff"),
        schedule=schedule, operating_points=points,
        source=keep_source if keep_source is not None else source)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` arguments as with_overrides() takes them; each VALUE is read as YAML
    (64, true, "2 MiB", {int8xint8: 1}), so it is validated like the same text in a file."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {show_value(pair)}: expected KEY=VALUE, e.g. mac_array.rows=64")
        import yaml
        try:
            value = parse_yaml(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {key.strip()}: value {show_value(text)} is not YAML "
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
    """None -> the default preset; a bare name ("edge-256") -> that preset, unless it names
    no preset but something that exists here; anything else -> a file path."""
    if path_or_name is None:
        path_or_name = "default"
    if not isinstance(path_or_name, (str, os.PathLike)):
        raise ConfigError(f"{path_or_name!r}: expected a preset name or a config file path")
    if isinstance(path_or_name, str) and not re.search(r"[/\\]|\.ya?ml$", path_or_name) and (
            path_or_name in preset_names() or not os.path.lexists(path_or_name)):
        path = preset_path(path_or_name)
    else:
        path = Path(path_or_name)
    return _build(read_yaml(path, "config file"), str(path))
