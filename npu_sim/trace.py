"""Cycle trace of a run in the Chrome / Perfetto Trace Event Format.

Opens in ui.perfetto.dev and chrome://tracing, or with `npu-sim view` (npu_sim/viewer.py).

One thread per engine (dma0.., mac, vector, host) holds one "X" slice per command; "layers"
threads above them hold each layer's span (overlapping layers on separate rows); "s"/"f" flow
events draw one arrow per dependency; "C" counters give each external memory's bandwidth,
on-chip buffer occupancy and MAC utilization. Timestamps are µs at the config's clock; args
carry exact cycles. Events are written one by one as they are generated, so memory stays
bounded by the program, not by the JSON.

Everything is derived from what the run already has (Program, SimResult, Report):
- a command spends `busy` cycles of its slice holding its ports (moving its bytes, doing its
  MACs); the rest (its `stall`) is setup and latency the engine could not hide behind the
  previous command, and queueing for a port another engine held. The machine does not record
  when each burst ran, so a counter spreads a command's bytes (MACs) evenly over
  [min(start + setup, end - busy), end], and bandwidth is capped at the memory's peak;
- on-chip occupancy counts the bytes a command writes to the buffer from its start until the
  last command that reads them ends (reads and writes resolved in program order, as the
  compiler derives dependencies).
"""
from __future__ import annotations

import bisect
import json
import os
from pathlib import Path

import numpy as np

from npu_sim.isa.asm import mnemonic
from npu_sim.isa.commands import Compute, DmaCopy, DmaFill
from npu_sim.isa.errors import InputError

from .cost import command_traffic

PID = 1
COARSE_BINS = 1000          # counter resolution of a coarse trace


def engine_order(engines) -> list[str]:
    """dma0, dma1, .., mac, vector, host: data movement above the compute it feeds."""
    rank = {"mac": 1, "vector": 2, "host": 3}

    def key(e):
        if e.startswith("dma") and e[3:].isascii() and e[3:].isdigit():    # not 'dma²'
            return 0, int(e[3:]), e
        return rank.get(e, 4), 0, e
    return sorted(engines, key=key)


def command_label(cmd) -> str:
    """The disassembly's mnemonic; a host command is named after the TOSA operator it runs."""
    if isinstance(cmd, Compute) and cmd.unit == "host" and cmd.attrs.get("tosa_op"):
        return cmd.attrs["tosa_op"].upper()
    return mnemonic(cmd)


def _operands(cmd) -> list[tuple[str, str, object]]:
    """(role, 'r'|'w', view) of every operand."""
    if isinstance(cmd, DmaCopy):
        return [("src", "r", cmd.src), ("dst", "w", cmd.dst)]
    if isinstance(cmd, DmaFill):
        return [("dst", "w", cmd.dst)]
    return ([(k, "r", v) for k, v in cmd.inputs.items()]
            + [(k, "w", v) for k, v in cmd.outputs.items()])


def _origin(view, base: int) -> list[int] | None:
    """Element coordinates of view.addr from `base` in a tensor laid out with view.strides."""
    off = view.addr - base
    if off < 0 or any(s <= 0 for s in view.strides):
        return None
    coords = [0] * len(view.shape)
    for i in sorted(range(len(view.shape)), key=lambda i: -view.strides[i]):
        coords[i], off = divmod(off, view.strides[i])
    return coords if off == 0 else None


class _Tiles:
    """Tile number within (layer, engine) and, where derivable, the tile's origin: the element
    offset of its external-memory window from the layer's first window with the same layout.
    A compute command takes the origin of the STORE that writes its output back."""

    def __init__(self, program):
        cmds = program.commands
        self.count: dict[tuple[int, str], int] = {}
        self.base: dict[tuple, int] = {}
        self.number: list[int] = []
        for cmd in cmds:
            k = (cmd.layer, cmd.engine)
            self.number.append(self.count.get(k, 0))
            self.count[k] = self.number[-1] + 1
            v = self._ext_view(cmd)
            if v is not None:
                key = self._key(cmd.layer, v)
                self.base[key] = min(self.base.get(key, v.addr), v.addr)
        self.stored_at: dict[int, list[int]] = {}
        for cmd in cmds:
            if isinstance(cmd, DmaCopy) and cmd.src.mem == 0 and cmd.dst.mem:
                at = self.origin(cmd)
                for d in cmd.deps:
                    if at is not None and isinstance(cmds[d], Compute) and any(
                            o.mem == 0 and o.addr == cmd.src.addr
                            for o in cmds[d].outputs.values()):
                        self.stored_at[d] = at

    @staticmethod
    def _key(layer, v):
        return layer, v.mem, v.strides, v.dtype

    @staticmethod
    def _ext_view(cmd):
        if isinstance(cmd, DmaCopy):
            return cmd.src if cmd.src.mem else cmd.dst if cmd.dst.mem else None
        return None

    def origin(self, cmd):
        v = self._ext_view(cmd)
        return None if v is None else _origin(v, self.base[self._key(cmd.layer, v)])

    def of(self, cmd) -> dict:
        t = {"n": self.number[cmd.id], "of": self.count[(cmd.layer, cmd.engine)]}
        at = self.origin(cmd) if isinstance(cmd, DmaCopy) else self.stored_at.get(cmd.id)
        if at is not None:
            t["at"] = at
        return t


def _step(times, deltas, cap=None):
    """Sum of +/- steps -> change points (t, value) of the resulting step function."""
    if len(times) == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    order = np.argsort(times, kind="stable")
    t, v = np.asarray(times)[order], np.cumsum(np.asarray(deltas, dtype=float)[order])
    last = np.r_[t[1:] != t[:-1], True]          # value after all steps at the same time
    t, v = t[last], v[last]
    if cap is not None:
        v = np.minimum(v, cap)
    keep = np.r_[True, np.abs(np.diff(v)) > 1e-9]
    return t[keep], np.where(np.abs(v[keep]) < 1e-9, 0.0, v[keep])


def _resample(t, v, total: int, bins: int):
    """Average of a step function over `bins` equal intervals of [0, total] (coarse traces)."""
    edges = np.linspace(0, max(total, 1), bins + 1)
    if len(t) == 0:
        return edges[:-1], np.zeros(bins)
    pts = np.r_[0, t, max(total, t[-1])]
    vals = np.r_[0, v]                             # value on [pts[i], pts[i+1])
    integral = np.r_[0, np.cumsum(vals * np.diff(pts))]
    return edges[:-1], np.diff(np.interp(edges, pts, integral)) / np.diff(edges)


def occupancy_intervals(program, sim):
    """(start, end, bytes) of buffer writes, each live until its last reader ends.

    Live regions are disjoint byte ranges [lo, hi) (a view's footprint) kept sorted: a write
    cuts what it overlaps out of older regions, whose cut-out share of bytes retires at the
    last read so far. Bounded by the buffer's layout, not by the number of commands.
    """
    los: list[int] = []
    regs: list[list] = []                          # [lo, hi, start, last_end, bytes]

    def overlapping(lo, hi):
        i = max(bisect.bisect_right(los, lo) - 1, 0)
        while i < len(regs) and regs[i][0] < hi:
            if regs[i][1] > lo:
                yield i
            i += 1

    for cmd in program.commands:
        e = int(sim.end[cmd.id])
        ops = [(rw, v.footprint(), v.nbytes) for _, rw, v in _operands(cmd) if v.mem == 0]
        for rw, (lo, hi), _ in ops:
            if rw == "r":
                for i in overlapping(lo, hi):
                    regs[i][3] = max(regs[i][3], e)
        for rw, (lo, hi), nbytes in ops:
            if rw != "w" or hi <= lo:
                continue
            hit = list(overlapping(lo, hi))
            pieces = []
            for i in hit:
                rlo, rhi, s, last, b = regs[i]
                density = b / (rhi - rlo)
                yield s, last, density * (min(hi, rhi) - max(lo, rlo))
                if rlo < lo:
                    pieces.append([rlo, lo, s, last, density * (lo - rlo)])
                if hi < rhi:
                    pieces.append([hi, rhi, s, last, density * (rhi - hi)])
            at = hit[0] if hit else bisect.bisect_left(los, lo)
            pieces.append([lo, hi, int(sim.start[cmd.id]), e, nbytes])
            pieces.sort()
            regs[at:at + len(hit)] = pieces
            los[at:at + len(hit)] = [p[0] for p in pieces]
    for r in regs:
        yield r[2], r[3], r[4]


def counters(program, config, sim):
    """(name, unit, times in cycles, values) of every counter track."""
    clock = config.clock_mhz
    setup = np.array([c.setup for c in sim.costs], dtype=np.int64)
    busy = np.array([c.busy for c in sim.costs], dtype=np.int64)
    on = np.maximum(sim.start, np.minimum(sim.start + setup, sim.end - busy))
    span = np.maximum(sim.end - on, 1)
    per_mem: dict[int, tuple[list, list]] = {}
    for cmd in program.commands:
        for mem, r, w in command_traffic(cmd):
            if mem and r + w:
                rate = (r + w) / span[cmd.id] * clock / 1e3         # B/cycle -> GB/s
                ts, ds = per_mem.setdefault(mem, ([], []))
                ts += [on[cmd.id], sim.end[cmd.id]]
                ds += [rate, -rate]
    # A memory has one port: while two transfers overlap one of them holds it, so the memory
    # runs at its peak; the per-command averages may add up to more, and are capped there.
    out = [(f"{name} bandwidth", "GB/s",
            *_step(*per_mem[m], cap=config.memories[name].bandwidth_gbps))
           for m in sorted(per_mem) for name in [program.memory_name(m)]]
    occ = np.array(list(occupancy_intervals(program, sim)), dtype=float).reshape(-1, 3)
    if len(occ):
        t = np.r_[occ[:, 0], occ[:, 1]].astype(np.int64)
        out.append(("onchip occupancy", "KiB", *_step(t, np.r_[occ[:, 2], -occ[:, 2]] / 1024)))
    mac = [i for i in sim.engines.get("mac", []) if sim.costs[i].macs]
    if mac:
        ids = np.array(mac)
        u = np.array([sim.costs[i].macs for i in mac]) / span[ids] * (
            100 / config.mac_array.macs_per_cycle)
        out.append(("MAC utilization", "%", *_step(np.r_[on[ids], sim.end[ids]], np.r_[u, -u])))
    return out


def _bytes(cmd) -> int:
    """Bytes a DMA moves; bytes a compute command reads and writes."""
    if isinstance(cmd, Compute):
        return sum(r + w for _, r, w in command_traffic(cmd))
    return cmd.dst.nbytes


def _layer_args(program, index: int) -> dict:
    layer = program.layers[index] if 0 <= index < len(program.layers) else None
    return {"layer": index, "layer_name": layer.name if layer else "",
            "ops": "+".join(layer.ops) if layer else ""}


def _command_args(cmd, program, sim, tiles, prev_end) -> dict:
    s, e, c = int(sim.start[cmd.id]), int(sim.end[cmd.id]), sim.costs[cmd.id]
    args = {"id": cmd.id, **_layer_args(program, cmd.layer), "start_cycle": s, "end_cycle": e,
            "cycles": e - s, "busy": c.busy, "stall": e - s - c.busy,
            # setup may hide behind the previous command; the stall beyond it queued for a port
            "setup": c.setup, "port_wait": max(0, e - s - c.busy - c.setup),
            "tile": tiles.of(cmd)}
    if s > prev_end:                                # the engine sat idle waiting for a dependency
        args["idle_before"] = s - prev_end
        if cmd.deps:
            args["waited_for"] = max(cmd.deps, key=lambda d: sim.end[d])
    args["bytes"] = _bytes(cmd)
    if c.macs:
        args["macs"] = c.macs
    if c.elements:
        args["elements"] = c.elements
    args["mem"] = [f"{role} {rw} {program.memory_name(v.mem)}[0x{lo:x}, 0x{hi:x}) {v.nbytes} B"
                   for role, rw, v in _operands(cmd) for lo, hi in [v.footprint()]]
    if cmd.deps:
        args["deps"] = list(cmd.deps)
    return args


def _pack(layers) -> list[int]:
    """A row per layer such that layers overlapping in time (pipelining) share no row."""
    ends: list[int] = []
    rows = []
    for r in layers:
        if not r.commands:
            rows.append(-1)
            continue
        k = next((k for k, e in enumerate(ends) if e <= r.start), len(ends))
        ends[k:k + 1] = [r.end]
        rows.append(k)
    return rows


class _Writer:
    def __init__(self, f):
        self.f, self.n = f, 0

    def __call__(self, ev: dict):
        self.f.write(("\n" if self.n == 0 else ",\n") + json.dumps(ev, separators=(",", ":")))
        self.n += 1


def write_trace(path, program, config, sim, report=None, coarse: bool = False) -> int:
    """Write the trace of a run to `path` (atomically); return its size in bytes."""
    if report is None:
        from .report import build_report
        report = build_report(program, config, sim, True)
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            _write(f, program, config, sim, report, coarse)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"--trace {path}: cannot write ({exc.strerror})") from None
    finally:                        # interrupted too: no .part left behind
        tmp.unlink(missing_ok=True)
    return path.stat().st_size


def _write(f, program, config, sim, report, coarse):
    clock = config.clock_mhz

    def us(cycles):
        return round(float(cycles) / clock, 4)

    engines = engine_order(sim.engines)
    rows = _pack(report.layers)
    n_rows = max(rows, default=-1) + 1
    # Layer rows first, then the engines: tid order is track order in Perfetto.
    tid = {e: n_rows + i + 1 for i, e in enumerate(engines)}
    other = {"generator": "npu-sim", "model": report.model, "config": report.config,
             "clock_mhz": clock, "cycles": sim.cycles, "coarse": coarse,
             "macs_per_cycle": config.mac_array.macs_per_cycle, "onchip_bytes": config.sram.size,
             "engines": ",".join(engines)}
    for name, m in config.memories.items():
        other[f"{name}_peak_gbps"] = m.bandwidth_gbps
    f.write('{"displayTimeUnit":"ns","otherData":' + json.dumps(other, separators=(",", ":"))
            + ',"traceEvents":[')
    emit = _Writer(f)
    emit({"ph": "M", "name": "process_name", "pid": PID,
          "args": {"name": f"npu-sim: {report.model} on {report.config}"}})
    names = [(k + 1, "layers" + (f" {k + 1}" if k else "")) for k in range(n_rows)]
    for t, name in names + [(tid[e], e) for e in engines]:
        emit({"ph": "M", "name": "thread_name", "pid": PID, "tid": t, "args": {"name": name}})
        emit({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": t,
              "args": {"sort_index": t}})
    for r, row in zip(report.layers, rows):
        if row >= 0:
            emit({"ph": "X", "name": r.name, "cat": "layer", "pid": PID, "tid": row + 1,
                  "ts": us(r.start), "dur": round(us(r.end) - us(r.start), 4),
                  "args": {"layer": r.index, "ops": "+".join(r.ops), "unit": r.unit,
                           "start_cycle": r.start, "end_cycle": r.end, "cycles": r.cycles,
                           "macs": r.macs, "mac_utilization": round(r.mac_utilization, 4),
                           "commands": r.commands}})
    slice_of = (_CoarseSlices if coarse else _command_slices)(program, sim, engines)
    where = {}                                # command id -> (tid, slice mid-point), for flows
    for eng, key, s, e, name, cat, args in slice_of:
        emit({"ph": "X", "name": name, "cat": cat, "pid": PID, "tid": tid[eng], "ts": us(s),
              "dur": round(us(e) - us(s), 4), "args": args})
        where[key] = (tid[eng], us((s + e) / 2))
    flows = _coarse_flows(program, slice_of) if coarse else (
        (d, c.id) for c in program.commands for d in c.deps)
    for n, (a, b) in enumerate(flows):
        # mid-points bind each end to its enclosing slice, never to a back-to-back neighbour
        (ta, xa), (tb, xb) = where[a], where[b]
        emit({"ph": "s", "name": "dep", "cat": "dep", "id": n, "pid": PID, "tid": ta, "ts": xa})
        emit({"ph": "f", "bp": "e", "name": "dep", "cat": "dep", "id": n, "pid": PID, "tid": tb,
              "ts": xb})
    for name, unit, t, v in counters(program, config, sim):
        if coarse:
            t, v = _resample(t, v, sim.cycles, COARSE_BINS)
        for ti, vi in zip(t, v):
            emit({"ph": "C", "name": name, "pid": PID, "ts": us(ti),
                  "args": {unit: round(float(vi), 3)}})
    f.write("\n]}\n")


def _command_slices(program, sim, engines):
    tiles = _Tiles(program)
    cmds = program.commands
    for eng in engines:
        prev = 0
        for i in sim.engines[eng]:
            cmd = cmds[i]
            args = _command_args(cmd, program, sim, tiles, prev)
            prev = int(sim.end[i])
            yield (eng, i, int(sim.start[i]), prev, command_label(cmd), eng.rstrip("0123456789"),
                   args)


class _CoarseSlices:
    """One slice per run of consecutive commands of one layer on one engine: one per layer and
    engine in practice, and never overlapping on a track even when layers interleave."""

    def __init__(self, program, sim, engines):
        self.program, self.sim, self.engines = program, sim, engines
        self.run_of = {}                      # command id -> run key (first command id)

    def __iter__(self):
        p, sim = self.program, self.sim
        for eng in self.engines:
            ids = sim.engines[eng]
            k = 0
            while k < len(ids):
                j = k
                layer = p.commands[ids[k]].layer
                while j + 1 < len(ids) and p.commands[ids[j + 1]].layer == layer:
                    j += 1
                run = ids[k:j + 1]
                for i in run:
                    self.run_of[i] = run[0]
                s, e = int(sim.start[run[0]]), int(sim.end[run[-1]])
                args = {**_layer_args(p, p.commands[run[0]].layer), "commands": len(run),
                        "first_id": run[0], "last_id": run[-1], "start_cycle": s, "end_cycle": e,
                        "cycles": e - s,
                        # the engine's time in these commands; the rest of the slice it idled
                        "command_cycles": int(np.sum(sim.end[run] - sim.start[run])),
                        "bytes": sum(_bytes(p.commands[i]) for i in run),
                        "macs": sum(sim.costs[i].macs for i in run)}
                yield (eng, run[0], s, e, args["layer_name"] or eng, eng.rstrip("0123456789"),
                       args)
                k = j + 1


def _coarse_flows(program, slices):
    seen = set()
    for c in program.commands:
        b = slices.run_of[c.id]
        for d in c.deps:
            a = slices.run_of[d]
            if a != b and (a, b) not in seen:
                seen.add((a, b))
                yield a, b
