"""RESCALE / apply_scale kernels vs the reference model and exact Python-int arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

import npu_sim.datapath as dp
from npu_sim.datapath import scale
from dp_helpers import add_rescale
from oracle import DType, GraphBuilder

# (storage dtype, TOSA dtype, unsigned, bits)
TYPES = {
    "int8": (np.int8, DType.INT8, False, 8),
    "uint8": (np.int8, DType.INT8, True, 8),
    "int16": (np.int16, DType.INT16, False, 16),
    "uint16": (np.int16, DType.INT16, True, 16),
    "int32": (np.int32, DType.INT32, False, 32),
    "int48": (np.int64, DType.INT48, False, 48),
}
OUT_TYPES = ("int8", "uint8", "int16", "uint16", "int32")


def _zp(rng, name):
    if name in ("int8", "uint8"):
        return int(rng.integers(0, 256)) if name == "uint8" else int(rng.integers(-128, 128))
    if name == "uint16":
        return int(rng.choice([0, 32768]))
    return 0


def _raw(v, np_dt, bits):
    """Unsigned value -> raw bit pattern in the signed storage dtype."""
    return np.asarray(v, dtype=np.int64).astype({8: np.uint8, 16: np.uint16}[bits]).view(np_dt)


def _case(rng, in_name, out_name, scale32, rounding):
    in_np, in_dt, in_u, in_bits = TYPES[in_name]
    out_np, out_dt, out_u, out_bits = TYPES[out_name]
    rank = int(rng.integers(1, 5))
    shape = tuple(int(v) for v in rng.integers(1, 6, size=rank))
    per_channel = bool(rng.integers(0, 2))
    nc = shape[-1] if per_channel else 1
    slo = int(rng.choice([2, 10, 20, 30]))
    shift = rng.integers(slo, min(slo + 20, 62), size=nc, endpoint=True)
    if scale32:
        mult = rng.integers(0, (1 << 31) - 1, size=nc, endpoint=True)
        mult[rng.random(nc) < 0.7] = rng.integers(1 << 30, (1 << 31) - 1, size=nc)[:1]
    else:
        mult = rng.integers(0, (1 << 15) - 1, size=nc, endpoint=True)
    izp, ozp = _zp(rng, in_name), _zp(rng, out_name)
    # value range: REQUIRE |v| < 2^(shift-1) for scale32; for scale16 only the int32 result bound
    vbits = int(shift.min()) - 1 + (0 if scale32 else 15)
    tlo, thi = (0, (1 << in_bits) - 1) if in_u else (-(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1)
    lo, hi = max(tlo, izp - (1 << vbits)), min(thi, izp + (1 << vbits) - 1)
    v = rng.integers(lo, hi, size=shape, endpoint=True)
    edge = rng.random(shape) < 0.1
    v[edge] = rng.choice([lo, hi, min(max(izp, lo), hi)], size=int(edge.sum()))
    x = _raw(v, in_np, in_bits) if in_u else v.astype(in_np)
    izp_s = int(_raw(izp, in_np, in_bits)) if in_u else izp  # zps are stored raw too
    ozp_s = int(_raw(ozp, out_np, out_bits)) if out_u else ozp
    return dict(x=x, shape=shape, mult=mult, shift=shift, izp=izp_s, ozp=ozp_s,
                per_channel=per_channel, in_dt=in_dt, out_dt=out_dt, in_u=in_u, out_u=out_u,
                out_np=out_np, scale32=scale32, rounding=rounding)


def _run(c):
    g = GraphBuilder()
    xi = g.tensor(c["shape"], c["in_dt"], c["x"])
    out = add_rescale(g, xi, c["shape"], c["in_dt"], c["out_dt"], c["mult"], c["shift"], c["izp"],
                      c["ozp"], scale32=c["scale32"], rounding_mode=c["rounding"],
                      per_channel=c["per_channel"], input_unsigned=c["in_u"],
                      output_unsigned=c["out_u"])
    ref = g.run()[out]
    got = dp.rescale(c["x"], c["mult"], c["shift"], c["izp"], c["ozp"], scale32=c["scale32"],
                     rounding_mode=c["rounding"], per_channel=c["per_channel"],
                     input_unsigned=c["in_u"], output_unsigned=c["out_u"], out_dtype=c["out_np"])
    return got, ref


def _combos():
    out = []
    for i in TYPES:
        for o in OUT_TYPES:
            if TYPES[i][2] and TYPES[o][2]:
                continue  # both unsigned: ERROR
            if (TYPES[i][2] and o in ("int32",)) or (TYPES[o][2] and i in ("int32", "int48")):
                continue  # unsigned with i32/i48: ERROR
            out.append((i, o))
    return out


COMBOS = _combos()


@pytest.mark.parametrize("seed", range(36))
def test_rescale(seed):
    rng = np.random.default_rng(600 + seed)
    in_name, out_name = COMBOS[seed % len(COMBOS)]
    scale32 = in_name != "int48" and bool(rng.integers(0, 4))  # mostly 32-bit
    rounding = str(rng.choice(["SINGLE_ROUND", "DOUBLE_ROUND"])) if scale32 else "SINGLE_ROUND"
    got, ref = _run(_case(rng, in_name, out_name, scale32, rounding))
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("seed", range(3))
def test_rescale_inexact_round_within_one(seed):
    """INEXACT_ROUND is computed as SINGLE_ROUND; the model uses float32, so allow 1 LSB."""
    rng = np.random.default_rng(700 + seed)
    got, ref = _run(_case(rng, "int32", "int8", True, "INEXACT_ROUND"))
    assert np.abs(got.astype(np.int64) - ref.astype(np.int64)).max(initial=0) <= 1


def _py_scale(v, m, s, double_round):
    rnd = 1 << (s - 1)
    if double_round and s > 31:
        rnd += (1 << 30) if v >= 0 else -(1 << 30)
    return (v * m + rnd) >> s


@pytest.mark.parametrize("double_round", [False, True])
def test_apply_scale_32_exact_for_48bit_values(double_round):
    """48-bit values times 31-bit multipliers overflow int64: the split path must be exact."""
    rng = np.random.default_rng(11)
    n = 4000
    s = rng.integers(2, 63, size=n)
    # valid domain: |v| < 2^(shift-1) (so up to 61 bits), log-uniform magnitudes
    vb = rng.integers(0, s)
    v = rng.integers(-(1 << 62), 1 << 62, size=n) >> (63 - vb)
    m = rng.integers(0, 1 << 31, size=n)
    m[:50], s[:50] = (1 << 31) - 1, 49
    v[:50] = -(1 << 47)
    got = dp.apply_scale_32(v, m, s, double_round)
    want = [_py_scale(int(a), int(b), int(c), double_round) for a, b, c in zip(v, m, s)]
    assert got.dtype == np.int64
    assert [int(g) for g in got] == want
    # fast path agrees with Python ints too
    small = np.clip(v, -(1 << 31), (1 << 31) - 1)
    got = dp.apply_scale_32(small, m, s, double_round)
    assert [int(g) for g in got] == [_py_scale(int(a), int(b), int(c), double_round)
                                    for a, b, c in zip(small, m, s)]


def test_apply_scale_16_exact():
    rng = np.random.default_rng(12)
    n = 3000
    v = rng.integers(-(1 << 47), 1 << 47, size=n)
    m = rng.integers(0, 1 << 15, size=n)
    s = rng.integers(2, 63, size=n)
    got = dp.apply_scale_16(v, m, s)
    assert [int(g) for g in got] == [_py_scale(int(a), int(b), int(c), False)
                                    for a, b, c in zip(v, m, s)]


def test_reciprocal_scale_matches_spec():
    n = np.arange(1, 5000)
    mul, shift = dp.reciprocal_scale(n)
    for c, m, s in zip(n, mul, shift):
        k = 32 - (32 - int(c - 1).bit_length())  # 32 - clz(n-1)
        assert (int(m), int(s)) == ((((1 << 30) + 1) << k) // int(c), 30 + k)


def test_output_stage_without_multiplier_wraps_and_saturates():
    acc = np.array([[(1 << 31) - 10, -(1 << 31) + 5]], dtype=np.int64)
    r = dp.output_stage(acc, bias=np.array([20, -10]))
    assert r.dtype == np.int32 and list(r[0]) == [-(1 << 31) + 10, (1 << 31) - 5]
    acc48 = np.array([[(1 << 47) - 10, -(1 << 47) + 5]], dtype=np.int64)
    r = dp.output_stage(acc48, bias=np.array([20, -10]), acc_dtype="int48")
    assert r.dtype == np.int64 and list(r[0]) == [(1 << 47) - 1, -(1 << 47)]


def _py_stage(acc, bias, m, s, zp, lo, hi, double_round):
    """The int32 output stage in Python ints, as the spec computes it: the register wraps
    acc + bias to int32, then apply_scale_32, the zero point, saturation."""
    out = []
    for row in acc.reshape(-1, acc.shape[-1]).tolist():
        for c, v in enumerate(row):
            v = (int(v) + int(bias[c % len(bias)]) + (1 << 31)) % (1 << 32) - (1 << 31)
            r = _py_scale(v, int(m[c % len(m)]), int(s[c % len(s)]), double_round) + zp
            out.append(min(max(r, lo), hi))
    return np.array(out, dtype=np.int64).reshape(acc.shape)


STAGE_CASES = [   # (acc dtype, |acc| bits, |bias| bits, shifts, double round, out dtype, clamp,
                  #  fast path with bias, fast path without)
    (np.float32, 23, 14, (20, 40), False, np.int8, None, True, True),   # the MAC tiles' case
    (np.float32, 23, 14, (30, 35), False, np.int8, None, True, True),   # one shift for all
    (np.float32, 23, 31, (20, 40), False, np.int8, (-100, 90), True, True),  # may wrap: int32 add
    (np.int32, 31, 31, (20, 40), False, np.int8, None, True, True),     # split reduction's sums
    (np.float64, 28, 14, (30, 62), False, np.int16, None, True, True),  # bound from the data
    (np.float64, 30, 30, (2, 31), True, np.int32, None, True, True),    # may wrap
    (np.int64, 45, 20, (20, 40), False, np.int8, None, True, True),     # beyond int32: wraps
    (np.float32, 23, 10, (2, 62), True, np.int16, (-128, 0), True, True),  # DOUBLE_ROUND, s > 31
    (np.float32, 23, 14, (32, 36), True, np.int8, None, True, True),    # ... with one shift
    (np.float64, 30, 30, (33, 40), True, np.int8, None, True, True),    # ... that may wrap
    (np.int32, 31, 31, (28, 45), True, np.int16, None, True, True),     # ... about 31
    (np.int64, 45, 20, (40, 62), False, np.int8, None, False, False),   # beyond int64
]


@pytest.mark.parametrize("case", range(len(STAGE_CASES)))
def test_output_stage_int32_equals_the_spec(case, monkeypatch):
    """The fast int32 stage (bias, rounding and zero point in one per-channel constant where
    bounds prove the register cannot wrap; else the sums wrapped to int32 and the bias added
    in int32, as the register does; DOUBLE_ROUND's +-2^30 by the register's sign for shifts
    above 31) against Python integers, and the case where it must fall back to the general
    path: products beyond int64. Per channel and per tensor, with and without bias."""
    adt, abits, bbits, (slo, shi), dr, odt, clamp, *folds = STAGE_CASES[case]
    rng = np.random.default_rng(40 + case)
    folded = []
    stage = scale._int32_stage
    monkeypatch.setattr(scale, "_int32_stage",
                        lambda *a: folded.append(stage(*a) is not None) or stage(*a))
    for per_channel, with_bias in ((True, True), (False, True), (True, False)):
        c = 7
        acc = rng.integers(-(1 << abits), 1 << abits, size=(3, 5, c)).astype(adt)
        acc.reshape(-1)[:2] = (1 << abits) - 1, -(1 << abits)
        bias = rng.integers(-(1 << bbits), min((1 << bbits) + 1, 1 << 31), size=c)
        bias[:2] = min(1 << bbits, (1 << 31) - 1), -(1 << bbits)
        bias = bias.astype(np.int32)
        m = rng.integers(1 << 30, 1 << 31, size=c).astype(np.int32)
        s = rng.integers(slo, shi + 1, size=c).astype(np.int32)
        m[0], s[0] = (1 << 31) - 1, shi
        info = np.iinfo(odt)
        zp = int(rng.integers(-128, 128)) if odt == np.int8 else 0
        lo, hi = clamp or (int(info.min), int(info.max))
        tables = (bias if with_bias else np.zeros(1, np.int32), m if per_channel else m[:1],
                  s if per_channel else s[:1])
        want = _py_stage(acc, *tables, zp, lo, hi, dr).astype(odt)
        got = dp.output_stage(acc, bias=bias if with_bias else None, multiplier=m, shift=s,
                              rounding_mode="DOUBLE_ROUND" if dr else "SINGLE_ROUND",
                              per_channel=per_channel, output_zp=zp, clamp=clamp,
                              out_dtype=odt)
        assert got.dtype == odt
        np.testing.assert_array_equal(got, want)
        assert folded.pop() == folds[0 if with_bias else 1]


def test_output_stage_double_round_takes_the_registers_sign():
    """DOUBLE_ROUND's +-2^30 follows the sign of the register (acc + bias), not of the sums:
    registers of 0 and -1 beside each other, a zero multiplier, shifts on both sides of 31,
    every channel's one shift and per channel, on sums that may and may not wrap."""
    m = np.array([1 << 30, (1 << 31) - 1, 0, 3 << 29], np.int32)
    bias = np.array([5, -5, 9, 0], np.int32)
    for shifts in ((32, 32, 32, 32), (31, 32, 33, 34), (20, 33, 40, 62)):
        s = np.array(shifts, np.int32)
        for adt, span in ((np.float32, 1 << 12), (np.int64, 1 << 34)):
            regs = np.arange(-span, span, max(span >> 9, 1), dtype=np.int64)
            regs = np.concatenate([regs, [-1, 0, 1, -6, -5, -4, 4, 5, 6]])
            acc = np.repeat(regs[:, None], 4, axis=1) - bias.astype(np.int64)
            acc = acc.astype(adt)
            got = dp.output_stage(acc, bias=bias, multiplier=m, shift=s, output_zp=-3,
                                  rounding_mode="DOUBLE_ROUND", out_dtype=np.int8)
            want = _py_stage(acc.astype(np.int64), bias, m, s, -3, -128, 127, True)
            np.testing.assert_array_equal(got, want)


def test_output_stage_one_shift_for_every_channel():
    """Per-channel shifts a few bits apart scale to the largest (m and c times 2^(max s - s),
    exact: floor(X / 2^s) = floor(X 2^d / 2^(s + d))) where the products still fit int64,
    and stay per channel where they would not."""
    m = np.array([1 << 30, (1 << 31) - 1, 1 << 30], np.int32)
    for shifts, one in (((30, 33, 35), True), ((20, 33, 40), False)):
        s = np.array(shifts, np.int32)
        k = scale._stage_tables(m, s, np.array([7, -9, 100], np.int32), 3, False)
        assert k.sn == max(shifts)
        assert ((1 << 24) * k.mnmax + k.cnmax < 1 << 63) == one
        acc = np.random.default_rng(5).integers(-(1 << 24), 1 << 24, (40, 3)).astype(np.float32)
        acc[:3] = (1 << 24) - 1
        bias = np.array([7, -9, 100], np.int32)
        got = dp.output_stage(acc, bias=bias, multiplier=m, shift=s, output_zp=3, out_dtype=np.int8)
        np.testing.assert_array_equal(got, _py_stage(acc, bias, m, s, 3, -128, 127, False))


def test_output_stage_wraps_wide_sums_without_bias():
    """int64 or float64 sums beyond int32 wrap as the register does even with no bias to add
    (a MATMUL's): the folded stage must not scale them unwrapped."""
    m, s = np.full(1, 1 << 30, np.int32), np.full(1, 31, np.int32)
    for adt in (np.int64, np.float64):
        acc = np.array([[2 ** 31 + 5, -2 ** 31 - 7, 2 ** 31 - 1]], dtype=adt)
        got = dp.output_stage(acc, multiplier=m, shift=s, per_channel=False, out_dtype=np.int16)
        want = _py_stage(acc.astype(np.int64), np.zeros(1, np.int32), m, s, 0, -32768, 32767,
                         False)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, [[-32768, 32767, 32767]])


def test_output_stage_zero_sums_with_shifts_far_apart():
    """Per-channel shifts too far apart for one shared shift, on all-zero wide sums (a conv
    tile whose input is all the zero point): the bound of 0 must not take the one-shift path
    that does not exist for these tables (this once raised a numpy type error)."""
    m, s = np.array([2 ** 31 - 1, 2 ** 30], np.int32), np.array([10, 50], np.int32)
    for adt in (np.int64, np.float64):
        acc = np.zeros((2, 2), adt)
        got = dp.output_stage(acc, multiplier=m, shift=s, out_dtype=np.int8, output_zp=3)
        want = _py_stage(acc.astype(np.int64), np.zeros(2, np.int32), m, s, 3, -128, 127, False)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, [[3, 3], [3, 3]])


def test_output_stage_reads_new_tables_each_time():
    """The stage's constants are kept by the tables' bytes: new values written into the same
    arrays (a layer's tables staged over the last one's) give the new result."""
    acc = np.arange(-60, 60, dtype=np.float32).reshape(1, 30, 4) * 1000
    bias, m, s = np.zeros(4, np.int32), np.full(4, 1 << 30, np.int32), np.full(4, 20, np.int32)
    out = np.empty(acc.shape, np.int8)
    kw = dict(bias=bias, multiplier=m, shift=s, out_dtype=np.int8, out=out)
    first = dp.output_stage(acc, **kw).copy()
    np.testing.assert_array_equal(first, _py_stage(acc, bias, m, s, 0, -128, 127, False))
    for table, value in ((bias, 5000), (m, 1 << 29), (s, 18)):
        table[1] = value
        got = dp.output_stage(acc, **kw)
        np.testing.assert_array_equal(got, _py_stage(acc, bias, m, s, 0, -128, 127, False))
        assert not np.array_equal(got[..., 1], first[..., 1])


def test_stage_caches_start_again_past_a_count_or_bytes():
    """The stage constants' caches start again, empty, rather than pass a count of entries or
    a byte budget (a large-8k run's whole-layer tables had stayed to its end, 1.2 MiB of its
    peak)."""
    cache = scale._Bounded(entries=3, nbytes=100)
    for key in "abc":
        cache.keep(key, key.upper(), 10)
    assert dict(cache) == {"a": "A", "b": "B", "c": "C"} and cache.held == 30
    cache.keep("d", "D", 10)                        # past the count
    assert dict(cache) == {"d": "D"} and cache.held == 10
    cache.keep("e", "E", 85)
    assert dict(cache) == {"d": "D", "e": "E"} and cache.held == 95
    cache.keep("f", "F", 10)                        # past the bytes
    assert dict(cache) == {"f": "F"} and cache.held == 10


def test_output_stage_results_hold_when_its_caches_forget():
    """Results do not depend on what the caches still hold: with room for one entry, tiles
    alternating between two layers' tables recompute them and stay exact."""
    acc = np.arange(-60, 60, dtype=np.float32).reshape(1, 30, 4) * 1000
    layers = [(np.array([0, 7, -3, 9], np.int32), np.full(4, 1 << 30, np.int32),
               np.array([20, 21, 22, 23], np.int32)),
              (np.array([5, 0, 2, -1], np.int32), np.full(4, 1 << 29, np.int32),
               np.array([18, 19, 20, 21], np.int32))]
    saved = scale._STAGE_TABLES, scale._STAGE_BY_ARRAYS
    scale._STAGE_TABLES, scale._STAGE_BY_ARRAYS = scale._Bounded(1, 1), scale._Bounded(1, 1)
    try:
        for bias, m, s in layers * 3:
            got = dp.output_stage(acc, bias=bias, multiplier=m, shift=s, out_dtype=np.int8)
            np.testing.assert_array_equal(got, _py_stage(acc, bias, m, s, 0, -128, 127, False))
            assert len(scale._STAGE_TABLES) == len(scale._STAGE_BY_ARRAYS) == 1
    finally:
        scale._STAGE_TABLES, scale._STAGE_BY_ARRAYS = saved


def test_output_stage_tables_found_again_do_not_follow_their_first_buffer():
    """Tables found again by their bytes, read from another buffer, give the result of those
    bytes though the buffer they were first read from holds other tables by then (a second
    run of a program in one process read its first run's last buffer contents)."""
    acc = np.arange(-8, 8, dtype=np.int64).reshape(1, 8, 2) * 1000
    first = (np.array([7, -3], np.int32), np.array([2 ** 31 - 1, 2 ** 30], np.int32),
             np.array([10, 50], np.int32))         # shifts too far apart for one shared shift
    want = _py_stage(acc, *first, 3, -128, 127, False)
    buffer = [table.copy() for table in first]
    got = dp.output_stage(acc, bias=buffer[0], multiplier=buffer[1], shift=buffer[2],
                          out_dtype=np.int8, output_zp=3)
    np.testing.assert_array_equal(got, want)
    for table, value in zip(buffer, ([100, 200], [1 << 29, 1 << 28], [12, 40])):
        table[:] = value                            # the buffer's next tables
    again = [table.copy() for table in first]
    got = dp.output_stage(acc, bias=again[0], multiplier=again[1], shift=again[2],
                          out_dtype=np.int8, output_zp=3)
    np.testing.assert_array_equal(got, want)
