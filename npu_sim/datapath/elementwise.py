"""Vector-unit elementwise kernels: TOSA elementwise binary/unary/ternary ops, CLAMP, TABLE.

Arithmetic is done in int64 and then narrowed to the TOSA output type, so wraps and
truncations are the intended two's-complement ones. Overflow that TOSA REQUIREs away
(ADD/SUB/ABS/INTDIV/NEGATE-i32 overflow) is unpredictable; these kernels then just wrap.
"""

from __future__ import annotations

import numpy as np

from .fp import fp_clamp, fp_elementwise, is_float
from .scale import signed_range, type_bits

_UNSIGNED = {np.dtype(np.int8): np.uint8, np.dtype(np.int16): np.uint16,
             np.dtype(np.int32): np.uint32}


def _i64(x) -> np.ndarray:
    return np.asarray(x).astype(np.int64)


def _narrow(r, out_dtype) -> np.ndarray:
    """Truncate int64 results to the output type (numpy astype wraps two's complement)."""
    return np.asarray(r).astype(out_dtype)


def _add(a, b, out_dtype, **_):
    return _narrow(_i64(a) + _i64(b), out_dtype)


def _sub(a, b, out_dtype, **_):
    return _narrow(_i64(a) - _i64(b), out_dtype)


def _mul(a, b, out_dtype, shift=0, **_):
    p = _i64(a) * _i64(b)  # i32*i32 < 2^62: exact
    s = int(np.asarray(shift).reshape(-1)[0])
    if s > 0:
        # (p + 2^(s-1)) >> s, rewritten as ((p >> 1) + 2^(s-2)) >> (s-1) so the rounding
        # constant cannot overflow int64 for shift up to 63 (identical floor result).
        p = (p + 1) >> 1 if s == 1 else ((p >> 1) + (1 << (s - 2))) >> (s - 1)
    return _narrow(p, out_dtype)  # shift 0: low 32 bits (wraps)


def _ars(a, b, out_dtype, round=False, **_):
    a, b = np.asarray(a), _i64(b)
    r = _i64(a) >> b
    if round:
        # add bit (b-1) of a when b > 0: round half up
        bm1 = np.maximum(b - 1, 0)
        r = r + (((_i64(a) >> bm1) & 1) * (b > 0))
    return _narrow(r, out_dtype)


def _lls(a, b, out_dtype, **_):
    return _narrow(_i64(a) << _i64(b), out_dtype)  # b <= 31, a <= 32 bits: no int64 overflow


def _lrs(a, b, out_dtype, **_):
    a = np.asarray(a)
    u = a.view(_UNSIGNED[a.dtype]).astype(np.int64)  # zero-extended bit pattern
    return _narrow(u >> _i64(b), out_dtype)


def _intdiv(a, b, out_dtype, **_):
    a, b = _i64(a), _i64(b)
    q = np.abs(a) // np.maximum(np.abs(b), 1)  # truncation toward zero; b == 0 is unpredictable
    return _narrow(np.where((a < 0) != (b < 0), -q, q), out_dtype)


def _clz(a, out_dtype, **_):
    a = _i64(a)
    # frexp exponent = bit length for 0 < a < 2^31 (exact in float64)
    e = np.frexp(np.maximum(a, 0).astype(np.float64))[1]
    return _narrow(np.where(a < 0, 0, 32 - e), out_dtype)


def _negate(a, out_dtype, input_zp=0, output_zp=0, **_):
    a = np.asarray(a)
    bits = type_bits(a.dtype)
    r = -(_i64(a) - int(input_zp)) + int(output_zp)
    return _narrow(np.clip(r, *signed_range(bits)), out_dtype)  # saturates, as the spec clips


def _cast(a, out_dtype, **_):
    a = np.asarray(a)
    if np.dtype(out_dtype) == np.bool_:
        return a != 0
    return _narrow(a.astype(np.int64), out_dtype)  # bool -> 0/1; narrowing truncates


def _bool(f):
    return lambda *xs, out_dtype, **_: f(*(np.asarray(x, dtype=np.bool_) for x in xs))


_OPS = {
    "ADD": _add,
    "SUB": _sub,
    "MUL": _mul,
    "ARITHMETIC_RIGHT_SHIFT": _ars,
    "LOGICAL_LEFT_SHIFT": _lls,
    "LOGICAL_RIGHT_SHIFT": _lrs,
    "INTDIV": _intdiv,
    "BITWISE_AND": lambda a, b, out_dtype, **_: _narrow(np.bitwise_and(a, b), out_dtype),
    "BITWISE_OR": lambda a, b, out_dtype, **_: _narrow(np.bitwise_or(a, b), out_dtype),
    "BITWISE_XOR": lambda a, b, out_dtype, **_: _narrow(np.bitwise_xor(a, b), out_dtype),
    "BITWISE_NOT": lambda a, out_dtype, **_: _narrow(np.invert(a), out_dtype),
    "LOGICAL_AND": _bool(np.logical_and),
    "LOGICAL_OR": _bool(np.logical_or),
    "LOGICAL_XOR": _bool(np.logical_xor),
    "LOGICAL_NOT": _bool(np.logical_not),
    "MAXIMUM": lambda a, b, out_dtype, **_: _narrow(np.maximum(a, b), out_dtype),
    "MINIMUM": lambda a, b, out_dtype, **_: _narrow(np.minimum(a, b), out_dtype),
    "ABS": lambda a, out_dtype, **_: _narrow(np.abs(_i64(a)), out_dtype),
    "CLZ": _clz,
    "NEGATE": _negate,
    "SELECT": lambda c, a, b, out_dtype, **_: _narrow(np.where(np.asarray(c, np.bool_), a, b), out_dtype),
    "EQUAL": lambda a, b, out_dtype, **_: np.equal(a, b),
    "GREATER": lambda a, b, out_dtype, **_: np.greater(a, b),
    "GREATER_EQUAL": lambda a, b, out_dtype, **_: np.greater_equal(a, b),
    "CAST": _cast,
}

ELEMENTWISE_OPS = tuple(_OPS)


def elementwise(op: str, inputs: list, out_dtype, **attrs) -> np.ndarray:
    """Apply TOSA elementwise `op` with numpy broadcasting; returns an `out_dtype` array.

    attrs: MUL shift; ARITHMETIC_RIGHT_SHIFT round; NEGATE input_zp/output_zp; MAXIMUM and
    MINIMUM nan_mode. Float operands (or a CAST to a float type) run the float kernels (fp.py).
    """
    if is_float(out_dtype) or any(is_float(np.asarray(x).dtype) for x in inputs):
        return fp_elementwise(op, inputs, out_dtype, **attrs)
    try:
        fn = _OPS[op]
    except KeyError:
        raise ValueError(f"unsupported elementwise op {op!r}") from None
    return fn(*inputs, out_dtype=np.dtype(out_dtype), **attrs)


def clamp(x, lo, hi, nan_mode: str = "PROPAGATE") -> np.ndarray:
    """TOSA CLAMP: max then min, same dtype (floats: fp.fp_clamp, with its nan_mode)."""
    x = np.asarray(x)
    if is_float(x.dtype):
        return fp_clamp(x, lo, hi, nan_mode)
    return np.minimum(np.maximum(x, lo), hi).astype(x.dtype)


def table(x, table) -> np.ndarray:
    """TOSA TABLE: int8 x / 256 x int8 -> int8; int16 x / 513 x int16 -> int32 (interpolated)."""
    x = np.asarray(x)
    t = np.asarray(table)
    if x.dtype == np.int8:
        return t.astype(np.int8)[x.astype(np.int64) + 128]
    if x.dtype == np.int16:
        xi = x.astype(np.int64) + 32768
        idx, frac = xi >> 7, xi & 0x7F  # x & 0x7F: same low bits after the +32768 bias
        t = t.astype(np.int64)
        base, nxt = t[idx], t[idx + 1]
        return ((base << 7) + (nxt - base) * frac).astype(np.int32)
    raise ValueError(f"TABLE input must be int8 or int16, got {x.dtype}")
