"""FFT2D and RFFT2D (EXT-FFT, fp32) as the spec defines them, a 2-D DFT: here two passes of
the DFT matrices (isa/dft.py: along W, then along H) in float64, rounded once to fp32.

This is the host CPU's evaluation (inside control-flow bodies). On the NPU the compiler
rewrites the operators into the same two passes as fp32 GEMMs on the MAC array
(compiler/lowering/tensor_ops.py), so the machine computes them through its memories.
"""
from __future__ import annotations

import numpy as np

from npu_sim.isa.dft import gemm_weights


def _dft(v: np.ndarray, sign: float, out_w: int, complex_input: bool):
    """v: [N, H, K] rows [re | im] (or [re]) -> (re, im) [N, H, out_w]."""
    n, h, _ = v.shape
    t = v @ gemm_weights(v.shape[2] // (2 if complex_input else 1), sign, out_w, complex_input)
    # along H: each column's [re | im] of length 2H times the H-point matrix
    cols = t.reshape(n, h, 2, out_w).transpose(0, 3, 2, 1).reshape(n, out_w, 2 * h)
    o = (cols @ gemm_weights(h, sign, h, True)).reshape(n, out_w, 2, h)
    return o[:, :, 0].transpose(0, 2, 1), o[:, :, 1].transpose(0, 2, 1)


def fft2d(input_real, input_imag, inverse: bool) -> tuple[np.ndarray, np.ndarray]:
    v = np.concatenate([np.asarray(input_real, np.float64), np.asarray(input_imag, np.float64)],
                       axis=2)
    return tuple(np.ascontiguousarray(o, np.float32)
                 for o in _dft(v, -1.0 if inverse else 1.0, v.shape[2] // 2, True))


def rfft2d(input_real) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(input_real, np.float64)
    return tuple(np.ascontiguousarray(o, np.float32)
                 for o in _dft(v, 1.0, v.shape[2] // 2 + 1, False))
