"""Energy = sum of events x energy per event + leakage x time (Accelergy's method).

Event energies come from the config's energy table; this module counts events per layer and
prices them. Every component is linear in its events, so pricing the per-layer counts gives
each layer's energy and, summed, the run's.
"""
from __future__ import annotations


import numpy as np

from npu_sim.isa.commands import DmaCopy, DmaFill
from npu_sim.isa.records import record

from .cost import cmd_dtype


@record
class Events:
    """Per-layer event counts; row `len(program.layers)` holds commands outside any layer."""
    traffic: np.ndarray          # [rows, memory id, 2]: bytes read, bytes written
    dma_bytes: np.ndarray        # [rows]: bytes DMA engines moved
    macs: dict[str, np.ndarray]  # activation dtype -> [rows] MACs
    vector_ops: dict[str, np.ndarray]  # op class -> [rows] vector-unit element operations
    host_cycles: np.ndarray      # [rows]: cycles the host CPU model ran


def count_events(program, costs) -> Events:
    rows, mems = len(program.layers) + 1, len(program.memories) + 1
    # Python lists while counting (numpy item updates cost more than the arithmetic). A
    # command's events are a function of its kind and its cost, and costs are shared, so the
    # commands are counted per (row, cost) and each distinct one priced once; the counts are
    # integers, so the sums are the same in any order.
    traffic = [[0] * (2 * mems) for _ in range(rows)]
    dma, host = [0] * rows, [0] * rows
    macs: dict[str, list[int]] = {}
    vector: dict[str, list[int]] = {}
    last = rows - 1
    groups: dict[tuple[int, int], list] = {}
    for cmd in program.commands:
        layer = cmd.layer
        cost = costs[cmd.id]
        key = (layer if 0 <= layer < last else last, id(cost))
        group = groups.get(key)
        if group is None:
            groups[key] = [1, cmd, cost]
        else:
            group[0] += 1
    for (row, _), (n, cmd, cost) in groups.items():
        counts = traffic[row]
        for mem, read, written in cost.traffic:
            counts[2 * mem] += n * read
            counts[2 * mem + 1] += n * written
        if isinstance(cmd, (DmaCopy, DmaFill)):
            dma[row] += n * cmd.dst.nbytes
        elif cmd.unit == "mac":
            macs.setdefault(cmd_dtype(cmd), [0] * rows)[row] += n * cost.macs
            counts[0] += n * cost.reread    # operands the array streams again read the banks again
        elif cmd.unit == "vector":
            for op_class, k in (cost.vector or {}).items():
                vector.setdefault(op_class, [0] * rows)[row] += n * k
        else:
            host[row] += n * (cost.setup + cost.busy)
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
