"""A systolic array's timing per dataflow, fold by fold (SCALE-Sim's mapping of a GEMM): the
contract by which the compiler plans tiles and the machine charges them.

A layer asks for m outputs x n channels x k reduction terms. The array (R rows, C columns)
holds one block of a stationary operand per fold and streams the other through it:

    dataflow             stationary block       folds             preload  stream
    weight_stationary    k x n weights          ceil(k/R)ceil(n/C)  R        m
    output_stationary    m x n outputs          ceil(m/R)ceil(n/C)  0        k
    input_stationary     k x m inputs           ceil(k/R)ceil(m/C)  R        n

and every fold pays a fill skew of R + C - 2 cycles (operands enter row by row and column by
column, the last result leaves R + C - 2 cycles after the first). With `fold_overlap: false`
each fold starts once the previous one has drained: folds x (preload + stream + skew), the
closed forms SCALE-Sim's compute cycles follow. With `fold_overlap: true` the stationary
registers are double-buffered: the next fold's preload hides behind the current fold's
stream, and folds follow each other through the array with one fill and one drain in all.
The same holds between consecutive commands, whose folds the machine chains when the next is
ready (`head`, `tail` and `drain` below; npu_sim/simulator.py).

Depthwise layers have no reduction across channels to share: each PE computes one output
pixel of one channel, streaming its taps (output-stationary), and needs its own activation
every cycle, so its operand port, not the array, usually sets the pace.

Operand delivery: each fold's preload and stream take at least their bytes over the port that
carries them (`mac_array.ports`, each bounded by the buffer's aggregate bank bandwidth): the
bytes of the PEs a fold occupies, re-reads included (WS streams every input once per column
block), spread evenly over the folds. Partial
sums stay in the column accumulators (`mac_array.accumulators` entries each) while the reduction
folds pass; a command whose outputs per column exceed them spills partial sums through the output
port and reads them back at every further reduction fold.

Several identical arrays (`mac_array.arrays`, a TPU core's four MXUs) share the ports. A
command's work is split among them the way that finishes first: its folds into groups, one per
array, or its stream (each array holding the same stationary block and streaming a share of the
rows, so that block is loaded into each), or a mix (2 x 2 of 4 arrays). Fill and drain are each
array's own, in parallel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

UNLIMITED = math.inf


@dataclass(frozen=True)
class ArrayTime:
    """The array's time for one problem: busy, ideal and streaming cycles, traffic."""

    cycles: int          # the array's busy cycles
    ideal: int           # cycles at unlimited operand bandwidth
    compute: int         # cycles streaming operands (folds x stream x passes)
    traffic: int = 0     # bytes through the array's ports, re-reads and spills included
    # Weight-stationary only (else 0): the first fold's preload, and one fold's stream, in
    # which every row of the streamed operand enters the array once and, in the last fold,
    # every output row leaves it finished, one row a cycle.
    preload: int = 0
    stream: int = 0
    # With fold_overlap (else 0), what a next command may overlap, as the folds of one
    # command do: its first fold's preload (`head`, loaded behind the previous command's
    # last fold, whose stream is `tail`) and the previous command's skew (`drain`).
    head: int = 0
    tail: int = 0
    drain: int = 0
    # The fewest cycles any commands that split the problem take on the array, chained or
    # not: the attainable bound's figure (see chain_least()).
    least: int = 0

    @property
    def fill(self) -> int:
        """Preload, fill skew and drain: what the array spends not streaming."""
        return self.ideal - self.compute

    @property
    def stall(self) -> int:
        """Cycles waiting for operand delivery."""
        return self.cycles - self.ideal


def passes(arr, act: str, weight: str) -> int:
    """Passes of each fold's stream for an operand pair (1 / its throughput)."""
    rate = arr.precision.get(f"{act}x{weight}")
    return 1 if rate is None else math.ceil(1 / rate - 1e-9)


def _port(arr, name: str, bank_bpc: float) -> float:
    return min(arr.ports.get(name, UNLIMITED), bank_bpc)


def array_time(arr, kind: str, m: int, n: int, k: int, npass: int = 1,
               sizes: tuple[int, int, int] = (1, 1, 1), bank_bpc: float = UNLIMITED,
               partial: bool = False) -> ArrayTime:
    """Cycles of an (m, n, k) problem. `sizes`: bytes per activation, weight and output
    element; `bank_bpc`: the buffer's aggregate bandwidth; `partial`: the outputs are raw
    partial sums (the reduction continues in a later command)."""
    R, C = arr.rows, arr.cols
    xa, xw, xo = sizes
    act = _port(arr, "activations", bank_bpc)
    wgt = _port(arr, "weights", bank_bpc)
    out = _port(arr, "outputs", bank_bpc)
    skew = R + C - 2
    # Bytes each port carries over the whole problem (the PEs a fold occupies, not its padding),
    # spread evenly over the folds.
    xf = 4 if partial else xo                           # raw partial sums leave as int32
    if kind == "depthwise":
        folds, pre, stream = math.ceil(m / R) * math.ceil(n / C), 0, k
        pre_cycles = 0.0
        # every PE its own activation per tap, every column its own weight
        a_bytes, w_bytes, o_bytes = m * n * k * xa, n * k * xw * math.ceil(m / R), m * n * xf
    else:
        flow = arr.dataflow
        kfolds = math.ceil(k / R)
        spill = 0.0
        if flow != "output_stationary" and kfolds > 1:
            # outputs per column a fold accumulates: WS streams m of them, IS n
            if (m if flow == "weight_stationary" else n) > arr.accumulators:
                spill = 2 * m * n * 4 * (kfolds - 1)    # written and read back per k-fold
        if flow == "weight_stationary":
            folds, pre, stream = kfolds * math.ceil(n / C), R, m
            pre_cycles = k * n * xw / wgt                # each weight loaded once
            a_bytes, w_bytes = m * k * xa * math.ceil(n / C), 0.0
        elif flow == "input_stationary":
            folds, pre, stream = kfolds * math.ceil(m / C), R, n
            pre_cycles = m * k * xa / act                # each input loaded once
            a_bytes, w_bytes = 0.0, n * k * xw * math.ceil(m / C)
        else:
            folds, pre, stream = math.ceil(m / R) * math.ceil(n / C), 0, k
            pre_cycles, spill = 0.0, 0.0
            a_bytes, w_bytes = m * k * xa * math.ceil(n / C), n * k * xw * math.ceil(m / R)
        o_bytes = m * n * xf + spill
    traffic = a_bytes + w_bytes + o_bytes + (
        (k * n * xw if flow == "weight_stationary" else m * k * xa if flow == "input_stationary"
         else 0) if kind != "depthwise" else 0)
    stream *= npass
    best = None
    for split in _splits(getattr(arr, "arrays", 1)):
        t = _split_time(arr, split, folds, pre, stream, skew, pre_cycles,
                        max(a_bytes / act, w_bytes / wgt, o_bytes / out))
        if best is None or t[0] < best[0]:
            best = t
    real, ideal, compute, copies, first, each = best
    preloaded = k * n * xw if kind != "depthwise" and flow == "weight_stationary" else \
        m * k * xa if kind != "depthwise" and flow == "input_stationary" else 0
    # one array's rows, in order (arrays sharing a stream finish theirs side by side)
    rows = kind != "depthwise" and flow == "weight_stationary" and copies == 1
    # Several arrays split each command their own way, which no one split of the whole
    # problem bounds: their commands are not chained.
    chained = arr.fold_overlap and getattr(arr, "arrays", 1) == 1
    least = chain_least(folds, pre, first, each, skew) if chained else real
    return ArrayTime(math.ceil(real), ideal, compute,
                     math.ceil(traffic + (copies - 1) * preloaded),
                     math.ceil(first) if rows else 0, math.ceil(each) if rows else 0,
                     # rounded down, so a chained command hides no more than it overlaps
                     math.floor(first) if chained else 0, math.floor(each) if chained else 0,
                     skew if chained else 0, math.ceil(least - 1e-9))


def chain_least(folds: int, pre: int, first: float, each: float, skew: int) -> float:
    """The fewest cycles any chain of commands that splits a problem takes (fold_overlap, one
    array): of its folds in order, the first preload, then each later fold after the longer of
    the previous fold's stream and its own preload, then the last stream and one skew. Over
    any split, the streams add up to at least the whole problem's (folds x each: rows, column
    blocks and port bytes only add up), the preloads to at least its folds x first (the
    weights' port bytes add up, and every fold preloads at least `pre`), the first preload is
    at least `pre` and the last stream at least a cycle. So the chain takes at least
    skew + max(pre + folds x each, folds x first + 1): the whole problem as one command when
    its preload is not port-bound and its folds stream longer than they preload, less
    otherwise (a chain of lighter tiles can expose less preload than the average)."""
    return skew + max(pre + folds * each, folds * first + 1)


def _splits(arrays: int) -> list[tuple[int, int]]:
    """(arrays sharing the stream, groups of folds) with their product the array count."""
    return [(d, arrays // d) for d in range(1, arrays + 1) if arrays % d == 0]


def _split_time(arr, split, folds, pre, stream, skew, pre_cycles, stream_port):
    """(cycles, ideal, streaming cycles, stationary copies, a fold's preload, a fold's stream)
    with the folds in `groups` and each fold's stream shared by `sharing` arrays: the ports
    carry the stationary block once per sharing array, the streamed bytes once."""
    sharing, groups = split
    folds_each = math.ceil(folds / groups)
    stream_each = math.ceil(stream / sharing)
    pre_time = pre_cycles * sharing / folds_each
    stream_time = stream_port / folds_each
    ideal = math.ceil(_total(arr, folds_each, pre, stream_each, skew))
    first, each = max(pre, pre_time), max(stream_each, stream_time)
    real = _total(arr, folds_each, first, each, skew)
    return real, ideal, folds_each * stream_each, sharing, first, each


def _total(arr, folds: int, pre: float, stream: float, skew: int) -> float:
    if arr.fold_overlap:        # each later fold's preload behind the previous fold's stream
        return pre + (folds - 1) * max(stream, pre) + stream + skew
    return folds * (pre + stream + skew)
