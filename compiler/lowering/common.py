"""What every operator's lowering shares: the registries, the planning context, helpers.

The registries are keyed by TOSA operator (isa/operators.py); each family module registers the
operators of its family:
  TILE_SPACES  MAC-array and vector-unit operators: step -> (TileSpace, opcode, attributes)
  DMA_MOVES    data movement: emits the DMA descriptors of a whole step (an alias, RESHAPE
               or IDENTITY, is one only when it accesses a variable)
  MICRO_ATTRS  elementwise operators: the attributes of the operator as one micro-op of a
               vector-unit chain (compiler/chains.py fuses them)
  FOLDS        operators evaluated at compile time when all their inputs are constants
  REWRITES     operators the hardware has no unit for: (graph, op) -> the operators that
               replace it (compiler/driver.py applies them after validation)
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from npu_sim.isa.operators import OPERATORS, names
from npu_sim.isa.registry import Registry
from npu_sim.isa.systolic import array_time, passes

from ..ir import Graph, itemsize
from ..tiling import Operand, window

TILE_SPACES = Registry("tile space", names(engine="mac") | names(engine="vector"))
DMA_MOVES = Registry("DMA lowering", names(engine="dma") | names(engine="alias"))
MICRO_ATTRS = Registry("vector micro-op", names(opcode="elementwise"))
FOLDS = Registry("constant folding", OPERATORS)
REWRITES = Registry("graph rewrite", names(engine="rewrite"))

STAGE_COLUMNS = 3            # bias, multiplier, shift per output channel (int32 each)


def const_int(graph: Graph, name: str, default: int = 0) -> int:
    if not name:
        return default
    data = graph.const(name)
    return default if data is None or data.size == 0 else int(np.asarray(data).reshape(-1)[0])


def const_ints(graph: Graph, name: str) -> list[int]:
    return [int(v) for v in np.asarray(graph.const(name)).reshape(-1)]


def operand(op, name: str) -> str:
    """Tensor bound to operand `name` of `op` ('' when absent)."""
    names_ = OPERATORS[op.op].operand_names
    i = names_.index(name) if name in names_ else len(op.inputs)
    return op.inputs[i] if i < len(op.inputs) else ""


class Context:
    """What the families need from placement (residency and memory cost of each tensor) and
    from the configured hardware (the MAC array, its ports and accumulators, the lanes)."""

    def __init__(self, graph, on_chip, cost_per_byte, hardware, memory_of=lambda name: 0):
        self.graph, self._on_chip, self._cost = graph, on_chip, cost_per_byte
        # With more than one DMA queue, constants take their own (compiler/lower.py), so a
        # step's transfers from the weights' memory and the feature maps' run in parallel.
        self._lane = memory_of if hardware.dma.channels > 1 else lambda name: 0
        self.array = hardware.mac_array
        self.lanes = hardware.vector_unit.lanes
        self.bank_bpc = hardware.sram.bytes_per_cycle * hardware.sram.banks
        self._work: dict[tuple, float] = {}     # mac_work() by problem (and float dtypes)
        self._floor: dict[tuple, float] = {}    # the same, partial sums never spilling

    def share_costs(self, other: Context) -> None:
        """Reuse `other`'s mac_work() memos: they depend on the hardware alone."""
        self._work, self._floor = other._work, other._floor

    def mac_work(self, problem, op=None, spill: bool = True) -> float:
        """Array cycles of a tile's (kind, m, n, k) problem (isa.opcodes.mac_problem) of MAC
        operator `op` on the configured array, as the machine charges them (isa/systolic.py,
        with op's operand sizes and passes when it is a float layer; integer layers plan with
        int8 operands, their reference estimate): folds quantised to the array, each tile's
        fill and drain (the machine hides part of them where an operator's tiles chain;
        charging them all keeps the search from favouring small tiles that wait for their
        loads and do not chain, bench/HISTORY.md), operand ports, partial sums that overflow
        the accumulators (with `spill` False, as if they never did)."""
        if op is None or "array_acc" not in op.attrs:
            key = problem
        else:
            t = self.graph.tensors
            key = (problem, *(t[n].dtype for n in (op.inputs[0], op.inputs[1], op.outputs[0])))
        memo = self._work if spill else self._floor
        cycles = memo.get(key)             # the tiling search asks the same problems often
        if cycles is None:
            arr = self.array if spill else dataclasses.replace(self.array, accumulators=1 << 62)
            if key is problem:
                cycles = array_time(arr, *problem, bank_bpc=self.bank_bpc).cycles
            else:
                act, weight, out = key[1:]
                cycles = array_time(arr, *problem, passes(arr, act, weight),
                                    (itemsize(act), itemsize(weight), itemsize(out)),
                                    bank_bpc=self.bank_bpc).cycles
            memo[key] = cycles
        return cycles

    def mac_costs(self, problem, op) -> dict:
        """A MAC tile space's `work` and `floor` (compiler/tiling.TileSpace) from `problem`,
        the (kind, m, n, k) problem of a tile of given sizes."""
        return {"work": lambda s: self.mac_work(problem(s), op),
                "floor": lambda s: self.mac_work(problem(s), op, spill=False)}

    def folds(self, channels: str, terms: str = "") -> dict[str, int]:
        """The tile-space dims the array folds: output channels over its columns, reduction
        terms (when each is one weight row) over its rows, as its dataflow maps them."""
        flow = self.array.dataflow
        out = {channels: self.array.cols} if flow in ("weight_stationary", "output_stationary") else {}
        if terms and flow in ("weight_stationary", "input_stationary"):
            out[terms] = self.array.rows
        return out

    def vector_work(self, *factors) -> float:
        return math.prod(factors) / self.lanes

    def operand(self, role, tensor, depends, box, dtype=None):
        t = self.graph.tensors[tensor]
        dtype = dtype or t.dtype
        return Operand(role, tensor, dtype, tuple(depends), box, itemsize(dtype),
                       self._on_chip(tensor), self._cost(tensor), tuple(t.shape),
                       lane=self._lane(tensor))


def _kept(span, dim: str):
    """span() of a tile's (start, size) along `dim`, each computed once: the search and the
    lowering ask the same rows of a window many times."""
    known = {}

    def of(t):
        key = t[dim]
        got = known.get(key)
        if got is None:
            got = known[key] = span(key)
        return got
    return of


class Window:
    """The input rows and columns a tile of a sliding-window op reads, and the padding it sees."""

    def __init__(self, op, h: int, w: int, kh: int, kw: int):
        sy, sx = op.attrs["stride"]
        dy, dx = op.attrs.get("dilation", (1, 1))
        pt, _, pl, _ = op.attrs["pad"]
        self.rows = _kept(lambda oh: window(*oh, sy, pt, (kh - 1) * dy + 1, h), "oh")
        self.cols = _kept(lambda ow: window(*ow, sx, pl, (kw - 1) * dx + 1, w), "ow")
        self._boxes: dict[tuple, tuple] = {}     # box() by the tile's rows and columns

    def box(self, t):
        key = (t["oh"], t["ow"])
        got = self._boxes.get(key)
        if got is None:
            got = self._boxes[key] = (self.rows(t)[:2], self.cols(t)[:2])
        return got

    def pad(self, t):
        r, c = self.rows(t), self.cols(t)
        return (r[2], r[3], c[2], c[3])


def acc_dtype(graph: Graph, op) -> str:
    """The accumulator a MAC operator's partial sums live in: a float layer's is the array's
    (compiler/driver.py records it), an integer layer's int48 or int32 as its output."""
    if "array_acc" in op.attrs:
        return op.attrs["array_acc"]
    return "int48" if graph.tensors[op.outputs[0]].dtype == "int48" else "int32"


def stage_attrs(graph: Graph, step, acc: str) -> dict:
    """Output-stage attributes of a MAC step: its fused RESCALE and CLAMP."""
    attrs = {"acc_dtype": acc}
    if step.rescale is not None:
        r = step.rescale
        attrs.update(scale32=bool(r.attrs["scale32"]), rounding_mode=r.attrs["rounding_mode"],
                     output_zp=const_int(graph, r.inputs[4]))
    if step.clamp is not None:
        attrs["clamp"] = (step.clamp.attrs["min_val"], step.clamp.attrs["max_val"])
    return attrs
