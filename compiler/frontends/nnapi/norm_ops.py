"""The NNAPI operations that normalize along an axis (SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION,
LOCAL_RESPONSE_NORMALIZATION) or over a feature map's positions (INSTANCE_NORMALIZATION), as
TFLite builtin records: the TFLite lowerings work along the last axis, so another axis is
swapped with it by a TRANSPOSE on either side."""
from __future__ import annotations

import numpy as np

from .model import OperandType as T
from .ops import FLOAT_TENSORS, Q8F, fixed_quant, layout
from .translate import Translator

NUMPY_FLOAT = {"FLOAT32": np.float32, "FLOAT16": np.float16}


def softmax(t: Translator):
    t.counts((2, 3))
    x = t.operand(0)
    t.out_shape(x.dimensions)
    beta = t.scalar(1, T.FLOAT32, T.FLOAT16)
    t.need(beta > 0, "beta must be positive")
    rank = len(x.dimensions)
    axis = _axis_input(t, 2, rank) if t.n_inputs() > 2 else rank - 1
    t.types(Q8F, 0, "o0")
    fixed_quant(t, 1 / 256, 0)
    _on_axis(t, "SOFTMAX", axis, beta=float(beta))


def log_softmax(t: Translator):
    t.counts((3,))
    x = t.operand(0)
    t.out_shape(x.dimensions)
    beta = t.scalar(1, T.FLOAT32, T.FLOAT16)
    t.need(beta > 0, "beta must be positive")
    axis = _axis_input(t, 2, len(x.dimensions))
    t.types(FLOAT_TENSORS, 0, "o0")
    _on_axis(t, "LOG_SOFTMAX", axis, beta=float(beta))


def _on_axis(t: Translator, builtin: str, axis: int, **options):
    """A TFLite builtin that works along the last axis, applied along `axis` (the axis swapped
    with the last by a TRANSPOSE on either side)."""
    x_k, y_k = t.op.inputs[0], t.op.outputs[0]
    dims = t.operand(0).dimensions
    if axis == len(dims) - 1:
        t.emit(builtin, [x_k], [y_k], **options)
        return
    perm = list(range(len(dims)))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    shape = [dims[p] for p in perm]
    a = t.synth(shape, t.tensors[x_k].dtype, like=x_k)
    t.emit("TRANSPOSE", [x_k, t.const(perm)], [a])
    b = t.synth(shape, t.tensors[y_k].dtype, like=y_k)
    t.emit(builtin, [a], [b], **options)
    t.emit("TRANSPOSE", [b, t.const(perm)], [y_k])


def _axis_input(t: Translator, i: int, rank: int) -> int:
    """Optional INT32 input i: an axis in [-rank, rank), the last by default."""
    axis = -1 if t.is_omitted(i) else t.scalar(i, T.INT32)
    t.need(-rank <= axis < rank, f"axis {axis} is outside rank {rank}")
    return axis % rank


def l2_normalization(t: Translator):
    t.counts((1, 2))
    x = t.operand(0)
    t.need(1 <= len(x.dimensions) <= 4, f"input 0 has rank {len(x.dimensions)}; 1 to 4 allowed")
    t.out_shape(x.dimensions)
    axis = _axis_input(t, 1, len(x.dimensions)) if t.n_inputs() > 1 else len(x.dimensions) - 1
    t.types(FLOAT_TENSORS, 0, "o0")         # the quantized form is not lowered
    _on_axis(t, "L2_NORMALIZATION", axis)


def local_response_normalization(t: Translator):
    t.counts((5, 6))
    x = t.operand(0)
    t.need(1 <= len(x.dimensions) <= 4, f"input 0 has rank {len(x.dimensions)}; 1 to 4 allowed")
    t.out_shape(x.dimensions)
    t.types(FLOAT_TENSORS, 0, "o0")
    radius = t.scalar(1, T.INT32)
    t.need(radius >= 0, f"radius {radius} must not be negative")
    bias, alpha, beta = (float(t.scalar(i, T.FLOAT32, T.FLOAT16)) for i in (2, 3, 4))
    axis = _axis_input(t, 5, len(x.dimensions)) if t.n_inputs() > 5 else len(x.dimensions) - 1
    _on_axis(t, "LOCAL_RESPONSE_NORMALIZATION", axis, radius=radius, bias=bias, alpha=alpha,
             beta=beta)


def instance_normalization(t: Translator):
    """(x - mean) * gamma / sqrt(var + epsilon) + beta, mean and variance over each image's
    positions per channel: MEAN records, and RSQRT of the variance plus epsilon."""
    t.counts((5,))
    x = t.operand(0)
    t.rank(0, (4,))
    t.out_shape(x.dimensions)
    t.types(FLOAT_TENSORS, 0, "o0")
    gamma, beta, eps = (float(t.scalar(i, T.FLOAT32, T.FLOAT16)) for i in (1, 2, 3))
    t.need(eps > 0, f"epsilon {eps:g} must be positive")
    spatial = (2, 3) if layout(t, 4) else (1, 2)
    x_k, y_k = t.op.inputs[0], t.op.outputs[0]
    dims = list(x.dimensions)
    pooled = [1 if i in spatial else d for i, d in enumerate(dims)]
    dtype = t.tensors[x_k].dtype
    axes = t.const(list(spatial))

    def new(shape):
        return t.synth(shape, dtype)

    def scalar(value):
        return t.synth((1, 1, 1, 1), dtype, data=np.full((1, 1, 1, 1), value, NUMPY_FLOAT[dtype]))

    mean, centred, square, var = new(pooled), new(dims), new(dims), new(pooled)
    t.emit("MEAN", [x_k, axes], [mean], keep_dims=True)
    t.emit("SUB", [x_k, mean], [centred])
    t.emit("MUL", [centred, centred], [square])
    t.emit("MEAN", [square, axes], [var], keep_dims=True)
    padded, inv, scaled = new(pooled), new(pooled), new(dims)
    t.emit("ADD", [var, scalar(eps)], [padded])
    t.emit("RSQRT", [padded], [inv])
    t.emit("MUL", [centred, inv], [scaled])
    gained = new(dims)
    t.emit("MUL", [scaled, scalar(gamma)], [gained])
    t.emit("ADD", [gained, scalar(beta)], [y_k])
