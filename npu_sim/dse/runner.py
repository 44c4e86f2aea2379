"""Run a sweep on any concurrent.futures.Executor: local processes, or a Dask cluster.

Both go through the same code path (submit + as_completed); Dask is only a different
Executor (`Client.get_executor()`). Every row is appended to results.jsonl as it arrives, so
an interrupted sweep loses at most the points in flight, and --resume skips every point whose
key (base config + network content + overrides) is already there with status ok or
infeasible. Rows with status error (unexpected exceptions, lost workers) are retried; a line
that is not a sound row (edited, corrupt) is refused, naming the file and line.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from npu_sim.isa.errors import ConfigError, InputError

from ..config_checks import show_value
from .evaluate import METRIC_FIELDS, network_graph, evaluate_task, network_id, point_key
from .pareto import aggregate
from .strategies import make_strategy
from .sweep import Sweep

RESULTS_FILE = "results.jsonl"
DONE = ("ok", "infeasible")  # deterministic outcomes; "error" may be transient
MAX_METRIC = 1e18            # beyond any real figure (ms, uJ, mW, mm², cycles), and sums stay finite
MAX_JOBS = 512


@dataclass
class SweepResult:
    sweep: Sweep
    outdir: Path
    rows: list[dict]  # one per (design, network), in the order designs were asked
    designs: list[dict]  # one per design, aggregated over networks, with axis labels
    evaluated: list[str] = field(default_factory=list)  # keys simulated by this run (not from the file)

    @property
    def results_path(self) -> Path:
        return self.outdir / RESULTS_FILE


def _number_problem(row: dict, name: str, optional: bool) -> str | None:
    value = row.get(name)
    if value is None and optional:
        return None
    kind = int if name == "cycles" else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not 0 <= value <= MAX_METRIC:
        return (f"{name}: expected a number from 0 to {MAX_METRIC:g}"
                f"{' or null' if optional else ''}, got {show_value(value)}")
    return None


def row_problem(row) -> str | None:
    """Why a results.jsonl row cannot be trusted, or None. Error rows are retried, so only their
    key and status matter; the metrics of ok and infeasible rows go into the tables as they are."""
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    if not isinstance(row.get("key"), str) or not row["key"]:
        return f"key: expected a point key, got {show_value(row.get('key'))}"
    if row.get("status") not in ("ok", "infeasible", "error"):
        return f"status: expected ok, infeasible or error, got {show_value(row.get('status'))}"
    if row["status"] == "error":
        return None
    null = type(None)
    for name, kind, what in (("design", str, "a string"), ("network", str, "a string"),
                             ("overrides", dict, "a mapping"), ("error", (str, null), "a string or null"),
                             ("area", (dict, null), "a mapping or null")):
        if not isinstance(row.get(name), kind):
            return f"{name}: expected {what}, got {show_value(row.get(name))}"
    for name in METRIC_FIELDS:     # an ok row has them all but the area figures (no area section)
        optional = row["status"] == "infeasible" or name in ("area_mm2", "throughput_per_mm2")
        if problem := _number_problem(row, name, optional):
            return problem
    return None


def read_results(path: Path) -> dict[str, dict]:
    """key -> last row in the file (run_sweep cuts a torn last line first). A line that is not a
    row this module wrote is an InputError naming the file and line: it is never trusted."""
    rows = {}
    if not path.exists():
        return rows
    for n, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except RecursionError:
            problem = "not a JSON row (nested too deep)"
        except ValueError as exc:                        # not JSON, not UTF-8
            problem = f"not a JSON row ({' '.join(str(exc).split())[:100]})"
        else:
            problem = row_problem(row)
        if problem:
            raise InputError(f"{path}: line {n}: {problem}; delete the line, or run without --resume")
        rows[row["key"]] = row
    return rows


def _append(fd: int, row: dict) -> None:
    """One row, one write() on an O_APPEND descriptor: a kill lands before or after it, so
    the file never holds half a row written by this process (a torn line from a crash of the
    machine itself is dropped when read)."""
    data = (json.dumps(row, default=str) + "\n").encode()
    written = os.write(fd, data)
    while written < len(data):           # a short write (a full disk): finish the line
        written += os.write(fd, data[written:])


def _cut_torn_tail(path: Path) -> None:
    """Appending after a line without its newline would corrupt the next row too."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


@contextlib.contextmanager
def make_executor(jobs: int | None = None, scheduler: str | None = None):
    """A Dask client's executor when a scheduler address is given, else local worker processes."""
    check_jobs(jobs)
    if scheduler:
        try:
            from distributed import Client
        except ImportError:
            raise ConfigError("--scheduler needs dask distributed: pip install 'npu-sim[dse]'") from None
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
        try:
            yield client.get_executor(pure=False)  # pure=False: never dedupe or cache by argument hash
        finally:
            client.close()
    else:
        # The platform's start method (fork on Linux): workers start fast and scripts need no
        # __main__ guard. Python starts all forked workers at the first submit, before any results.
        with ProcessPoolExecutor(max_workers=jobs or min(os.cpu_count() or 1, MAX_JOBS)) as ex:
            yield ex


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, file=sys.stderr, unit="pt", dynamic_ncols=True, desc="dse")


def check_jobs(jobs: int | None) -> None:
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS):
        raise ConfigError(f"-j {jobs}: expected 1 to {MAX_JOBS} worker processes")


def run_sweep(sweep: Sweep, outdir, jobs: int | None = None, scheduler: str | None = None,
              resume: bool = False, progress: bool = True, executor: Executor | None = None) -> SweepResult:
    check_jobs(jobs)
    net_ids = {net: network_id(net) for net in sweep.networks}  # a bad network fails here, once
    for net in sweep.networks:  # and one that does not load: "infeasible" is left to the designs
        network_graph(net)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / RESULTS_FILE
    if resume and path.exists():
        _cut_torn_tail(path)
        done = {k: r for k, r in read_results(path).items() if r.get("status") in DONE}
    else:
        path.write_text("")  # without --resume a sweep starts afresh
        done = {}
    strategy = make_strategy(sweep)
    result = SweepResult(sweep, outdir, [], [])
    seen_designs: set[tuple] = set()
    counts = {"ok": 0, "infeasible": 0, "error": 0}
    points = strategy.total * len(sweep.networks)
    bar = _progress(points, progress)
    with contextlib.ExitStack() as stack:      # no more worker processes than points
        workers = min(jobs or os.cpu_count() or 1, points, MAX_JOBS)
        ex = executor or stack.enter_context(make_executor(workers, scheduler))
        out = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        stack.callback(os.close, out)
        if bar is not None:
            stack.callback(bar.close)
        while (designs := strategy.ask()) is not None:
            batch = _run_batch(sweep, designs, net_ids, done, ex, out, bar, counts, result.evaluated)
            aggregated = []
            for design in designs:
                rows = [batch[(design, net)] for net in sweep.networks]
                agg = {**aggregate(rows), "labels": sweep.labels(design)}
                aggregated.append(agg)
                if design not in seen_designs:
                    seen_designs.add(design)
                    result.rows.extend(rows)
                    result.designs.append(agg)
            strategy.tell(designs, aggregated)
    return result


def _run_batch(sweep, designs, net_ids, done, ex, out, bar, counts, evaluated) -> dict:
    """Evaluate one batch of designs on every network -> {(design, network): row}."""
    want, futures = {}, {}
    for design in designs:
        overrides = sweep.overrides(design)
        for net in sweep.networks:
            key = want[(design, net)] = point_key(sweep.base, net_ids[net], overrides)
            if key not in done and key not in futures.values():  # NSGA-II may ask a design twice
                futures[ex.submit(evaluate_task, sweep.base, overrides, net, key, sweep.timeout_s)] = key
    if bar is not None:
        bar.update(len(want) - len(futures))  # already in the results file
    fresh = {}
    try:
        for fut in as_completed(futures):
            key = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:  # the worker died or the cluster lost it: record, go on
                row = {"key": key, "status": "error", "error": f"{type(exc).__name__}: {exc}"[:500]}
            _append(out, row)
            fresh[key] = row
            evaluated.append(key)
            if row["status"] in DONE:
                done[key] = row
            counts[row["status"]] += 1
            if bar is not None:
                bar.set_postfix(ok=counts["ok"], infeasible=counts["infeasible"], error=counts["error"], refresh=False)
                bar.update(1)
    except BaseException:
        for fut in futures:  # Ctrl-C: do not sit through the queue; what finished is on disk
            fut.cancel()
        raise
    batch = {}
    for (design, net), key in want.items():
        row = fresh.get(key) or done[key]
        if "design" not in row:  # a lost-worker row lacks what evaluate_point fills in
            row = _placeholder(sweep, design, net, row)
        batch[(design, net)] = row
    return batch


def _placeholder(sweep, design, net, row) -> dict:
    from .evaluate import METRIC_FIELDS, network_name, design_key
    overrides = sweep.overrides(design)
    return {**dict.fromkeys(METRIC_FIELDS), "design": design_key(sweep.base, overrides),
            "network": network_name(net), "overrides": overrides, "area": None, **row}
