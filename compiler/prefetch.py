"""Weight prefetch: stage constants on chip some steps before the step that reads them.

Without it a step's weights stream in with its own tiles, so the external memory idles while
compute-bound steps run and the array idles while weight-heavy steps load. A staged constant is
copied on chip right after an earlier step's commands, on the constants' DMA queue, into room
that no step in between needs: every step keeps at least the working set of the tile plan it
had without prefetch (so no step tiles worse), and a reading step keeps its plan minus the
buffers the copy replaces. Constants are taken in the order they are first read, each staged as
early as it fits, so the queue carries them in the order the array needs them.
"""
from __future__ import annotations

from .ir import Graph
from .placement import Placement
from .steps import Step

TILED = ("mac", "vector")


def plan_prefetch(graph: Graph, steps: list[Step], placement: Placement,
                  lowering) -> dict[int, list[tuple[str, int]]]:
    """Stage what fits; returns step index -> (constant, first reading step) to preload after
    that step."""
    n = len(steps)
    onchip = placement.onchip_size
    need = [0] * n               # bytes of workspace each step must keep
    replaced: dict[tuple[int, str], int] = {}   # (step, constant) -> bytes of its tile buffers
    for i, step in enumerate(steps):
        if step.kind not in TILED:
            continue
        space, _, _, plan = lowering.plan(step, placement.workspaces[i][1])
        if plan is None:
            need[i] = onchip                    # reported when the step is lowered
            continue
        need[i] = plan.working_set
        for opnd in space.inputs:
            if opnd.role in plan.buffers and graph.tensors[opnd.tensor].is_const:
                key = (i, placement.root(opnd.tensor))
                replaced[key] = replaced.get(key, 0) + (plan.buffers[opnd.role]
                                                        * plan.buffer_bytes[opnd.role])
    readers: dict[str, list[int]] = {}
    for i, step in enumerate(steps):
        for name in step.inputs:
            root = placement.root(name)
            if graph.tensors[root].is_const and i not in readers.get(root, []):
                readers.setdefault(root, []).append(i)
    outputs = {placement.root(n) for n in graph.outputs}
    preloads: dict[int, list[tuple[str, int]]] = {}
    for root, users in sorted(readers.items(), key=lambda item: item[1][0]):
        # Only what every reader loads through its tile buffers (per-tensor parameters are
        # immediates in the commands, and other engines read constants where they live).
        if root in outputs or any((u, root) not in replaced for u in users):
            continue
        first, last = users[0], users[-1]
        ceiling = [onchip - need[j] + replaced.get((j, root), 0) for j in range(n)]
        for start in range(first):
            if placement.stage(root, start, last, min(ceiling[start:last + 1])):
                for u in users:
                    need[u] -= replaced.get((u, root), 0)
                preloads.setdefault(start, []).append((root, first))
                break
    return preloads
