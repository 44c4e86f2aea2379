"""Sweep outputs: designs.csv, the Pareto front (printed, pareto.csv, pareto.md), report.md."""
from __future__ import annotations

import collections
import csv
from pathlib import Path

from .pareto import best, pareto_front
from .runner import SweepResult
from .sweep import METRICS, OBJECTIVES

COLUMNS = OBJECTIVES + ("mac_utilization",)


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _header(metric: str) -> str:
    unit = METRICS[metric][1]
    return f"{metric} ({unit})" if unit else metric


def _table_rows(result: SweepResult, rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    axes = [a.name for a in result.sweep.axes]
    metrics = list(result.sweep.objectives) + [m for m in COLUMNS if m not in result.sweep.objectives]
    header = axes + [_header(m) for m in metrics]
    body = [[r["labels"][a] for a in axes] + [_fmt(r.get(m)) for m in metrics] for r in rows]
    return header, body


def text_table(header: list[str], body: list[list[str]], left: int = 1) -> str:
    """Aligned columns: the first `left` (axis values) flush left, numbers flush right."""
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) if i < left else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    lines += ["  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in body]
    return "\n".join("  " + line.rstrip() for line in lines)


def markdown_table(header: list[str], body: list[list[str]]) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")
    lines = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(esc, row)) + " |" for row in body]
    return "\n".join(lines)


def front(result: SweepResult) -> list[dict]:
    return pareto_front(result.designs, result.sweep.objectives, result.sweep.constraints)


def write_csv(path: Path, result: SweepResult, rows: list[dict]) -> None:
    axes = [a.name for a in result.sweep.axes]
    fields = ["design", "status"] + axes + ["cycles", *COLUMNS, "error"]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(fields)
        for r in rows:
            w.writerow([r["design"], r["status"]] + [r["labels"][a] for a in axes]
                       + [r.get(m) for m in ("cycles", *COLUMNS)] + [r.get("error") or ""])


def counts(result: SweepResult) -> collections.Counter:
    return collections.Counter(r["status"] for r in result.designs)


def answers(result: SweepResult) -> list[str]:
    """One line per objective: the best design meeting the constraints (area first: 'cheapest')."""
    sweep, lines = result.sweep, []
    for metric in sorted(sweep.objectives, key=lambda m: m != "area_mm2"):
        row = best(result.designs, metric, sweep.constraints)
        what = "cheapest (smallest area)" if metric == "area_mm2" else f"best {metric}"
        if row is None:
            lines.append(f"{what}: no design meets the constraints")
        else:
            labels = ", ".join(f"{k}={v}" for k, v in row["labels"].items())
            lines.append(f"{what}: {labels} -> {metric} {_fmt(row[metric])} {METRICS[metric][1]}".rstrip())
    return lines


def summary_text(result: SweepResult, files: dict[str, Path], max_rows: int = 15) -> str:
    sweep, c = result.sweep, counts(result)
    rows = front(result)
    header, body = _table_rows(result, rows[:max_rows])
    out = [f"npu-sim dse: {sweep.name}: {len(result.designs)} designs x {len(sweep.networks)} networks on "
           f"{sweep.base.name} ({sweep.strategy}); ok {c['ok']}, infeasible {c['infeasible']}, error {c['error']}; "
           f"simulated {len(result.evaluated)} points this run",
           f"constraints: {', '.join(map(str, sweep.constraints)) or 'none'}",
           f"Pareto front over {', '.join(f'{m} ({s})' for m, s in sweep.objectives.items())}: {len(rows)} designs",
           text_table(header, body, len(sweep.axes)) if rows else "  (empty: no feasible design)"]
    if len(rows) > max_rows:
        out.append(f"  ... {len(rows) - max_rows} more in {files['pareto']}")
    out += answers(result)
    out += [f"{name:<8} {path}" for name, path in files.items()]
    return "\n".join(out) + "\n"


def write_report(result: SweepResult, plots: list[Path] | None = None) -> dict[str, Path]:
    """Write designs.csv, pareto.csv, pareto.md and report.md into the sweep's output directory."""
    sweep, outdir = result.sweep, result.outdir
    rows = front(result)
    files = {"results": result.results_path, "designs": outdir / "designs.csv", "pareto": outdir / "pareto.csv",
             "report": outdir / "report.md"}
    write_csv(files["designs"], result, result.designs)
    write_csv(files["pareto"], result, rows)
    header, body = _table_rows(result, rows)
    table = markdown_table(header, body) if rows else "_No design is feasible and meets the constraints._"
    (outdir / "pareto.md").write_text(table + "\n", encoding="utf-8")

    c = counts(result)
    nets = ", ".join(f"`{Path(n).name if '/' in n else n}`" for n in sweep.networks)
    md = [f"# Design-space exploration: {sweep.name}", "",
          f"- base config: `{sweep.base.name}` ({sweep.base.source})",
          f"- networks: {nets} (metrics add up over the networks; power is the worst network's)",
          "- axes: " + "; ".join(f"`{a.name}` = {', '.join(a.label(i) for i in range(len(a.values)))}"
                                 for a in sweep.axes),
          f"- strategy: {sweep.strategy}" + (f", budget {sweep.budget}, seed {sweep.seed}" if sweep.budget else ""),
          f"- designs: {len(result.designs)} (ok {c['ok']}, infeasible {c['infeasible']}, error {c['error']})",
          f"- objectives: {', '.join(f'{m} ({s})' for m, s in sweep.objectives.items())}; "
          f"constraints: {', '.join(f'`{k}`' for k in sweep.constraints) or 'none'}", "",
          "## Answers", ""] + [f"- {line}" for line in answers(result)]
    md += ["", f"## Pareto front ({len(rows)} designs)", "", table, "",
           "Also as [pareto.csv](pareto.csv); every design is in [designs.csv](designs.csv) and every "
           "(design, network) point in [results.jsonl](results.jsonl)."]
    if plots:
        md += ["", "## Plots", ""]
        for png in (p for p in plots if p.suffix == ".png"):
            rel = png.relative_to(outdir).as_posix()
            md += [f"### {png.stem.replace('_', ' ')}", "", f"![{png.stem}]({rel}) ([SVG]({rel[:-4]}.svg))", ""]
    reasons = collections.Counter(r["error"].split(" (")[0][:160] for r in result.designs if r["status"] != "ok")
    if reasons:
        md += ["", "## Infeasible and failed designs", "", "| designs | reason |", "|---|---|"]
        md += [f"| {n} | {reason.replace('|', '/')} |" for reason, n in reasons.most_common(10)]
    files["report"].write_text("\n".join(md) + "\n", encoding="utf-8")
    return files
