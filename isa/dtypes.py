"""The one dtype table: every element type a graph, a program or the machine stores.

Each row gives a TOSA dtype's numpy storage type (int48 lives in 64-bit containers and int4 in
8-bit ones, in host memory and in the modelled memories alike), its size in memory, its code in
the binary program encoding (never renumbered: codes are part of the .npub format) and its
value set: the integer range, or the floating-point format. The float rows exist before any
operator uses them, so adding a float type to an operator never means adding a storage type.
"""
from __future__ import annotations

import sys

import numpy as np

from .records import record


@record(frozen=True)
class DType:
    """One element type: its TOSA name, encoding code, numpy storage, kind and widths."""

    name: str                  # TOSA name, lower case ("int8", "bf16"); "shape" is shape_t
    code: int                  # .npub encoding code
    itemsize: int              # bytes of one element in memory
    kind: str                  # "bool" | "int" | "float" | "shape"
    bits: int                  # the TOSA width (int4: 4, int48: 48), not the storage width
    exponent_bits: int = 0     # floats: the format (fp8e4m3: 4 and 3)
    mantissa_bits: int = 0

    @property
    def storage(self) -> np.dtype:
        """The numpy type of one element in memory."""
        return STORAGE[self.name]

    @property
    def min(self) -> int:
        """Smallest integer value (integers and shape_t)."""
        return -(1 << (self.bits - 1)) if self.kind in ("int", "shape") else 0

    @property
    def max(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.kind in ("int", "shape") else 1


# The float types numpy lacks: their ml_dtypes names and sizes.
_ML_DTYPES = {"bf16": ("bfloat16", 2), "fp8e4m3": ("float8_e4m3fn", 1),
              "fp8e5m2": ("float8_e5m2", 1)}
_STORAGE: dict[str, np.dtype] = {}


def _row(name, code, storage, kind, bits, exponent=0, mantissa=0) -> DType:
    if storage is None:
        itemsize = _ML_DTYPES[name][1]
    else:
        _STORAGE[name] = np.dtype(storage)
        itemsize = _STORAGE[name].itemsize
    return DType(name, code, itemsize, kind, bits, exponent, mantissa)


DTYPES: dict[str, DType] = {d.name: d for d in (
    _row("bool", 0, np.bool_, "bool", 1),
    _row("int4", 1, np.int8, "int", 4),
    _row("int8", 2, np.int8, "int", 8),
    _row("int16", 3, np.int16, "int", 16),
    _row("int32", 4, np.int32, "int", 32),
    _row("int48", 5, np.int64, "int", 48),
    _row("int64", 6, np.int64, "int", 64),      # wide partial sums of a split reduction
    _row("shape", 7, np.int64, "shape", 64),
    _row("fp32", 8, np.float32, "float", 32, 8, 23),
    _row("fp16", 9, np.float16, "float", 16, 5, 10),
    _row("bf16", 10, None, "float", 16, 8, 7),            # ml_dtypes' (_ML_DTYPES)
    _row("fp8e4m3", 11, None, "float", 8, 4, 3),          # TOSA: no infinities
    _row("fp8e5m2", 12, None, "float", 8, 5, 2),
)}

BY_CODE: dict[int, DType] = {d.code: d for d in DTYPES.values()}


class _Storage(dict):
    """name -> numpy storage dtype, for the many places that only need that. The float types
    numpy lacks are ml_dtypes', imported at the first lookup of one (its import was a
    twentieth of a small integer network's cached run, which never needs it). Lookups,
    membership and get() see every type; iterating sees only those looked up."""

    def __missing__(self, name: str) -> np.dtype:
        if name not in _ML_DTYPES:
            raise KeyError(name)
        import ml_dtypes
        for n, (attr, _) in _ML_DTYPES.items():
            self[n] = np.dtype(getattr(ml_dtypes, attr))
        return self[name]

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in _ML_DTYPES

    def get(self, name, default=None):
        return self[name] if name in self else default


STORAGE: dict[str, np.dtype] = _Storage(_STORAGE)
ITEMSIZE: dict[str, int] = {name: d.itemsize for name, d in DTYPES.items()}


def itemsize(name: str) -> int:
    return ITEMSIZE[name]


# Float types numpy lacks travel in .npy files as Arm's reference model writes them: bf16 as
# raw 2-byte void (|V2), fp8e4m3 as |V1, fp8e5m2 as uint8. Those forms, and the same-width
# unsigned integer view, are accepted wherever an array of the type is expected; the first
# form is what npu-sim writes.
NPY_FORMS: dict[str, tuple[np.dtype, ...]] = {
    "bf16": (np.dtype("V2"), np.dtype(np.uint16)),
    "fp8e4m3": (np.dtype("V1"), np.dtype(np.uint8)),
    "fp8e5m2": (np.dtype(np.uint8),),
}


def accepts(dtype: str, array_dtype) -> bool:
    """Whether an array of `array_dtype` holds values of TOSA type `dtype`."""
    array_dtype = np.dtype(array_dtype)
    return array_dtype == STORAGE[dtype] or array_dtype in NPY_FORMS.get(dtype, ())


def as_storage(array: np.ndarray, dtype: str) -> np.ndarray:
    """An accepted array (see accepts) as the type's storage dtype, by reinterpreting its bytes."""
    array = np.asarray(array)
    storage = STORAGE[dtype]
    if array.dtype == storage:
        return array
    return np.ascontiguousarray(array).view(storage).reshape(array.shape)   # (keeps rank 0)


def as_npy(array: np.ndarray) -> np.ndarray:
    """A storage array in the form .npy files carry it (the reference model's)."""
    array = np.asarray(array)
    if "ml_dtypes" in sys.modules:         # else no array holds one of its types
        for name, forms in NPY_FORMS.items():
            if array.dtype == STORAGE[name]:
                return np.ascontiguousarray(array).view(forms[0]).reshape(array.shape)
    return array


def fill_word(value, dtype: str) -> int:
    """The integer a DmaFill carries for one element of `dtype`: the value itself for integer
    and bool types, the element's bit pattern for float types (a fill writes bits)."""
    if DTYPES[dtype].kind != "float":
        return int(value)
    element = np.asarray(value).astype(STORAGE[dtype]).reshape(1)
    return int(element.view(f"u{element.itemsize}")[0])


def fill_element(word: int, dtype: str) -> np.ndarray:
    """The element a DmaFill's word stands for (fill_word inverted)."""
    storage = STORAGE[dtype]
    if DTYPES[dtype].kind != "float":
        return np.array(word).astype(storage)
    return np.array(word, dtype=f"u{storage.itemsize}").view(storage)
