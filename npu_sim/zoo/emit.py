"""Thin TOSA 1.0 graph emitter over `tosa_serializer`.

Tensors are referred to by name. Every tensor gets a readable, unique name
(`<base>`, `<base>_1`, ...) so dumps of generated graphs are easy to follow.
Zero points, RESCALE multipliers/shifts, MUL shift, TABLE contents and shape
operands are compile-time-constant inputs in TOSA 1.0, so each op gets its own
small CONST / CONST_SHAPE operands, as ExecuTorch's Arm backend emits them.
"""

from __future__ import annotations

from collections import Counter

import ml_dtypes
import numpy as np
import tosa_serializer as ts

from .quant import multipliers

DT = {"INT8": ts.DType.INT8, "INT16": ts.DType.INT16, "INT32": ts.DType.INT32,
      "FP32": ts.DType.FP32, "FP16": ts.DType.FP16, "BF16": ts.DType.BF16}
NP = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "FP32": np.float32,
      "FP16": np.float16, "BF16": ml_dtypes.bfloat16}
FLOATS = ("FP32", "FP16", "BF16")
ROUND = {"single": ts.RoundingMode.SINGLE_ROUND, "double": ts.RoundingMode.DOUBLE_ROUND}


def attribute(kind, *args):
    a = ts.TosaSerializerAttribute()
    getattr(a, kind)(*args)
    return a


class Emitter:
    def __init__(self):
        self.ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0,
                                     targetDraft=False)
        self.blk = self.ser.currRegion.currBasicBlock
        self.shape: dict[str, list[int]] = {}
        self.dtype: dict[str, str] = {}
        self._used: Counter = Counter()
        self._shape_consts: dict[tuple, str] = {}
        self.hist: Counter = Counter()
        self.macs = 0
        self.macs_by_op: Counter = Counter()
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        # every operator and constant as emitted, so one operator can be re-emitted alone
        self.records: list[tuple] = []
        self.const_data: dict[str, tuple[np.ndarray, str]] = {}
        self.terms: dict[str, int] = {}    # dot-product outputs: products summed per element

    # ---- naming / tensors -------------------------------------------------
    def _name(self, base: str) -> str:
        n = self._used[base]
        self._used[base] += 1
        return base if n == 0 else f"{base}_{n}"

    def _tensor(self, base, shape, dtype, data=None) -> str:
        name = self._name(base)
        shape = [int(s) for s in shape]
        self.shape[name], self.dtype[name] = shape, dtype
        self.blk.addTensor(name, shape, DT[dtype], data)
        return name

    def input(self, name, shape, dtype="INT8") -> str:
        t = self._tensor(name, shape, dtype)
        self.blk.addInput(t)
        self.inputs.append(t)
        return t

    def output(self, name: str):
        self.blk.addOutput(name)
        self.outputs.append(name)

    def const(self, base, values, dtype) -> str:
        arr = np.ascontiguousarray(np.asarray(values, dtype=NP[dtype]))
        shape = list(arr.shape) or [1]
        name = self._name(base)
        self.shape[name], self.dtype[name] = shape, dtype
        self.ser.addConst(shape, DT[dtype], arr.reshape(shape), name=name)
        self.const_data[name] = (arr.reshape(shape), dtype)
        self.hist["CONST"] += 1
        return name

    def shape_const(self, values) -> str:
        """CONST_SHAPE, shared between ops with the same value (as ExecuTorch does)."""
        key = tuple(int(v) for v in values)
        if key not in self._shape_consts:
            name = self._name("shape")
            self.ser.addConst([len(key)], ts.DType.SHAPE, np.array(key, np.int64), name=name)
            self.const_data[name] = (np.array(key, np.int64), "SHAPE")
            self.hist["CONST_SHAPE"] += 1
            self._shape_consts[key] = name
        return self._shape_consts[key]

    def op(self, opname, inputs, out_shape, out_dtype, attr, base) -> str:
        out = self._tensor(base, out_shape, out_dtype)
        self.blk.addOperator(getattr(ts.Op, opname), list(inputs), [out], attr)
        self.records.append((opname, list(inputs), out, attr))
        self.hist[opname] += 1
        return out

    def is_float(self, x: str) -> bool:
        return self.dtype[x] in FLOATS

    def zero(self, base, dtype) -> str:
        """A zero-point operand: [0] of the operand's type (0.0 for floats)."""
        return self.const(base, [0], dtype)

    def _macs(self, opname, n):
        self.macs += int(n)
        self.macs_by_op[opname] += int(n)

    # ---- compute ops --------------------------------------------------------
    def conv2d(self, x, w, bias, in_zp, pad, stride, base, depthwise=False):
        """CONV2D (w OHWI) or DEPTHWISE_CONV2D (w HWCM), int8 x int8 -> int32."""
        n, ih, iw, c = self.shape[x]
        kh, kw = (self.shape[w][1:3] if not depthwise else self.shape[w][0:2])
        oc = self.shape[w][0] if not depthwise else self.shape[w][2] * self.shape[w][3]
        oh = (ih + pad[0] + pad[1] - kh) // stride[0] + 1
        ow = (iw + pad[2] + pad[3] - kw) // stride[1] + 1
        assert (ih + pad[0] + pad[1] - kh) % stride[0] == 0, "conv H must divide exactly"
        assert (iw + pad[2] + pad[3] - kw) % stride[1] == 0, "conv W must divide exactly"
        dt = self.dtype[x]
        izp = self.const(f"{base}_input_zp", [in_zp], dt)
        wzp = self.zero(f"{base}_weight_zp", self.dtype[w])
        kind = "DEPTHWISE_CONV2D" if depthwise else "CONV2D"
        # floats accumulate in fp32 and write the input's type; int8 accumulates in int32
        acc, out_dt = ("FP32", dt) if dt in FLOATS else ("INT32", "INT32")
        attr = attribute("DepthwiseConv2dAttribute" if depthwise else "Conv2dAttribute",
                     list(pad), list(stride), [1, 1], False, DT[acc])
        out = self.op(kind, [x, w, bias, izp, wzp], [n, oh, ow, oc], out_dt, attr, base)
        self.terms[out] = kh * kw * (1 if depthwise else c)
        self._macs(kind, n * oh * ow * oc * kh * kw * (1 if depthwise else c))
        return out

    def matmul(self, a, b, a_zp, b_zp, base):
        n, h, c = self.shape[a]
        w = self.shape[b][2]
        azp = self.const(f"{base}_A_zp", [a_zp], self.dtype[a])
        bzp = self.const(f"{base}_B_zp", [b_zp], self.dtype[b])
        out_dt = "FP32" if self.is_float(a) else "INT32"     # fp16/bf16 accumulate in fp32
        out = self.op("MATMUL", [a, b, azp, bzp], [n, h, w], out_dt,
                      attribute("MatMulAttribute"), base)
        self.terms[out] = c
        self._macs("MATMUL", n * h * w * c)
        return out

    def avg_pool(self, x, kernel, stride, pad, in_zp, out_zp, base):
        n, ih, iw, c = self.shape[x]
        oh = (ih + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
        ow = (iw + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
        dt = self.dtype[x]
        izp = self.const(f"{base}_input_zp", [in_zp], dt)
        ozp = self.const(f"{base}_output_zp", [out_zp], dt)
        acc = ts.DType.FP32 if dt in FLOATS else ts.DType.INT32
        attr = attribute("AvgPool2dAttribute", list(kernel), list(stride), list(pad), acc)
        out = self.op("AVG_POOL2D", [x, izp, ozp], [n, oh, ow, c], dt, attr, base)
        self.terms[out] = kernel[0] * kernel[1]
        return out

    def max_pool(self, x, kernel, stride, pad, base):
        n, ih, iw, c = self.shape[x]
        assert (ih + pad[0] + pad[1] - kernel[0]) % stride[0] == 0
        assert (iw + pad[2] + pad[3] - kernel[1]) % stride[1] == 0
        oh = (ih + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
        ow = (iw + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
        attr = attribute("MaxPool2dAttribute", list(kernel), list(stride), list(pad),
                     ts.NanPropagationMode.PROPAGATE)
        return self.op("MAX_POOL2D", [x], [n, oh, ow, c], self.dtype[x], attr, base)

    # ---- elementwise ---------------------------------------------------------
    def rescale(self, x, scales, in_zp, out_zp, out_dtype, base, rounding="single"):
        """RESCALE with float factor(s) turned into 31-bit multipliers/shifts.

        An array of factors means per-channel on the last axis."""
        per_channel = np.ndim(scales) > 0 and np.size(scales) > 1
        m, s = multipliers(scales)
        mul = self.const(f"{base}_multipliers", m, "INT32")
        sh = self.const(f"{base}_shifts", s, "INT8")
        izp = self.const(f"{base}_input_zp", [in_zp], self.dtype[x])
        ozp = self.const(f"{base}_output_zp", [out_zp], out_dtype)
        attr = attribute("RescaleAttribute", True, ROUND[rounding], per_channel, False, False)
        return self.op("RESCALE", [x, mul, sh, izp, ozp], self.shape[x], out_dtype, attr, base)

    def _bcast(self, a, b):
        return [max(p, q) for p, q in zip(self.shape[a], self.shape[b])]

    def _out_dt(self, a):
        return self.dtype[a] if self.is_float(a) else "INT32"

    def add(self, a, b, base):
        return self.op("ADD", [a, b], self._bcast(a, b), self._out_dt(a), attribute("AddAttribute"),
                       base)

    def sub(self, a, b, base):
        return self.op("SUB", [a, b], self._bcast(a, b), self._out_dt(a), attribute("SubAttribute"),
                       base)

    def mul(self, a, b, base, shift=0):
        sh = self.const(f"{base}_shift", [shift], "INT8")
        return self.op("MUL", [a, b, sh], self._bcast(a, b), self._out_dt(a),
                       attribute("MulAttribute"), base)

    def unary(self, opname, x, base):
        """A float elementwise function without attributes (EXP, ERF, RSQRT, RECIPROCAL, ...)."""
        kind = "".join(w.capitalize() for w in opname.split("_")) + "Attribute"
        return self.op(opname, [x], self.shape[x], self.dtype[x], attribute(kind), base)

    def clamp(self, x, lo, hi, base):
        dt = DT[self.dtype[x]]

        def raw(v):
            b = list(ts.TosaSerializer.convertDataToUint8Vec(dt, [v]))
            return b + [0] * (-len(b) % 8)
        attr = attribute("ClampAttribute", raw(lo), raw(hi), ts.NanPropagationMode.PROPAGATE)
        return self.op("CLAMP", [x], self.shape[x], self.dtype[x], attr, base)

    def cast(self, x, dtype, base):
        return self.op("CAST", [x], self.shape[x], dtype, attribute("CastAttribute"), base)

    def table(self, x, values, base):
        t = self.const(f"{base}_table", values, "INT8")
        return self.op("TABLE", [x, t], self.shape[x], "INT8", attribute("TableAttribute"), base)

    def reduce(self, kind, x, axis, base):
        shape = list(self.shape[x])
        shape[axis] = 1
        if kind == "REDUCE_MAX":
            attr = attribute("ReduceMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE)
        else:
            attr = attribute("ReduceSumAttribute", axis)
        out = self.op(kind, [x], shape, self.dtype[x], attr, base)
        if kind == "REDUCE_SUM":
            self.terms[out] = self.shape[x][axis]
        return out

    # ---- data layout ---------------------------------------------------------
    def reshape(self, x, shape, base):
        assert np.prod(shape) == np.prod(self.shape[x]), (shape, self.shape[x])
        return self.op("RESHAPE", [x, self.shape_const(shape)], shape, self.dtype[x],
                       attribute("ReshapeAttribute"), base)

    def transpose(self, x, perms, base):
        shape = [self.shape[x][p] for p in perms]
        return self.op("TRANSPOSE", [x], shape, self.dtype[x],
                       attribute("TransposeAttribute", list(perms)), base)

    def slice(self, x, start, size, base):
        return self.op("SLICE", [x, self.shape_const(start), self.shape_const(size)], size,
                       self.dtype[x], attribute("SliceAttribute"), base)

    def concat(self, xs, axis, base):
        shape = list(self.shape[xs[0]])
        shape[axis] = sum(self.shape[x][axis] for x in xs)
        return self.op("CONCAT", xs, shape, self.dtype[xs[0]], attribute("ConcatAttribute", axis), base)

    # ---- result ----------------------------------------------------------------
    def serialize(self) -> bytes:
        return bytes(self.ser.serialize())
