"""Fixed-point rescaling: TOSA apply_scale_32/16, RESCALE, and the fused MAC output stage.

All arithmetic is exact int64; the one product that can exceed 63 bits (48-bit value times a
31-bit multiplier) is split into 32-bit halves instead of leaving numpy to wrap it.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

_M32 = (1 << 32) - 1

# Bit width of the TOSA type each storage dtype carries (int64 holds int48 in this package).
_BITS = {np.dtype(np.int8): 8, np.dtype(np.int16): 16, np.dtype(np.int32): 32, np.dtype(np.int64): 48}
_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32}
# MAC sums that int32 holds exactly (float32 ones: the MAC kernels' plans keep them below 2^24)
INT32_EXACT = (np.dtype(np.int32), np.dtype(np.float32))

ROUNDING_MODES = ("SINGLE_ROUND", "DOUBLE_ROUND", "INEXACT_ROUND")


def type_bits(dtype) -> int:
    return _BITS[np.dtype(dtype)]


def signed_range(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def wrap(x, bits: int) -> np.ndarray:
    """Two's-complement wrap of int64 values to `bits` bits (result stays int64)."""
    x = np.asarray(x, dtype=np.int64)
    if bits == 64:
        return x
    half = 1 << (bits - 1)
    return ((x + half) & ((1 << bits) - 1)) - half


def sext(v: int, bits: int) -> int:
    """Interpret an integer's low `bits` bits as signed."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _split_scale(v, m, s, rnd) -> np.ndarray:
    """(v*m + rnd) >> s exactly when v*m may exceed 63 bits, for broadcast int64 operands with
    0 <= m < 2^31, 0 <= rnd < 2^62, 1 <= s <= 63."""
    # v*m + rnd = H*2^32 + L with 0 <= L < 2^32; every partial product below fits in int64.
    vh, vl = v >> 32, v & _M32
    b = vl * m  # < 2^32 * 2^31
    t = (b & _M32) + (rnd & _M32)
    h = vh * m + (b >> 32) + (rnd >> 32) + (t >> 32)
    low = t & _M32
    hi_part = h >> np.maximum(s - 32, 0)
    lo_part = (h << np.maximum(32 - s, 0)) + (low >> np.minimum(s, 32))
    return np.where(s >= 32, hi_part, lo_part)


def _abs_bound(a) -> int:
    """max |a| as a Python int (no |a| temporary, no int64-min wrap); a per-channel table's
    through Python, cheaper than numpy's reductions on a few values."""
    if a.size <= 64:
        values = a.ravel().tolist()
        return max(max(values), -min(values), 0) if values else 0
    return max(-int(a.min()), int(a.max()), 0)


def apply_scale_32(value, multiplier, shift, double_round: bool = False,
                   value_bound: int | None = None) -> np.ndarray:
    """TOSA apply_scale_32, vectorized; multiplier/shift broadcast against value. Returns int64.
    `value_bound`, a bound of |value| the caller knows from its type, spares a pass over the
    data to prove that the 64-bit product cannot overflow.

    REQUIREs (mul >= 0, 2 <= shift <= 62, value within +-2^(shift-1), result fits int32) are the
    caller's responsibility: violating inputs are unpredictable in TOSA.
    """
    v = np.asarray(value, dtype=np.int64)
    if np.ndim(multiplier) == 0 and np.ndim(shift) == 0:
        # One multiplier and shift (a per-tensor RESCALE): Python ints, no arrays of them,
        # as most calls are on one tile each. The same int64 arithmetic as below.
        m, s = int(multiplier), int(shift)
        if 2 <= s <= 62 and 0 <= m < 1 << 31 and not (double_round and s > 31):
            rnd = 1 << (s - 1)
            if value_bound is None or value_bound * m + rnd >= 1 << 63:
                value_bound = _abs_bound(v)
            if value_bound * m + rnd < 1 << 63:
                r = v * m
                r += rnd
                r >>= s
                return r
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    rnd = np.left_shift(np.int64(1), s - 1)
    if double_round:
        # spec: for shift > 31 the rounding constant gains +-2^30 (two-step rounding emulation)
        rnd = rnd + np.where(s > 31, np.where(v >= 0, 1 << 30, -(1 << 30)), 0)
    # Multiplier, shift and rounding are per channel at most: their bounds cost nothing.
    mmax, rmax = _abs_bound(m), _abs_bound(rnd)
    if value_bound is None or value_bound * mmax + rmax >= 1 << 63:
        value_bound = _abs_bound(v)
    if value_bound * mmax + rmax < 1 << 63:  # common case: the 64-bit product cannot overflow
        r = v * m
        r += rnd
        r >>= s
        return r
    return _split_scale(*np.broadcast_arrays(v, m, s, rnd))


def apply_scale_16(value, multiplier, shift) -> np.ndarray:
    """TOSA apply_scale_16 (48-bit value, 16-bit multiplier), vectorized. Returns int64."""
    v = np.asarray(value, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    rnd = np.left_shift(np.int64(1), s - 1)
    # |v| < 2^47, m < 2^15, rnd <= 2^61: v*m + rnd < 2^63, exact in int64.
    return (v * m + rnd) >> s


def _channel_params(multiplier, shift, per_channel: bool):
    m = np.asarray(multiplier, dtype=np.int64).reshape(-1)
    s = np.asarray(shift, dtype=np.int64).reshape(-1)
    if not per_channel:
        return m[0], s[0]
    return m, s  # length C, broadcasts along the last axis


def _extend_zp(zp, bits: int, unsigned: bool) -> int:
    zp = zp if type(zp) is int else int(np.asarray(zp).reshape(-1)[0])
    return zp & ((1 << bits) - 1) if unsigned else sext(zp, bits)


try:                    # np.clip's ufunc, one pass: on a tile np.clip's Python wrapper costs more
    from numpy._core.umath import clip as _clip        # numpy 2
except ImportError:     # pragma: no cover (numpy 1.26)
    from numpy.core.umath import clip as _clip


def _saturate(r, lo: int, hi: int) -> np.ndarray:
    return _clip(r, lo, hi)


def _saturated(r: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """_saturate in place, of a temporary of the caller's own (a scalar: a new one)."""
    if type(r) is not np.ndarray:
        return _saturate(r, lo, hi)
    return _clip(r, lo, hi, out=r)


def _rescaled(x, multiplier, shift, input_zp, output_zp, scale32: bool, rounding_mode: str,
              per_channel: bool, input_unsigned: bool, out_bits: int,
              output_unsigned: bool) -> np.ndarray:
    """RESCALE's int64 result before saturation to the output type."""
    if rounding_mode not in ROUNDING_MODES:
        raise ValueError(f"bad rounding_mode {rounding_mode!r}")
    in_bits = type_bits(x.dtype)
    v = (x.view(_UNSIGNED[in_bits]) if input_unsigned else x).astype(np.int64)
    izp = _extend_zp(input_zp, in_bits, input_unsigned)
    if izp:
        v -= izp
    m, s = _channel_params(multiplier, shift, per_channel)
    if scale32:
        bound = (1 << (in_bits if input_unsigned else in_bits - 1)) + abs(izp)
        r = apply_scale_32(v, m, s, rounding_mode == "DOUBLE_ROUND", value_bound=bound)
    else:
        r = apply_scale_16(v, m, s)
    zp = _extend_zp(output_zp, out_bits, output_unsigned)
    if zp:
        r += zp                  # r is the scaling's own new array
    return r


def _narrowed(r, out_dtype, out_bits: int, output_unsigned: bool) -> np.ndarray:
    if output_unsigned:
        return r.astype(_UNSIGNED[out_bits]).view(out_dtype)
    return r.astype(out_dtype)


def rescale(x, multiplier, shift, input_zp, output_zp, *, scale32: bool, rounding_mode: str,
            per_channel: bool, input_unsigned: bool, output_unsigned: bool, out_dtype) -> np.ndarray:
    """TOSA RESCALE. Unsigned tensors/zero points are raw bit patterns in int8/int16 storage.

    INEXACT_ROUND is computed as SINGLE_ROUND (an exact SINGLE_ROUND always meets its bound).
    """
    x = np.asarray(x)
    out_dtype = np.dtype(out_dtype)
    out_bits = type_bits(out_dtype)
    r = _rescaled(x, multiplier, shift, input_zp, output_zp, scale32, rounding_mode, per_channel,
                  input_unsigned, out_bits, output_unsigned)
    lo, hi = (0, (1 << out_bits) - 1) if output_unsigned else signed_range(out_bits)
    return _narrowed(_saturated(r, lo, hi), out_dtype, out_bits, output_unsigned)


def output_stage(acc, *, bias=None, multiplier=None, shift=None, scale32: bool = True,
                 rounding_mode: str = "SINGLE_ROUND", per_channel: bool = True, output_zp=0,
                 clamp=None, out_dtype=None, acc_dtype: str = "int32",
                 output_unsigned: bool = False, out: np.ndarray | None = None) -> np.ndarray:
    """Bit-identical to CONV/MATMUL (+bias) -> RESCALE(input_zp=0) -> CLAMP on the exact sums.

    The reference model wraps int32 accumulators (spec: REQUIRE no overflow) and saturates
    int48 ones to the int48 range; both are reproduced here. With `out`, the result is
    written there (and returned).
    """
    a = np.asarray(acc)
    if acc_dtype == "int32" and multiplier is not None and scale32 and not output_unsigned:
        r = _int32_stage(a, bias, multiplier, shift, rounding_mode, per_channel, output_zp,
                         clamp, np.dtype(out_dtype), out)
        if r is not None:
            return r
    if acc_dtype == "int32" and a.dtype in INT32_EXACT:
        # Sums that int32 holds (float32 ones are exact integers below 2^24, as the MAC
        # kernels' float32 plans prove): an int32 add wraps as the register does, the same as
        # adding in int64 and wrapping after.
        a = a.astype(np.int32)
        if bias is not None:
            a += np.asarray(bias).reshape(-1).astype(np.int32)
    elif bias is not None or a.dtype != np.int64:     # an int64 copy of its own
        a = a.astype(np.int64)
        if bias is not None:
            # [OC] or [1] along the last axis; int64 first: a mixed-type add costs more
            a += np.asarray(bias).reshape(-1).astype(np.int64)
    if acc_dtype == "int32":
        if a.dtype != np.int32:
            a = a.astype(np.int32)                   # two's-complement wrap
    elif acc_dtype == "int48":
        a = _saturate(a, *signed_range(48))
    else:
        raise ValueError(f"bad acc_dtype {acc_dtype!r}")
    if multiplier is None:
        r = a.astype(out_dtype if out_dtype is not None else a.dtype)
    else:
        if out_dtype is None:
            raise ValueError("out_dtype is required with a multiplier")
        out_dtype = np.dtype(out_dtype)
        bits = type_bits(out_dtype)
        lo, hi = (0, (1 << bits) - 1) if output_unsigned else signed_range(bits)
        if clamp is not None and not output_unsigned and lo <= clamp[0] <= clamp[1] <= hi:
            lo, hi, clamp = clamp[0], clamp[1], None   # the clamp within the type: one saturation
        r = _rescaled(a, multiplier, shift, 0, output_zp, scale32, rounding_mode, per_channel,
                      False, bits, output_unsigned)
        r = _narrowed(_saturated(r, lo, hi), out_dtype, bits, output_unsigned)
    if clamp is not None:
        r = np.clip(r, clamp[0], clamp[1]).astype(r.dtype)
    if out is not None:
        out[...] = r
        return out
    return r


# |sums| below which each accumulator dtype holds them: the MAC kernels' float32 plans prove
# theirs below 2^24; other dtypes are bounded from the data.
_ACC_BOUNDS = {np.dtype(np.float32): 1 << 24, np.dtype(np.int32): 1 << 31}


def _int32_stage(a, bias, multiplier, shift, rounding_mode, per_channel, output_zp, clamp,
                 out_dtype, out):
    """output_stage of int32 sums with a 32-bit RESCALE to a signed type in a few passes over
    the tile, or None where the bounds below do not hold (the general path then runs).

    With |acc| <= A and |bias| <= B, A + B < 2^31 means the register never wraps, so
    ((acc + bias) * m + rnd) >> s + zp = (acc * m + c) >> s with one per-channel constant
    c = bias * m + (2 zp + 1) << (s - 1) (adding zp << s before an arithmetic shift adds zp
    after it), exact in int64 while A * max m + max |c| < 2^63. Where it may wrap, the sums
    wrap to int32 and the bias is added in int32, wrapping as the register does; then
    c0 = (2 zp + 1) << (s - 1) takes the place of c (exact while 2^31 max m + max |c0| < 2^63).
    DOUBLE_ROUND adds 2^30 to rnd for shifts above 31 where the register is >= 0, and takes it
    where it is negative: with m >= 0, the register's sign is that of X - c0 for X = register *
    m + c0, which the passes above compute (c0 2^(sn - s) = (2 zp + 1) 2^(sn - 1) in the one
    shift's terms: one figure for every channel)."""
    bits = _BITS.get(out_dtype)
    if bits is None or bits > 32 or rounding_mode not in ROUNDING_MODES:
        return None
    zp = _extend_zp(output_zp, bits, False)
    k = _stage_constants(bias, multiplier, shift, per_channel, zp, rounding_mode == "DOUBLE_ROUND")
    if k is None:
        return None
    bound = _ACC_BOUNDS.get(a.dtype)
    if bound is None:                     # float64 or int64 sums: bounded from the data
        if a.dtype.kind not in "if" or not a.size:
            return None
        lo, hi = float(a.min()), float(a.max())
        if not -2.0 ** 62 < lo <= hi < 2.0 ** 62:      # also refuses NaN
            return None
        bound = max(-int(lo), int(hi), 0)
    lo, hi = signed_range(bits)
    if clamp is not None:
        if not lo <= clamp[0] <= clamp[1] <= hi:
            return None
        lo, hi = clamp
    if bound + k.bmax < 1 << 31 or (not k.bmax and a.dtype in INT32_EXACT):
        # no wrap: the bias folded into c; one shift for every channel where that fits
        if bound * k.mnmax + k.cnmax < 1 << 63:
            m, c, s, d = k.mn, k.cn, k.sn, k.dn
            c0 = (2 * zp + 1) << (s - 1) if d is not None else None
        elif bound * k.mmax + k.cmax < 1 << 63:
            m, c, c0, s, _ = _per_channel(k)
            d = k.d
        else:
            return None
        v = a.astype(np.int64)
    else:
        if (1 << 31) * k.mmax + k.c0max >= 1 << 63:
            return None
        m, _, c, s, b32 = _per_channel(k)
        c0, d = c, k.d
        # the register's wrap: sums beyond int32 (exact integers in int64) to int32 first
        t = a.astype(np.int32) if bound < 1 << 31 else a.astype(np.int64).astype(np.int32)
        if b32 is not None:
            t += b32
        v = t.astype(np.int64)
    v *= m
    v += c
    if d is not None:                   # DOUBLE_ROUND, shifts above 31: +-2^30 by the sign
        negative = v < c0
        v += d
        np.subtract(v, d + d, out=v, where=negative)
    v >>= s
    _clip(v, lo, hi, out=v)
    if out is None:
        return v.astype(out_dtype)
    out[...] = v
    return out


class _Tables(namedtuple("_Tables", (
        # floor(X / 2^s) = floor(X 2^d / 2^(s + d)): one shift, sn = max s, for every channel
        # with mn = m 2^(sn - s) and cn = bias mn + (2 zp + 1) 2^(sn - 1) (None where they
        # would not fit int64; then mnmax = cnmax = 2^63), and bounds of |mn| and |cn|
        "mn", "cn", "sn", "mnmax", "cnmax",
        "mmax", "bmax",
        "cmax",             # bound of |bias * m + (2 zp + 1) << (s - 1)|
        "c0max",            # bound of |(2 zp + 1) << (s - 1)|, +2^30 where DOUBLE_ROUND adds it
        # DOUBLE_ROUND's 2^30 per channel with a shift above 31, else 0 (None: no such shift),
        # in the one shift's terms (dn = d 2^(sn - s)) and as read; cmax and cnmax count it
        "dn", "d",
        "m", "s", "b", "zp"))):    # the tables as read (per channel, or Python ints)
    """_int32_stage's constants for one layer's tables; a namedtuple, as mac._Geometry. The
    per-channel shifts' constants are worked out only when a tile needs them (_per_channel):
    most tables are read by one tile or a few, and take the one-shift path."""

    __slots__ = ()


def _per_channel(k: _Tables):
    """(m, c, c0, s, the bias as int32 or None) per channel: c = bias m + c0 and
    c0 = (2 zp + 1) << (s - 1), each below k.cmax or k.c0max (< 2^63), so exact in int64."""
    if type(k.m) is int:                                # one scale: Python ints
        c0 = (2 * k.zp + 1) << (k.s - 1)
        if k.b is None:
            return k.m, c0, c0, k.s, None
        return k.m, k.b * k.m + c0, c0, k.s, np.asarray(k.b).astype(np.int32)
    m, s = k.m.astype(np.int64), k.s.astype(np.int64)
    c0 = np.left_shift(np.int64(2 * k.zp + 1), s - 1)
    if k.b is None:
        return m, c0, c0, s, None
    return m, c0 + k.b.astype(np.int64) * m, c0, s, k.b.astype(np.int32)


class _Bounded(dict):
    """A cache that starts again, empty, when it would pass `entries` entries or `nbytes` of
    what they hold (a key kept again counts again until then). A layer's tiles use its
    tables one after another (a slice of them per slab of output channels), so the latest
    layer's are what pays: a MobileNetV2 run on edge-256 has 746 distinct slices, 1.1 MiB in
    all; on large-8k each layer's tables are whole and used once, and kept to the run's end
    they had taken 1.2 MiB of its peak. (Forgetting the oldest one by one cost more than the
    tables it kept: a dict's first entry is found past the slots its deletions left.)"""

    __slots__ = ("entries", "nbytes", "held")

    def __init__(self, entries: int, nbytes: int):
        super().__init__()
        self.entries, self.nbytes, self.held = entries, nbytes, 0

    def keep(self, key, value, size: int):
        if len(self) >= self.entries or self.held + size > self.nbytes:
            self.clear()
            self.held = 0
        self[key] = value
        self.held += size


_KEPT, _KEPT_BYTES = 256, 1 << 18
_STAGE_TABLES = _Bounded(_KEPT, _KEPT_BYTES)        # contents -> (_Tables, bytes held)
_STAGE_BY_ARRAYS = _Bounded(_KEPT, _KEPT_BYTES)     # the arrays read -> (their contents, _Tables)


def _held_bytes(contents, tables) -> int:
    """Bytes a cache entry holds: the tables' contents as read, and its mn, cn, dn and d
    (int64 as mn; one scale has none)."""
    size = len(contents[1]) + len(contents[3]) + (len(contents[4][1]) if contents[4] else 0)
    if tables is not None and type(tables.mn) is np.ndarray:
        size += (2 + (tables.dn is not None)) * tables.mn.nbytes
    if tables is not None and type(tables.d) is np.ndarray:
        size += tables.d.nbytes
    return size


def _flat(a) -> np.ndarray:
    return a if type(a) is np.ndarray and a.ndim == 1 else np.asarray(a).reshape(-1)


def _stage_constants(bias, multiplier, shift, per_channel: bool, zp: int, double_round: bool):
    """_Tables for these per-channel tables, or None when they do not qualify. A pure function
    of the tables' contents, read from memory on every call: tiles of a layer share their
    tables, so it is kept by the arrays they were read from, and used while their contents
    (dtype and bytes) compare equal; arrays seen first, or with new contents, look it up by
    the contents (hashed, as tiles reading the same tables from other buffers do)."""
    m, s = _flat(multiplier), _flat(shift)
    if not per_channel:
        m, s = m[:1], s[:1]
    b = None if bias is None else _flat(bias)
    contents = (m.dtype.char, m.tobytes(), s.dtype.char, s.tobytes(), None if b is None else (
        b.dtype.char, b.tobytes()))
    key = (id(multiplier), id(shift), id(bias), per_channel, zp, double_round)
    hit = _STAGE_BY_ARRAYS.get(key)
    if hit is not None and hit[0] == contents:
        return hit[1]
    # new arrays or contents: by the contents themselves (hashed), else worked out
    full = (contents, zp, double_round)
    entry = _STAGE_TABLES.get(full)                 # (_Tables, the bytes the entry holds)
    if entry is None:
        tables = _stage_tables(m, s, b, zp, double_round)
        entry = tables, _held_bytes(contents, tables)
        _STAGE_TABLES.keep(full, entry, entry[1])
    _STAGE_BY_ARRAYS.keep(key, (contents, entry[0]), entry[1])
    return entry[0]


def _stage_tables(m, s, b, zp: int, double_round: bool):
    ml, sl = m.tolist(), s.tolist()
    bl = [0] if b is None else b.tolist()
    if not sl or not bl or min(sl) < 2 or max(sl) > 62 or min(ml) < 0:
        return None
    rounds = double_round and max(sl) > 31        # DOUBLE_ROUND's +-2^30 somewhere
    mmax, bmax, smax = max(ml), max(max(bl), -min(bl)), max(sl)
    c0max = ((2 * abs(zp) + 1) << (smax - 1)) + (1 << 30 if rounds else 0)
    cmax = bmax * mmax + c0max
    if cmax >= 1 << 63:
        return None
    if len(ml) == len(sl) == len(bl) == 1:              # one scale: Python ints
        c = bl[0] * ml[0] + ((2 * zp + 1) << (sl[0] - 1))
        d = 1 << 30 if rounds else None
        return _Tables(ml[0], c, sl[0], mmax, abs(c) + (d or 0), mmax, bmax, cmax, c0max, d, d,
                       ml[0], sl[0], None if b is None else bl[0], zp)
    grow = smax - min(sl)
    mn = cn = dn = None
    d = np.where(s > 31, np.int64(1 << 30), np.int64(0)) if rounds else None
    mnmax = cnmax = 1 << 63
    # |mn| <= mmax 2^grow and |cn| = |bias m + c0| 2^(smax - s) <= cmax 2^grow
    if mmax << grow < 1 << 63 and cmax << grow < 1 << 63:
        mn = m.astype(np.int64) << (smax - s)
        k0 = (2 * zp + 1) << (smax - 1)         # c0 2^(smax - s), the same for every channel
        if b is None:
            cn = k0
        else:
            cn = b.astype(np.int64)
            cn *= mn
            cn += k0
        if d is not None:
            dn = d << (smax - s)
        mnmax, cnmax = mmax << grow, cmax << grow
    # m, s and b are views of the memory they were read from: kept, they must not change
    # when that buffer is written again (a later tile, a later run's tables found by contents)
    return _Tables(mn, cn, smax, mnmax, cnmax, mmax, bmax, cmax, c0max, dn, d, m.copy(),
                   s.copy(), None if b is None else b.copy(), zp)


def reciprocal_scale(count) -> tuple[np.ndarray, np.ndarray]:
    """TOSA reciprocal_scale(n) for n >= 1, vectorized: (multiplier, shift) int64."""
    n = np.asarray(count, dtype=np.int64)
    # k = 32 - clz(n-1) = bit length of n-1; frexp's exponent is exactly that for n-1 < 2^53.
    k = np.frexp((n - 1).astype(np.float64))[1].astype(np.int64)
    mul = (((1 << 30) + 1) << k) // n  # k <= 31: < 2^62
    return mul, 30 + k
