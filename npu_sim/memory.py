"""The modelled memories: one byte array per memory, addressed through TensorViews."""
from __future__ import annotations

import bisect
from functools import partial

import numpy as np

from npu_sim.isa.commands import TensorView
from npu_sim.isa.dtypes import STORAGE
from npu_sim.isa.errors import DoesNotFitError, ProgramError


# Arrays the cache keeps: the views that recur are the on-chip buffers a layer's tiles take
# turns in; most external views are one tile's box, read or written once (MobileNetV2 on
# edge-256 has 7,519 distinct views, whose arrays took 1 MiB kept to the run's end).
KEPT_ARRAYS = 1024


class _Arrays(dict):
    """view -> its array, made by `make` at the view's first lookup; forgotten all at once
    past KEPT_ARRAYS (made again if they recur)."""

    __slots__ = ("make",)

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, v: TensorView) -> np.ndarray:
        if len(self) >= KEPT_ARRAYS:
            self.clear()                # (cheaper than evicting one by one; hot views recur)
        a = self[v] = self.make(v)
        return a


class Memories:
    """One byte array per memory. Constant segments are not copied in: views of them read the
    program image itself, read-only (no command writes a constant, so one that tried is a
    compiler bug and fails loudly), and the zero pages beneath them are never touched."""

    def __init__(self, names: list[str], sizes: list[int]):
        self.names = ["onchip"] + list(names)
        try:
            self.banks = [np.zeros(max(int(s), 16), dtype=np.uint8) for s in sizes]
        except MemoryError:
            held = ", ".join(f"{n} {int(s) / (1 << 20):,.0f} MiB" for n, s in zip(self.names, sizes))
            raise DoesNotFitError(f"the modelled memories ({held}) are held in host memory, and "
                                  "this machine has not that much to give the run; --timing-only "
                                  "holds none of them") from None
        self._starts: list[list[int]] = [[] for _ in self.banks]     # sorted segment starts
        self._segments: list[list[tuple[int, int, np.ndarray]]] = [[] for _ in self.banks]
        # view -> its array: a program's tile buffers recur, and the buffers never move
        self._arrays = _Arrays(partial(_view_array, self.banks, self._starts, self._segments,
                                       self.names))
        # array(v): a numpy view of the bytes that `v` describes (no copy; writes go to
        # memory). The cache's own subscript: every command looks its views up, and a method
        # around it would be a Python call each time.
        self.array = self._arrays.__getitem__

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


def _view_array(banks: list, starts: list, segments: list, names: list,
                v: TensorView) -> np.ndarray:
    """The numpy view of memory that `v` describes: of a constant segment where it reads one."""
    try:
        buffer, offset = banks[v.mem], v.addr
        if starts[v.mem]:
            lo, hi = v.footprint()
            i = bisect.bisect_left(starts[v.mem], hi) - 1
            if i >= 0 and segments[v.mem][i][1] > lo:
                start, end, data = segments[v.mem][i]
                if lo < start or hi > end:
                    raise ProgramError(f"view {v.dtype}{list(v.shape)} at "
                                       f"{names[v.mem]}:0x{v.addr:x} straddles the "
                                       f"constant segment at 0x{start:x}..0x{end:x}")
                buffer, offset = data, v.addr - start
        return np.ndarray(v.shape, dtype=STORAGE[v.dtype], buffer=buffer, offset=offset,
                          strides=v.strides)
    except (ValueError, TypeError, IndexError) as exc:
        name = names[v.mem] if v.mem < len(names) else f"memory {v.mem}"
        raise ProgramError(f"view {v.dtype}{list(v.shape)} at {name}:0x{v.addr:x} falls "
                           f"outside the memory ({exc})") from None
