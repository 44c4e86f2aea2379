"""`npu-sim view TRACE.json`: a self-contained HTML viewer for an npu-sim trace.

The trace is compacted (per-engine arrays of cycles, a string table, per-counter series) and
embedded with the page's inline JS/CSS (viewer_template.html), so the file opens offline in
any browser. The page draws on <canvas>, only the visible slices, merging sub-pixel ones.
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path

from npu_sim.isa.errors import InputError


TEMPLATE = Path(__file__).with_name("viewer_template.html")
# Slice args the compact form stores once elsewhere (arrays, layer table), not per slice.
_DROP = {"start_cycle", "end_cycle", "layer", "layer_name", "ops", "cycles"}
_MAX_CYCLE = 2 ** 53        # the page's numbers are doubles: past this, cycles lose precision
_BIGGEST = 1.7976931348623157e308          # a JSON integer past it is no finite float
_DEPTH = 32                 # args nested deeper than this: no trace npu-sim writes, and the
#                             page's JSON.stringify or our own json.dumps could recurse out


def load_trace(path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON trace ({exc})") from None
    except RecursionError:                             # the decoder recurses per nesting level
        raise InputError(f"{path}: not a JSON trace (arrays or objects nested too deeply)") \
            from None
    if isinstance(trace, list):                       # the bare-array form of the format
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise InputError(f"{path}: not a Chrome/Perfetto trace (no traceEvents list)")
    return trace


def show_json_value(v) -> str:
    """A bad field's value for the message: short, as the file spells it, never a deep repr."""
    if isinstance(v, (list, dict)):
        return "a list" if isinstance(v, list) else "an object"
    if v is None or isinstance(v, bool) or isinstance(v, float) and not math.isfinite(v):
        return json.dumps(v)                          # null, true, NaN, Infinity
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _plain(v, depth=0) -> bool:
    """JSON the page can parse back: json.dumps writes NaN/Infinity, which JSON.parse refuses."""
    if type(v) is float:
        return math.isfinite(v)
    if type(v) is list:
        return depth < _DEPTH and all(_plain(x, depth + 1) for x in v)
    if type(v) is dict:
        return depth < _DEPTH and all(_plain(x, depth + 1) for x in v.values())
    return True


class _Fields:
    """An event's (or otherData's) fields, each read with its type and range checked: a bad one
    is an InputError naming the trace, the event and the field, where compact() would otherwise
    die of a ValueError deep inside. A null counts as an absent field."""

    def __init__(self, where: str, obj: dict, prefix: str = ""):
        self.where, self.obj, self.prefix = where, obj, prefix

    def fail(self, key, expected):
        raise InputError(f"{self.where}: '{self.prefix}{key}' is {show_json_value(self.obj.get(key))}, "
                         f"expected {expected}")

    def sub(self, key) -> "_Fields":
        v = self.obj.get(key)
        if v is not None and type(v) is not dict:
            self.fail(key, "an object")
        return _Fields(self.where, v or {}, f"{self.prefix}{key}.")

    def number(self, key, default=None, lo=-_BIGGEST):
        v = self.obj.get(key)
        if v is None:
            return default
        if type(v) not in (int, float) or not lo <= v <= _BIGGEST:      # NaN fails too
            self.fail(key, "a finite number" + (f" >= {lo}" if lo > -_BIGGEST else ""))
        return float(v)             # an int past 2**1024 cannot meet a float later (overflow)

    def integer(self, key, default=None, lo=0):
        v = self.obj.get(key)
        if v is None:
            return default
        if type(v) is float and v.is_integer():      # 3.0: JSON does not tell it from 3
            v = int(v)
        if type(v) is not int or not lo <= v <= _MAX_CYCLE:
            self.fail(key, f"an integer in [{lo}, 2**53]")
        return v

    def text(self, key, default=""):
        v = self.obj.get(key)
        if v is None:
            return default
        if type(v) is not str:
            self.fail(key, "a string")
        return v

    def ident(self, key):
        v = self.obj.get(key)
        if v is not None and type(v) not in (int, str):
            self.fail(key, "an integer or a string")
        return v

    def cycles(self, key, us, clock) -> int:
        """µs at the trace's clock (how the writer stores time) back to cycles."""
        c = us * clock
        if not c <= _MAX_CYCLE:
            self.fail(key, f"a time under {_MAX_CYCLE / clock:.4g} us (2**53 cycles at "
                           f"{clock:g} MHz)")
        return int(round(c))

    def plain(self, skip=()) -> dict:
        """The fields the page gets as they are, but for `skip`: checked to be plain JSON."""
        kept = {}
        for k, v in self.obj.items():
            if k in skip:
                continue
            if not _plain(v):
                self.fail(k, f"plain JSON (finite numbers, nested at most {_DEPTH} deep)")
            kept[k] = v
        return kept

    def slice_args(self) -> dict:
        """A slice's args for its tooltip, with the few the page itself reads checked."""
        kept = self.plain(_DROP)
        self.ident("id")
        deps = self.obj.get("deps")                   # the page draws arrows from them
        if deps is not None and (type(deps) is not list
                                 or any(type(d) not in (int, str) for d in deps)):
            self.fail("deps", "a list of command ids")
        tile = self.obj.get("tile")                   # the tooltip reads tile.n/of/at
        if tile is not None and (type(tile) is not dict
                                 or type(tile.get("at") or []) is not list):
            self.fail("tile", "an object with 'at' a list")
        return kept


def compact(trace: dict, source: str = "trace") -> dict:
    """The data the page needs, as arrays: cycles are exact when the trace carries them.
    A malformed field raises InputError naming `source`, the event's index and the field."""
    if trace.get("otherData") is not None and type(trace["otherData"]) is not dict:
        raise InputError(f"{source}: 'otherData' is {show_json_value(trace['otherData'])}, "
                         "expected an object")
    other = trace.get("otherData") or {}
    o = _Fields(f"{source}: otherData", other)
    o.plain()                                 # the page gets otherData as meta
    clock = o.number("clock_mhz", 0, lo=0) or 1000.0
    # Read up front, whether or not a counter will want them: a bad one is bad in any trace.
    macs_per_cycle = o.integer("macs_per_cycle", 0)      # >= 1 if given: util stays finite
    end = o.integer("cycles", 0)
    onchip = o.number("onchip_bytes", 0, lo=0)
    peaks = {k: o.number(k, lo=0) for k in other if k.endswith("_peak_gbps")}
    threads, lanes, layers, series, names = {}, {}, {}, {}, {}

    for i, ev in enumerate(trace["traceEvents"]):
        if type(ev) is not dict:
            raise InputError(f"{source}: event {i} is {show_json_value(ev)}, expected an object")
        f = _Fields(f"{source}: event {i}", ev)
        ph, a = f.text("ph", None), f.sub("args")
        args = a.obj
        if ph == "M" and ev.get("name") == "thread_name":
            tid = f.ident("tid")
            threads[tid] = a.text("name", str(tid))
        elif ph == "X" and ev.get("cat") == "layer":          # the layer rows
            li = a.integer("layer", len(layers))
            row = layers.setdefault(li, {"index": li})
            row.update(name=f.text("name"), ops=a.text("ops"), unit=a.text("unit"),
                       start=a.integer("start_cycle"), end=a.integer("end_cycle"),
                       macs=a.integer("macs"), cycles=a.integer("cycles"),
                       util=a.number("mac_utilization", lo=0))
            if row["start"] is not None and row["end"] is not None and row["end"] < row["start"]:
                a.fail("end_cycle", f"at least 'start_cycle' ({row['start']})")
        elif ph == "X":
            ts, dur = f.number("ts", 0, lo=0), f.number("dur", 0, lo=0)
            s, e = a.integer("start_cycle"), a.integer("end_cycle")
            s = f.cycles("ts", ts, clock) if s is None else s
            e = f.cycles("dur", ts + dur, clock) if e is None else e
            if e < s:
                raise InputError(f"{f.where}: ends at cycle {e}, before it starts at cycle {s}")
            lane = lanes.setdefault(f.ident("tid"), [])
            name = f.text("name", "?")
            li = a.integer("layer", -1, lo=-1)
            lane.append((s, e, names.setdefault(name, len(names)), li, a.slice_args()))
            if li >= 0 and li not in layers:          # in case the trace has no layer rows
                layers[li] = {"index": li, "name": a.text("layer_name", f"layer {li}"),
                              "ops": a.text("ops"), "unit": "", "start": None, "end": None}
            if li >= 0:
                row = layers[li]
                row.setdefault("_s", []).append(s)
                row.setdefault("_e", []).append(e)
                row["bytes"] = row.get("bytes", 0) + a.integer("bytes", 0)
                row["commands"] = row.get("commands", 0) + a.integer("commands", 1)
                row["_macs"] = row.get("_macs", 0) + a.integer("macs", 0)
        elif ph == "C":
            t = f.cycles("ts", f.number("ts", 0, lo=0), clock)
            name = f.text("name")
            for unit in args:
                v = a.number(unit)
                if v is None:
                    a.fail(unit, "a finite number")
                s = series.setdefault((name, unit), ([], []))
                s[0].append(t)
                s[1].append(v)
        f.ident("pid"), f.ident("tid")       # unread here (one process), but Perfetto reads them
    table = []
    for li in sorted(layers):
        row = layers[li]
        s = row["start"] if row.get("start") is not None else min(row.get("_s", [0]))
        e = row["end"] if row.get("end") is not None else max(row.get("_e", [0]))
        macs = row.get("macs") if row.get("macs") is not None else row.get("_macs", 0)
        table.append({"index": li, "name": row.get("name", ""), "ops": row.get("ops", ""),
                      "unit": row.get("unit", ""), "start": s, "end": e,
                      # the run's critical-path advance when the trace carries it, else the span
                      "cycles": row["cycles"] if row.get("cycles") is not None else e - s,
                      # the report's figure (the array's use while on this layer) when given
                      "macs": macs, "util": row["util"] if row.get("util") is not None
                      else macs / ((e - s) * macs_per_cycle)
                      if macs_per_cycle and e > s else 0.0,
                      "bytes": row.get("bytes", 0), "commands": row.get("commands", 0)})
    from .trace import engine_order       # numpy and the simulator: only when drawing
    order = engine_order([threads.get(t, str(t)) for t in lanes])
    by_name = {threads.get(t, str(t)): t for t in lanes}
    out_lanes = []
    for name in order:
        rows = sorted(lanes[by_name[name]], key=lambda r: (r[0], r[1]))
        out_lanes.append({"name": name, "s": [r[0] for r in rows], "e": [r[1] for r in rows],
                          "n": [r[2] for r in rows], "l": [r[3] for r in rows],
                          "a": [r[4] for r in rows]})
    counters = []
    for (name, unit), (t, v) in series.items():
        order_t = sorted(range(len(t)), key=t.__getitem__)
        peak = peaks.get(f"{name.split(' ')[0]}_peak_gbps") if unit == "GB/s" else None
        if unit == "KiB" and onchip:
            peak = onchip / 1024
        counters.append({"name": name, "unit": unit, "peak": peak or (100 if unit == "%" else None),
                         "t": [t[i] for i in order_t], "v": [v[i] for i in order_t]})
    counters.sort(key=lambda c: (c["unit"] != "%", c["unit"] != "GB/s", c["name"]))
    end = max([end] + [max(l["e"]) for l in out_lanes if l["e"]])
    return {"meta": {**other, "clock_mhz": clock, "cycles": end}, "names": list(names),
            "lanes": out_lanes, "layers": table, "counters": counters}


def render_html(data: dict) -> str:
    meta = data["meta"]
    title = f"npu-sim trace: {meta.get('model', '')} on {meta.get('config', '')}"
    # "</" inside the JSON must not close the <script> element that holds it. No NaN: the
    # page's JSON.parse would refuse it (compact() let none through).
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return (TEMPLATE.read_text(encoding="utf-8")
            .replace("__NPU_TITLE__", html.escape(title))
            .replace("__NPU_TRACE_DATA__", payload))


def write_viewer(trace_path, out=None) -> Path:
    trace_path = Path(trace_path)
    # The whole page is built before a byte is written: a bad trace leaves no file behind.
    text = render_html(compact(load_trace(trace_path), str(trace_path)))
    out = trace_path.with_suffix(".html") if out is None else out
    from .cli_files import Staged
    with Staged([trace_path]) as staged:    # written whole, then moved: never a half page
        # a lone surrogate (valid JSON escape, no UTF-8 form) is written as '?'
        staged.path(out).write_text(text, encoding="utf-8", errors="replace")
        staged.commit()
    return Path(out)


def cmd_view(args) -> int:
    out = write_viewer(args.trace, args.output)
    print(f"npu-sim: wrote {out} ({out.stat().st_size:,} B)")
    if args.open:
        import webbrowser
        webbrowser.open(out.resolve().as_uri())
    return 0


def add_parser(subparsers):
    v = subparsers.add_parser("view", help="write a self-contained HTML viewer for a trace")
    v.add_argument("trace", help="trace JSON written by npu-sim run --trace")
    v.add_argument("-o", "--output", metavar="OUT.html",
                   help="HTML file to write (default: the trace's name with .html)")
    v.add_argument("--open", action="store_true", help="open it in the web browser")
    v.set_defaults(func=cmd_view)
