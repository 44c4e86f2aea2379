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
