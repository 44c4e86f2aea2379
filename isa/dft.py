"""The DFT matrices of FFT2D and RFFT2D (TOSA 1.0 EXT-FFT): the compiler's lowering puts them
in the program as GEMM weights and the host CPU's evaluation multiplies by them, so both
compute the one transform from the same coefficients."""
from __future__ import annotations

import numpy as np


def twiddles(n: int, sign: float) -> tuple[np.ndarray, np.ndarray]:
    """Real and imaginary parts of exp(-sign * 2 pi i (i*j mod n) / n) for i, j < n, in
    float64 (sign 1: forward, -1: inverse, as the spec's sign_val). Multiples of a quarter turn
    are exact (0, +-1), as the spec's RFFT2D makes its sin(k pi) terms exactly 0."""
    j = np.outer(np.arange(n), np.arange(n)) % n
    angle = 2 * np.pi * j / n
    cos, sin = np.cos(angle), np.sin(angle)
    quarter = (4 * j) % n == 0
    q = (4 * j // n) % 4
    cos = np.where(quarter, np.choose(q, [1.0, 0.0, -1.0, 0.0]), cos)
    sin = np.where(quarter, np.choose(q, [0.0, 1.0, 0.0, -1.0]), sin)
    return cos, -sign * sin + 0.0          # + 0.0: no negative zeros


def gemm_weights(n: int, sign: float, out: int, complex_input: bool) -> np.ndarray:
    """One DFT pass along an axis of length n as a real GEMM, [K, 2*out]: the row vector
    [re | im] (or [re] for a real input) times it gives [re | im] of the first `out`
    coefficients, since (a + ib)(c + is) = (ac - bs) + i(as + bc)."""
    c, s = (t[:, :out] for t in twiddles(n, sign))
    top = np.concatenate([c, s], axis=1)
    if not complex_input:
        return top
    return np.concatenate([top, np.concatenate([-s, c], axis=1)], axis=0)
