"""Run a sweep on any concurrent.futures.Executor: local processes, or a Dask cluster.

Both go through the same code path (submit + as_completed); Dask is only a different
Executor (`Client.get_executor()`). Every row is appended to results.jsonl as it arrives, so
an interrupted sweep loses at most the points in flight, and --resume skips every point whose
key (base config + network content + overrides) is already there with status ok or
infeasible. Rows with status error (unexpected exceptions, lost workers) are retried.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from npu_sim.isa.errors import ConfigError

from .evaluate import evaluate_task, network_id, point_key
from .pareto import aggregate
from .strategies import make_strategy
from .sweep import Sweep

RESULTS_FILE = "results.jsonl"
DONE = ("ok", "infeasible")  # deterministic outcomes; "error" may be transient


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


def read_results(path: Path) -> dict[str, dict]:
    """key -> last complete row in the file; a torn last line (killed mid-write) is dropped."""
    rows = {}
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "key" in row:
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
        with ProcessPoolExecutor(max_workers=jobs or os.cpu_count()) as ex:
            yield ex


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, file=sys.stderr, unit="pt", dynamic_ncols=True, desc="dse")


def run_sweep(sweep: Sweep, outdir, jobs: int | None = None, scheduler: str | None = None,
              resume: bool = False, progress: bool = True, executor: Executor | None = None) -> SweepResult:
    net_ids = {net: network_id(net) for net in sweep.networks}  # a bad network fails here, once
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
    bar = _progress(strategy.total * len(sweep.networks), progress)
    with contextlib.ExitStack() as stack:
        ex = executor or stack.enter_context(make_executor(jobs, scheduler))
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
    from .evaluate import METRIC_FIELDS, _network_name, design_key
    overrides = sweep.overrides(design)
    return {**dict.fromkeys(METRIC_FIELDS), "design": design_key(sweep.base, overrides),
            "network": _network_name(net), "overrides": overrides, "area": None, **row}
