"""Silicon area of a configured NPU, from the config's `area:` section (mm²).

The model is deliberately linear in the knobs a design-space sweep turns, so area is an
objective next to latency and energy:

    macs     rows·cols·arrays · Σ area.mac_mm2[d] over mac_array.dtypes   (int8 is the MAC
                                                        itself; the other types are add-ons)
    sram     size in KiB · sram_mm2_per_kib + banks · sram_bank_overhead_mm2
    vector   lanes · (vector_lane_mm2 + vector_fp_lane_mm2 with PRO-FP)
    dma      channels · dma_channel_mm2
    fixed    fixed_mm2

External memories (DRAM, system SRAM, flash) are not part of the NPU block and cost nothing here.
"""
from __future__ import annotations

from npu_sim.isa.errors import ConfigError

from .config import HardwareConfig

PARTS = ("mac_array", "sram", "vector_unit", "dma", "fixed")


def area_mm2(config: HardwareConfig) -> dict[str, float]:
    """Breakdown by part (PARTS) plus 'total', in mm²."""
    a = config.area
    if a is None:
        raise ConfigError(f"{config.source}: area: the config has no area section, so its area is unknown")
    mac = config.mac_array
    missing = [d for d in mac.dtypes if d not in a.mac_mm2]
    if missing:  # only reachable for configs built around validation
        raise ConfigError(f"{config.source}: area.mac_mm2: missing entry for {', '.join(missing)}")
    parts = {
        "mac_array": mac.macs_per_cycle * sum(a.mac_mm2[d] for d in mac.dtypes),
        "sram": config.sram.size / 1024 * a.sram_mm2_per_kib + config.sram.banks * a.sram_bank_overhead_mm2,
        "vector_unit": config.vector_unit.lanes * (a.vector_lane_mm2 + a.vector_fp_lane_mm2),
        "dma": config.dma.channels * a.dma_channel_mm2,
        "fixed": a.fixed_mm2,
    }
    parts["total"] = sum(parts.values())
    return parts
