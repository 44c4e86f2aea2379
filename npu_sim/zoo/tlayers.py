"""Transformer layers lowered to integer TOSA the way ExecuTorch's Arm
backend lowers one (see tests/data/attn_block): every intermediate is int8 with its
own calibrated scale/zp; elementwise math is RESCALE-to-int32, int32 op, RESCALE
back; transcendental functions (rsqrt, exp, reciprocal, GELU) are 256-entry TABLEs.

Float activations are [N, tokens, d] (N calibration samples); the int8 graph works
on [1, tokens, d], linears as 1x1 CONV2D on [tokens, 1, 1, d], attention as
batched MATMUL over heads.
"""

from __future__ import annotations

import math

import numpy as np

from . import fgraph
from .layers import QT, linear_init, addsub_q
from .quant import f32, make_table, quantize_bias, quantize_weights

LN_EPS = 1e-5
QK_GAIN = 2.0


def reshaped(b, x: QT, shape, base) -> QT:
    if list(b.e.shape[x.name]) == list(shape):
        return x
    return QT(b.e.reshape(x.name, shape, base), x.q)


def _to_i32(b, x: QT, base) -> str:
    """int8 -> int32 with the zero point removed (scale 1), as ExecuTorch does before MUL."""
    return b.e.rescale(x.name, 1.0, x.q.zp, 0, "INT32", base)


def _observe_all(b, key, **vals):
    for sub, v in vals.items():
        b.observe(f"{key}.{sub}", v)


def linear(b, x, dout, name, row_gain=None):
    """nn.Linear as a 1x1 CONV2D on [tokens,1,1,din] with per-channel weights.

    Quantized output stays [tokens,1,1,dout]; callers reshape when needed.
    `row_gain` scales output rows of the seeded weights (see attention)."""
    key = b.key(name)
    if b.is_float:
        if key not in b.params:
            w, bias = linear_init(b.rng, x.shape[-1], dout)
            if row_gain is not None:
                w, bias = w * row_gain[:, None], bias * row_gain
            b.params[key] = dict(w=f32(w), b=f32(bias))
        p = b.params[key]
        y = x @ p["w"].T + p["b"]
        b.observe(key, y)
        return b.record(key, y)
    if b.graph_dtype:
        return b.record(key, QT(fgraph.linear(b, key, x.name, dout), None))
    e, p, qo = b.e, b.params[key], b.qp(key)
    din = e.shape[x.name][-1]
    tokens = int(np.prod(e.shape[x.name])) // din
    x = reshaped(b, x, [tokens, 1, 1, din], f"{key}_in")
    wq, sw = quantize_weights(p["w"], axis=0)
    acc_scale = x.q.scale * sw
    w = e.const(f"{key}_weight_ohwi", wq.reshape(dout, 1, 1, din), "INT8")
    bias = e.const(f"{key}_bias", quantize_bias(p["b"], acc_scale), "INT32")
    acc = e.conv2d(x.name, w, bias, x.q.zp, (0, 0, 0, 0), (1, 1), key)
    out = e.rescale(acc, acc_scale / qo.scale, 0, qo.zp, "INT8", f"{key}_rescale")
    return b.record(key, QT(out, qo))


def table_act(b, x, fn, name):
    """Elementwise int8 function as a single TABLE (GELU here)."""
    key = b.key(name)
    if b.is_float:
        y = fn(x)
        b.observe(key, y)
        return b.record(key, y)
    if b.graph_dtype:
        return b.record(key, QT(fgraph.table_act(b, key, x.name, fn), None))
    qo = b.qp(key)
    return b.record(key, QT(b.e.table(x.name, make_table(fn, x.q, qo), key), qo))


def layernorm(b, x, name="ln"):
    """LayerNorm over the last axis: REDUCE_SUM mean, SUB, MUL square, REDUCE_SUM
    variance, rsqrt TABLE, MUL, then gamma MUL and beta ADD in int32."""
    key = b.key(name)
    if b.is_float:
        if key not in b.params:
            d = x.shape[-1]
            b.params[key] = dict(gamma=f32(b.rng.uniform(0.5, 1.5, d)),
                                 beta=f32(b.rng.normal(0.0, 0.2, d)))
        p = b.params[key]
        mean = x.mean(-1, keepdims=True)
        cen = x - mean
        var = (cen**2).mean(-1, keepdims=True)
        rstd = 1.0 / np.sqrt(var + LN_EPS)
        norm = cen * rstd
        y = norm * p["gamma"] + p["beta"]
        _observe_all(b, key, mean=mean, centered=cen, var=var, rstd=rstd, norm=norm)
        b.observe(key, y)
        return b.record(key, y)
    if b.graph_dtype:
        return b.record(key, QT(fgraph.layernorm(b, key, x.name, LN_EPS), None))
    e, p = b.e, b.params[key]
    shape = e.shape[x.name]
    d, axis = shape[-1], len(shape) - 1
    qm, qc, qv, qr, qn = (b.qp(f"{key}.{s}") for s in ("mean", "centered", "var", "rstd", "norm"))
    qo = b.qp(key)
    s = e.reduce("REDUCE_SUM", _to_i32(b, x, f"{key}_in"), axis, f"{key}_sum")
    mean = QT(e.rescale(s, x.q.scale / (d * qm.scale), 0, qm.zp, "INT8", f"{key}_mean"), qm)
    cen = QT(addsub_q(e, "SUB", x, mean, qc, f"{key}_center"), qc)
    c32 = _to_i32(b, cen, f"{key}_center_i32")
    sq = e.mul(c32, c32, f"{key}_square")
    vs = e.reduce("REDUCE_SUM", sq, axis, f"{key}_sqsum")
    var = e.rescale(vs, qc.scale**2 / (d * qv.scale), 0, qv.zp, "INT8", f"{key}_var")
    rsqrt = make_table(lambda v: 1.0 / np.sqrt(np.maximum(v, 0.0) + LN_EPS), qv, qr)
    r = QT(e.table(var, rsqrt, f"{key}_rsqrt"), qr)
    nd = e.mul(c32, _to_i32(b, r, f"{key}_rsqrt_i32"), f"{key}_scale")
    norm = QT(e.rescale(nd, qc.scale * qr.scale / qn.scale, 0, qn.zp, "INT8", f"{key}_norm"), qn)
    # affine part: per-tensor symmetric gamma, beta at the product scale (like a bias)
    gq, sg = quantize_weights(p["gamma"].reshape(1, -1), axis=0)
    gmul = e.mul(_to_i32(b, norm, f"{key}_norm_i32"),
                 e.const(f"{key}_gamma", gq.astype(np.int32).reshape(1, 1, d), "INT32"),
                 f"{key}_gamma_mul")
    beta = quantize_bias(p["beta"], qn.scale * sg[0]).reshape(1, 1, d)
    gb = e.add(gmul, e.const(f"{key}_beta", beta, "INT32"), f"{key}_beta_add")
    out = e.rescale(gb, qn.scale * sg[0] / qo.scale, 0, qo.zp, "INT8", f"{key}_rescale")
    return b.record(key, QT(out, qo))


def softmax_q(b, s: QT, key) -> QT:
    """Softmax over the last axis, integer-only (ExecuTorch's int8 decomposition):
    REDUCE_MAX, SUB, exp TABLE, REDUCE_SUM (int32), reciprocal TABLE, MUL, RESCALE."""
    e = b.e
    qz, qe, qs, qr, qp = (b.qp(f"{key}.{n}") for n in ("shifted", "exp", "sum", "recip",
                                                        "probs"))
    axis = len(e.shape[s.name]) - 1
    m = QT(e.reduce("REDUCE_MAX", s.name, axis, f"{key}_max"), s.q)
    z = QT(addsub_q(e, "SUB", s, m, qz, f"{key}_shift"), qz)
    ex = QT(e.table(z.name, make_table(np.exp, qz, qe), f"{key}_exp"), qe)
    ex32 = _to_i32(b, ex, f"{key}_exp_i32")
    tot = e.reduce("REDUCE_SUM", ex32, axis, f"{key}_sum")
    tot = QT(e.rescale(tot, qe.scale / qs.scale, 0, qs.zp, "INT8", f"{key}_sum_i8"), qs)
    rec = QT(e.table(tot.name, make_table(lambda v: 1.0 / v, qs, qr), f"{key}_recip"), qr)
    p32 = e.mul(ex32, _to_i32(b, rec, f"{key}_recip_i32"), f"{key}_norm")
    return QT(e.rescale(p32, qe.scale * qr.scale / qp.scale, 0, qp.zp, "INT8", f"{key}_probs"),
              qp)


def attention(b, x, heads, name="attn"):
    """Multi-head self-attention: fused QKV linear, SLICE into q/k/v, RESHAPE+TRANSPOSE
    to heads, MATMUL q.k^T (1/sqrt(dh) folded into its RESCALE), softmax, MATMUL with v,
    heads merged by SLICE+CONCAT, output projection. Returns [1,tokens,d]."""
    key = b.key(name)
    d = x.shape[-1] if b.is_float else b.e.shape[x.name][-1]
    # Q and K rows get a gain so scores span several units: trained attention is
    # peaked, while plain random init gives near-uniform softmax (a dull exp TABLE).
    gain = np.concatenate([np.full(2 * d, QK_GAIN), np.ones(d)])
    qkv = linear(b, x, 3 * d, f"{key}_qkv", row_gain=gain)
    if b.is_float:
        n, t, d3 = qkv.shape
        d, dh = d3 // 3, d3 // 3 // heads
        q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(n, t, heads, dh).transpose(0, 2, 1, 3)
                   for i in range(3))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
        z = s - s.max(-1, keepdims=True)
        ex = np.exp(z)
        tot = ex.sum(-1, keepdims=True)
        p = ex * (1.0 / tot)
        ctx = p @ v
        _observe_all(b, key, scores=s, shifted=z, exp=ex, sum=tot, recip=1.0 / tot, probs=p,
                     ctx=ctx)
        merged = ctx.transpose(0, 2, 1, 3).reshape(n, t, d)
        return b.record(key, linear(b, merged, d, f"{key}_proj"))
    if b.graph_dtype:
        proj = lambda m: linear(b, QT(m, None), d, f"{key}_proj").name   # noqa: E731
        return b.record(key, QT(fgraph.attention(b, key, qkv.name, heads, proj), None))
    e = b.e
    t, d = e.shape[qkv.name][0], e.shape[qkv.name][-1] // 3
    dh = d // heads
    parts = [e.slice(qkv.name, [0, 0, 0, i * d], [t, 1, 1, d], f"{key}_{n}")
             for i, n in enumerate("qkv")]
    heads_of = [e.reshape(p_, [t, heads, dh], f"{key}_{n}_heads") for p_, n in zip(parts, "qkv")]
    q = e.transpose(heads_of[0], [1, 0, 2], f"{key}_q_t")  # [H, T, dh]
    kt = e.transpose(heads_of[1], [1, 2, 0], f"{key}_k_t")  # [H, dh, T]
    v = e.transpose(heads_of[2], [1, 0, 2], f"{key}_v_t")  # [H, T, dh]
    qs, qc = b.qp(f"{key}.scores"), b.qp(f"{key}.ctx")
    s32 = e.matmul(q, kt, qkv.q.zp, qkv.q.zp, f"{key}_scores")
    s = QT(e.rescale(s32, qkv.q.scale**2 / math.sqrt(dh) / qs.scale, 0, qs.zp, "INT8",
                     f"{key}_scores_rescale"), qs)
    p = softmax_q(b, s, f"{key}")
    c32 = e.matmul(p.name, v, p.q.zp, qkv.q.zp, f"{key}_ctx")
    ctx = e.rescale(c32, p.q.scale * qkv.q.scale / qc.scale, 0, qc.zp, "INT8",
                    f"{key}_ctx_rescale")
    per_head = [e.slice(ctx, [h, 0, 0], [1, t, dh], f"{key}_head{h}") for h in range(heads)]
    merged = QT(e.concat(per_head, 2, f"{key}_merge"), qc)  # [1, T, d]
    out = linear(b, merged, d, f"{key}_proj")
    return b.record(key, reshaped(b, out, [1, t, d], f"{key}_out"))
