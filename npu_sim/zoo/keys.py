"""Per-layer keys shared by every pass over a network (calibration, int8 and float emission)."""

from __future__ import annotations

from collections import Counter


class LayerKeys:
    """`key(kind)` numbers the calls of one kind (`add`, `add_1`, ...), so each pass that runs
    the same deterministic network code names every layer alike."""

    def __init__(self):
        self._count: Counter = Counter()

    def key(self, kind: str) -> str:
        n = self._count[kind]
        self._count[kind] += 1
        return kind if n == 0 else f"{kind}_{n}"
