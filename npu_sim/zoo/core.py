"""Build driver: calibrate a network in float, then emit its int8 TOSA graph."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .fgraph import FpCtx
from .layers import QT, FloatCtx, QuantCtx
from .quant import choose_qparams

FLOAT_DTYPES = {"fp16": "FP16", "bf16": "BF16", "fp32": "FP32"}

# Graph input is int8 covering float [-1, 1]; calibration inputs are uniform on the
# same interval, so a uniformly random int8 test input is in-distribution.
INPUT_RANGE = (-1.0, 1.0)


@dataclass
class Spec:
    """A network definition: `net_fn(ctx, x, **kw)` plus its input and seeds."""
    name: str
    net_fn: object
    input_shape: list
    seed: int
    n_calib: int
    kw: dict = field(default_factory=dict)
    input_name: str = "input"
    dtype: str = "int8"          # or a float graph: fp16, bf16, fp32 (fgraph.py)

    def calibrate(self) -> FloatCtx:
        """Create the seeded float network and observe its activation ranges."""
        fctx = FloatCtx(self.seed)
        data_rng = np.random.default_rng([self.seed, 1])
        calib = data_rng.uniform(*INPUT_RANGE, size=(self.n_calib, *self.input_shape[1:]))
        self.net_fn(fctx, calib, **self.kw)
        return fctx

    def float_forward(self, fctx: FloatCtx, x_int8: np.ndarray):
        """Float model output for an int8 graph input (dequantized first)."""
        x = choose_qparams(*INPUT_RANGE).dequantize(x_int8)
        return self.net_fn(FloatCtx(frozen=fctx), x, **self.kw)

    def emit(self, fctx: FloatCtx, debug_outputs: bool = False) -> tuple[bytes, dict]:
        """Emit the int8 graph. `debug_outputs` also exposes every layer's result as a
        graph output (meta["debug"] maps layer key -> tensor name/scale/zp)."""
        qctx = QuantCtx(fctx)
        qin = choose_qparams(*INPUT_RANGE)
        x = QT(qctx.e.input(self.input_name, self.input_shape, "INT8"), qin)
        y = self.net_fn(qctx, x, **self.kw)
        outs = list(y) if isinstance(y, (list, tuple)) else [y]
        e = qctx.e
        for o in outs:
            e.output(o.name)
        debug = {}
        if debug_outputs:
            for k, t in qctx.acts.items():
                if t.name not in e.outputs:
                    e.output(t.name)
                debug[k] = {"name": t.name, "scale": t.q.scale, "zero_point": t.q.zp}
        data = e.serialize()
        meta = {
            "name": self.name,
            "tosa_version": "1.0.0",
            "input": {"name": x.name, "shape": list(self.input_shape), "dtype": "INT8",
                      "scale": qin.scale, "zero_point": qin.zp},
            "output_names": [o.name for o in outs],
            "outputs": [{"name": o.name, "shape": e.shape[o.name], "dtype": e.dtype[o.name],
                         "scale": o.q.scale, "zero_point": o.q.zp} for o in outs],
            "macs": e.macs,
            "macs_by_op": dict(sorted(e.macs_by_op.items())),
            "op_histogram": dict(sorted(e.hist.items(), key=lambda kv: (-kv[1], kv[0]))),
            "seed": self.seed,
            "n_calib": self.n_calib,
            "config": dict(self.kw),
            "tosa_bytes": len(data),
        }
        if debug_outputs:
            meta["debug"] = debug
        return data, meta

    def emit_float(self, fctx: FloatCtx) -> tuple[bytes, dict]:
        """The float graph (self.dtype) with the calibrated network's parameters; its input
        takes the float values the int8 graph's input stands for ([-1, 1])."""
        e = self.float_graph(fctx).e
        y = e.outputs[0]
        data = e.serialize()
        meta = {
            "name": self.name, "tosa_version": "1.0.0", "dtype": self.dtype,
            "input": {"name": self.input_name, "shape": list(self.input_shape),
                      "dtype": e.dtype[self.input_name]},
            "output_names": [y],
            "outputs": [{"name": y, "shape": e.shape[y], "dtype": e.dtype[y]}],
            "macs": e.macs, "macs_by_op": dict(sorted(e.macs_by_op.items())),
            "op_histogram": dict(sorted(e.hist.items(), key=lambda kv: (-kv[1], kv[0]))),
            "seed": self.seed, "n_calib": self.n_calib, "config": dict(self.kw),
            "tosa_bytes": len(data),
        }
        return data, meta

    def float_graph(self, fctx: FloatCtx) -> FpCtx:
        """The float graph's emitter context (its per-operator records, for checks)."""
        b = FpCtx(fctx, FLOAT_DTYPES[self.dtype])
        x = QT(b.e.input(self.input_name, self.input_shape, b.dtype), None)
        b.e.output(self.net_fn(b, x, **self.kw).name)
        return b

    def float_reference(self, fctx: FloatCtx, x: np.ndarray):
        """The float64 model on a float input (what the float graph approximates)."""
        return self.net_fn(FloatCtx(frozen=fctx), np.asarray(x, np.float64), **self.kw)

    def build(self) -> tuple[bytes, dict]:
        fctx = self.calibrate()
        return self.emit_float(fctx) if self.dtype != "int8" else self.emit(fctx)
