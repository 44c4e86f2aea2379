"""float L2_NORMALIZATION and LOCAL_RESPONSE_NORMALIZATION over the last axis, as TFLite's
reference kernels compute them, in fp32 (a float16 tensor is CAST to fp32 and back, as NNAPI's
float16 kernels convert):

- L2_NORMALIZATION: x / max(sqrt(sum x^2), 1e-6), as x * RSQRT(max(sum x^2, 1e-12));
- LOCAL_RESPONSE_NORMALIZATION: x * (bias + alpha * s)^-beta, s the sum of x^2 over the
  channels [c - radius, c + radius] (the squares padded with zeros along the axis, then
  2 radius + 1 SLICEs added), the power a TOSA POW. That window is TensorFlow's definition,
  which TFLite's default kernel and NNAPI's follow; TFLite's reference kernel stops one
  channel short, at c + radius - 1.
"""
from __future__ import annotations

import numpy as np

from .context import Lowering

L2_EPSILON = 1e-6      # TFLite's L2Normalization: the norm is at least this


def _fp32_input(L: Lowering) -> str:
    x = L.value(0)
    if L.b.dtype_of(x) != "fp32":
        x = L.b.op("CAST", [x], L.b.shape_of(x), "fp32", {})
    return x


def _output(L: Lowering, y: str):
    o = L.o()
    if L.ftype != "fp32":
        y = L.b.op("CAST", [y], L.b.shape_of(y), L.ftype, {})
    L.b.reshape(y, o.shape, L.out())


def _mul(L: Lowering, a: str, c: str) -> str:
    shape = np.broadcast_shapes(L.b.shape_of(a), L.b.shape_of(c))
    return L.b.op("MUL", [a, c, L.b.scalar(0, "int8")], shape, "fp32", {})


def _k(L: Lowering, value: float, rank: int) -> str:
    return L.b.bcast(value, "fp32", rank)


def l2_normalization(L: Lowering):
    if L.op.options.get("fused_activation_function", 0):
        L.fail("a fused activation is not supported (TFLite allows none)")
    b, x = L.b, _fp32_input(L)
    shape = b.shape_of(x)
    rank, axis = len(shape), len(shape) - 1
    total = b.op("REDUCE_SUM", [_mul(L, x, x)], shape[:-1] + (1,), "fp32", {"axis": axis})
    floor = b.binary("MAXIMUM", total, _k(L, L2_EPSILON * L2_EPSILON, rank))
    inv = b.op("RSQRT", [floor], b.shape_of(floor), "fp32", {})
    _output(L, _mul(L, x, inv))


def local_response_normalization(L: Lowering):
    opt = L.op.options
    radius = int(opt.get("radius", 5))
    bias, alpha, beta = (float(opt.get(k, d)) for k, d in (("bias", 1.0), ("alpha", 1.0),
                                                           ("beta", 0.5)))
    if radius < 0:
        L.fail(f"radius {radius} is negative")
    b, x = L.b, _fp32_input(L)
    shape = b.shape_of(x)
    rank, depth = len(shape), shape[-1]
    squares = _mul(L, x, x)
    reach = min(radius, depth - 1)         # channels beyond the axis add only zeros
    padded = squares
    if reach:
        pads = [0] * (2 * rank)
        pads[-2:] = [reach, reach]
        padded = b.op("PAD", [squares, b.shape(pads), b.scalar(0.0, "fp32")],
                      shape[:-1] + (depth + 2 * reach,), "fp32", {})
    total = None
    for start in range(2 * reach + 1):
        part = padded
        if reach:
            part = b.op("SLICE", [padded, b.shape([0] * (rank - 1) + [start]), b.shape(shape)],
                        shape, "fp32")
        total = part if total is None else b.binary("ADD", total, part)
    base = b.binary("ADD", _mul(L, total, _k(L, alpha, rank)), _k(L, bias, rank))
    power = b.op("POW", [base, _k(L, -beta, rank)], shape, "fp32", {})
    _output(L, _mul(L, x, power))


BUILTINS = {"L2_NORMALIZATION": l2_normalization,
            "LOCAL_RESPONSE_NORMALIZATION": local_response_normalization}
