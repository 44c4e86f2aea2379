"""`npu-sim view TRACE.json`: a self-contained HTML viewer for an npu-sim trace.

The trace is compacted (per-engine arrays of cycles, a string table, per-counter series) and
embedded with the page's inline JS/CSS (viewer_template.html), so the file opens offline in
any browser. The page draws on <canvas>, only the visible slices, merging sub-pixel ones.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from npu_sim.isa.errors import InputError


TEMPLATE = Path(__file__).with_name("viewer_template.html")
# Slice args the compact form stores once elsewhere (arrays, layer table), not per slice.
_DROP = {"start_cycle", "end_cycle", "layer", "layer_name", "ops", "cycles"}


def load_trace(path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON trace ({exc})") from None
    if isinstance(trace, list):                       # the bare-array form of the format
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise InputError(f"{path}: not a Chrome/Perfetto trace (no traceEvents list)")
    return trace


def compact(trace: dict) -> dict:
    """The data the page needs, as arrays: cycles are exact when the trace carries them."""
    other = trace.get("otherData") or {}
    clock = float(other.get("clock_mhz") or 1000.0)
    threads, lanes, layers, series, names = {}, {}, {}, {}, {}

    def cyc(us):
        return int(round(float(us) * clock))

    for ev in trace["traceEvents"]:
        if not isinstance(ev, dict):
            continue
        ph, args = ev.get("ph"), ev.get("args") or {}
        if ph == "M" and ev.get("name") == "thread_name":
            threads[ev.get("tid")] = str(args.get("name", ev.get("tid")))
        elif ph == "X" and ev.get("cat") == "layer":          # the layer rows
            li = int(args.get("layer", len(layers)))
            row = layers.setdefault(li, {"index": li})
            row.update(name=str(ev.get("name", "")), ops=args.get("ops", ""),
                       unit=args.get("unit", ""), start=args.get("start_cycle"),
                       end=args.get("end_cycle"), macs=args.get("macs"),
                       cycles=args.get("cycles"), util=args.get("mac_utilization"))
        elif ph == "X":
            s = args.get("start_cycle", cyc(ev.get("ts", 0)))
            e = args.get("end_cycle", cyc(ev.get("ts", 0) + ev.get("dur", 0)))
            lane = lanes.setdefault(ev.get("tid"), [])
            name = str(ev.get("name", "?"))
            lane.append((int(s), int(e), names.setdefault(name, len(names)),
                         int(args.get("layer", -1)),
                         {k: v for k, v in args.items() if k not in _DROP}))
            li = int(args.get("layer", -1))
            if li >= 0 and li not in layers:          # in case the trace has no layer rows
                layers[li] = {"index": li, "name": args.get("layer_name", f"layer {li}"),
                              "ops": args.get("ops", ""), "unit": "", "start": None, "end": None}
            if li >= 0:
                row = layers[li]
                row.setdefault("_s", []).append(int(s))
                row.setdefault("_e", []).append(int(e))
                row["bytes"] = row.get("bytes", 0) + int(args.get("bytes", 0))
                row["commands"] = row.get("commands", 0) + int(args.get("commands", 1))
                row["_macs"] = row.get("_macs", 0) + int(args.get("macs", 0))
        elif ph == "C":
            for unit, v in args.items():
                s = series.setdefault((ev.get("name", ""), unit), ([], []))
                s[0].append(cyc(ev.get("ts", 0)))
                s[1].append(float(v))
    macs_per_cycle = float(other.get("macs_per_cycle") or 0)
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
        peak = other.get(f"{name.split(' ')[0]}_peak_gbps") if unit == "GB/s" else None
        if unit == "KiB" and other.get("onchip_bytes"):
            peak = other["onchip_bytes"] / 1024
        counters.append({"name": name, "unit": unit, "peak": peak or (100 if unit == "%" else None),
                         "t": [t[i] for i in order_t], "v": [v[i] for i in order_t]})
    counters.sort(key=lambda c: (c["unit"] != "%", c["unit"] != "GB/s", c["name"]))
    end = max([int(other.get("cycles") or 0)] + [max(l["e"]) for l in out_lanes if l["e"]])
    return {"meta": {**other, "clock_mhz": clock, "cycles": end}, "names": list(names),
            "lanes": out_lanes, "layers": table, "counters": counters}


def render_html(data: dict) -> str:
    meta = data["meta"]
    title = f"npu-sim trace: {meta.get('model', '')} on {meta.get('config', '')}"
    # "</" inside the JSON must not close the <script> element that holds it.
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (TEMPLATE.read_text(encoding="utf-8")
            .replace("__NPU_TITLE__", html.escape(title))
            .replace("__NPU_TRACE_DATA__", payload))


def write_viewer(trace_path, out=None) -> Path:
    trace_path = Path(trace_path)
    out = Path(out) if out else trace_path.with_suffix(".html")
    text = render_html(compact(load_trace(trace_path)))
    tmp = out.with_name(out.name + ".part")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{out}: cannot write ({exc.strerror})") from None
    return out


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
