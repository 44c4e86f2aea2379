"""Per-layer Gantt chart in the terminal (`npu-sim run --timeline`): a rendering of the Report.

One line per layer, however many layers: name, a bar on a time axis common to all rows and
scaled to the terminal width, cycles. Edge cells show half blocks so short layers stay visible;
a light shade marks the time before the layer's first compute, when only its loads ran (a
long shade: weights prefetched while earlier layers computed).
"""
from __future__ import annotations

import shutil
import sys

UNICODE = {"full": "█", "left": "▌", "right": "▐", "thin": "│", "edge": "│",
           "rule": "─", "light": "░"}
ASCII = {"full": "#", "left": "#", "right": "#", "thin": "|", "edge": "|", "rule": "-",
         "light": "."}


def _bar(start: int, end: int, total: int, width: int, glyph: dict) -> str:
    """Cells of width `total / width` cycles; a cell at least half covered is full."""
    cells = []
    scale = width / max(total, 1)
    a, b = start * scale, max(end, start) * scale
    for c in range(width):
        cover = max(0.0, min(b, c + 1) - max(a, c))
        if cover >= 0.5:
            cells.append(glyph["full"])
        elif cover > 0 or (a == b and c <= a < c + 1):
            ends_here, starts_here = c < b < c + 1, c < a < c + 1
            cells.append(glyph["thin"] if ends_here == starts_here else
                         glyph["left"] if ends_here else glyph["right"])
        else:
            cells.append(" ")
    return "".join(cells)


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.3g}"


def _time(cycles: float, clock_mhz: float) -> str:
    us = cycles / clock_mhz
    return f"{us / 1e3:.3g} ms" if us >= 1e3 else f"{us:.3g} us"


def render_timeline(report, columns: int | None = None, unicode: bool | None = None) -> str:
    if columns is None:
        columns = shutil.get_terminal_size((100, 24)).columns
    if unicode is None:
        unicode = (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "") == "utf8"
    glyph = UNICODE if unicode else ASCII
    rows = report.layers
    total = max([report.cycles] + [r.end for r in rows])
    iw = len(str(max(len(rows) - 1, 0)))
    nw = min(28, max([len(r.name) for r in rows] + [5]))
    cw = max(len(f"{total:,}"), 6)
    room = columns - 1 - (iw + cw + 6)              # for the name and the bar; no wrapping
    nw = max(6, min(nw, room - 20))                 # narrow terminals shorten names first
    width = max(10, room - nw)
    head = f"timeline: {report.model} on {report.config}, {total:,} cycles, " \
           f"1 column = {_num(total / width)} cycles"[:max(columns - 1, 20)]
    left, mid, right = "0", _time(total / 2, report.clock_mhz), _time(total, report.clock_mhz)
    axis = left + mid.center(width - len(left) - len(right)) + right
    out = [head, f"{'':>{iw}} {'layer':<{nw}}  {axis}  {'cycles':>{cw}}",
           f"{'':>{iw}} {'':<{nw}} {glyph['edge']}{glyph['rule'] * width}{glyph['edge']}"]
    for r in rows:
        name = r.name if len(r.name) <= nw else r.name[:nw - 1] + ("…" if unicode else "~")
        bar = _bar(r.compute_start, r.end, total, width, glyph)
        ahead = _bar(r.start, r.compute_start, total, width, glyph)
        bar = "".join(b if b != " " or a == " " else glyph["light"] for a, b in zip(ahead, bar))
        out.append(f"{r.index:>{iw}} {name:<{nw}} {glyph['edge']}{bar}{glyph['edge']}"
                   f" {r.cycles:>{cw},}")
    return "\n".join(out) + "\n"
