"""The machine's engines skip the simpy timeouts no other process could act within (the
module docstring of npu_sim/simulator.py): every command's start and end must be what yielding
each timeout gives. The reference below is the engine that yields every one."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import simpy

from npu_sim import api
from npu_sim.banks import BankSchedule
from npu_sim.cost import CostModel, chained, shortened
from npu_sim.handoff import handoff
from npu_sim.isa.commands import DmaCopy, DmaFill, dense
from npu_sim.isa.program import Layer, Program
from npu_sim.simulator import BURST_CYCLES, MAX_BURSTS, Machine, Port, chain_layers

MODEL = Path(__file__).parent / "data" / "mbv2_050_128" / "model.tosa"


def _reference(program, config) -> tuple[list[int], list[int]]:
    """(start, end) of every command, an event for every wait and every burst."""
    cost_model = CostModel(config, program.memories)
    costs = [cost_model.of(c) for c in program.commands]
    n = len(costs)
    start, end, finished = [0] * n, [0] * n, [False] * n
    done = [None] * n
    # row handoffs: a consumer waits until its producer's end is known, then for that end
    # less its lead
    planned, known, ends = [None] * n, [False] * n, [0] * n

    def announce(i, t):
        ends[i], known[i] = t, True
        if planned[i] is not None:
            planned[i].succeed()

    env = simpy.Environment()
    ports = [None] + [Port(env) for _ in program.memories]
    banks = BankSchedule(config.sram.banks)

    one_operator = chain_layers(program)

    def engine(cmds):
        issued, prev = 0, -1
        for cmd in cmds:
            i, c = cmd.id, costs[cmd.id]
            rows = {}
            for d in cmd.deps:
                lead = 0 if finished[d] or not config.row_handoff else handoff(
                    cmd, c, program.commands[d], costs[d])
                if lead:
                    rows[d] = lead
                    if not known[d]:
                        if planned[d] is None:
                            planned[d] = env.event()
                        yield planned[d]
                elif not finished[d]:
                    if done[d] is None:
                        done[d] = env.event()
                    yield done[d]
            now = start[i] = env.now
            ready = max((ends[d] - rows[d] if d in rows else end[d] for d in cmd.deps),
                        default=0)
            if cmd.deps:
                issued = max(issued, ready)
            # the array's next command of one operator, ready before the one ahead ends
            if prev >= 0 and end[prev] == now and cmd.layer in one_operator \
                    and cmd.layer == program.commands[prev].layer:
                c = costs[i] = shortened(c, chained(costs[prev], c, now - ready))
            prev = i
            issued += c.setup - c.latency
            wait = max(0, issued + c.latency - now)
            if not c.ports and not c.bank_cycles:
                if wait:
                    yield env.timeout(wait)
                announce(i, env.now + c.busy)
                yield env.timeout(c.busy)
            else:
                if wait:
                    yield env.timeout(wait)
                bursts = min(MAX_BURSTS, max(1, c.busy // BURST_CYCLES))
                for b in range(bursts):
                    for p in c.ports:
                        req = ports[p].request(env.peek)
                        if req is not None:
                            yield req
                    now = env.now
                    length = c.busy * (b + 1) // bursts - c.busy * b // bursts
                    until = now + length
                    occupy = c.bank_cycles * (b + 1) // bursts - c.bank_cycles * b // bursts
                    if occupy:
                        until = max(until, banks.book(c.banks, now, occupy, length))
                    if b == bursts - 1:
                        announce(i, until)
                    if c.port_shares:                 # each port for its own memory's share
                        for h, k in sorted((min(s * (b + 1) // bursts - s * b // bursts,
                                                length), k)
                                           for k, s in enumerate(c.port_shares)):
                            yield env.timeout(now + h - env.now)
                            ports[c.ports[k]].release()
                        yield env.timeout(until - env.now)
                        continue
                    port = c.port_cycles if 0 < c.port_cycles < c.busy else c.busy
                    hold = port * (b + 1) // bursts - port * b // bursts
                    if c.ports and hold < length:     # the memory's share of the burst
                        yield env.timeout(hold)
                        for p in c.ports:
                            ports[p].release()
                        yield env.timeout(until - env.now)
                        continue
                    yield env.timeout(until - now)
                    for p in c.ports:
                        ports[p].release()
            end[i] = env.now
            finished[i] = True
            if done[i] is not None:
                done[i].succeed()

    engines: dict[str, list] = {}
    for cmd in program.commands:
        engines.setdefault(cmd.engine, []).append(cmd)
    for cmds in engines.values():
        env.process(engine(cmds))
    env.run()
    return start, end


def _same_schedule(program, config):
    sim = Machine(program, config).run(compute_values=False)
    start, end = _reference(program, config)
    moved = np.nonzero((sim.start != start) | (sim.end != end))[0]
    assert not len(moved), (f"{len(moved)} commands moved, the first {moved[0]}: "
                            f"{start[moved[0]], end[moved[0]]} -> "
                            f"{sim.start[moved[0]], sim.end[moved[0]]}")


def test_waiters_of_one_command_and_a_shared_port():
    # Three DMA channels wait for one fill, then copy from DRAM through its one port at once.
    # The fill's later waiters resume at its end in the same simpy step as the first one, with
    # nothing else in simpy's queue (the fill's engine waits for the last copy): the first may
    # not run ahead of them.
    cfg = api.load_config("default").with_overrides({"dma.channels": 4})
    src = dense(1, 0, (64, 1024), "int8")
    cmds = [DmaFill(id=0, layer=0, channel=0, dst=dense(0, 0, (64, 64), "int8"), value=0)]
    for ch in (1, 2, 3):
        cmds.append(DmaCopy(id=ch, deps=(0,), layer=0, channel=ch, src=src,
                            dst=dense(0, ch << 16, (64, 1024), "int8")))
    cmds.append(DmaCopy(id=4, deps=(1,), layer=0, channel=1, src=dense(0, 1 << 16, (64, 64), "int8"),
                        dst=dense(1, 1 << 17, (64, 64), "int8")))
    cmds.append(DmaFill(id=5, deps=(3,), layer=0, channel=0, dst=dense(0, 0, (64, 64), "int8"),
                        value=1))
    program = Program(["dram"], [1 << 20, 1 << 20], cmds, [], [], [], [Layer("x", ["COPY"], "dma")])
    _same_schedule(program, cfg)


@pytest.mark.parametrize("dma_rate,ends", [(8, (8192, 8192 + 1024)), (32, (8192 - 1024, 8192))])
def test_a_memory_serves_its_bandwidth_to_the_transfers_in_flight(dma_rate, ends):
    # Two 64 KiB loads from DRAM (16 B/cycle) on two channels, each in four bursts. A DMA at
    # 8 B/cycle holds the port for half of each burst (the memory's share), so the two take
    # turns and both run at their own rate, the second a half burst behind; at 32 B/cycle
    # each needs the port for its whole transfer: they take it burst by burst, 128 KiB / 16
    # cycles in all.
    cfg = api.load_config("default").with_overrides({"dma.bytes_per_cycle": dma_rate})
    cmds = [DmaCopy(id=ch, layer=0, channel=ch, src=dense(1, ch << 16, (64, 1024), "int8"),
                    dst=dense(0, ch << 16, (64, 1024), "int8")) for ch in (0, 1)]
    program = Program(["dram"], [1 << 20, 1 << 20], cmds, [], [], [], [Layer("x", ["COPY"], "dma")])
    sim = Machine(program, cfg).run(compute_values=False)
    setup = cfg.dma.setup_cycles + cfg.memory_latency_cycles("dram")
    assert tuple(sim.end) == (ends[0] + setup, ends[1] + setup)
    _same_schedule(program, cfg)


def test_a_copy_between_two_memories_holds_each_port_for_its_own_bytes():
    # edge-256: 8 KiB from flash (1 B/cycle) into system SRAM (8 B/cycle) beside a 64 KiB load
    # from system SRAM on the other channel. The copy needs SRAM's port for an eighth of its
    # time, so the load is delayed by at most that, not by the copy's whole transfer.
    cfg = api.load_config("edge-256")

    def run(cmds):
        program = Program(["system_sram", "flash"], [1 << 20] * 3, cmds, [], [], [],
                          [Layer("x", ["COPY"], "dma")])
        _same_schedule(program, cfg)
        return Machine(program, cfg).run(compute_values=False).end.tolist()

    copy = DmaCopy(id=0, layer=0, channel=0, src=dense(2, 0, (8, 1024), "int8"),
                   dst=dense(1, 1 << 18, (8, 1024), "int8"))
    load = DmaCopy(id=1, layer=0, channel=1, src=dense(1, 0, (64, 1024), "int8"),
                   dst=dense(0, 0, (64, 1024), "int8"))
    alone_copy, = run([copy])
    alone_load, = run([dataclasses.replace(load, id=0)])
    copy_end, load_end = run([copy, load])
    assert alone_load < load_end <= alone_load + 8192 // 8
    assert alone_copy <= copy_end < alone_copy + 8192


@pytest.fixture(scope="module")
def programs():
    return {name: api.compile_model(MODEL, api.load_config(name)) for name in ("default", "edge-256")}


@pytest.mark.parametrize("preset,overrides", [
    ("default", {}),
    ("edge-256", {}),
    ("edge-256", {"dma.bytes_per_cycle": 2}),                 # DMAs long: many bursts
    ("edge-256", {"memories.system_sram.bandwidth_gbps": 1}),  # the feature maps' port contended
    ("default", {"sram.banks": 2}),                            # banks contended
    ("default", {"dma.bytes_per_cycle": 8}),                   # DMAs share DRAM's port
])
def test_a_network_schedules_as_with_every_timeout_yielded(programs, preset, overrides,
                                                          monkeypatch):
    # BankSchedule's rule holds for bursts booked in the order of their starts: the engines,
    # whose clocks run ahead of simpy's, book them so too
    starts = []
    book = BankSchedule.book

    def booked_in_order(self, banks, t, cycles, length):
        starts.append(t)
        return book(self, banks, t, cycles, length)
    config = api.load_config(preset).with_overrides(overrides)
    with monkeypatch.context() as patch:
        patch.setattr(BankSchedule, "book", booked_in_order)
        Machine(programs[preset], config).run(compute_values=False)
    assert starts and starts == sorted(starts)
    _same_schedule(programs[preset], config)


def test_simpys_own_timeouts_give_the_reused_alarms_schedule(monkeypatch):
    """The engines reschedule one event for their timeouts (simulator._alarm), and fall back
    to a simpy Timeout per yield where simpy keeps its queue otherwise: both schedule alike."""
    from npu_sim import simulator
    cfg = api.load_config("edge-256")
    program = api.compile_model(MODEL, cfg)

    def timing():
        result = api.simulate(program, cfg, timing_only=True)
        return result.report.to_json(), result.sim.start.tolist(), result.sim.end.tolist()
    alarm = timing()
    monkeypatch.setattr(simulator, "_alarm", lambda env: lambda when: env.timeout(when - env.now))
    assert timing() == alarm
