"""The machine in time: each engine is a simpy process that runs its commands in order.

An engine waits for a command's dependencies and its setup (issued back to back, with memory
latency overlapping the commands in flight), holds the external memory ports it needs for its
transfer time and the on-chip banks its views touch (npu_sim/banks.py) for the cycles its
on-chip bytes occupy them, then applies the command to the modelled memories. External ports
are one-port simpy resources and banks one-port FCFS reservations, so engines sharing them slow
each other. A few simpy events per command (its bursts): never per cycle.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import simpy

from npu_sim.isa.commands import Compute, DmaCopy
from npu_sim.isa.dtypes import STORAGE, accepts, as_storage
from npu_sim.isa.errors import InputError
from npu_sim.isa.program import Program

from .cost import Cost, CostModel
from .execute import execute
from .hazards import HazardChecker, enabled as hazards_enabled
from .memory import Memories


BURST_CYCLES = 256         # port arbitration granule for long transfers
MAX_BURSTS = 4             # bounds simpy events per command


@dataclass
class SimResult:
    cycles: int
    start: np.ndarray                    # per command
    end: np.ndarray
    costs: list[Cost]
    engines: dict[str, list[int]]        # engine -> command ids in order
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    state: dict[str, np.ndarray] = field(default_factory=dict)   # variables after the run


class Machine:
    def __init__(self, program: Program, config, check_hazards: bool | None = None):
        self.program, self.config = program, config
        # None leaves it to NPU_SIM_CHECK_HAZARDS, so a test session can turn it on everywhere.
        self.check_hazards = hazards_enabled(check_hazards)
        self.cost_model = CostModel(config, program.memories)
        self.engines: dict[str, list] = {}
        for cmd in program.commands:
            self.engines.setdefault(cmd.engine, []).append(cmd)
        # Variables (EXT-VARIABLE) persist from one run of this machine to the next; the first
        # run starts from the initial values in the program image.
        self.state: dict[str, np.ndarray] = {}

    def _memories(self, inputs: dict[str, np.ndarray]) -> Memories:
        mem = Memories(self.program.memories, self.program.memory_sizes)
        for seg in self.program.segments:
            mem.load(seg.mem, seg.addr, seg.data)
        for binding in self.program.inputs:
            if binding.name not in inputs:
                raise InputError(f"no value for graph input '{binding.name}'")
            value = np.asarray(inputs[binding.name])
            view = binding.view
            if tuple(value.shape) != tuple(view.shape):
                raise InputError(f"input '{binding.name}': shape {list(value.shape)}, the graph "
                                 f"expects {list(view.shape)}")
            if not accepts(view.dtype, value.dtype):
                raise InputError(f"input '{binding.name}': dtype {value.dtype}, the graph expects "
                                 f"{np.dtype(STORAGE[view.dtype])} (TOSA {view.dtype})")
            mem.array(view)[...] = as_storage(value, view.dtype)
        for binding in self.program.variables:
            if binding.name in self.state:
                value = np.asarray(self.state[binding.name])
                want = np.dtype(STORAGE[binding.view.dtype])
                if tuple(value.shape) != tuple(binding.view.shape) or not accepts(binding.view.dtype,
                                                                                  value.dtype):
                    raise InputError(f"state of variable '{binding.name}': {value.dtype}"
                                     f"{list(value.shape)}, the program holds {want}"
                                     f"{list(binding.view.shape)}")
                mem.array(binding.view)[...] = as_storage(value, binding.view.dtype)
        return mem

    def run(self, inputs: dict[str, np.ndarray] | None = None, compute_values: bool = True,
            ) -> SimResult:
        mem = self._memories(inputs or {}) if compute_values else None
        n = len(self.program.commands)
        costs = [self.cost_model.of(c) for c in self.program.commands]
        start = [0] * n
        end = [0] * n
        env = simpy.Environment()
        hazards = HazardChecker(self.program) if self.check_hazards else None
        # A command's completion event exists only once something has to wait for it.
        done: list[simpy.Event | None] = [None] * n
        finished = [False] * n
        ports = [None] + [simpy.Resource(env, capacity=1) for _ in self.program.memories]
        # A bank is one port: FCFS reservations of its time, booked when a burst starts (the
        # same order a one-port simpy resource would serve, without its events).
        bank_free = [0] * self.config.sram.banks

        def engine(cmds):
            issued = 0             # when the engine's front end finished the previous command
            for cmd in cmds:
                i, deps = cmd.id, cmd.deps
                for d in deps:
                    if not finished[d]:
                        if done[d] is None:
                            done[d] = env.event()
                        yield done[d]
                now = env.now
                start[i] = now
                if hazards is not None:
                    hazards.start(cmd, now)
                host_done = False
                if mem is not None and getattr(cmd, "unit", "") == "host":
                    # The host runs the operator first: its time depends on the work it did.
                    costs[i] = self.cost_model.host_with_work(cmd, execute(cmd, mem))
                    host_done = True
                c = costs[i]
                # The front end sets commands up one after another as soon as their inputs are
                # ready, while earlier ones still work; memory latency then overlaps the
                # transfers in flight (requests are pipelined), so a queue of short DMAs pays
                # each latency once, not in turn.
                ready = max([end[d] for d in deps]) if deps else 0
                issued = max(ready, issued) + c.setup - c.latency
                wait = max(issued + c.latency - now, 0)
                if not c.ports and not c.bank_cycles:
                    yield env.timeout(wait + c.busy)
                else:
                    if wait:
                        yield env.timeout(wait)
                    # Long commands hold their ports and banks burst by burst, so concurrent
                    # ones share them instead of queueing behind each other whole; each burst
                    # books its banks for its share of the bank cycles once it has its ports.
                    bursts = min(MAX_BURSTS, max(1, c.busy // BURST_CYCLES))
                    for b in range(bursts):
                        span = c.busy * (b + 1) // bursts - c.busy * b // bursts
                        occupy = c.bank_cycles * (b + 1) // bursts - c.bank_cycles * b // bursts
                        held = []
                        for p in c.ports:
                            req = ports[p].request()
                            yield req
                            held.append((p, req))
                        until = env.now + span
                        if occupy:
                            booked = max(env.now, max(bank_free[k] for k in c.banks)) + occupy
                            for k in c.banks:
                                bank_free[k] = booked
                            until = max(until, booked)
                        yield env.timeout(until - env.now)
                        for p, req in held:
                            ports[p].release(req)
                if mem is not None and not host_done:
                    execute(cmd, mem)
                end[i] = env.now
                if hazards is not None:
                    hazards.end(cmd, end[i])
                finished[i] = True
                if done[i] is not None:
                    done[i].succeed()

        for cmds in self.engines.values():
            env.process(engine(cmds))
        env.run()
        start, end = np.array(start, dtype=np.int64), np.array(end, dtype=np.int64)
        result = SimResult(int(end.max()) if n else 0, start, end, costs,
                           {k: [c.id for c in v] for k, v in self.engines.items()})
        if mem is not None:
            result.outputs = {b.name: mem.array(b.view).copy() for b in self.program.outputs}
            self.state = {b.name: mem.array(b.view).copy() for b in self.program.variables}
            result.state = dict(self.state)
        return result


def command_traffic(cmd) -> list[tuple[int, int, int]]:
    """(memory id, bytes read, bytes written) of a command, for energy and bandwidth figures."""
    if isinstance(cmd, DmaCopy):
        return [(cmd.src.mem, cmd.src.nbytes, 0), (cmd.dst.mem, 0, cmd.dst.nbytes)]
    if isinstance(cmd, Compute):
        return [(v.mem, v.nbytes, 0) for v in cmd.inputs.values()] + [
            (v.mem, 0, v.nbytes) for v in cmd.outputs.values()]
    return [(cmd.dst.mem, 0, cmd.dst.nbytes)]
