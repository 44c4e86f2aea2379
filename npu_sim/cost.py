"""Cost model: the cycles each command occupies its engine and the ports it holds.

A function of the config and the command only, so it is the same with or without values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from npu_sim.isa.commands import Compute, DmaCopy, DmaFill, TensorView
from npu_sim.isa.opcodes import mac_problem

from .ops import VECTOR_WORK

PIPELINE_LATENCY = 8          # vector unit fill/drain cycles per command
# MAC array fill/drain per command. Held constant rather than growing with rows + cols: the
# weight registers are double-buffered, so a larger array hides its fill behind the last tile.
MAC_PIPELINE_LATENCY = 16


@dataclass
class Cost:
    setup: int                 # cycles before the ports are needed (setup, latency, fill)
    busy: int                  # cycles holding the ports
    ports: tuple[int, ...]     # memory ids held during `busy` (0 = an on-chip bank)
    macs: int = 0
    elements: int = 0          # vector-unit element operations
    latency: int = 0           # the part of setup that overlaps earlier commands in flight


def cmd_dtype(cmd: Compute) -> str:
    """The activation dtype a MAC command streams through the array."""
    return next(iter(cmd.inputs.values())).dtype


def array_cycles(arr, kind: str, m: int, n: int, k: int, dtype: str = "int8") -> int:
    """Cycles the MAC array takes for m outputs x n channels x k reduction terms.

    Weight-stationary holds a k x n block of weights and streams the m outputs through it;
    output-stationary holds an m x n block of outputs and streams the k terms. Depthwise
    ("depthwise": k taps per channel) has no reduction across channels to share, so it is
    always output-stationary.
    """
    if kind == "gemm" and arr.dataflow == "weight_stationary":
        cycles = math.ceil(k / arr.rows) * math.ceil(n / arr.cols) * m
    else:
        cycles = math.ceil(m / arr.rows) * math.ceil(n / arr.cols) * k
    return cycles * 2 if dtype == "int16" else cycles    # 16-bit activations take two passes


class CostModel:
    def __init__(self, config, memory_names: list[str]):
        self.cfg = config
        self.names = memory_names
        self.mem_bpc = [config.sram.bytes_per_cycle] + [
            config.memory_bytes_per_cycle(n) for n in memory_names]
        self.mem_latency = [1] + [config.memory_latency_cycles(n) for n in memory_names]
        self.cpu_ratio = config.clock_mhz / config.cpu_baseline.clock_mhz

    def of(self, cmd) -> Cost:
        if isinstance(cmd, (DmaCopy, DmaFill)):
            return self._dma(cmd)
        if cmd.unit == "mac":
            return self._mac(cmd)
        if cmd.unit == "vector":
            return self._vector(cmd)
        return self._host(cmd)

    def _dma(self, cmd) -> Cost:
        dst: TensorView = cmd.dst
        src = cmd.src if isinstance(cmd, DmaCopy) else None
        # Each side moves its bytes at its own rate; an external side pays whole bursts for
        # short runs (a channel-sliced NHWC box is many short runs).
        cycles = dst.nbytes / self.cfg.dma.bytes_per_cycle
        for v in (src, dst):
            if v is not None:
                moved = v.burst_bytes() if v.mem else v.nbytes
                cycles = max(cycles, moved / self.mem_bpc[v.mem])
        latency = self.mem_latency[src.mem] if src is not None else 0
        ports = tuple(sorted({dst.mem} | ({src.mem} if src is not None else set())))
        return Cost(self.cfg.dma.setup_cycles + latency, max(1, math.ceil(cycles)), ports,
                    latency=latency)

    def _sram_cycles(self, cmd: Compute) -> int:
        """A compute engine streams its operands from all banks at once (they sit in
        different banks), so its bound is the aggregate bandwidth of the buffer."""
        moved = sum(v.nbytes for v in cmd.inputs.values()) + sum(
            v.nbytes for v in cmd.outputs.values())
        return math.ceil(moved / (self.cfg.sram.bytes_per_cycle * self.cfg.sram.banks))

    def _mac(self, cmd: Compute) -> Cost:
        x = cmd.inputs
        weights = x["b"] if cmd.op == "matmul" else x["weights"]
        kind, m, cols, k = mac_problem(cmd.op, next(iter(cmd.outputs.values())).shape,
                                       weights.shape, tuple(cmd.attrs.get("stride", (1, 1))))
        busy = max(array_cycles(self.cfg.mac_array, kind, m, cols, k, cmd_dtype(cmd)), self._sram_cycles(cmd), 1)
        return Cost(MAC_PIPELINE_LATENCY, busy, (0,), macs=m * cols * k)

    def _vector(self, cmd: Compute) -> Cost:
        work = VECTOR_WORK[cmd.op](cmd)
        cycles = math.ceil(work / self.cfg.vector_unit.lanes)
        return Cost(PIPELINE_LATENCY, max(cycles, self._sram_cycles(cmd), 1), (0,), elements=work)

    def host_with_work(self, cmd: Compute, elements: int) -> Cost:
        """A host command's cost once its run is known: control flow adds the elements its
        sub-graphs computed, loop iterations included."""
        base = self._host(cmd)
        extra = elements / self.cfg.cpu_baseline.ops_per_cycle * self.cpu_ratio
        return Cost(base.setup, base.busy + math.ceil(extra), base.ports, base.macs,
                    base.elements + elements)

    def _host(self, cmd: Compute) -> Cost:
        cpu = self.cfg.cpu_baseline
        moved = sum(v.nbytes for v in cmd.inputs.values()) + sum(
            v.nbytes for v in cmd.outputs.values())
        work = sum(v.count for v in cmd.outputs.values())
        cpu_cycles = work / cpu.ops_per_cycle + moved / cpu.bytes_per_cycle
        ports = tuple(sorted({v.mem for v in list(cmd.inputs.values()) + list(cmd.outputs.values())
                              if v.mem}))
        return Cost(0, max(1, math.ceil(cpu_cycles * self.cpu_ratio)), ports, elements=work)
