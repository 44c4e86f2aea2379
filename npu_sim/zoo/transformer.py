"""Pre-LayerNorm transformer encoder (int8, ExecuTorch-style integer lowering)."""

from __future__ import annotations

from .core import Spec
from .layers import add
from .quant import gelu
from .tlayers import reshaped, attention, layernorm, linear, table_act


def _mlp(b, x, d_ff, name):
    h = linear(b, x, d_ff, f"{name}_fc1")
    h = table_act(b, h, gelu, f"{name}_gelu")  # exact-erf GELU as one int8 TABLE
    y = linear(b, h, x.shape[-1] if b.is_float else b.e.shape[x.name][-1], f"{name}_fc2")
    if b.is_float:
        return y
    t, d = b.e.shape[x.name][1], b.e.shape[y.name][-1]
    return reshaped(b, y, [1, t, d], f"{name}_out")


def _encoder_net(b, x, heads, d_ff, layers):
    for i in range(layers):
        h = layernorm(b, x, f"layer{i}_ln1")
        x = add(b, x, attention(b, h, heads, f"layer{i}_attn"), name=f"layer{i}_add1")
        h = layernorm(b, x, f"layer{i}_ln2")
        x = add(b, x, _mlp(b, h, d_ff, f"layer{i}_mlp"), name=f"layer{i}_add2")
    return layernorm(b, x, "final_ln")


def transformer_encoder_spec(tokens=16, d_model=64, heads=2, d_ff=128, layers=1, seed=0,
                             n_calib=16, dtype="int8"):
    """`dtype` fp16/bf16/fp32: the float graph of the same encoder (fgraph.py)."""
    if d_model % heads:
        raise ValueError("d_model must be divisible by heads")
    return Spec("transformer", _encoder_net, [1, tokens, d_model], seed, n_calib,
                dict(heads=heads, d_ff=d_ff, layers=layers), dtype=dtype)
