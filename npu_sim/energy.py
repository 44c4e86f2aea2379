"""Energy = sum of events x energy per event + leakage x time (Accelergy's method).

Event energies come from the config's energy table; this module counts events per layer and
prices them. Every component is linear in its events, so pricing the per-layer counts gives
each layer's energy and, summed, the run's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npu_sim.isa.commands import DmaCopy, DmaFill

from .cost import cmd_dtype


@dataclass
class Events:
    """Per-layer event counts; row `len(program.layers)` holds commands outside any layer."""
    traffic: np.ndarray          # [rows, memory id, 2]: bytes read, bytes written
    dma_bytes: np.ndarray        # [rows]: bytes DMA engines moved
    macs: dict[str, np.ndarray]  # activation dtype -> [rows] MACs
    vector_ops: dict[str, np.ndarray]  # op class -> [rows] vector-unit element operations
    host_cycles: np.ndarray      # [rows]: cycles the host CPU model ran


def count_events(program, costs) -> Events:
    rows, mems = len(program.layers) + 1, len(program.memories) + 1
    # Python lists while counting (numpy item updates cost more than the arithmetic).
    traffic = [[0] * (2 * mems) for _ in range(rows)]
    dma, host = [0] * rows, [0] * rows
    macs: dict[str, list[int]] = {}
    vector: dict[str, list[int]] = {}
    for cmd in program.commands:
        row = cmd.layer if 0 <= cmd.layer < rows - 1 else rows - 1
        counts = traffic[row]
        cost = costs[cmd.id]
        for mem, read, written in cost.traffic:
            counts[2 * mem] += read
            counts[2 * mem + 1] += written
        if isinstance(cmd, (DmaCopy, DmaFill)):
            dma[row] += cmd.dst.nbytes
        elif cmd.unit == "mac":
            macs.setdefault(cmd_dtype(cmd), [0] * rows)[row] += cost.macs
            counts[0] += cost.reread        # operands the array streams again read the banks again
        elif cmd.unit == "vector":
            for op_class, n in (cost.vector or {}).items():
                vector.setdefault(op_class, [0] * rows)[row] += n
        else:
            host[row] += cost.setup + cost.busy
    return Events(np.array(traffic, dtype=np.float64).reshape(rows, mems, 2),
                  np.array(dma, dtype=np.float64),
                  {k: np.array(v, dtype=np.float64) for k, v in macs.items()},
                  {k: np.array(v, dtype=np.float64) for k, v in vector.items()},
                  np.array(host, dtype=np.float64))


def energy_pj(events: Events, config, memory_names: list[str],
              cycles_to_s: float) -> dict[str, np.ndarray]:
    """Dynamic energy by component, each a per-layer array in pJ (components with no
    events are left out)."""
    e = config.energy
    out = {"onchip": events.traffic[:, 0] @ [e.sram_read_pj_per_byte, e.sram_write_pj_per_byte]}
    for i, name in enumerate(memory_names, start=1):
        m = e.memories[name]
        out[name] = events.traffic[:, i] @ [m.read_pj_per_byte, m.write_pj_per_byte]
    out["dma"] = events.dma_bytes * e.dma_pj_per_byte
    out["mac_array"] = sum((n * e.mac_pj.get(dtype, max(e.mac_pj.values()))
                            for dtype, n in events.macs.items()), np.zeros(len(out["dma"])))
    out["vector_unit"] = sum((n * e.vector_op_pj[c] for c, n in events.vector_ops.items()),
                             np.zeros(len(out["dma"])))
    out["host_cpu"] = events.host_cycles * cycles_to_s * config.cpu_baseline.power_mw * 1e9
    return {k: v for k, v in out.items() if v.any()}
