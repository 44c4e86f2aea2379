"""Lower bounds on a program's cycles, from its layers' static figures and the config.

The roofline takes each resource alone: every MAC at peak, or each memory moving only the
bytes the layers must move (constants, graph inputs and outputs). It assumes any layer's
loads can overlap any other layer's compute, however far ahead, which a finite on-chip
buffer does not allow: the attainable bound adds what the hardware itself imposes whatever
the schedule.

- Compute: each MAC layer takes at least the array cycles of its whole-layer problems
  (cost.array_cycles: folds with their preload, fill and drain, operand ports and the output
  stage; a 16-channel reduction on 32 weight-stationary rows fills half of them), as the
  least that any commands splitting them take, chained one after another as the array
  chains an operator's tiles (isa/systolic.py chain_least): splitting only adds folds, rows
  and port bytes, and a chain exposes at least one structural preload, one skew and a
  cycle of its last stream.
- Buffer: each memory streams its bytes in layer order at its bandwidth, at most the whole
  on-chip buffer ahead of the layer that uses them (`stream_cycles`), from the moment its
  first bytes can arrive (a DMA setup and the memory's latency). A layer without array work
  (the vector unit's or the DMAs', free here) hands its bytes to the next layer with array
  work, which uses them evenly over its compute: the vector unit may take them as they
  arrive and pass its rows on (row handoffs), so the array need not wait for all of them (a
  TFLite QUANTIZE of a 36 KB input, streamed under the first conv, had run below a bound
  that made the conv wait for the whole input). Where the feature maps live
  in another memory, a schedule may buffer the weights there too (edge-256's flash weights in
  system SRAM, as Vela does and compiler/buffering.py does), so that memory's whole size
  counts as room as well (`lookahead`).

Both relax the real machine (no tiles, one setup and latency in all, no feature-map traffic,
every byte freed the moment it is used, the vector unit free), so no schedule beats the bound.
"""
from __future__ import annotations

import math

from .cost import array_cycles

_EPS = 1e-9


def stream_cycles(compute: list[float], needed: list[float], bytes_per_cycle: float,
                  capacity: float) -> float:
    """Least cycles to run `compute[i]` cycles of layers in order while a memory delivers the
    `needed[i]` bytes each one uses, at `bytes_per_cycle`, never more than `capacity` bytes
    ahead of their use. A layer uses its bytes evenly over its compute, and runs at full rate
    whenever they have arrived (a fluid model; the greedy schedule, loading as early as the
    capacity lets it and computing as soon as the bytes are there, is optimal)."""
    r, cap = float(bytes_per_cycle), float(capacity)
    total = float(sum(needed))
    t = loaded = base = 0.0
    for c, b in zip(compute, needed):
        c, b = float(c), float(b)
        if c <= 0:                              # uses its bytes as soon as they arrive
            if loaded < base + b:
                t += (base + b - loaded) / r
                loaded = base + b
            base += b
            continue
        d = b / c                               # bytes used per cycle of compute
        left = c
        while left > _EPS:
            ahead = loaded - (base + (c - left) * d)
            if total - loaded <= _EPS:          # everything has arrived
                t += left
                break
            if d > r:                           # outruns the memory: drains what is ahead
                if ahead <= _EPS:               # then computes at the memory's pace
                    t += left * d / r
                    loaded = base + b
                    break
                dt = min(left, ahead / (d - r), (total - loaded) / r)
                loaded += r * dt
            elif ahead >= cap - _EPS:           # buffer full: loads keep pace with use
                dt = min(left, (total - loaded) / d) if d > 0 else left
                loaded += d * dt
            else:                               # fills the buffer while computing
                dt = min(left, (cap - ahead) / (r - d) if r > d else math.inf,
                         (total - loaded) / r)
                loaded += r * dt
            t += dt
            left -= dt
        base += b
    return t


def lookahead(config, mem: str) -> int:
    """Bytes memory `mem` can deliver ahead of their use: the on-chip buffer, and all of the
    feature maps' memory when that is another (nothing in the machine stops a DMA from
    parking bytes there; the room the feature maps leave is not counted off, so the bound
    stays below every schedule)."""
    fm = config.placement.feature_maps
    return config.sram.size + (config.memories[fm].size if fm != mem else 0)


def _to_next_compute(compute: list[float], needed: list[float]) -> list[float]:
    """`needed` with each layer's bytes moved to the next layer that computes (those after
    the last one stay where they are)."""
    last = max((i for i, c in enumerate(compute) if c > 0), default=-1)
    moved, carried = list(needed), 0.0
    for i in range(last + 1):
        if compute[i] > 0:
            moved[i] += carried
            carried = 0.0
        else:
            carried += moved[i]
            moved[i] = 0
    return moved


def attainable(layers, config) -> dict:
    """{'cycles', 'bound_by', 'terms'}: the attainable bound and, per memory, the stream bound
    it took the maximum of ('compute' alone when no layer moves external bytes)."""
    compute = [sum(array_cycles(config, *p) for p in layer.array_problems) for layer in layers]
    terms = {"compute": float(sum(compute))}
    first = next((i for i, c in enumerate(compute) if c > 0), None)
    for mem in sorted({m for layer in layers for m in layer.min_bytes}):
        needed = [layer.min_bytes.get(mem, 0) for layer in layers]
        terms[mem] = stream_cycles(compute, _to_next_compute(compute, needed),
                                   config.memory_bytes_per_cycle(mem), lookahead(config, mem))
        if first is not None and needed[first]:
            # The first layer computes nothing before its first bytes from this memory
            # arrive, a DMA setup and the memory's latency after the start.
            terms[mem] += config.dma.setup_cycles + config.memory_latency_cycles(mem)
    bound_by = max(terms, key=terms.get)
    return {"cycles": int(math.ceil(terms[bound_by])), "bound_by": bound_by,
            "terms": {k: int(math.ceil(v)) for k, v in terms.items()}}
