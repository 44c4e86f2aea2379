"""The hardware configuration's schema: the names a config may use and the frozen dataclasses
one validated config becomes. npu_sim.config reads and checks YAML into these."""

from __future__ import annotations

import hashlib
import json
import math
import reprlib
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from npu_sim.isa.errors import ConfigError

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
MIN_SRAM = 1024
MAX_SIZE = 1 << 64  # addresses are 64-bit


def _plain(obj: Any) -> Any:
    if is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxlong = 3, 4, 4, 40, 40


def _show(value: Any) -> str:
    # reprlib: a value expanded from YAML aliases may be huge; only what is shown is built
    text = _REPR.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."




@dataclass(frozen=True)
class MacArrayConfig:
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


@dataclass(frozen=True)
class VectorUnitConfig:
    lanes: int
    cycles_per_lane: dict[str, float] = field(default_factory=dict)   # op class -> cycles

    def __hash__(self) -> int:
        return hash(json.dumps(_plain(self), sort_keys=True))


@dataclass(frozen=True)
class SramConfig:
    size: int
    banks: int
    bytes_per_cycle: float  # per bank
    interleave: int = 1 << 62  # address-to-bank mapping: bank = addr // interleave % banks

    @property
    def bank_size(self) -> int:
        return self.size // self.banks


@dataclass(frozen=True)
class DmaConfig:
    channels: int
    bytes_per_cycle: float  # per channel
    setup_cycles: int


@dataclass(frozen=True)
class MemoryConfig:
    name: str
    size: int
    bandwidth_gbps: float
    latency_ns: float


@dataclass(frozen=True)
class PlacementConfig:
    weights: str
    feature_maps: str


@dataclass(frozen=True)
class ScheduleConfig:
    """The compiler's planning trade-offs (optional section `schedule`; these are the defaults).

    resident_fraction: at most this share of the on-chip buffer holds tensors that live across
    steps, and tile_floor: it leaves tiles at least that many bytes unless that is under half the
    buffer; room_slack: among near-fastest tile plans, the fewest tiles whose working set is
    within this factor of the smallest (more room for far fewer commands)."""

    resident_fraction: float = 0.85
    tile_floor: int = 16 * 1024
    room_slack: float = 1.25


@dataclass(frozen=True)
class OperatingPoint:
    """A lower clock and supply the NPU may run at (optional section `operating_points`, by
    name; the config's own figures are the nominal point): on-chip energy per event scales with
    voltage_scale squared, leakage power with voltage_scale; external memories keep theirs."""
    clock_mhz: float
    voltage_scale: float


@dataclass(frozen=True)
class MemoryEnergy:
    read_pj_per_byte: float
    write_pj_per_byte: float


@dataclass(frozen=True)
class EnergyConfig:
    mac_pj: dict[str, float]
    vector_op_pj: dict[str, float]   # per op class (isa.operators.VECTOR_CLASSES)
    sram_read_pj_per_byte: float
    sram_write_pj_per_byte: float
    memories: dict[str, MemoryEnergy]
    dma_pj_per_byte: float
    leakage_mw: float

    def __hash__(self) -> int:  # dict fields are not hashable; their contents are
        return hash(json.dumps(_plain(self), sort_keys=True))


@dataclass(frozen=True)
class CpuBaselineConfig:
    name: str
    clock_mhz: float
    macs_per_cycle: float
    ops_per_cycle: float
    power_mw: float
    bytes_per_cycle: float


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class TosaTarget:
    profiles: tuple[str, ...]   # PRO-INT, and PRO-FP when the machine has a float datapath
    extensions: tuple[str, ...]
    level: str  # "8K" or "none"


@dataclass(frozen=True)
class HardwareConfig:
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
            raise ConfigError(f"{src}: expected a mapping of dotted keys to values, got {_show(overrides)}")
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
        from .config import _build  # the checker lives with the loader, which imports this module
        return _build(d, src, self.source)

    def fingerprint(self) -> str:
        """Stable sha256 of the configuration's content (not of its source path), for caching."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()
