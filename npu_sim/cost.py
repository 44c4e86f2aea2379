"""Cost model: the cycles each command occupies its engine and the ports it holds.

A function of the config and the command only, so it is the same with or without values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import dataclasses

from npu_sim.isa.commands import Compute, DmaCopy, DmaFill, TensorView
from npu_sim.isa.dtypes import ITEMSIZE
from npu_sim.isa.errors import UnsupportedError
from npu_sim.isa.opcodes import mac_problem

from .banks import bank_cycles, banks_of
from .ops import VECTOR_WORK
from npu_sim.isa.systolic import array_time, passes

PIPELINE_LATENCY = 8          # vector unit fill/drain cycles per command


@dataclass
class Cost:
    """The cycles a command occupies its engine, the ports and banks it holds, its work."""

    setup: int                 # cycles before the ports are needed (setup, latency, fill)
    busy: int                  # cycles of the transfer (or compute) once set up
    ports: tuple[int, ...]     # external memory ids it moves bytes through
    macs: int = 0
    elements: int = 0          # vector-unit element operations
    latency: int = 0           # the part of setup that overlaps earlier commands in flight
    fill: int = 0              # MAC array: preload, fill skew and drain cycles within busy
    stall: int = 0             # MAC array: cycles of busy waiting for operand delivery
    vector: dict | None = None # vector unit: op class -> element operations
    banks: tuple[int, ...] = ()  # on-chip banks the command's views touch
    bank_cycles: int = 0       # of busy, the cycles its on-chip bytes occupy those banks
    reread: int = 0            # on-chip bytes read beyond its views' (operands re-streamed)
    traffic: tuple = ()        # (memory id, bytes read, bytes written) of its views
    port_cycles: int = 0       # of busy, the cycles its bytes occupy its ports (0: all of it)
    # A copy between two external memories: per port of `ports`, the cycles its own memory's
    # bytes occupy it (the DMA's burst buffer frees the faster one within each burst, once
    # its share is written); () when every port is held for port_cycles.
    port_shares: tuple[int, ...] = ()
    # Row handoffs (npu_sim/handoff.py): cycles before the command first reads its streamed
    # operand (the array's first preload), and the cycles over which it reads that operand's
    # rows once, in order, and writes its output's rows finished, in order (0: not in rows).
    lead_in: int = 0
    window: int = 0
    # MAC array with fold_overlap (else all 0): what the next command of the same operator may
    # overlap (isa/systolic.py ArrayTime.head, tail, drain; see chained()), and the least
    # busy an overlapped command keeps (its output stage's and its banks' cycles).
    head: int = 0
    tail: int = 0
    drain: int = 0
    least: int = 0


def chained(prev: Cost, cost: Cost, early: int) -> int:
    """Cycles of `cost` that run under `prev`, the array's command before it, of the same
    operator, which ends `early` cycles after `cost`'s command is ready: its first preload
    behind prev's last fold and its stream behind prev's drain, as the folds of one command
    follow each other (isa/systolic.py, fold_overlap)."""
    if not prev.drain or not cost.drain:
        return 0
    return max(0, min(prev.drain + min(prev.tail, cost.head), early, cost.busy - cost.least))


def shortened(cost: Cost, hidden: int) -> Cost:
    """`cost` with `hidden` of its cycles run under the command before it (chained())."""
    fill = min(cost.fill, hidden)          # what it hides is fill, then port stall
    return dataclasses.replace(cost, busy=cost.busy - hidden, fill=cost.fill - fill,
                               stall=max(cost.stall - (hidden - fill), 0))


def cmd_dtype(cmd: Compute) -> str:
    """The activation dtype a MAC command streams through the array."""
    return next(iter(cmd.inputs.values())).dtype


def cmd_weight_dtype(cmd: Compute) -> str:
    return (cmd.inputs["b"] if cmd.op == "matmul" else cmd.inputs["weights"]).dtype


def array_cycles(config, kind: str, m: int, n: int, k: int, dtype: str = "int8",
                 weight_dtype: str = "int8", out_dtype: str = "int8") -> int:
    """Least cycles the MAC array takes for m outputs x n channels x k reduction terms
    (npu_sim/systolic.py), its operand ports and output stage included, with partial sums
    never spilling: a lower bound of any split of the problem into commands, chained or not
    (ArrayTime.least)."""
    arr = dataclasses.replace(config.mac_array, accumulators=1 << 62)
    sizes = (ITEMSIZE[dtype], ITEMSIZE[weight_dtype], ITEMSIZE[out_dtype])
    t = array_time(arr, kind, m, n, k, passes(arr, dtype, weight_dtype), sizes, _bank_bpc(config))
    return max(t.least, math.ceil(m * n / arr.output_stage))


def _bank_bpc(config) -> float:
    return config.sram.bytes_per_cycle * config.sram.banks


def _views(cmd: Compute) -> list:
    return list(cmd.inputs.values()) + list(cmd.outputs.values())


def _bank_bytes(views, word: int) -> int:
    """Bytes the banks serve for `views`: they serve whole words, so an on-chip run shorter
    than one (a strided view's channel slice or gather, read in place) costs a whole word,
    as it does a DMA."""
    return sum(v.burst_bytes(word) if not v.mem else v.nbytes for v in views)


class CostModel:
    def __init__(self, config, memory_names: list[str]):
        self.cfg = config
        self.names = memory_names
        self.mem_bpc = [config.sram.bytes_per_cycle] + [
            config.memory_bytes_per_cycle(n) for n in memory_names]
        self.mem_latency = [1] + [config.memory_latency_cycles(n) for n in memory_names]
        self.cpu_ratio = config.clock_mhz / config.cpu_baseline.clock_mhz
        # A DMA's, MAC or vector command's cost is a function of its views (and a compute
        # command's opcode and attributes) alone, and of a view's address only through the banks
        # it touches, which repeat every `interleave x banks` bytes; tiles repeat all of them,
        # so each distinct command is costed once. Costs are never modified after they are made.
        self._known: dict[tuple, Cost] = {}
        self._period = config.sram.interleave * config.sram.banks
        # Views recur as the same objects (decoding makes one per distinct encoding), so each
        # is numbered once, by identity, with the number of its site (from 1); a key of such
        # numbers builds and hashes faster than one of views. The views are kept, so ids stay
        # theirs.
        self._sids: dict[int, int] = {}
        self._site_ids: dict[tuple, int] = {}
        self._kept: list[TensorView] = []
        # MAC tiles of different sites often pose the same array problem: its time, once
        self._array_times: dict[tuple, object] = {}

    def _site(self, v: TensorView):
        """What of a view its cost depends on: all but the address, of which only the offset
        within the bank period on chip (an external memory's rate ignores alignment)."""
        mem, addr, shape, strides, dtype = v
        return (mem, addr % self._period if mem == 0 else 0, shape, strides, dtype)

    def _sid(self, v: TensorView) -> int:
        """The number of `v`'s site, numbering the view if it is new; TypeError for a view
        built with lists."""
        n = self._sids.get(id(v))
        if n is None:
            n = self._sids[id(v)] = self._site_ids.setdefault(self._site(v),
                                                              len(self._site_ids) + 1)
            self._kept.append(v)
        return n

    def of(self, cmd) -> Cost:
        # the views' numbers looked up inline (`or` numbers a new one): a cost is looked up
        # for every command, and calls are most of a lookup's time
        known, sids, sid = self._known.get, self._sids.get, self._sid
        try:
            if isinstance(cmd, DmaCopy):
                src, dst = cmd.src, cmd.dst
                key = (sids(id(src)) or sid(src), sids(id(dst)) or sid(dst))
                cost_of = self._dma
            elif isinstance(cmd, DmaFill):
                dst = cmd.dst
                key = (0, sids(id(dst)) or sid(dst))
                cost_of = self._dma
            elif cmd.unit == "host":
                return self._traced(self._host, cmd)
            else:
                ins, outs = cmd.inputs, cmd.outputs
                key = [cmd.op, *ins, None, *outs, None]
                for v in ins.values():
                    key.append(sids(id(v)) or sid(v))
                for v in outs.values():
                    key.append(sids(id(v)) or sid(v))
                if cmd.unit == "mac":      # of its attributes, only the stride matters
                    key.append(tuple(cmd.attrs.get("stride", (1, 1))))
                    cost_of = self._mac
                else:
                    key.extend(cmd.attrs.items())
                    cost_of = self._vector
                key = tuple(key)
            cost = known(key)
        except TypeError:    # a view or attribute built with lists: costed each time
            return self._traced(self._dma if isinstance(cmd, (DmaCopy, DmaFill)) else
                                self._mac if cmd.unit == "mac" else self._vector, cmd)
        if cost is None:
            cost = self._known[key] = self._traced(cost_of, cmd)
        return cost

    @staticmethod
    def _traced(cost_of, cmd) -> Cost:
        cost = cost_of(cmd)
        cost.traffic = command_traffic(cmd)
        return cost

    def _dma(self, cmd) -> Cost:
        dst: TensorView = cmd.dst
        src = cmd.src if isinstance(cmd, DmaCopy) else None
        # Each side moves its bytes at its own rate; an external side pays whole bursts for
        # short runs (a channel-sliced NHWC box is many short runs).
        # A copy within one external memory reads and writes each byte through its port.
        nbytes = dst.nbytes                     # a copy's two sides hold the same elements
        cycles = nbytes / self.cfg.dma.bytes_per_cycle
        external: dict[int, int] = {}
        for v in (src, dst):
            if v is not None and v.mem:
                external[v.mem] = external.get(v.mem, 0) + v.burst_bytes()
        # A memory serves its bandwidth to the transfers in flight together: a DMA slower
        # than the memory holds its port only for the memory's share of its time. Between two
        # memories, each port is held for its own bytes: the channel buffers a burst read
        # from one before writing it to the other, so the slower one sets the pace.
        shares = {mem: moved / self.mem_bpc[mem] for mem, moved in external.items()}
        port = max(shares.values(), default=0)
        cycles = max(cycles, port)
        banks = banks_of((src, dst), self.cfg.sram)
        # the banks serve whole words: a run shorter than one (a transpose's gather) costs one
        on_chip = sum(v.burst_bytes(self.cfg.sram.bytes_per_cycle) for v in (src, dst)
                      if v is not None and not v.mem)
        occupied = bank_cycles(on_chip, banks, self.cfg.sram)
        latency = self.mem_latency[src.mem] if src is not None else 0
        # the slower memory's port first: a copy waiting for it holds no other
        ports = tuple(sorted(external, key=lambda m: (-shares[m], m)))
        return Cost(self.cfg.dma.setup_cycles + latency, max(1, math.ceil(cycles), occupied),
                    ports, latency=latency, banks=banks, bank_cycles=occupied,
                    port_cycles=math.ceil(port),
                    port_shares=tuple(math.ceil(shares[m]) for m in ports)
                    if len(ports) > 1 else ())

    def _mac(self, cmd: Compute) -> Cost:
        x = cmd.inputs
        arr = self.cfg.mac_array
        weights = x["b"] if cmd.op == "matmul" else x["weights"]
        out_name, out = next(iter(cmd.outputs.items()))
        kind, m, cols, k = mac_problem(cmd.op, out.shape, weights.shape,
                                       tuple(cmd.attrs.get("stride", (1, 1))))
        act = cmd_dtype(cmd)
        if f"{act}x{weights.dtype}" not in arr.precision:
            raise UnsupportedError(f"command {cmd.id} ({cmd.op}): the MAC array has no "
                                   f"{act} x {weights.dtype} (mac_array.precision)")
        sizes = (ITEMSIZE[act], weights.itemsize, out.itemsize)
        sram = self.cfg.sram
        views = _views(cmd)
        banks = banks_of(views, sram)
        # the ports read and write only the banks the operands live in
        problem = (kind, m, cols, k, act, weights.dtype, sizes, len(banks), out_name)
        t = self._array_times.get(problem)
        if t is None:
            t = self._array_times[problem] = array_time(
                arr, kind, m, cols, k, passes(arr, act, weights.dtype), sizes,
                len(banks) * sram.bytes_per_cycle, partial=out_name == "acc_out")
        busy = t.cycles
        staged = 1
        if out_name == "ofm":       # the output stage takes the finished sums at its own rate
            staged = max(staged, math.ceil(m * cols / arr.output_stage))
            busy = max(busy, staged)
        unique = sum(v.nbytes for v in views)
        # the array's traffic (re-reads included) is of the operands' layout: whole words
        words = _bank_bytes(views, sram.bytes_per_cycle)
        occupied = bank_cycles(max(t.traffic, unique) * words / unique if unique else 0,
                               banks, sram)
        busy = max(busy, occupied, 1)
        least = max(staged, occupied)          # what a chained command keeps of its busy
        return Cost(0, busy, (), macs=m * cols * k, fill=t.fill, stall=busy - t.ideal,
                    banks=banks, bank_cycles=occupied, reread=max(t.traffic - unique, 0),
                    lead_in=t.preload, window=t.stream, head=t.head, tail=t.tail,
                    drain=t.drain, least=least)

    def _vector(self, cmd: Compute) -> Cost:
        work = VECTOR_WORK[cmd.op](cmd)
        cpl = self.cfg.vector_unit.cycles_per_lane
        lane_cycles = sum(n * cpl[c] for c, n in work.items())
        cycles = math.ceil(lane_cycles / self.cfg.vector_unit.lanes)
        views = _views(cmd)
        banks = banks_of(views, self.cfg.sram)
        occupied = bank_cycles(_bank_bytes(views, self.cfg.sram.bytes_per_cycle), banks,
                               self.cfg.sram)
        busy = max(cycles, occupied, 1)
        return Cost(PIPELINE_LATENCY, busy, (), elements=sum(work.values()),
                    vector=work, banks=banks, bank_cycles=occupied, window=busy)

    def host_with_work(self, cmd: Compute, elements: int) -> Cost:
        """A host command's cost once its run is known: control flow adds the elements its
        sub-graphs computed, loop iterations included."""
        base = self._host(cmd)
        extra = elements / self.cfg.cpu_baseline.ops_per_cycle * self.cpu_ratio
        return Cost(base.setup, base.busy + math.ceil(extra), base.ports, base.macs,
                    base.elements + elements, traffic=command_traffic(cmd))

    def _host(self, cmd: Compute) -> Cost:
        cpu = self.cfg.cpu_baseline
        moved = sum(v.nbytes for v in cmd.inputs.values()) + sum(
            v.nbytes for v in cmd.outputs.values())
        work = sum(v.count for v in cmd.outputs.values())
        cpu_cycles = work / cpu.ops_per_cycle + moved / cpu.bytes_per_cycle
        ports = tuple(sorted({v.mem for v in list(cmd.inputs.values()) + list(cmd.outputs.values())
                              if v.mem}))
        return Cost(0, max(1, math.ceil(cpu_cycles * self.cpu_ratio)), ports, elements=work)


def command_traffic(cmd) -> tuple[tuple[int, int, int], ...]:
    """(memory id, bytes read, bytes written) of a command, for energy and bandwidth figures."""
    if isinstance(cmd, DmaCopy):
        return (cmd.src.mem, cmd.src.nbytes, 0), (cmd.dst.mem, 0, cmd.dst.nbytes)
    if isinstance(cmd, Compute):
        return tuple([(v.mem, v.nbytes, 0) for v in cmd.inputs.values()] + [
            (v.mem, 0, v.nbytes) for v in cmd.outputs.values()])
    return ((cmd.dst.mem, 0, cmd.dst.nbytes),)
