"""Shared helpers for the datapath tests: random data and TOSA graph snippets."""

from __future__ import annotations

import numpy as np
import tosa_serializer as ts

from oracle import DType, GraphBuilder, fit_pad  # noqa: F401  (fit_pad is re-exported)

TOSA_DT = {np.dtype(np.int8): DType.INT8, np.dtype(np.int16): DType.INT16,
           np.dtype(np.int32): DType.INT32, np.dtype(np.bool_): DType.BOOL}
RANGE = {np.dtype(np.int8): (-128, 127), np.dtype(np.int16): (-32768, 32767),
         np.dtype(np.int32): (-(1 << 31), (1 << 31) - 1), np.dtype(np.int64): (-(1 << 47), (1 << 47) - 1)}


def tdt(np_dtype, int48=False):
    if int48:
        return DType.INT48
    return TOSA_DT[np.dtype(np_dtype)]


def rand_int(rng, dtype, shape, lo=None, hi=None, edge_frac=0.1):
    """Uniform ints in [lo, hi] (default: the type range), with ~edge_frac set to lo/hi/0."""
    dtype = np.dtype(dtype)
    tlo, thi = RANGE[dtype]
    lo = tlo if lo is None else lo
    hi = thi if hi is None else hi
    x = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
    if edge_frac and x.size:
        m = rng.random(x.shape) < edge_frac
        x[m] = rng.choice(np.array([lo, hi, min(max(0, lo), hi)], dtype=np.int64), size=int(m.sum()))
    return x.astype(dtype)


def rand_bool(rng, shape):
    return rng.random(shape) < 0.5


def clamp_attr(dtype, lo, hi):
    a = ts.TosaSerializerAttribute()
    t = tdt(dtype)

    def b(v):
        bs = list(ts.TosaSerializer.convertDataToUint8Vec(t, [v]))
        return bs + [0] * (-len(bs) % 8)
    a.ClampAttribute(b(lo), b(hi), ts.NanPropagationMode.PROPAGATE)
    return a


def rescale_attr(scale32, rounding_mode, per_channel, input_unsigned=False, output_unsigned=False):
    a = ts.TosaSerializerAttribute()
    a.RescaleAttribute(scale32, getattr(ts.RoundingMode, rounding_mode), per_channel,
                       input_unsigned, output_unsigned)
    return a


def add_rescale(g: GraphBuilder, src, shape, in_dt, out_dt, mult, shift, izp, ozp, *, scale32,
                rounding_mode, per_channel, input_unsigned=False, output_unsigned=False,
                output=True):
    """Append RESCALE(src) to g; in_dt/out_dt are TOSA DTypes. Returns the result name."""
    mult = np.asarray(mult).reshape(-1)
    shift = np.asarray(shift).reshape(-1)
    m = g.tensor([mult.size], DType.INT32 if scale32 else DType.INT16, mult, is_const=True)
    s = g.tensor([shift.size], DType.INT8, shift, is_const=True)
    iz = g.tensor([1], in_dt, [izp], is_const=True)
    oz = g.tensor([1], out_dt, [ozp], is_const=True)
    out = g.output(shape, out_dt) if output else g.intermediate(shape, out_dt)
    g.op("RESCALE", [src, m, s, iz, oz], [out],
         rescale_attr(scale32, rounding_mode, per_channel, input_unsigned, output_unsigned))
    return out


def rand_multipliers(rng, n, scale32=True, shift_lo=20, shift_hi=40):
    """Realistic normalised multipliers (as TF's computeMultiplierAndShift produces)."""
    if scale32:
        mult = rng.integers(1 << 30, (1 << 31) - 1, size=n, endpoint=True)
    else:
        mult = rng.integers(1 << 14, (1 << 15) - 1, size=n, endpoint=True)
    shift = rng.integers(shift_lo, shift_hi, size=n, endpoint=True)
    return mult.astype(np.int64), shift.astype(np.int64)




def resize_axis(rng, n):
    """(scale_n, scale_d, offset, border, out_size) satisfying RESIZE's ERROR_IFs (level 8K)."""
    while True:
        sn = int(rng.integers(1, 12))
        sd = int(rng.integers(1, min(16 * sn - 1, 12) + 1))
        off = int(rng.integers(-sn, 2 * sn))
        border = int(rng.integers(-sn, sn))
        border -= ((n - 1) * sn - off + border) % sd  # exact output size
        num = (n - 1) * sn - off + border
        if border >= -16 * sn and num >= 0 and sn <= 256 * sd:
            return sn, sd, off, border, num // sd + 1
