"""Data-movement steps that stay views: a SLICE or TRANSPOSE whose result is read in place
through strides (by later moves, or by MAC and vector steps whose address generators step
through any strides), and moves whose producer writes straight into the moved layout.
compiler/placement.py decides where tensors live; this module says which moves need no copy.
"""
from __future__ import annotations

import numpy as np

from npu_sim.isa.commands import BURST_BYTES, TensorView, dense

from .ir import Graph, itemsize

# Data-movement steps that are views of their input: their result need not exist when only
# other data-movement steps read it, which then read the composed view (one DMA, not two), or
# when MAC and vector steps read it from a tensor they produce among themselves (on chip),
# whose commands then take the strided view as their operand, as the array's and the vector
# unit's address generators step through any strides (the heads' q, k and v of a QKV GEMM).
VIEW_MOVES = frozenset({"SLICE", "TRANSPOSE"})
VIEW_READERS = frozenset({"SLICE", "TRANSPOSE", "CONCAT", "PAD", "TILE", "REVERSE"})
COMPUTE_KINDS = frozenset({"mac", "vector"})
# Bytes of the shortest contiguous run a compute step reads in place: the banks serve whole
# words (npu_sim.cost charges a compute view's runs by the word, as a DMA's), so a gather of
# shorter runs (a transposed K, one byte a word) stays a move, done once, instead of every
# tile that reads it paying a word a byte; a head's rows of q or v (16-64 B) read in place.
MIN_COMPUTE_RUN = 16


def reads_in_place_off_chip(graph: Graph, alias: dict[str, str], virtual: dict, name: str,
                            resident: int) -> bool:
    """A compute step may read view `name` in place from external memory too when a copy
    would gain nothing: too large for the `resident` share, the copy would go to external
    memory as well, and its runs cost what the copy's would (each run pays whole bursts:
    runs of at least eight bursts, or exact multiples of one, lose at most an eighth to
    rounding), while the move that makes the copy reads those runs too, then writes and
    reads them again (a ResNet downsample's input cropped to odd rows and columns: one run
    per row). Short runs (a transposed K, a byte each) and copies that may stay on chip
    (read by many tiles: attention heads on a large buffer) stay moves."""
    if graph.tensors[name].nbytes <= resident:
        return False
    origin = _origin_view(graph, alias, virtual, name)
    if origin is None:
        return False
    run = origin[1].contiguous_run() * itemsize(graph.tensors[name].dtype)
    return run % BURST_BYTES == 0 or run >= 8 * BURST_BYTES


def moved_view(src: TensorView, op, graph: Graph) -> TensorView:
    """The view `op` (a VIEW_MOVES operator) makes of `src`."""
    if op.op == "TRANSPOSE":
        perms = op.attrs["perms"]
        return TensorView(src.mem, src.addr, tuple(src.shape[i] for i in perms),
                          tuple(src.strides[i] for i in perms), src.dtype)
    start = [int(v) for v in np.asarray(graph.const(op.inputs[1])).reshape(-1)]
    shape = graph.tensors[op.outputs[0]].shape
    return TensorView(src.mem, src.addr + sum(a * s for a, s in zip(start, src.strides)),
                      tuple(shape), src.strides, src.dtype)


def reshape_view(view: TensorView, shape) -> TensorView | None:
    """`view` with the same elements in row-major order as `shape`, by strides alone (the runs
    of dims merged or split must be contiguous in one another); None when it takes a copy."""
    old = [(n, s) for n, s in zip(view.shape, view.strides) if n != 1]
    new = [n for n in shape if n != 1]
    strides, i = [], 0
    for n in new:
        if i >= len(old):
            return None
        size, run = old[i][0], [old[i]]
        i += 1
        while size < n and i < len(old):   # merge: each dim must step over the next's extent
            if run[-1][1] != old[i][1] * old[i][0]:
                return None
            size *= old[i][0]
            run.append(old[i])
            i += 1
        if size == n:
            strides.append(run[-1][1])
            continue
        if size > n and len(run) == 1 and size % n == 0:    # split one dim
            inner = size // n
            strides.append(run[0][1] * inner)
            old.insert(i, (inner, run[0][1]))
            continue
        return None
    if i != len(old):
        return None
    full, step = [], view.itemsize          # a dim of one takes the stride of a dense layout
    for n in reversed(shape):
        step = strides.pop() if n != 1 else step
        full.append(step)
        step *= n
    return TensorView(view.mem, view.addr, tuple(shape), tuple(reversed(full)), view.dtype)


def view_moves(graph: Graph, steps, alias: dict[str, str]) -> tuple[dict, dict, set]:
    """Results of VIEW_MOVES steps read only by data-movement steps among VIEW_READERS, or
    only by MAC and vector steps when the move's (composed) source is made by one of them,
    directly or through reshapes a strided view can express: (result -> (source, operator),
    result -> the stored tensor it is a view of, the results compute steps read)."""
    pinned = {alias.get(n, n) for n in graph.inputs + graph.outputs}
    readers: dict[str, list] = {}
    names: dict[str, set] = {}
    made_by: dict[str, str] = {}
    for step in (s for s in steps if s.kind != "alias"):    # a reshape's readers decide
        made_by[step.output] = step.kind
        for name in step.inputs:
            readers.setdefault(alias.get(name, name), []).append(step)
            names.setdefault(alias.get(name, name), set()).add(name)
    out, probes, origin = {}, {}, {}      # result -> its view of a dense origin, that origin
    computed_views = set()
    for step in steps:
        op = step.main
        if step.kind != "dma" or op.op not in VIEW_MOVES or op.is_variable_access \
                or step.output in pinned or not readers.get(step.output):
            continue
        src = alias.get(op.inputs[0], op.inputs[0])
        base = origin.get(src, src)
        moves = all(r.kind == "dma" and r.main.op in VIEW_READERS and not r.main.is_variable_access
                    for r in readers[step.output])
        computed = all(r.kind in COMPUTE_KINDS for r in readers[step.output]) and \
            made_by.get(base) in COMPUTE_KINDS and base not in pinned
        if not (moves or computed):
            continue
        t = graph.tensors[step.output]
        shape = graph.tensors[op.inputs[0]].shape
        probe = dense(0, 0, shape, t.dtype) if src not in probes else \
            reshape_view(probes[src], shape)
        if probe is None:
            continue
        probe = moved_view(probe, op, graph)
        if not moves and probe.contiguous_run() < MIN_COMPUTE_RUN:
            continue
        if all(reshape_view(probe, graph.tensors[n].shape) is not None
               for n in names[step.output] if n != step.output):
            out[step.output] = (op.inputs[0], op)
            probes[step.output], origin[step.output] = probe, base
            if not moves:
                computed_views.add(step.output)
    return out, origin, computed_views


# Data-movement steps whose whole input a MAC or vector step makes for them alone: that step
# writes each element where the move would put it (its output address generator steps
# through the strides), and the move emits nothing (the heads' outputs transposed or
# concatenated back into tokens x channels).
FILLED_MOVES = frozenset({"TRANSPOSE", "CONCAT"})


def written_moves(graph: Graph, steps, alias: dict[str, str], virtual: dict[str, tuple],
                   onchip_size: int) -> dict[str, tuple]:
    """Tensors made by a MAC or vector step and read only by one TRANSPOSE or CONCAT (directly
    or through view moves), which places each of their elements once: tensor -> (the move's
    result, element offset, element strides) of the strided view it is written as. Only
    moves whose result fits the on-chip buffer, where it must stay, are considered (working
    out the places takes a few integers per element)."""
    made_by = {s.output: s.kind for s in steps if s.kind != "alias"}
    readers: dict[str, set] = {}
    for i, step in enumerate(steps):
        if step.kind == "alias" or step.output in virtual:
            continue
        for name in step.inputs:
            r = alias.get(name, name)
            while r in virtual:
                r = alias.get(virtual[r][0], virtual[r][0])
            readers.setdefault(r, set()).add(i)
    pinned = {alias.get(n, n) for n in graph.inputs + graph.outputs}
    out = {}
    for i, step in enumerate(steps):
        op = step.main
        if step.kind != "dma" or op.op not in FILLED_MOVES or op.is_variable_access \
                or step.output in pinned or step.output in virtual \
                or graph.tensors[step.output].nbytes > onchip_size:
            continue
        views = [_origin_view(graph, alias, virtual, n) for n in op.inputs]
        source = views[0][0]
        if any(v is None or v[0] != source for v in views) or readers.get(source) != {i} \
                or made_by.get(source) not in COMPUTE_KINDS or source in pinned:
            continue
        placed = _written_view(graph.tensors[source].shape, graph.tensors[step.output].shape,
                               op, [v for _, v in views])
        if placed is not None and _run(placed[1], graph.tensors[source].shape,
                                       itemsize(graph.tensors[source].dtype)) >= MIN_COMPUTE_RUN:
            out[source] = (step.output, *placed)
    return out


def _origin_view(graph: Graph, alias, virtual, name: str):
    """(stored tensor, element view of it) that `name` is, through reshapes and view moves;
    None when a reshape takes a copy."""
    root = alias.get(name, name)
    if root in virtual:
        src, op = virtual[root]
        inner = _origin_view(graph, alias, virtual, src)
        if inner is None:
            return None
        base, view = inner[0], moved_view(inner[1], op, graph)
    else:
        base, view = root, dense(0, 0, graph.tensors[root].shape, "int8")
    view = reshape_view(view, graph.tensors[name].shape)
    return None if view is None else (base, view)


def _written_view(shape, out_shape, op, views) -> tuple[int, tuple] | None:
    """(offset, strides) in elements of the move's output at which each element of a source
    of `shape` lands, when the move (TRANSPOSE or CONCAT of element views of the source) puts
    every source element once and the places form one strided view; else None."""
    size = int(np.prod(shape, dtype=np.int64))
    if int(np.prod(out_shape, dtype=np.int64)) != size or any(
            st < 0 for v in views for st in v.strides):
        return None
    index = np.arange(size, dtype=np.int64)

    def gather(v):
        return np.lib.stride_tricks.as_strided(index[v.addr:], v.shape,
                                               [st * index.itemsize for st in v.strides])
    if op.op == "TRANSPOSE":
        placed = gather(moved_view(views[0], op, None))
    else:
        placed, offset, axis = np.empty(out_shape, np.int64), 0, op.attrs["axis"]
        for v in views:
            box = tuple(slice(offset, offset + n) if d == axis else slice(None)
                        for d, n in enumerate(v.shape))
            placed[box] = gather(v)
            offset += v.shape[axis]
    where = np.full(size, -1, np.int64)
    where[placed.ravel()] = np.arange(size, dtype=np.int64)
    if (where < 0).any():
        return None                     # some element is placed twice, another never
    where = where.reshape(shape)
    strides = tuple(int(np.take(where, 1, axis=d).flat[0] - where.flat[0]) if n > 1 else 0
                    for d, n in enumerate(shape))
    expected = np.full(shape, where.flat[0], np.int64)
    for d, (n, st) in enumerate(zip(shape, strides)):
        expected += (np.arange(n, dtype=np.int64) * st).reshape(
            [n if i == d else 1 for i in range(len(shape))])
    if not np.array_equal(where, expected):
        return None
    return int(where.flat[0]), strides


def _run(strides, shape, itemsize: int) -> int:
    """Bytes of the innermost contiguous run of a view with these element strides."""
    return TensorView(0, 0, tuple(shape), tuple(st * itemsize for st in strides),
                      "int8").contiguous_run() * itemsize
