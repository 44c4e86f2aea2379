"""The config checker: every figure's plausible range, and type and range checks that phrase
each failure as '<source>: <key path>: <expected>'. npu_sim.config reads YAML through it; the
design-space sweeps check their own files with it too."""

from __future__ import annotations

import math
import re
import reprlib
from typing import Any

from npu_sim.isa.errors import ConfigError

MIN_SRAM = 1024
MAX_SIZE = 1 << 64  # addresses are 64-bit
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
_SIZE_RE = re.compile(r"^\s*(\d+)(?:\.(\d+))?\s*(" + "|".join(_UNITS) + r")\s*$", re.ASCII)
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # no dots: names appear in dotted override keys


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxlong = 3, 4, 4, 40, 40


def show_value(value: Any) -> str:
    # reprlib: a value expanded from YAML aliases may be huge; only what is shown is built
    text = _REPR.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


class Checker:
    """Type and range checks that phrase every failure as '<source>: <key path>: <expected>'."""

    def __init__(self, source: str, ranged: bool = False):
        self.source = source
        self.ranged = ranged

    def fail(self, path: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {path or '(top level)'}: {message}")

    def mapping(self, data: Any, path: str) -> dict:
        if not isinstance(data, dict):
            raise self.fail(path, f"expected a mapping, got {show_value(data)}")
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
            raise self.fail(path, f"expected a {adjective} {'integer' if integer else 'number'}, "
                                  f"got {show_value(value)}")
        return self.in_range(value, path)

    def in_range(self, value, path: str):
        """Figures of a hardware config have a documented range (RANGES); other files' numbers do not."""
        bounds = RANGES.get(_range_key(path)) if self.ranged else None
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            lo, hi = (_bound(b, path) for b in bounds)
            side = f"at least {lo}" if value < bounds[0] else f"at most {hi}"
            raise self.fail(path, f"expected {side} (range {lo} to {hi}), got {show_value(value)}")
        return value

    def flag(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {show_value(value)}")
        return value

    def text(self, value: Any, path: str, allow_empty: bool = False) -> str:
        if not isinstance(value, str) or not (value.strip() or allow_empty):
            raise self.fail(path, f"expected a{'' if allow_empty else ' non-empty'} string, "
                                  f"got {show_value(value)}")
        return value

    def choice(self, value: Any, path: str, options: tuple) -> str:
        if not isinstance(value, str) or value not in options:
            raise self.fail(path, f"expected one of: {', '.join(options)}, got {show_value(value)}")
        return value

    def subset(self, value: Any, path: str, options: tuple) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list drawn from: {', '.join(options)}, "
                                  f"got {show_value(value)}")
        items = tuple(self.choice(v, f"{path}[{i}]", options) for i, v in enumerate(value))
        if len(set(items)) != len(items):
            raise self.fail(path, f"expected no duplicates, got {show_value(value)}")
        return items

    def size(self, value: Any, path: str) -> int:
        nbytes: Any = None
        if isinstance(value, int) and not isinstance(value, bool):
            nbytes = value
        elif isinstance(value, str) and (m := _SIZE_RE.match(value)):
            # exact: "1.5 KiB" is 15 * 1024 / 10 bytes, "1.3 KiB" no whole number. A whole
            # number of bytes below 2**64 has at most 20 significant digits before the point
            # (in B) and 30 after it (2**-30 GiB), so longer strings are refused unread
            fraction = (m.group(2) or "").rstrip("0")
            digits = m.group(1).lstrip("0") + fraction
            if len(digits) <= 64:
                scaled, denominator = int(digits or "0") * _UNITS[m.group(3)], 10 ** len(fraction)
                if scaled % denominator == 0:
                    nbytes = scaled // denominator
        if nbytes is not None and 0 < nbytes < MAX_SIZE:
            return self.in_range(nbytes, path)
        raise self.fail(path, "expected a whole number of bytes in [1, 2**64), as an integer or a string like "
                              f"'256 KiB' (units: {', '.join(_UNITS)}), got {show_value(value)}")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)
