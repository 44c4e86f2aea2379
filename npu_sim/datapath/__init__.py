"""Numpy kernels for TOSA 1.0: exact integer (PRO-INT) semantics, and floating point (PRO-FP,
fp.py) evaluated in fp64 and rounded once to nearest-even.

Pure functions, numpy in / numpy out; spatial kernels accept tile-local pads or origins so a
simulator can call them per tile. Storage dtypes: int8/int16/int32, int64 for int48, bool;
int4 arrives as int8 holding -8..7. Accumulator kernels return exact int64 sums.
"""

from .data import gather, resize, scatter
from .elementwise import ELEMENTWISE_OPS, clamp, elementwise, table
from .fft import fft2d, rfft2d
from .fp import fp_elementwise, is_float, narrow
from .mac import conv2d_acc, conv3d_acc, depthwise_conv2d_acc, float_stage, matmul_acc, \
    transpose_conv2d_acc
from .pool import argmax, avg_pool2d, fp_combine, fp_reduce, max_pool2d, reduce
from .scale import apply_scale_16, apply_scale_32, output_stage, reciprocal_scale, rescale

__all__ = [
    "conv2d_acc", "depthwise_conv2d_acc", "conv3d_acc", "transpose_conv2d_acc", "matmul_acc",
    "float_stage", "fft2d", "rfft2d",
    "apply_scale_32", "apply_scale_16", "rescale", "output_stage", "reciprocal_scale",
    "elementwise", "ELEMENTWISE_OPS", "clamp", "table",
    "avg_pool2d", "max_pool2d", "reduce", "argmax", "fp_reduce", "fp_combine",
    "is_float", "narrow", "fp_elementwise",
    "resize", "gather", "scatter",
]
