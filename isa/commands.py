"""Commands of the NPU instruction set and their operand descriptors.

Every command names the commands it waits for (`deps`): synchronisation is explicit, so the
machine never infers hazards. Each engine runs its own commands in program order.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

from .dtypes import ITEMSIZE

# Memory ids: 0 is the on-chip buffer; external memories follow in Program.memories order.
ONCHIP = 0

# External memories move data in bursts of this many bytes: a contiguous run shorter than a
# burst still costs a whole burst. Both the compiler's tiling and the machine's timing use it.
BURST_BYTES = 32



class TensorView(NamedTuple):
    """A strided n-dimensional window onto one memory (byte strides, may be 0 or negative).

    A named tuple: programs hold tens of thousands of these, and tuples build fastest."""

    mem: int
    addr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def count(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.count * self.itemsize

    def footprint(self) -> tuple[int, int]:
        """Half-open byte range [lo, hi) that bounds every element of the view."""
        _, addr, shape, strides, dtype = self     # (unpacked: the simulator asks often)
        lo = hi = addr
        for d, s in zip(shape, strides):
            if d == 0:
                return addr, addr
            if s > 0:
                hi += (d - 1) * s
            else:
                lo += (d - 1) * s
        return lo, hi + ITEMSIZE[dtype]

    def burst_bytes(self, unit: int = BURST_BYTES) -> int:
        """Bytes a memory transfers for this view: every run rounded up to whole `unit`s (an
        external memory's bursts, or the on-chip banks' words)."""
        run = self.contiguous_run()
        if run >= self.nbytes or run <= 0:
            return -(-self.nbytes // unit) * unit if self.nbytes else 0
        return (self.nbytes // run) * (-(-run // unit) * unit)

    def contiguous_run(self) -> int:
        """Bytes in the innermost contiguous run (what one burst of a DMA can move)."""
        run = self.itemsize
        for d, s in zip(reversed(self.shape), reversed(self.strides)):
            if s == run:
                run *= d
            else:
                break
        return run


# make_view((mem, addr, shape, strides, dtype)) is TensorView(mem, addr, shape, strides, dtype)
# without the generated __new__'s Python-level call: the compiler builds tens of thousands.
make_view = partial(tuple.__new__, TensorView)


def dense(mem: int, addr: int, shape, dtype: str) -> TensorView:
    """A row-major contiguous view."""
    shape = tuple(map(int, shape))
    strides, step = [], ITEMSIZE[dtype]
    for d in reversed(shape):
        strides.append(step)
        step *= d or 1                  # (a zero dim strides as one; max() costs more)
    return make_view((mem, addr, shape, tuple(reversed(strides)), dtype))


@dataclass(kw_only=True, slots=True)
class Command:
    """What every command has: its id, the commands it waits for and its layer. Slotted: a
    program holds tens of thousands of commands, and an instance dict each took 0.3 KB."""

    id: int
    deps: tuple[int, ...] = ()
    layer: int = -1          # index into Program.layers, for per-layer reports


@dataclass(kw_only=True, slots=True)
class DmaCopy(Command):
    """Copy src to dst element by element (shapes equal): loads, stores and memory moves."""

    channel: int
    src: TensorView
    dst: TensorView

    @property
    def engine(self) -> str:
        return f"dma{self.channel}"


@dataclass(kw_only=True, slots=True)
class DmaFill(Command):
    """Write one constant value to every element of dst (padding borders, initial values)."""

    channel: int
    dst: TensorView
    value: int

    @property
    def engine(self) -> str:
        return f"dma{self.channel}"


@dataclass(kw_only=True, slots=True)
class Compute(Command):
    """A tile operation on the MAC array or vector unit, or a host-CPU fallback operation.

    `op` names an entry of isa.opcodes.OPCODES, which fixes its engine, operands and attributes.
    MAC and vector operands live in the on-chip buffer; host operands in external memory.
    """

    unit: str                                   # "mac" | "vector" | "host"
    op: str
    inputs: dict[str, TensorView]
    outputs: dict[str, TensorView]
    attrs: dict = field(default_factory=dict)

    @property
    def engine(self) -> str:
        return self.unit
