"""One mechanism for every per-operator table: implementations registered by decorator.

Each room keeps the tables of what it does with an operator (its checks, its lowering, its
kernels, its cost, its host evaluation) as Registry objects keyed by the names of the operator
table (isa/operators.py) or of the opcode table (isa/opcodes.py). Registering a name outside
those tables, or one name twice, is a programming error and fails at import.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Callable

from .errors import UnsupportedError


class Registry(Mapping):
    def __init__(self, what: str, names: Iterable[str]):
        self.what = what                     # e.g. "tile space", for messages
        self.names = frozenset(names)
        self._impl: dict[str, Callable] = {}

    def register(self, *names: str):
        def add(fn):
            for name in names:
                if name not in self.names:
                    raise KeyError(f"{self.what}: '{name}' is not in the table")
                if name in self._impl:
                    raise KeyError(f"{self.what}: '{name}' is registered twice")
                self._impl[name] = fn
            return fn
        return add

    def lookup(self, name: str, where: str = "") -> Callable:
        """The implementation of `name`; UnsupportedError when there is none."""
        try:
            return self._impl[name]
        except KeyError:
            prefix = f"{where}: " if where else ""
            raise UnsupportedError(f"{prefix}no {self.what} for {name}") from None

    def __getitem__(self, name: str) -> Callable:
        return self._impl[name]

    def __iter__(self):
        return iter(self._impl)

    def __len__(self) -> int:
        return len(self._impl)
