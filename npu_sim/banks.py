"""The on-chip buffer's address-to-bank mapping: which banks a command's views touch.

Consecutive `sram.interleave`-byte lines sit in consecutive banks (bank = addr // interleave %
banks), so a view spanning banks x interleave bytes touches every bank, and a small one only
the banks of its lines. A view's bytes are taken to spread evenly over the banks it touches;
strided views count their bounding range (npu_sim.isa.commands.TensorView.footprint).
"""
from __future__ import annotations

import math


def banks_of(views, sram) -> tuple[int, ...]:
    """Banks touched by the on-chip views among `views` (memory id 0)."""
    touched: set[int] = set()
    for v in views:
        if v is None or v.mem or not v.count:
            continue
        lo, hi = v.footprint()
        first, last = lo // sram.interleave, (hi - 1) // sram.interleave
        if last - first + 1 >= sram.banks:
            return tuple(range(sram.banks))
        touched.update(line % sram.banks for line in range(first, last + 1))
    return tuple(sorted(touched))


def bank_cycles(nbytes: float, banks: tuple[int, ...], sram) -> int:
    """Cycles `nbytes` occupy `banks`, one access of bytes_per_cycle per bank per cycle."""
    return math.ceil(nbytes / (len(banks) * sram.bytes_per_cycle)) if banks and nbytes else 0


class BankSchedule:
    """When the banks serve the bank cycles each burst books (every bank is one port).

    A burst books its share of its command's bank cycles on the banks it touches when it
    starts; bursts book in the order of their starts (the engines' clocks never go back). A
    bank serves the most urgent work first: a burst goes ahead of the work booked before it
    where that work can wait, that is where each of those bursts would still have its bank
    cycles served within its own cycles; otherwise it queues behind that work, first come
    first served. So a short store beside a long MAC command that needs a fraction of the
    banks' cycles takes the cycles the MAC leaves, as a bank's arbiter would give them, and
    neither takes longer; a burst that needs its banks for all its cycles is waited for.
    Booked work is never put off past the end of its burst, so no burst's end, once known,
    moves."""

    __slots__ = ("free", "slack")

    def __init__(self, banks: int):
        self.free = [0] * banks       # when each bank has served the work booked on it
        # How long that work may yet be put off: the least, over the bursts booked on the bank
        # since it was last idle, of the burst's end less the end of its bank cycles. Bursts
        # that have ended still count until the bank is idle (conservative), and a burst
        # already late counts below zero.
        self.slack = [0] * banks

    def book(self, banks: tuple[int, ...], t: int, cycles: int, length: int) -> int:
        """Book `cycles` bank cycles on `banks` for a burst of `length` cycles starting at t
        (no earlier than the bursts booked before it); returns when the banks have served
        them."""
        free, slack = self.free, self.slack
        for k in banks:
            if free[k] > t and slack[k] < cycles:
                break
        else:                                   # ahead of the work booked before it
            spare = length - cycles
            for k in banks:
                if free[k] > t:
                    free[k] += cycles
                    left = slack[k] - cycles
                    slack[k] = left if left < spare else spare
                else:
                    free[k] = t + cycles
                    slack[k] = spare
            return t + cycles
        served = t                              # behind it: from when all its banks are free
        for k in banks:
            if free[k] > served:
                served = free[k]
        served += cycles
        late_by = served - t - length           # below zero: cycles it has to spare
        for k in banks:
            if free[k] <= t or slack[k] > -late_by:
                slack[k] = -late_by
            free[k] = served
        return served
