"""The modelled memories: one byte array per memory, addressed through TensorViews."""
from __future__ import annotations

import numpy as np

from isa.commands import TensorView
from isa.errors import ProgramError

STORAGE = {"bool": np.bool_, "int4": np.int8, "int8": np.int8, "int16": np.int16,
           "int32": np.int32, "int48": np.int64, "int64": np.int64}


class Memories:
    def __init__(self, names: list[str], sizes: list[int]):
        self.names = ["onchip"] + list(names)
        self.banks = [np.zeros(max(int(s), 16), dtype=np.uint8) for s in sizes]

    def array(self, v: TensorView) -> np.ndarray:
        """A numpy view of the bytes that `v` describes (no copy; writes go to memory)."""
        try:
            return np.ndarray(v.shape, dtype=STORAGE[v.dtype], buffer=self.banks[v.mem],
                              offset=v.addr, strides=v.strides)
        except (ValueError, TypeError, IndexError) as exc:
            name = self.names[v.mem] if v.mem < len(self.names) else f"memory {v.mem}"
            raise ProgramError(f"view {v.dtype}{list(v.shape)} at {name}:0x{v.addr:x} falls "
                               f"outside the memory ({exc})") from None

    def load(self, mem: int, addr: int, data: bytes):
        self.banks[mem][addr:addr + len(data)] = np.frombuffer(data, dtype=np.uint8)
