"""What an ExecutionPreference makes of a model: candidate schedules, each compiled and run on
the simulator (timing only), and the one the preference asks for.

- LOW_POWER: the least energy per execution among the nominal point and the config's
  operating points (a lower clock at a lower supply: fewer pJ per event, more leakage time).
- FAST_SINGLE_ANSWER: the nominal point (the highest clock; no time in the model grows with
  the clock, so no operating point answers sooner).
- SUSTAINED_SPEED: back-to-back executions compiled as one stream of two (the graph twice,
  independent), so the second execution's weight loads and input transfers overlap the first
  one's compute; queued executions of the model run in such pairs. The figure is the time per
  execution of the pair."""
from __future__ import annotations

from dataclasses import dataclass, replace

from npu_sim.compiler.ir import Graph

from ..config import HardwareConfig
from ..simulator import Machine
from ..report import build_report
from .hal import ExecutionPreference


def at_operating_point(cfg: HardwareConfig, name: str) -> HardwareConfig:
    p = cfg.operating_points[name]
    v2, e = p.voltage_scale ** 2, cfg.energy
    ov = {"clock_mhz": p.clock_mhz, "energy.leakage_mw": e.leakage_mw * p.voltage_scale,
          "energy.sram_read_pj_per_byte": e.sram_read_pj_per_byte * v2,
          "energy.sram_write_pj_per_byte": e.sram_write_pj_per_byte * v2,
          "energy.dma_pj_per_byte": e.dma_pj_per_byte * v2}
    ov.update({f"energy.mac_pj.{k}": v * v2 for k, v in e.mac_pj.items()})
    ov.update({f"energy.vector_op_pj.{k}": v * v2 for k, v in e.vector_op_pj.items()})
    return cfg.with_overrides(ov)


def repeat_graph(graph: Graph, n: int) -> Graph:
    """n independent copies of the graph in one: tensors of copy j end in `#j` (constants are
    shared, as one prepared model's weights are)."""
    tensors, ops, ins, outs = {}, [], [], []
    consts = {name for name, t in graph.tensors.items() if t.is_const}
    rename = lambda name, j: name if name in consts else f"{name}#{j}"     # noqa: E731
    for name in consts:
        tensors[name] = graph.tensors[name]
    for j in range(n):
        for name, t in graph.tensors.items():
            if name not in consts:
                tensors[rename(name, j)] = replace(t, name=rename(name, j))
        for op in graph.operators:
            if j and all(o in consts for o in op.outputs):
                continue                                 # a constant's CONST once
            ops.append(replace(op, inputs=[rename(i, j) for i in op.inputs],
                               outputs=[rename(o, j) for o in op.outputs], attrs=dict(op.attrs)))
        ins += [rename(i, j) for i in graph.inputs]
        outs += [rename(o, j) for o in graph.outputs]
    return Graph(tensors, ops, ins, outs, graph.version, {}, graph.source)


@dataclass
class Schedule:
    """A compiled candidate and its simulated figures per execution."""
    point: str                        # "nominal" or an operating point's name
    config: HardwareConfig
    program: object
    executions: int                   # executions per run of the program (2: a sustained pair)
    cycles: int
    seconds: float
    energy_uj: float

    @property
    def seconds_per_execution(self) -> float:
        return self.seconds / self.executions

    @property
    def energy_per_execution(self) -> float:
        return self.energy_uj / self.executions


def measure(graph: Graph, cfg: HardwareConfig, point: str, executions: int = 1) -> Schedule:
    from npu_sim.compiler.driver import compile_graph
    g = graph.copy() if executions == 1 else repeat_graph(graph, executions)
    program = compile_graph(g, cfg, model_name=graph.source or "model")
    program.meta["config_dict"] = cfg.to_dict()
    sim = Machine(program, cfg, check_hazards=False).run(None, compute_values=False)
    report = build_report(program, cfg, sim, True)
    return Schedule(point, cfg, program, executions, report.cycles, report.seconds,
                    report.energy_uj["total"])


def choose(graph: Graph, cfg: HardwareConfig, preference: ExecutionPreference):
    """(the schedule single executions run, the pair schedule for SUSTAINED_SPEED or None)."""
    nominal = measure(graph, cfg, "nominal")
    if preference == ExecutionPreference.LOW_POWER:
        cands = [nominal] + [measure(graph, at_operating_point(cfg, p), p)
                             for p in cfg.operating_points]
        return min(cands, key=lambda s: s.energy_per_execution), None
    if preference == ExecutionPreference.SUSTAINED_SPEED:
        return nominal, measure(graph, cfg, "nominal", executions=2)
    return nominal, None
