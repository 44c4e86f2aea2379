"""Two-pass layer library: the same network code runs twice.

1. `FloatCtx`: float64 numpy forward over a batch of seeded calibration inputs.
   Layers create their seeded parameters here (He init, BatchNorm folded) and
   record min/max of every quantization point (a MinMax observer).
2. `QuantCtx`: the same calls, in the same order, emit the int8 TOSA graph from
   the stored parameters and ranges.

Layers are plain functions `layer(b, x, ...)` that branch on `b.is_float`; the
per-layer key (`block3_dw`, `add_2`, ...) comes from a call counter, so both passes
agree as long as the network code is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import fgraph, fops
from .emit import Emitter
from .keys import LayerKeys
from .quant import QParams, choose_qparams, f32, quantize_bias, quantize_weights

BN_EPS = 1e-5
ADD_LSHIFT = 20  # TFLite/TOSA int8 ADD: inputs scaled up by 2**20 before the int32 add


@dataclass(frozen=True)
class QT:
    """A quantized tensor in the emitted graph."""
    name: str
    q: QParams


class FloatCtx(LayerKeys):
    is_float = True
    graph_dtype = None      # fgraph.FpCtx emits a float graph instead (its element type)

    def __init__(self, seed: int = 0, frozen: "FloatCtx | None" = None):
        """`frozen`: replay a calibrated network (its params and ranges) on new data,
        e.g. to compare the int8 graph against its float model."""
        super().__init__()
        self.rng = np.random.default_rng([seed, 0])
        self.params: dict[str, dict] = frozen.params if frozen else {}
        self.ranges: dict[str, tuple[float, float]] = frozen.ranges if frozen else {}
        self.frozen = frozen is not None
        self.acts: dict = {}

    def record(self, key: str, x):
        if self.frozen:  # replays keep activations for layer-by-layer comparisons
            self.acts[key] = x
        return x

    def observe(self, key: str, x) -> None:
        if not self.frozen:
            self.ranges[key] = (float(f32(np.min(x))), float(f32(np.max(x))))


class QuantCtx(LayerKeys):
    is_float = False
    graph_dtype = None

    def __init__(self, fctx: FloatCtx):
        super().__init__()
        self.params, self.ranges = fctx.params, fctx.ranges
        self.e = Emitter()
        self.acts: dict[str, QT] = {}

    def record(self, key: str, x: QT) -> QT:
        self.acts[key] = x
        return x

    def qp(self, key: str) -> QParams:
        return choose_qparams(*self.ranges[key])


def _act(y, act):
    if act == "relu":
        return np.maximum(y, 0.0)
    if act == "relu6":
        return np.clip(y, 0.0, 6.0)
    assert act is None, act
    return y


def _bn_fold(rng, y, w, ch_axis):
    """Fold a BatchNorm with seeded statistics into (w, b).

    The running stats are the calibration batch's own channel stats perturbed by
    seeded noise, and gamma/beta are seeded too: folding is non-trivial, yet
    activations stay O(1) through 50+ layers, as in a trained network."""
    c = y.shape[-1]
    mu, sd = y.reshape(-1, c).mean(0), y.reshape(-1, c).std(0) + 1e-6
    rmean = mu + 0.1 * sd * rng.standard_normal(c)
    rvar = sd**2 * rng.uniform(0.7, 1.4, c)
    gamma = rng.uniform(0.6, 1.4, c)
    beta = rng.normal(0.0, 0.25, c)
    s = gamma / np.sqrt(rvar + BN_EPS)
    shape = [1] * w.ndim
    shape[ch_axis] = c
    return f32(w * s.reshape(shape)), f32(beta - rmean * s), s


def _spatial_pads(h, w, k, s, mode):
    (t, b), (l, r) = fops.conv_pads(h, k[0], s[0], mode), fops.conv_pads(w, k[1], s[1], mode)
    return (t, b, l, r)


def _crop_for_pads(b, x: QT, pad, base):
    """TOSA forbids negative padding: SLICE away rows/cols the window never reads."""
    n, h, w, c = b.e.shape[x.name]
    t, bo, l, r = pad
    if bo >= 0 and r >= 0:
        return x, pad
    h2, w2 = h + min(bo, 0), w + min(r, 0)
    name = b.e.slice(x.name, [0, 0, 0, 0], [n, h2, w2, c], f"{base}_crop")
    return QT(name, x.q), (t, max(bo, 0), l, max(r, 0))


def _conv_params(rng, x, cout, kk, ss, bn, depthwise, pad_mode):
    """He-init weights (OHWI, or HWCM for depthwise) with a folded BatchNorm."""
    n, h, w_, cin = x.shape
    pad = _spatial_pads(h, w_, kk, ss, pad_mode)
    if depthwise:
        w = rng.normal(0.0, np.sqrt(2.0 / (kk[0] * kk[1])), (kk[0], kk[1], cin, 1))
        y = fops.depthwise_conv2d(x, w, ss, pad)
    else:
        w = rng.normal(0.0, np.sqrt(2.0 / (kk[0] * kk[1] * cin)), (cout, kk[0], kk[1], cin))
        y = fops.conv2d(x, w, ss, pad)
    if bn:
        w, bias, s = _bn_fold(rng, y, w, 2 if depthwise else 0)
    else:
        w, bias, s = f32(w), f32(rng.normal(0.0, 0.1, y.shape[-1])), 1.0
    # y * s + bias equals the folded conv up to float32 snapping; saves a second conv
    return dict(w=w, b=bias, pad=pad), y * s + bias


def conv(b, x, cout, k=1, stride=1, act=None, bn=True, depthwise=False, pad_mode="torch",
         name="conv", rounding="single"):
    """conv/depthwise (+ folded BN) (+ ReLU/ReLU6 folded into the output RESCALE)."""
    key = b.key(name)
    kk, ss = (k, k) if isinstance(k, int) else tuple(k), (stride, stride)
    if b.is_float:
        if key not in b.params:
            b.params[key], y = _conv_params(b.rng, x, cout, kk, ss, bn, depthwise, pad_mode)
        else:
            p = b.params[key]
            f = fops.depthwise_conv2d if depthwise else fops.conv2d
            y = f(x, p["w"], ss, p["pad"]) + p["b"]
        y = _act(y, act)
        b.observe(key, y)
        return b.record(key, y)
    if b.graph_dtype:
        return b.record(key, QT(fgraph.conv(b, key, x.name, act, depthwise, ss), None))
    p, e = b.params[key], b.e
    xq, pad = _crop_for_pads(b, x, p["pad"], key)
    wq, sw = quantize_weights(p["w"], axis=2 if depthwise else 0)
    sw = sw.reshape(-1)
    acc_scale = xq.q.scale * sw
    wname = e.const(f"{key}_weight_{'hwcm' if depthwise else 'ohwi'}", wq, "INT8")
    bname = e.const(f"{key}_bias", quantize_bias(p["b"], acc_scale), "INT32")
    acc = e.conv2d(xq.name, wname, bname, xq.q.zp, pad, ss, key, depthwise=depthwise)
    # ReLU6 gets the fixed [0, 6] range (zp -128, scale 6/255), so the RESCALE's
    # saturation is exactly the clip; ReLU uses the calibrated [0, max].
    qo = choose_qparams(0.0, 6.0) if act == "relu6" else b.qp(key)
    out = e.rescale(acc, acc_scale / qo.scale, 0, qo.zp, "INT8", f"{key}_rescale", rounding)
    return b.record(key, QT(out, qo))


def addsub_q(e, kind, x: QT, y: QT, qo: QParams, base, rounding="single") -> str:
    """int8 ADD/SUB lowered TFLite-style: both inputs RESCALEd to int32 with zp
    removal and a 2**20 left shift relative to 2*max(scale), int32 ADD/SUB, RESCALE
    back to int8 (a following ReLU folds into that RESCALE's range)."""
    big = 2.0 * max(x.q.scale, y.q.scale)
    xs = e.rescale(x.name, (1 << ADD_LSHIFT) * x.q.scale / big, x.q.zp, 0, "INT32",
                   f"{base}_lhs", rounding)
    ys = e.rescale(y.name, (1 << ADD_LSHIFT) * y.q.scale / big, y.q.zp, 0, "INT32",
                   f"{base}_rhs", rounding)
    s = e.add(xs, ys, base) if kind == "ADD" else e.sub(xs, ys, base)
    return e.rescale(s, big / ((1 << ADD_LSHIFT) * qo.scale), 0, qo.zp, "INT8",
                     f"{base}_rescale", rounding)


def add(b, x, y, act=None, name="add", rounding="single"):
    """Residual add (optionally followed by a ReLU folded into the output range)."""
    key = b.key(name)
    if b.is_float:
        z = _act(x + y, act)
        b.observe(key, z)
        return b.record(key, z)
    if b.graph_dtype:
        return b.record(key, QT(fgraph.add(b, key, x.name, y.name, act), None))
    qo = b.qp(key)
    return b.record(key, QT(addsub_q(b.e, "ADD", x, y, qo, key, rounding), qo))


def global_avg_pool(b, x, name="avgpool"):
    """AVG_POOL2D over the whole map; keeps the input scale/zp (as ExecuTorch does)."""
    key = b.key(name)
    if b.is_float:
        return b.record(key, x.mean(axis=(1, 2), keepdims=True))
    if b.graph_dtype:
        return b.record(key, QT(fgraph.global_avg_pool(b, key, x.name), None))
    _, h, w, _ = b.e.shape[x.name]
    out = b.e.avg_pool(x.name, [h, w], [1, 1], [0, 0, 0, 0], x.q.zp, x.q.zp, key)
    return b.record(key, QT(out, x.q))


def max_pool(b, x, k=3, stride=2, name="maxpool"):
    key = b.key(name)
    if b.is_float:
        pad = _spatial_pads(x.shape[1], x.shape[2], (k, k), (stride, stride), "torch")
        b.params.setdefault(key, dict(pad=pad))
        return b.record(key, fops.max_pool(x, (k, k), (stride, stride), pad))
    xq, pad = _crop_for_pads(b, x, b.params[key]["pad"], key)
    out = b.e.max_pool(xq.name, [k, k], [stride, stride], list(pad), key)
    return b.record(key, QT(out, x.q))


def linear_init(rng, cin, cout):
    """PyTorch nn.Linear default init: U(+-1/sqrt(cin)) for weight and bias."""
    lim = 1.0 / np.sqrt(cin)
    return rng.uniform(-lim, lim, (cout, cin)), rng.uniform(-lim, lim, cout)


def _classifier_float(b, key, x, classes):
    if key not in b.params:
        w, bias = linear_init(b.rng, x.shape[-1], classes)
        b.params[key] = dict(w=f32(w), b=f32(bias))
    p = b.params[key]
    y = x.reshape(x.shape[0], -1) @ p["w"].T + p["b"]
    b.observe(key, y)
    return b.record(key, y)


def classifier_conv(b, x, classes, name="fc"):
    """Linear on a [1,1,1,C] map as a 1x1 CONV2D (ExecuTorch), then RESHAPE [1,classes]."""
    key = b.key(name)
    if b.is_float:
        return _classifier_float(b, key, x, classes)
    if b.graph_dtype:
        return b.record(key, QT(fgraph.classifier_conv(b, key, x.name, classes), None))
    p, e, qo = b.params[key], b.e, b.qp(key)
    wq, sw = quantize_weights(p["w"], axis=0)
    acc_scale = x.q.scale * sw
    wname = e.const(f"{key}_weight_ohwi", wq.reshape(classes, 1, 1, -1), "INT8")
    bname = e.const(f"{key}_bias", quantize_bias(p["b"], acc_scale), "INT32")
    acc = e.conv2d(x.name, wname, bname, x.q.zp, (0, 0, 0, 0), (1, 1), key)
    r = e.rescale(acc, acc_scale / qo.scale, 0, qo.zp, "INT8", f"{key}_rescale")
    return b.record(key, QT(e.reshape(r, [1, classes], f"{key}_reshape"), qo))


def classifier_matmul(b, x, classes, name="fc", rounding="double"):
    """Linear as MATMUL against a constant [1,C,classes] (TFLite BATCH_MATMUL style),
    int32 bias ADD, per-channel RESCALE on the class axis, RESHAPE [1,classes]."""
    key = b.key(name)
    if b.is_float:
        return _classifier_float(b, key, x, classes)
    p, e, qo = b.params[key], b.e, b.qp(key)
    c = e.shape[x.name][-1]
    wq, sw = quantize_weights(p["w"], axis=0)  # per output class
    acc_scale = x.q.scale * sw
    a = e.reshape(x.name, [1, 1, c], f"{key}_in")
    wname = e.const(f"{key}_weight_cw", wq.T.reshape(1, c, classes), "INT8")
    acc = e.matmul(a, wname, x.q.zp, 0, key)
    bname = e.const(f"{key}_bias", quantize_bias(p["b"], acc_scale).reshape(1, 1, classes),
                    "INT32")
    acc = e.add(acc, bname, f"{key}_bias_add")
    r = e.rescale(acc, acc_scale / qo.scale, 0, qo.zp, "INT8", f"{key}_rescale", rounding)
    return b.record(key, QT(e.reshape(r, [1, classes], f"{key}_reshape"), qo))

