"""Per-design aggregation over networks, constraints, and the Pareto front."""
from __future__ import annotations

from .sweep import METRICS, Constraint


def aggregate(rows: list[dict]) -> dict:
    """One design's per-network rows -> one row for the design (the workload = one run of each).

    latency, energy and cycles add up (the suite run back to back); power is the worst
    network's average power (a power budget must hold for each); area is the design's;
    EDP and throughput/mm² are recomputed from the sums. With one network these equal its row.
    """
    first = rows[0]
    out = {"design": first["design"], "overrides": first["overrides"], "networks": len(rows),
           "status": "ok", "error": None, "area_mm2": first.get("area_mm2")}
    bad = [r for r in rows if r["status"] != "ok"]
    if bad:
        worst = next((r for r in bad if r["status"] == "error"), bad[0])
        out.update(status=worst["status"], error=f"{worst['network']}: {worst['error']}")
        for m in ("cycles", "latency_ms", "energy_uj", "power_mw", "edp", "throughput_per_mm2", "mac_utilization"):
            out[m] = None
        return out
    out["cycles"] = sum(r["cycles"] for r in rows)
    out["latency_ms"] = sum(r["latency_ms"] for r in rows)
    out["energy_uj"] = sum(r["energy_uj"] for r in rows)
    out["power_mw"] = max(r["power_mw"] for r in rows)
    out["mac_utilization"] = sum(r["mac_utilization"] for r in rows) / len(rows)
    out["edp"] = out["energy_uj"] * out["latency_ms"]
    area = out["area_mm2"]
    out["throughput_per_mm2"] = 1e3 / out["latency_ms"] / area if area else None
    return out


def meets(row: dict, constraints: list[Constraint]) -> bool:
    return row.get("status", "ok") == "ok" and all(c.ok(row) for c in constraints)


def _senses(objectives) -> dict[str, str]:
    if isinstance(objectives, dict):
        return dict(objectives)
    return {name: METRICS[name][0] for name in objectives}


def dominates(a: tuple, b: tuple) -> bool:
    """a dominates b: no worse in every objective and better in one (vectors already 'minimise')."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def pareto_front(rows: list[dict], objectives, constraints: list[Constraint] = ()) -> list[dict]:
    """Rows no other row dominates, among the ok rows that meet the constraints.

    objectives: {"latency_ms": "min", "throughput_per_mm2": "max", ...} or a list of names (each
    with its natural sense). Ties (equal vectors) all stay. Sorted by the first objective.
    """
    senses = _senses(objectives)
    pool = [r for r in rows if meets(r, constraints) and all(r.get(m) is not None for m in senses)]
    vec = [tuple(r[m] if s == "min" else -r[m] for m, s in senses.items()) for r in pool]
    front = [r for i, r in enumerate(pool) if not any(dominates(v, vec[i]) for v in vec)]
    first, sense = next(iter(senses.items()))
    return sorted(front, key=lambda r: r[first] if sense == "min" else -r[first])


def best(rows: list[dict], metric: str, constraints: list[Constraint] = ()) -> dict | None:
    """The row that is best in `metric` among those meeting the constraints (e.g. cheapest area)."""
    pool = [r for r in rows if meets(r, constraints) and r.get(metric) is not None]
    if not pool:
        return None
    sign = 1 if METRICS[metric][0] == "min" else -1
    return min(pool, key=lambda r: sign * r[metric])
