"""The machine in time: each engine is a simpy process that runs its commands in order.

An engine waits for a command's dependencies and its setup (issued back to back, with memory
latency overlapping the commands in flight), holds the external memory ports it needs for its
transfer time and the on-chip banks its views touch (npu_sim/banks.py) for the cycles its
on-chip bytes occupy them, then applies the command to the modelled memories. External ports
are one-port FIFO resources (Port: simpy.Resource's order of service, with fewer events) and
banks one-port reservations serving the most urgent burst first (BankSchedule), so engines
sharing them slow each other; a DMA slower than its memory holds the port only for the
memory's share of each burst (Cost.port_cycles), so transfers on several channels together
reach the memory's bandwidth, and a copy between two memories holds each port for its own
memory's share (Cost.port_shares). A few simpy events per command (its bursts): never per
cycle.

The MAC array chains the commands of one operator (a layer's tiles) as it chains a command's
folds (isa/systolic.py, fold_overlap): a command ready before the one ahead of it ends has its
first preload and stream run under that one's last fold and drain (cost.chained()), so it
takes that much less time once the array is free.

An engine yields a timeout only when some other process could act before it ends: when
anything else is due by then (`env.peek()`, or the later waiters of the event that resumed it,
which simpy resumes in the same step), or when a port it releases has a queue. Otherwise
nothing can happen in between, so it carries on with its own clock ahead of simpy's, doing
what it would have done at the timeout's end; the next timeout it yields ends at the same
time, scheduled with the same place among the others. Whatever has to happen at simpy's
time (waking a command's waiters, granting a queued port) first yields the pending timeout.
Every start and end is what yielding each timeout gives (bench/sim_digest.py checks it), with
about a third fewer events.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections import deque
from dataclasses import field
from heapq import heappush

import numpy as np

from npu_sim.isa.commands import Compute
from npu_sim.isa.dtypes import STORAGE, accepts, as_storage
from npu_sim.isa.errors import InputError
from npu_sim.isa.program import Program
from npu_sim.isa.records import record

from .banks import BankSchedule
from .cost import Cost, CostModel, chained, shortened
from .handoff import UNITS, handoff
from .hazards import HazardChecker, enabled as hazards_enabled
from .memory import Memories


def _simpy_core():
    """simpy.core, leaving simpy/__init__.py unrun until something asks the package for more.

    simpy's __init__ imports importlib.metadata (with email, csv, zipfile, ...) to read its own
    version: some 0.08 G instructions, a ninth of a small network's whole cached run. The
    engines need only simpy.core. When simpy is not imported yet, its package module is made
    from its spec with a module __getattr__ that runs simpy/__init__.py in it at the first
    lookup of anything but its submodules, so `import simpy` elsewhere still gets all of it."""
    if "simpy" not in sys.modules:
        spec = importlib.util.find_spec("simpy")
        if spec is None:    # a broken install: say what is missing, as `import simpy` would
            raise ModuleNotFoundError("No module named 'simpy'", name="simpy")
        package = importlib.util.module_from_spec(spec)

        def load_all(name: str):
            del package.__getattr__
            spec.loader.exec_module(package)
            return getattr(package, name)

        package.__getattr__ = load_all
        sys.modules["simpy"] = package
    return importlib.import_module("simpy.core")


Environment = _simpy_core().Environment
NORMAL = sys.modules["simpy.events"].NORMAL     # a timeout's priority

BURST_CYCLES = 256         # port arbitration granule for long transfers
MAX_BURSTS = 4             # bounds simpy events per command


@record
class SimResult:
    """A run's schedule: every command's start, end and cost, the outputs."""

    cycles: int
    start: np.ndarray                    # per command
    end: np.ndarray
    costs: list[Cost]
    engines: dict[str, list[int]]        # engine -> command ids in order
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    state: dict[str, np.ndarray] = field(default_factory=dict)   # variables after the run


def _alarm(env):
    """An engine's timeouts, one pending at a time: timeout(when) is env.timeout(when -
    env.now), but one event rescheduled with the heap entry simpy's Timeout pushes (a Timeout
    per yield was 4% of a cached MobileNetV2 run's instructions). Where simpy's Environment
    keeps its queue otherwise (a release other than 4.1's), its own Timeout."""
    queue, eid = getattr(env, "_queue", None), getattr(env, "_eid", None)
    if not isinstance(queue, list) or eid is None or not hasattr(env, "_now"):
        return lambda when: env.timeout(when - env.now)
    alarm = env.event()
    alarm._ok, alarm._value = True, None

    def timeout(when):
        if when < env._now:             # as simpy refuses a negative delay
            raise ValueError(f"a timeout at {when}, before now ({env._now})")
        alarm.callbacks = []
        heappush(queue, (when, NORMAL, next(eid), alarm))
        return alarm
    return timeout


def _at_command(exc: Exception, cmd) -> Exception:
    """`exc`, naming the command it came from (`exc.command`), for the caller to report: a
    program read from a file may hold what its checks let through and a kernel refuses."""
    if not hasattr(exc, "command"):
        try:
            exc.command = cmd
        except AttributeError:          # an exception type without a __dict__
            pass
    return exc


def _fails(fn, cmd) -> bool:
    try:
        fn(cmd)
    except Exception:
        return True
    return False


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
        try:
            costs = [self.cost_model.of(c) for c in self.program.commands]
        except Exception as exc:
            raise _at_command(exc, next(c for c in self.program.commands
                                        if _fails(self.cost_model.of, c))) from None
        start = [0] * n
        end = [0] * n
        env = Environment()
        hazards = HazardChecker(self.program) if self.check_hazards else None
        commands = self.program.commands
        # A command's completion event exists only once something has to wait for it; its
        # planned event once a command reading its rows waits to know when it ends.
        done: list = [None] * n
        finished = [False] * n
        planned: list = [None] * n
        known = [False] * n
        waiting = [0] * n                        # processes waiting for each command's end
        ports = [None] + [Port(env) for _ in self.program.memories]
        # The banks' time, booked as each burst starts, the most urgent work served first
        # (BankSchedule), without events.
        book = BankSchedule(self.config.sram.banks).book
        peek, event = env.peek, env.event
        values = mem is not None
        if values:
            from .execute import execute          # only a run computing values executes
        plans: dict[int, tuple] = {}              # id(cost) -> _plan(cost); costs are shared
        one_operator = chain_layers(self.program)
        shorts: dict[tuple, tuple] = {}           # (id(cost), hidden) -> shortened, its plan

        def engine(cmds, host: bool, rows_over: bool):
            issued = 0             # when the engine's front end finished the previous command
            # The engine's own clock. simpy's may lag it: a timeout whose end comes before
            # anything else is due is not yielded (see the module's docstring).
            t = 0
            crowded = False
            timeout = _alarm(env)
            prev = -1                      # the engine's previous command
            for cmd in cmds:
                i, deps = cmd.id, cmd.deps
                ready = 0                   # when its last dependency ended
                rows = None          # dependency it reads row by row -> cycles it may lead by
                for d in deps:
                    if not finished[d]:
                        # one of the other compute engine: its rows may be read as it finishes them
                        prod = commands[d]
                        lead_by = rows_over and type(prod) is Compute and prod.unit != cmd.unit \
                            and handoff(cmd, costs[i], prod, costs[d])
                        if lead_by:
                            if rows is None:
                                rows = {}
                            rows[d] = lead_by
                            if not known[d]:           # until its end is known
                                if planned[d] is None:
                                    planned[d] = event()
                                yield planned[d]
                                t = env.now
                                crowded = True
                            if end[d] - lead_by > ready:
                                ready = end[d] - lead_by
                            continue
                        if done[d] is None:
                            done[d] = event()
                        waiting[d] += 1
                        yield done[d]
                        waiting[d] -= 1
                        t = env.now
                        # the event's later waiters resume at this instant, unseen by peek()
                        crowded = waiting[d] > 0
                    if end[d] > ready:
                        ready = end[d]
                start[i] = t
                if hazards is not None:
                    hazards.start(cmd, t, rows or ())
                host_done = False
                if host:
                    # The host runs the operator first: its time depends on the work it did.
                    try:
                        costs[i] = self.cost_model.host_with_work(cmd, execute(cmd, mem))
                    except Exception as exc:
                        raise _at_command(exc, cmd) from None
                    host_done = True
                c = costs[i]
                hidden = 0
                if c.drain and prev >= 0 and end[prev] == t \
                        and cmd.layer == commands[prev].layer and cmd.layer in one_operator:
                    hidden = chained(costs[prev], c, t - ready)
                prev = i
                if hidden:
                    key = (id(c), hidden)           # tiles of one shape chain alike
                    known_short = shorts.get(key)
                    if known_short is None:
                        short = shortened(c, hidden)
                        known_short = shorts[key] = (short, _plan(short, ports))
                    c, plan = known_short
                    costs[i] = c
                else:
                    plan = plans.get(id(c))
                    if plan is None:
                        plan = plans[id(c)] = _plan(c, ports)
                lead, latency, busy, held, banks, bursts = plan
                # The front end sets commands up one after another as soon as their inputs are
                # ready, while earlier ones still work; memory latency then overlaps the
                # transfers in flight (requests are pipelined), so a queue of short DMAs pays
                # each latency once, not in turn.
                if ready > issued:
                    issued = ready
                issued += lead
                wait = issued + latency - t
                if wait < 0:
                    wait = 0
                if bursts is None:              # neither ports nor banks: one timeout
                    t += wait
                    if planned[i] is not None:     # its end is known: tell who waits, now
                        if t > env.now:
                            yield timeout(t)
                        planned[i].succeed()
                        crowded = True
                    t += busy
                    end[i] = t
                    known[i] = True
                    if crowded or peek() <= t:
                        yield timeout(t)
                        crowded = False
                else:
                    if wait:
                        t += wait
                        if crowded or peek() <= t:
                            yield timeout(t)
                            crowded = False
                    # Long commands hold their ports and banks burst by burst, so concurrent
                    # ones share them instead of queueing behind each other whole; each burst
                    # books its banks for its share of the bank cycles once it has its ports.
                    last = len(bursts) - 1
                    for b, (length, occupy, hold) in enumerate(bursts):
                        for port in held:
                            if port.busy or port.queue or peek() <= t:
                                if not port.busy and t > env.now:
                                    yield timeout(t)     # a grant is an event: now
                                req = port.request(peek)
                                if req is not None:
                                    yield req
                                    t = env.now
                                    crowded = False
                            else:
                                port.busy = True    # free, and simpy would resume us next
                        until = t + length
                        if occupy:
                            booked = book(banks, t, occupy, length)
                            if booked > until:
                                until = booked
                        if b == last:                  # its end is known from here
                            if planned[i] is not None:
                                if t > env.now:
                                    yield timeout(t)
                                planned[i].succeed()
                                crowded = True
                            end[i] = until
                            known[i] = True
                        if held and type(hold) is tuple:
                            # between two memories: each port freed once its own memory has
                            # served the burst's bytes, the faster one first
                            began = t
                            for h, k in hold:
                                t = began + h
                                if crowded or peek() <= t:
                                    yield timeout(t)
                                    crowded = False
                                elif held[k].queue:
                                    yield timeout(t)
                                held[k].release()
                            held_now = ()
                        elif held and hold < length:
                            # the memory has served this burst's bytes: others may use it
                            # while the DMA finishes at its own rate
                            t += hold
                            if crowded or peek() <= t:
                                yield timeout(t)
                                crowded = False
                            else:
                                for port in held:
                                    if port.queue:
                                        yield timeout(t)
                                        break
                            for port in held:
                                port.release()
                            held_now = ()
                        else:
                            held_now = held
                        t = until
                        if crowded or peek() <= t:
                            yield timeout(t)
                            crowded = False
                        else:
                            for port in held_now:
                                if port.queue:      # its grant is an event: at the end
                                    yield timeout(t)
                                    break
                        for port in held_now:
                            port.release()
                if values and not host_done:
                    try:
                        execute(cmd, mem)
                    except Exception as exc:
                        raise _at_command(exc, cmd) from None
                end[i] = t
                if hazards is not None:
                    hazards.end(cmd, t)
                finished[i] = True
                if done[i] is not None:
                    if t > env.now:
                        yield timeout(t)   # waking the waiters is an event: now
                    done[i].succeed()
            if t > env.now:
                yield timeout(t)

        for name, cmds in self.engines.items():
            env.process(engine(cmds, values and name == "host",
                               self.config.row_handoff and name in UNITS))
        env.run()
        start, end = np.array(start, dtype=np.int64), np.array(end, dtype=np.int64)
        result = SimResult(int(end.max()) if n else 0, start, end, costs,
                           {k: [c.id for c in v] for k, v in self.engines.items()})
        if mem is not None:
            result.outputs = {b.name: mem.array(b.view).copy() for b in self.program.outputs}
            self.state = {b.name: mem.array(b.view).copy() for b in self.program.variables}
            result.state = dict(self.state)
        return result


def chain_layers(program: Program) -> frozenset[int]:
    """The layers of one MAC operator (one array problem), whose commands the array chains:
    the attainable bound charges each operator one fill and drain (npu_sim/bounds.py), so two
    operators' commands, even in one layer, each pay their own."""
    return frozenset(i for i, layer in enumerate(program.layers)
                     if len(layer.array_problems) == 1)


def _plan(c: Cost, ports: list) -> tuple:
    """(setup beyond the latency, latency, busy cycles, the Ports it holds, banks, bursts) of a
    cost, bursts as (cycles, bank cycles, port cycles) each, or None when it holds neither
    ports nor banks; a copy between two memories has its port cycles as ((cycles, index in
    the Ports), ...), shortest first."""
    lead = c.setup - c.latency
    if not c.ports and not c.bank_cycles:
        return lead, c.latency, c.busy, (), (), None
    busy, occupied = c.busy, c.bank_cycles
    port = c.port_cycles if 0 < c.port_cycles < busy else busy
    n = min(MAX_BURSTS, max(1, busy // BURST_CYCLES))

    def share(total, b):
        return total * (b + 1) // n - total * b // n
    if c.port_shares:       # each port freed after its own share, within its burst
        holds = [tuple(sorted((min(share(s, b), share(busy, b)), k)
                              for k, s in enumerate(c.port_shares))) for b in range(n)]
    else:
        holds = [share(port, b) for b in range(n)]
    bursts = tuple((share(busy, b), share(occupied, b), holds[b]) for b in range(n))
    return lead, c.latency, busy, [ports[p] for p in c.ports], c.banks, bursts


class Port:
    """One external memory port, served first come, first served: simpy.Resource(capacity=1)'s
    order of service, with events only where a process has to wait for it."""

    __slots__ = ("env", "busy", "queue")

    def __init__(self, env: Environment):
        self.env, self.busy, self.queue = env, False, deque()

    def request(self, peek):
        """The event that grants the port, or None when it is granted at once: free, nobody
        queued, and nothing else due now (simpy would resume the caller next anyway)."""
        env = self.env
        if not self.busy and not self.queue and peek() > env.now:
            self.busy = True
            return None
        ev = env.event()
        self.queue.append(ev)
        self._grant()
        return ev

    def _grant(self, _event=None):
        if not self.busy and self.queue:
            self.busy = True
            self.queue.popleft().succeed()

    def release(self):
        self.busy = False
        if self.queue:     # as simpy, the next in line is granted when the release is processed
            ev = self.env.event()
            ev.callbacks.append(self._grant)
            ev.succeed()
