"""Quantization helpers: qparams, TFLite-style multipliers, weights, lookup tables.

Everything here is pure numpy/math and deterministic. Float quantities that come
out of a calibration pass are snapped to float32 (as real frontends store
scales) so a last-bit BLAS difference between machines almost never changes a
quantized byte.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

QMIN, QMAX = -128, 127


def f32(x):
    """Snap a float (or array) to float32 precision, returned as float64."""
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def round_half_away(x):
    """Round half away from zero (C llround / TFLite std::round)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


@dataclass(frozen=True)
class QParams:
    scale: float
    zp: int

    def quantize(self, x):
        q = round_half_away(np.asarray(x) / self.scale) + self.zp
        return np.clip(q, QMIN, QMAX).astype(np.int8)

    def dequantize(self, q):
        return (np.asarray(q, dtype=np.float64) - self.zp) * self.scale


def choose_qparams(lo: float, hi: float) -> QParams:
    """Asymmetric int8 qparams for a [lo, hi] range (always containing 0)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo < 1e-8:
        hi = lo + 1e-8
    scale = float(f32((hi - lo) / (QMAX - QMIN)))
    zp = int(np.clip(QMIN - round_half_away(lo / scale), QMIN, QMAX))
    return QParams(scale, zp)


def quantize_multiplier(scale: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier: scale ~= m * 2**-shift, m in [2**30, 2**31).

    Returns TOSA (multiplier, shift) with shift in [2, 62]; tiny scales are
    pushed to shift 62 by shrinking the multiplier (as TOSA legalizers do).
    """
    if not scale > 0:
        raise ValueError(f"rescale factor must be positive, got {scale}")
    q, e = math.frexp(scale)  # scale = q * 2**e, q in [0.5, 1)
    m = int(math.floor(q * (1 << 31) + 0.5))
    if m == 1 << 31:
        m //= 2
        e += 1
    shift = 31 - e
    if shift > 62:
        m = (m + (1 << (shift - 63))) >> (shift - 62)
        shift = 62
    if shift < 2:
        raise ValueError(f"rescale factor {scale} too large for a 32-bit multiplier")
    return m, shift


def multipliers(scales) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised quantize_multiplier -> (int32 multipliers, int8 shifts)."""
    pairs = [quantize_multiplier(float(s)) for s in np.atleast_1d(scales)]
    return (np.array([p[0] for p in pairs], dtype=np.int32),
            np.array([p[1] for p in pairs], dtype=np.int8))


def quantize_weights(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-channel int8 weights (range +-127) along `axis`.

    Returns (int8 weights, float scales per channel)."""
    red = tuple(i for i in range(w.ndim) if i != axis % w.ndim)
    amax = np.max(np.abs(w), axis=red)
    scale = f32(np.maximum(amax, 1e-12) / 127.0)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(round_half_away(w / scale.reshape(shape)), -127, 127)
    return q.astype(np.int8), scale


def quantize_bias(b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """int32 bias at the accumulator scale (input scale * weight scale)."""
    q = round_half_away(np.asarray(b, dtype=np.float64) / scale)
    return np.clip(q, -(2**31), 2**31 - 1).astype(np.int32)


def make_table(fn, qin: QParams, qout: QParams) -> np.ndarray:
    """256-entry int8 TABLE: out[i] = quant_out(fn(dequant_in(i - 128))).

    Computed in float64 like TFLite/ExecuTorch's int8 LUT builders."""
    x = qin.dequantize(np.arange(QMIN, QMAX + 1))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        y = np.asarray(fn(x), dtype=np.float64)
    y = np.nan_to_num(y, nan=0.0, posinf=1e30, neginf=-1e30)
    q = round_half_away(np.clip(y / qout.scale, -1e6, 1e6)) + qout.zp
    return np.clip(q, QMIN, QMAX).astype(np.int8)


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def gelu(x):
    """Exact (erf) GELU, the PyTorch default."""
    return 0.5 * x * (1.0 + erf(np.asarray(x) / math.sqrt(2.0)))
