"""Seeded data for the graph inputs a run is not given.

A counter-based generator (SplitMix64's output function over a counter, one stream per seed
and input) in a few numpy passes. numpy.random would do, but importing it (with the hashlib
its seeding pulls in) adds about 7 MiB and 10 ms to every run without `--input`, the default
`npu-sim run` among them. Every value is computed with integer or exact float arithmetic, so
the data is the same on every machine.
"""
from __future__ import annotations

import math

import numpy as np

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15          # SplitMix64's increment: 2^64 over the golden ratio


def _mixed(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function, in place on uint64 (numpy wraps array arithmetic)."""
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def _key(seed: int, stream: int) -> int:
    """A stream's starting counter: both numbers mixed, so nearby seeds and streams start far
    apart."""
    z = np.array([(seed * _GAMMA + stream) & _MASK], dtype=np.uint64)
    z = _mixed(_mixed(z) + np.uint64(stream))
    return int(z[0])


_CHUNK = 1 << 16           # words made at a time: temporaries stay small for any input


def words(seed: int, stream: int, n: int, skip: int = 0) -> np.ndarray:
    """Words skip..skip+n-1 of stream `stream` of `seed`: n uniform uint64."""
    z = np.arange(skip + 1, skip + n + 1, dtype=np.uint64)
    z *= np.uint64(_GAMMA)
    z += np.uint64(_key(seed, stream))
    return _mixed(z)


def integers(seed: int, stream: int, shape: tuple, bits: int) -> np.ndarray:
    """Uniform signed `bits`-bit integers (int64), every value of the range equally likely:
    the words' top bits, sign-extended."""
    if not 1 <= bits <= 64:
        raise ValueError(f"bits {bits}: expected 1 to 64")
    out = np.empty(math.prod(shape), dtype=np.int64)
    for lo in range(0, out.size, _CHUNK):
        w = words(seed, stream, min(_CHUNK, out.size - lo), skip=lo).view(np.int64)
        np.right_shift(w, 64 - bits, out=out[lo:lo + w.size])      # arithmetic: sign-extends
    return out.reshape(shape)


def normal(seed: int, stream: int, shape: tuple) -> np.ndarray:
    """Approximately standard normal float64: the sum of twelve uniforms on [0, 1), less 6
    (mean 0, variance 1, within +-6). The uniforms have 32 bits, so every sum is exact."""
    n = math.prod(shape)
    out = np.empty(n, dtype=np.float64)
    for lo in range(0, n, _CHUNK):
        size = min(_CHUNK, n - lo)
        total = out[lo:lo + size]
        total[...] = 0.0
        for k in range(6):                          # each word holds two 32-bit uniforms
            w = words(seed, stream, size, skip=k * n + lo)
            total += w >> np.uint64(32)
            w &= np.uint64(0xFFFFFFFF)
            total += w
        total *= 2.0 ** -32
        total -= 6.0
    return out.reshape(shape)
