"""Address allocation: first-fit placement of buffers that have lifetimes."""
from __future__ import annotations

ALIGN = 16


def align(n: int, to: int = ALIGN) -> int:
    return (n + to - 1) // to * to


class IntervalAllocator:
    """Places buffers in [base, base+capacity) so that buffers alive at the same time never
    overlap. Lifetimes are inclusive step-index intervals."""

    def __init__(self, capacity: int, base: int = 0):
        self.capacity, self.base = capacity, base
        self.placed: list[tuple[int, int, int, int]] = []   # addr, size, first, last
        self.high_water = base

    def place(self, size: int, first: int, last: int, limit: int | None = None) -> int | None:
        """Place `size` bytes alive over [first, last] at find()'s address; None if none."""
        addr = self.find(size, first, last, limit)
        if addr is not None:
            self.take(addr, size, first, last)
        return addr

    def take(self, addr: int, size: int, first: int, last: int) -> None:
        """Place `size` bytes alive over [first, last] at `addr`, which find() returned."""
        self.placed.append((addr, align(max(size, 1)), first, last))
        self.high_water = max(self.high_water, addr + align(max(size, 1)))

    def find(self, size: int, first: int, last: int, limit: int | None = None) -> int | None:
        """First-fit address for `size` bytes alive over [first, last], ending at or below
        `limit` (default: the end of the region), or None."""
        size = align(max(size, 1))
        busy = sorted((a, s) for a, s, f, l in self.placed if not (l < first or f > last))
        addr = self.base
        for a, s in busy:
            if addr + size <= a:
                break
            addr = max(addr, align(a + s))
        if addr + size > (self.base + self.capacity if limit is None else limit):
            return None
        return addr
