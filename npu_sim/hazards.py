"""The hazard checker: verifies, as the machine runs, that the compiler's dependencies order
every pair of commands that touch the same bytes.

The machine trusts `deps` and applies each command atomically at its end time, so a missing
dependency whose commands happen to finish in the right order never shows as a wrong output.
With the checker on, no command may start while a command in flight on another engine writes
bytes it reads or writes, or reads bytes it writes (RAW, WAR, WAW). It looks at the schedule,
not at values, so it works with --timing-only too.

Each engine has at most one command in flight, so the in-flight accesses of one memory are a
handful of byte ranges: a new command is compared with those, never with the whole program.
"""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from npu_sim.isa.commands import Compute, DmaCopy, DmaFill, TensorView
from npu_sim.isa.asm import mnemonic
from npu_sim.isa.errors import HazardError
from npu_sim.isa.program import Program

ENV_VAR = "NPU_SIM_CHECK_HAZARDS"


def enabled(flag: bool | None = None) -> bool:
    """An explicit flag wins; otherwise NPU_SIM_CHECK_HAZARDS=1 (or true/yes/on) turns it on."""
    if flag is not None:
        return bool(flag)
    return os.environ.get(ENV_VAR, "").strip().lower() in ("1", "true", "yes", "on")


class _Access(NamedTuple):
    lo: int               # footprint, half-open
    hi: int
    view: TensorView
    write: bool
    cmd: object


def accesses(cmd) -> list[tuple[TensorView, bool]]:
    """(view, is_write) of every operand a command reads or writes."""
    if isinstance(cmd, DmaCopy):
        return [(cmd.src, False), (cmd.dst, True)]
    if isinstance(cmd, DmaFill):
        return [(cmd.dst, True)]
    assert isinstance(cmd, Compute)
    return [(v, False) for v in cmd.inputs.values()] + [(v, True) for v in cmd.outputs.values()]


def _runs(v: TensorView, lo: int, hi: int) -> tuple[np.ndarray, int]:
    """Sorted start addresses of the view's contiguous byte runs that reach into [lo, hi), and
    the runs' common length: the view's bytes as a set, in a form two views can be matched in."""
    addr, dims = v.addr, []
    for d, s in zip(v.shape, v.strides):
        if d > 1 and s != 0:          # size-1 and broadcast dims add no bytes
            if s < 0:                 # the same bytes, walked upwards
                addr += (d - 1) * s
                s = -s
            dims.append((s, d))
    dims.sort(reverse=True)
    run = v.itemsize
    while dims and dims[-1][0] <= run:    # an inner dim that leaves no gap extends the run
        s, d = dims.pop()
        run += (d - 1) * s
    starts = np.array([addr], dtype=np.int64)
    for s, d in dims:
        starts = (starts[:, None] + np.arange(d, dtype=np.int64) * s).ravel()
        starts = starts[starts < hi]
    starts = np.sort(starts[starts + run > lo])
    return starts, run


def shared_range(a: TensorView, b: TensorView) -> tuple[int, int] | None:
    """The bounding range [lo, hi) of the bytes both views touch, or None if they share none.

    Footprints bound a strided view loosely (interleaved channel slices of one tensor overlap
    in footprint but not in bytes), so an overlap of footprints is refined here, exactly."""
    a_lo, a_hi = a.footprint()
    b_lo, b_hi = b.footprint()
    lo, hi = max(a_lo, b_lo), min(a_hi, b_hi)
    if lo >= hi or a.mem != b.mem:
        return None
    if a.contiguous_run() == a.nbytes and b.contiguous_run() == b.nbytes:
        return lo, hi
    sa, la = _runs(a, lo, hi)
    sb, lb = _runs(b, lo, hi)
    # All of a's runs have one length, so among those starting before a run of b ends, the
    # last one ends furthest: a's runs meeting b's run [x, x+lb) are first..last-1 below.
    first = np.searchsorted(sa, sb - la, side="right")
    last = np.searchsorted(sa, sb + lb, side="left")
    hit = last > first
    if not hit.any():
        return None
    sb, first, last = sb[hit], first[hit], last[hit]
    shared_lo = int(np.maximum(sb, sa[first]).min())
    shared_hi = int(np.minimum(sb + lb, sa[last - 1] + la).max())
    return max(shared_lo, lo), min(shared_hi, hi)


class HazardChecker:
    """Told when each command starts and ends; raises HazardError at the first conflict."""

    def __init__(self, program: Program):
        self.program = program
        # memory -> in-flight command id -> its accesses of that memory
        self.active: dict[int, dict[int, list[_Access]]] = {}
        self.mems: dict[int, list[int]] = {}           # in-flight command id -> memories it uses
        # In-flight command id -> conflicts found when a later command started beside it. One
        # is real only if that command is still in flight after that start: one that ends at
        # the very cycle another starts (events of the same instant) is no hazard.
        self.pending: dict[int, list[tuple[int, _Access, _Access, tuple[int, int]]]] = {}

    def start(self, cmd, now: int, rows=()) -> None:
        """`rows`: the commands in flight whose output it reads row by row as they finish
        it (npu_sim/handoff.py), the one overlap a dependency allows."""
        mine: dict[int, list[_Access]] = {}
        for view, write in accesses(cmd):
            lo, hi = view.footprint()
            if lo >= hi:
                continue
            acc = _Access(lo, hi, view, write, cmd)
            for other_id, others in self.active.get(view.mem, {}).items():
                if other_id in rows:
                    continue
                for other in others:
                    if (write or other.write) and lo < other.hi and other.lo < hi:
                        shared = shared_range(view, other.view)
                        if shared is not None:
                            self.pending.setdefault(other.cmd.id, []).append(
                                (now, other, acc, shared))
            mine.setdefault(view.mem, []).append(acc)
        for mem, accs in mine.items():
            self.active.setdefault(mem, {})[cmd.id] = accs
        self.mems[cmd.id] = list(mine)

    def end(self, cmd, now: int) -> None:
        for mem in self.mems.pop(cmd.id, ()):
            del self.active[mem][cmd.id]
        for t, running, started, shared in self.pending.pop(cmd.id, ()):
            if now > t:
                raise HazardError(self._message(running, started, shared, t))

    def _message(self, x: _Access, y: _Access, shared: tuple[int, int], t: int) -> str:
        first, second = sorted((x, y), key=lambda a: a.cmd.id)     # program order
        kind = ("WAW" if first.write and second.write else "RAW" if first.write else "WAR")
        lo, hi = shared
        mem = self.program.memory_name(first.view.mem)
        return (f"{kind} hazard on {mem} bytes [0x{lo:x}, 0x{hi:x}): {self._describe(first)} "
                f"and {self._describe(second)}, both in flight at cycle {t} with no dependency "
                f"between them")

    def _describe(self, a: _Access) -> str:
        cmd = a.cmd
        layers = self.program.layers
        layer = (f"layer {cmd.layer} '{layers[cmd.layer].name}'"
                 if 0 <= cmd.layer < len(layers) else "no layer")
        verb = "writes" if a.write else "reads"
        return f"command {cmd.id} ({cmd.engine} {mnemonic(cmd)}, {layer}) {verb} them"
