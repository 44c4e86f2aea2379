"""One report object for a run; text, JSON and CSV are renderings of it."""
from __future__ import annotations

import io
import json
from dataclasses import asdict, field

import numpy as np

from npu_sim.isa.commands import Compute
from npu_sim.isa.records import record

from .bounds import attainable
from .energy import count_events, energy_pj
from .simulator import SimResult


@record
class LayerRow:
    """One layer's line of the report."""

    index: int
    name: str
    ops: list[str]
    unit: str
    start: int
    end: int
    compute_start: int    # its first compute command; before it only DMA ran (weight prefetch)
    cycles: int           # how far the layer pushed the run's end: the rows add up to the total
    span: int             # first command's start to last command's end (layers overlap)
    macs: int
    mac_utilization: float    # MACs / (array cycles spent on the layer x MACs per cycle)
    tiles: int
    commands: int
    bytes: dict[str, int]
    energy_uj: float
    roofline_cycles: int
    mac_fill_cycles: int = 0   # MAC array preload, fill skew and drain within its busy cycles
    mac_stall_cycles: int = 0  # MAC array cycles waiting for operand ports or the output stage


@record
class Report:
    """A run's figures: cycles, energy, utilization, bounds and the layers."""

    model: str
    config: str
    clock_mhz: float
    cycles: int
    seconds: float
    timing_only: bool
    engines: dict[str, dict]
    mac_utilization: float
    total_macs: int
    bytes_moved: dict[str, dict[str, int]]
    energy_uj: dict[str, float]
    average_power_mw: float
    performance_info: dict[str, float]
    timing: dict[str, int]
    roofline: dict
    operators: dict[str, int]
    layers: list[LayerRow] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def layers_csv(self) -> str:
        import csv                  # only here: most runs write no CSV
        buf = io.StringIO()
        w = csv.writer(buf)
        mems = sorted({m for row in self.layers for m in row.bytes})
        w.writerow(["index", "name", "ops", "unit", "start", "end", "compute_start", "cycles",
                    "span", "macs",
                    "mac_utilization", "tiles", "commands", "energy_uj", "roofline_cycles",
                    "mac_fill_cycles", "mac_stall_cycles"]
                   + [f"bytes_{m}" for m in mems])
        for r in self.layers:
            w.writerow([r.index, r.name, "+".join(r.ops), r.unit, r.start, r.end,
                        r.compute_start, r.cycles, r.span, r.macs,
                        f"{r.mac_utilization:.4f}", r.tiles, r.commands, f"{r.energy_uj:.4f}",
                        r.roofline_cycles, r.mac_fill_cycles, r.mac_stall_cycles]
                       + [r.bytes.get(m, 0) for m in mems])
        return buf.getvalue()

    def to_text(self, max_layers: int = 12) -> str:
        reach = self.roofline["attainable"]
        L = [f"npu-sim: {self.model} on {self.config} ({self.clock_mhz:g} MHz)"
             + ("  [timing only]" if self.timing_only else ""),
             f"  cycles            {self.cycles:,}  ({self.seconds * 1e3:.3f} ms)",
             f"  roofline bound    {self.roofline['cycles']:,} cycles ({self.roofline['bound_by']}"
             f"-bound); simulated {self.cycles / max(self.roofline['cycles'], 1):.2f}x the bound",
             f"  attainable bound  {reach['cycles']:,} cycles (array mapping; "
             + ("compute-bound" if reach["bound_by"] == "compute" else
                f"{reach['bound_by']} streamed ahead of its readers")
             + f"); simulated {self.cycles / max(reach['cycles'], 1):.2f}x",
             f"  MACs              {self.total_macs:,}  (MAC utilization {self.mac_utilization:.1%})",
             f"  operators         NPU {self.operators['npu']} "
             f"({self.operators['npu'] / max(self.operators['npu'] + self.operators['host'], 1):.0%})"
             f", host {self.operators['host']}",
             "  engines           " + ", ".join(
                 f"{k} {v['utilization']:.0%}" for k, v in sorted(self.engines.items())),
             "  bytes moved       " + ", ".join(
                 f"{m} r {v['read']:,} w {v['written']:,}" for m, v in self.bytes_moved.items()),
             f"  energy            {self.energy_uj['total']:.2f} uJ  (" + ", ".join(
                 f"{k} {v:.2f}" for k, v in self.energy_uj.items() if k != "total") + ")",
             f"  average power     {self.average_power_mw:.1f} mW",
             f"  PerformanceInfo   execTime {self.performance_info['execTime']:.4f}, "
             f"powerUsage {self.performance_info['powerUsage']:.4f}  (vs CPU baseline; lower is "
             "better)",
             f"  Timing            timeOnDevice {self.timing['timeOnDevice']:,} ns, "
             f"timeInDriver {self.timing['timeInDriver']:,} ns"]
        if self.layers:
            L.append(f"  {'layer':<34}{'ops':<28}{'cycles':>10}{'MACs':>13}{'util':>7}"
                     f"{'fill':>9}{'stall':>9}{'uJ':>9}")
            top = sorted(self.layers, key=lambda r: -r.cycles)[:max_layers]
            for r in sorted(top, key=lambda r: r.index):
                L.append(f"  {r.index:>3} {r.name[:29]:<30}{'+'.join(r.ops)[:27]:<28}"
                         f"{r.cycles:>10,}{r.macs:>13,}{r.mac_utilization:>7.1%}"
                         f"{r.mac_fill_cycles:>9,}{r.mac_stall_cycles:>9,}{r.energy_uj:>9.3f}")
            if len(self.layers) > max_layers:
                L.append(f"  ({len(self.layers) - max_layers} shorter layers not shown; see the "
                         "JSON or CSV report)")
        return "\n".join(L) + "\n"


def build_report(program, config, sim: SimResult, timing_only: bool) -> Report:
    clock_hz = config.clock_mhz * 1e6
    cycles = sim.cycles
    seconds = cycles / clock_hz
    names = program.memories
    n_layers = len(program.layers)
    events = count_events(program, sim.costs)
    parts = energy_pj(events, config, names, 1 / clock_hz)
    energy = {k: float(v.sum()) for k, v in parts.items()}
    layer_energy = sum(parts.values(), np.zeros(n_layers + 1))[:n_layers]
    totals = events.traffic.sum(axis=0)
    moved = {program.memory_name(m): {"read": int(totals[m, 0]), "written": int(totals[m, 1])}
             for m in range(len(names) + 1)}
    external = events.traffic[:n_layers, 1:].sum(axis=2)      # per layer and memory, r + w
    layer_bytes = [{names[m]: int(b) for m, b in enumerate(row) if b} for row in external]
    energy_uj = {k: v * 1e-6 for k, v in sorted(energy.items())}
    energy_uj["leakage"] = config.energy.leakage_mw * 1e-3 * seconds * 1e6
    energy_uj["total"] = sum(energy_uj.values())
    power_mw = energy_uj["total"] * 1e-6 / seconds * 1e3 if seconds else 0.0

    engines = {}
    for eng, ids in sim.engines.items():
        busy = int(np.sum(sim.end[ids] - sim.start[ids]))
        engines[eng] = {"busy_cycles": busy, "commands": len(ids),
                        "utilization": busy / cycles if cycles else 0.0}
    macs_per_cycle = config.mac_array.macs_per_cycle
    total_macs = sum(layer.macs for layer in program.layers)

    # Roofline of the same hardware: compute at peak, and each memory moving only what it must.
    min_bytes: dict[str, int] = {}
    for layer in program.layers:
        for m, b in layer.min_bytes.items():
            min_bytes[m] = min_bytes.get(m, 0) + b
    bounds = {"compute": int(np.ceil(total_macs / macs_per_cycle))}
    for m, b in min_bytes.items():
        bounds[m] = int(np.ceil(b / config.memory_bytes_per_cycle(m)))
    bound_by = max(bounds, key=bounds.get)
    roofline = {"cycles": bounds[bound_by], "bound_by": bound_by, "terms": bounds,
                "min_bytes": min_bytes, "attainable": attainable(program.layers, config)}

    cpu = config.cpu_baseline
    vector_elems = sum(c.elements for c in sim.costs)
    io_bytes = sum(min_bytes.values())
    cpu_seconds = (total_macs / cpu.macs_per_cycle + vector_elems / cpu.ops_per_cycle
                   + io_bytes / cpu.bytes_per_cycle) / (cpu.clock_mhz * 1e6)
    cpu_energy_uj = cpu.power_mw * 1e-3 * cpu_seconds * 1e6
    perf = {"execTime": seconds / cpu_seconds if cpu_seconds else 0.0,
            "powerUsage": energy_uj["total"] / cpu_energy_uj if cpu_energy_uj else 0.0,
            "cpu_baseline_seconds": cpu_seconds, "cpu_baseline_energy_uj": cpu_energy_uj}
    time_ns = int(round(seconds * 1e9))
    timing = {"timeOnDevice": time_ns,
              "timeInDriver": time_ns + int(round(config.driver_overhead_us * 1e3))}

    rows = []
    by_layer: list[list[int]] = [[] for _ in range(n_layers)]
    computing: list[list[int]] = [[] for _ in range(n_layers)]
    busy_sums = [0] * n_layers       # ints while summing: numpy item updates cost more
    mac_fill = [0] * n_layers
    mac_stall = [0] * n_layers
    for cmd in program.commands:
        layer = cmd.layer
        if 0 <= layer < n_layers:
            by_layer[layer].append(cmd.id)
            if isinstance(cmd, Compute):
                computing[layer].append(cmd.id)
                if cmd.unit == "mac":
                    c = sim.costs[cmd.id]
                    busy_sums[layer] += c.busy
                    mac_fill[layer] += c.fill
                    mac_stall[layer] += c.stall
    frontier = 0
    mac_busy = np.array(busy_sums, dtype=np.float64)
    for i, layer in enumerate(program.layers):
        ids = by_layer[i]
        s = int(sim.start[ids].min()) if ids else 0
        e = int(sim.end[ids].max()) if ids else 0
        span = e - s
        advance = max(0, e - frontier)
        frontier = max(frontier, e)
        terms = [layer.macs / macs_per_cycle] + [
            b / config.memory_bytes_per_cycle(m) for m, b in layer.min_bytes.items()]
        cs = int(sim.start[computing[i]].min()) if computing[i] else s
        rows.append(LayerRow(i, layer.name, layer.ops, layer.unit, s, e, cs, advance, span,
                             layer.macs, layer.macs / (mac_busy[i] * macs_per_cycle)
                             if mac_busy[i] else 0.0,
                             layer.tiles, len(ids), layer_bytes[i],
                             float(layer_energy[i]) * 1e-6
                             + config.energy.leakage_mw * 1e-3 * advance / clock_hz * 1e6,
                             int(np.ceil(max(terms))), mac_fill[i], mac_stall[i]))
    npu_ops = sum(len(l.ops) for l in program.layers if l.unit != "host")
    host_ops = sum(len(l.ops) for l in program.layers if l.unit == "host")
    return Report(
        model=program.meta.get("model", ""), config=program.meta.get("config", config.name),
        clock_mhz=config.clock_mhz, cycles=cycles, seconds=seconds, timing_only=timing_only,
        engines=engines,
        mac_utilization=total_macs / (cycles * macs_per_cycle) if cycles else 0.0,
        total_macs=total_macs, bytes_moved=moved, energy_uj=energy_uj, average_power_mw=power_mw,
        performance_info=perf, timing=timing, roofline=roofline,
        operators={"npu": npu_ops, "host": host_ops}, layers=rows)
