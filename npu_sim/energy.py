"""Energy = sum of events x energy per event + leakage x time (Accelergy's method).

Event energies come from the config's energy table; this module only counts events.
"""
from __future__ import annotations

from isa.commands import Compute, DmaCopy, DmaFill

from .simulator import command_traffic


def command_energy_pj(cmd, cost, config, memory_names, cycles_to_s,
                      traffic=None) -> dict[str, float]:
    """Dynamic energy of one command by component, in pJ (`traffic`: its command_traffic,
    when the caller has it already)."""
    e = config.energy
    out: dict[str, float] = {}

    def add(key, pj):
        if pj:
            out[key] = out.get(key, 0.0) + pj

    for mem, read, written in traffic or command_traffic(cmd):
        if mem == 0:
            add("onchip", read * e.sram_read_pj_per_byte + written * e.sram_write_pj_per_byte)
        else:
            name = memory_names[mem - 1]
            m = e.memories[name]
            add(name, read * m.read_pj_per_byte + written * m.write_pj_per_byte)
    if isinstance(cmd, (DmaCopy, DmaFill)):
        add("dma", cmd.dst.nbytes * e.dma_pj_per_byte)
    elif isinstance(cmd, Compute) and cmd.unit == "mac":
        dtype = next(iter(cmd.inputs.values())).dtype
        add("mac_array", cost.macs * e.mac_pj.get(dtype, max(e.mac_pj.values())))
    elif isinstance(cmd, Compute) and cmd.unit == "vector":
        add("vector_unit", cost.elements * e.vector_op_pj)
    else:
        seconds = (cost.setup + cost.busy) * cycles_to_s
        add("host_cpu", config.cpu_baseline.power_mw * 1e-3 * seconds * 1e12)
    return out
