"""Floating-point elementwise kernels (TOSA PRO-FP, EXT-BF16, EXT-FP8E4M3, EXT-FP8E5M2).

One rounding policy for every type: each operation is evaluated in fp64 from the exactly
widened operands and rounded once, to nearest with ties to even, to the output type. For
ADD/SUB/MUL/RECIPROCAL and the comparisons that is the correctly rounded result (fp64 keeps
more than twice fp32's precision, so the second rounding is innocuous); the transcendental
functions carry libm's fp64 error, far inside the spec's bounds. Subnormals are kept on input
and output (no flush to zero). Conversions to fp8 follow OCP's non-saturating mode (e4m3:
overflow becomes NaN, e5m2: infinity); to fp16/bf16/fp32, overflow becomes infinity.
NaN inputs give NaN results; MAXIMUM, MINIMUM and CLAMP follow their nan_mode.
"""
from __future__ import annotations

import math
import sys
from functools import cache

import numpy as np

from npu_sim.isa.dtypes import STORAGE

_NUMPY_FLOATS = frozenset((np.dtype(np.float32), np.dtype(np.float16)))


@cache
def _ml_floats() -> frozenset:
    return frozenset(STORAGE[t] for t in ("bf16", "fp8e4m3", "fp8e5m2"))


def is_float(dtype) -> bool:
    """Whether `dtype` is a float storage type (ml_dtypes' are possible only once it is
    imported: isa.dtypes imports it when first asked for one)."""
    dtype = np.dtype(dtype)
    return dtype in _NUMPY_FLOATS or ("ml_dtypes" in sys.modules and dtype in _ml_floats())


def wide(x) -> np.ndarray:
    """Any storage array as fp64 (exact for every float and integer type up to 48 bits)."""
    x = np.asarray(x)
    return x.astype(np.float64)


def narrow(r, out_dtype) -> np.ndarray:
    """An fp64 result rounded to nearest-even into a float storage type."""
    with np.errstate(all="ignore"):
        return np.asarray(r, dtype=np.float64).astype(out_dtype)


def _nan_select(a, b, r, nan_mode):
    """MAXIMUM/MINIMUM: PROPAGATE gives NaN when either input is; IGNORE gives the other one."""
    if nan_mode == "IGNORE":
        return np.where(np.isnan(a), b, np.where(np.isnan(b), a, r))
    return np.where(np.isnan(a) | np.isnan(b), np.nan, r)


def _pow(a, b):
    return np.power(a, b)


def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _erf(a):
    if a.size == 0:
        return a.copy()
    # math.erf raises on NaN-free input never; NaN in gives NaN out
    return _ERF(a)


def _cast_int(a, out_dtype):
    """float -> integer: round to nearest even, saturate (NaN is unpredictable: it becomes 0)."""
    info = np.iinfo(out_dtype)
    r = np.clip(np.rint(np.nan_to_num(a, nan=0.0)), info.min, info.max)
    return r.astype(out_dtype)


# fn(*fp64 operands, **attrs) -> fp64 (or bool) result
_UNARY = {
    "ABS": np.abs, "NEGATE": np.negative, "CEIL": np.ceil, "FLOOR": np.floor, "EXP": np.exp,
    "LOG": np.log, "RECIPROCAL": lambda a: 1.0 / a, "RSQRT": lambda a: 1.0 / np.sqrt(a),
    "SIN": np.sin, "COS": np.cos, "ERF": _erf, "SIGMOID": _sigmoid, "TANH": np.tanh,
}
_BINARY = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "POW": _pow,
}
_COMPARE = {"EQUAL": np.equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal}
FP_OPS = frozenset(_UNARY) | frozenset(_BINARY) | frozenset(_COMPARE) | {
    "MAXIMUM", "MINIMUM", "SELECT", "CAST"}


def fp_elementwise(op: str, inputs: list, out_dtype, nan_mode: str = "PROPAGATE", **_) -> np.ndarray:
    """TOSA elementwise `op` on float operands (or CAST to or from a float type)."""
    out_dtype = np.dtype(out_dtype)
    with np.errstate(all="ignore"):
        if op == "SELECT":
            cond, a, b = inputs
            return np.where(np.asarray(cond, np.bool_), np.asarray(a), np.asarray(b)).astype(out_dtype)
        if op == "CAST":
            a = np.asarray(inputs[0])
            if out_dtype == np.bool_:
                return a != 0
            if not is_float(out_dtype):
                return _cast_int(wide(a), out_dtype)
            return narrow(wide(a), out_dtype)
        xs = [wide(x) for x in inputs]
        if op in _COMPARE:
            return _COMPARE[op](*xs)
        if op in ("MAXIMUM", "MINIMUM"):
            a, b = xs
            r = np.fmax(a, b) if op == "MAXIMUM" else np.fmin(a, b)
            return narrow(_nan_select(a, b, r, nan_mode), out_dtype)
        fn = _UNARY.get(op) or _BINARY.get(op)
        if fn is None:
            raise ValueError(f"unsupported floating-point elementwise op {op!r}")
        return narrow(fn(*xs), out_dtype)


def fp_clamp(x, lo: float, hi: float, nan_mode: str = "PROPAGATE") -> np.ndarray:
    """TOSA CLAMP on floats: min(max(x, lo), hi); a NaN input stays NaN (PROPAGATE) or
    becomes lo (IGNORE: max(NaN, lo) is lo)."""
    x = np.asarray(x)
    a = wide(x)
    r = np.minimum(np.maximum(np.where(np.isnan(a), -np.inf, a), lo), hi)
    if nan_mode != "IGNORE":
        r = np.where(np.isnan(a), np.nan, r)
    return narrow(r, x.dtype)
