"""Float graphs (fp16, bf16, fp32) of the zoo's networks: the same seeded, BatchNorm-folded
parameters as the int8 graphs, emitted without quantization.

`FpCtx` replays a calibrated network; each layer of layers.py / tlayers.py hands it to the
function of the same name here. Weights are rounded once to the graph's type; dot products
(CONV2D, DEPTHWISE_CONV2D, MATMUL, AVG_POOL2D) accumulate in fp32 and write the graph's type
(MATMUL writes fp32, cast back). Transcendentals are TOSA's PRO-FP operators: GELU from ERF,
LayerNorm from RSQRT, softmax from EXP and RECIPROCAL.
"""

from __future__ import annotations

import math

import numpy as np

from .emit import Emitter
from .keys import LayerKeys
from .quant import gelu

MAX_FINITE = {"FP16": 65504.0, "BF16": 3.3895313892515355e38, "FP32": 3.4028234663852886e38}


class FpCtx(LayerKeys):
    """The third pass: emits the float graph of a network calibrated by a FloatCtx."""
    is_float = False

    def __init__(self, fctx, dtype: str):
        super().__init__()
        self.params = fctx.params
        self.dtype = self.graph_dtype = dtype
        self.e = Emitter()
        self.acts: dict = {}

    def record(self, key: str, x):
        self.acts[key] = x
        return x

    def const(self, base, values):
        return self.e.const(base, np.asarray(values, np.float32), self.dtype)

    def scalar(self, base, value, rank):
        return self.const(base, np.full((1,) * rank, value))


def _rank(b, x: str) -> int:
    return len(b.e.shape[x])


def activation(b, x: str, act, base) -> str:
    if act == "relu6":
        return b.e.clamp(x, 0.0, 6.0, f"{base}_relu6")
    if act == "relu":
        return b.e.clamp(x, 0.0, MAX_FINITE[b.dtype], f"{base}_relu")
    assert act is None, act
    return x


def conv(b, key, x: str, act, depthwise: bool, stride) -> str:
    p, e = b.params[key], b.e
    t, bo, l, r = p["pad"]
    if bo < 0 or r < 0:        # rows and columns no window reads (TOSA forbids negative pads)
        n, h, w_, c = e.shape[x]
        x = e.slice(x, [0, 0, 0, 0], [n, h + min(bo, 0), w_ + min(r, 0), c], f"{key}_crop")
    pad = (t, max(bo, 0), l, max(r, 0))
    w = b.const(f"{key}_weight_{'hwcm' if depthwise else 'ohwi'}", p["w"])
    bias = b.const(f"{key}_bias", p["b"])
    y = e.conv2d(x, w, bias, 0, pad, stride, key, depthwise=depthwise)
    return activation(b, y, act, key)


def add(b, key, x: str, y: str, act) -> str:
    return activation(b, b.e.add(x, y, key), act, key)


def global_avg_pool(b, key, x: str) -> str:
    _, h, w, _ = b.e.shape[x]
    return b.e.avg_pool(x, [h, w], [1, 1], [0, 0, 0, 0], 0, 0, key)


def classifier_conv(b, key, x: str, classes: int) -> str:
    p, e = b.params[key], b.e
    w = b.const(f"{key}_weight_ohwi", p["w"].reshape(classes, 1, 1, -1))
    acc = e.conv2d(x, w, b.const(f"{key}_bias", p["b"]), 0, (0, 0, 0, 0), (1, 1), key)
    return e.reshape(acc, [1, classes], f"{key}_reshape")


def linear(b, key, x: str, dout: int) -> str:
    """nn.Linear as a 1x1 CONV2D on [tokens, 1, 1, din]."""
    p, e = b.params[key], b.e
    din = e.shape[x][-1]
    tokens = int(np.prod(e.shape[x])) // din
    if e.shape[x] != [tokens, 1, 1, din]:
        x = e.reshape(x, [tokens, 1, 1, din], f"{key}_in")
    w = b.const(f"{key}_weight_ohwi", p["w"].reshape(dout, 1, 1, din))
    return e.conv2d(x, w, b.const(f"{key}_bias", p["b"]), 0, (0, 0, 0, 0), (1, 1), key)


def table_act(b, key, x: str, fn) -> str:
    """The elementwise functions the zoo uses: GELU = 0.5 x (1 + erf(x / sqrt 2))."""
    if fn is not gelu:
        raise ValueError(f"no float lowering of {fn.__name__}")
    e, r = b.e, _rank(b, x)
    t = e.unary("ERF", e.mul(x, b.scalar(f"{key}_rsqrt2", 1 / math.sqrt(2), r), f"{key}_scale"),
                f"{key}_erf")
    t = e.add(t, b.scalar(f"{key}_one", 1.0, r), f"{key}_one_plus")
    return e.mul(e.mul(x, t, f"{key}_x"), b.scalar(f"{key}_half", 0.5, r), key)


def layernorm(b, key, x: str, eps: float) -> str:
    """mean and variance by REDUCE_SUM and a MUL by 1/d, RSQRT of var + eps, then gamma, beta."""
    e, p = b.e, b.params[key]
    shape = e.shape[x]
    d, axis, r = shape[-1], len(shape) - 1, len(shape)
    inv_d = b.scalar(f"{key}_inv_d", 1.0 / d, r)
    mean = e.mul(e.reduce("REDUCE_SUM", x, axis, f"{key}_sum"), inv_d, f"{key}_mean")
    cen = e.sub(x, mean, f"{key}_center")
    var = e.mul(e.reduce("REDUCE_SUM", e.mul(cen, cen, f"{key}_square"), axis, f"{key}_sqsum"),
                inv_d, f"{key}_var")
    rstd = e.unary("RSQRT", e.add(var, b.scalar(f"{key}_eps", eps, r), f"{key}_var_eps"),
                   f"{key}_rsqrt")
    norm = e.mul(cen, rstd, f"{key}_norm")
    gamma = b.const(f"{key}_gamma", p["gamma"].reshape((1,) * (r - 1) + (d,)))
    beta = b.const(f"{key}_beta", p["beta"].reshape((1,) * (r - 1) + (d,)))
    return e.add(e.mul(norm, gamma, f"{key}_gamma_mul"), beta, key)


def softmax(b, key, s: str) -> str:
    e, axis = b.e, _rank(b, s) - 1
    z = e.sub(s, e.reduce("REDUCE_MAX", s, axis, f"{key}_max"), f"{key}_shift")
    ex = e.unary("EXP", z, f"{key}_exp")
    rec = e.unary("RECIPROCAL", e.reduce("REDUCE_SUM", ex, axis, f"{key}_sum"), f"{key}_recip")
    return e.mul(ex, rec, f"{key}_probs")


def attention(b, key, qkv: str, heads: int, proj) -> str:
    """Fused QKV linear, heads by SLICE/RESHAPE/TRANSPOSE, MATMUL (fp32 out) scaled by
    1/sqrt(dh) and cast back, softmax, MATMUL with v, heads merged by SLICE+CONCAT, and the
    output projection (`proj`, the caller's linear layer so the parameter keys match)."""
    e, dt = b.e, b.dtype
    t, d = e.shape[qkv][0], e.shape[qkv][-1] // 3
    dh = d // heads
    parts = [e.slice(qkv, [0, 0, 0, i * d], [t, 1, 1, d], f"{key}_{n}") for i, n in enumerate("qkv")]
    heads_of = [e.reshape(p_, [t, heads, dh], f"{key}_{n}_heads") for p_, n in zip(parts, "qkv")]
    q = e.transpose(heads_of[0], [1, 0, 2], f"{key}_q_t")
    kt = e.transpose(heads_of[1], [1, 2, 0], f"{key}_k_t")
    v = e.transpose(heads_of[2], [1, 0, 2], f"{key}_v_t")
    s32 = e.matmul(q, kt, 0, 0, f"{key}_scores")
    scale = e.const(f"{key}_scale", np.full((1, 1, 1), 1 / math.sqrt(dh), np.float32), "FP32")
    s = e.mul(s32, scale, f"{key}_scores_scaled")
    s = s if dt == "FP32" else e.cast(s, dt, f"{key}_scores_cast")
    p = softmax(b, key, s)
    c = e.matmul(p, v, 0, 0, f"{key}_ctx")
    c = c if dt == "FP32" else e.cast(c, dt, f"{key}_ctx_cast")
    per_head = [e.slice(c, [h, 0, 0], [1, t, dh], f"{key}_head{h}") for h in range(heads)]
    merged = e.concat(per_head, 2, f"{key}_merge")
    out = proj(merged)
    return e.reshape(out, [1, t, d], f"{key}_out")
