"""The modelled memories: one byte array per memory, addressed through TensorViews."""
from __future__ import annotations

import bisect

import numpy as np

from npu_sim.isa.commands import TensorView
from npu_sim.isa.dtypes import STORAGE
from npu_sim.isa.errors import ProgramError


class Memories:
    """One byte array per memory. Constant segments are not copied in: views of them read the
    program image itself, read-only (no command writes a constant, so one that tried is a
    compiler bug and fails loudly), and the zero pages beneath them are never touched."""

    def __init__(self, names: list[str], sizes: list[int]):
        self.names = ["onchip"] + list(names)
        self.banks = [np.zeros(max(int(s), 16), dtype=np.uint8) for s in sizes]
        self._starts: list[list[int]] = [[] for _ in self.banks]     # sorted segment starts
        self._segments: list[list[tuple[int, int, np.ndarray]]] = [[] for _ in self.banks]
        # view -> its array: a program's tile buffers recur, and the buffers never move
        self._arrays: dict[TensorView, np.ndarray] = {}

    def array(self, v: TensorView) -> np.ndarray:
        """A numpy view of the bytes that `v` describes (no copy; writes go to memory)."""
        a = self._arrays.get(v)
        if a is None:
            a = self._arrays[v] = self._array(v)
        return a

    def _array(self, v: TensorView) -> np.ndarray:
        try:
            buffer, offset = self.banks[v.mem], v.addr
            if self._starts[v.mem]:
                lo, hi = v.footprint()
                i = bisect.bisect_left(self._starts[v.mem], hi) - 1
                if i >= 0 and self._segments[v.mem][i][1] > lo:
                    start, end, data = self._segments[v.mem][i]
                    if lo < start or hi > end:
                        raise ProgramError(f"view {v.dtype}{list(v.shape)} at "
                                           f"{self.names[v.mem]}:0x{v.addr:x} straddles the "
                                           f"constant segment at 0x{start:x}..0x{end:x}")
                    buffer, offset = data, v.addr - start
            return np.ndarray(v.shape, dtype=STORAGE[v.dtype], buffer=buffer, offset=offset,
                              strides=v.strides)
        except (ValueError, TypeError, IndexError) as exc:
            name = self.names[v.mem] if v.mem < len(self.names) else f"memory {v.mem}"
            raise ProgramError(f"view {v.dtype}{list(v.shape)} at {name}:0x{v.addr:x} falls "
                               f"outside the memory ({exc})") from None

    def load(self, mem: int, addr: int, data: bytes):
        """Map a constant segment at `addr` (the data stays where it is, read-only)."""
        if not len(data):
            return
        self._arrays.clear()            # a view may now read the segment
        if addr < 0 or addr + len(data) > len(self.banks[mem]):
            raise ProgramError(f"constant segment at {self.names[mem]}:0x{addr:x} "
                               f"({len(data)} B) falls outside the memory")
        array = np.frombuffer(data, dtype=np.uint8)
        array.flags.writeable = False
        i = bisect.bisect_left(self._starts[mem], addr)
        segments = self._segments[mem]
        if (i < len(segments) and segments[i][0] < addr + len(data)) or (
                i > 0 and segments[i - 1][1] > addr):
            raise ProgramError(f"constant segments overlap at {self.names[mem]}:0x{addr:x}")
        self._starts[mem].insert(i, addr)
        segments.insert(i, (addr, addr + len(data), array))
