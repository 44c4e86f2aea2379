"""Thin TOSA 1.0 graph emitter over `tosa_serializer`.

Tensors are referred to by name. Every tensor gets a readable, unique name
(`<base>`, `<base>_1`, ...) so dumps of generated graphs are easy to follow.
Zero points, RESCALE multipliers/shifts, MUL shift, TABLE contents and shape
operands are compile-time-constant inputs in TOSA 1.0, so each op gets its own
small CONST / CONST_SHAPE operands, as ExecuTorch's Arm backend emits them.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import tosa_serializer as ts

from .quant import multipliers

DT = {"INT8": ts.DType.INT8, "INT16": ts.DType.INT16, "INT32": ts.DType.INT32}
NP = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32}
ROUND = {"single": ts.RoundingMode.SINGLE_ROUND, "double": ts.RoundingMode.DOUBLE_ROUND}


def _attr(kind, *args):
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
        self.hist["CONST"] += 1
        return name

    def shape_const(self, values) -> str:
        """CONST_SHAPE, shared between ops with the same value (as ExecuTorch does)."""
        key = tuple(int(v) for v in values)
        if key not in self._shape_consts:
            name = self._name("shape")
            self.ser.addConst([len(key)], ts.DType.SHAPE, np.array(key, np.int64), name=name)
            self.hist["CONST_SHAPE"] += 1
            self._shape_consts[key] = name
        return self._shape_consts[key]

    def op(self, opname, inputs, out_shape, out_dtype, attr, base) -> str:
        out = self._tensor(base, out_shape, out_dtype)
        self.blk.addOperator(getattr(ts.Op, opname), list(inputs), [out], attr)
        self.hist[opname] += 1
        return out

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
        izp = self.const(f"{base}_input_zp", [in_zp], "INT8")
        wzp = self.const(f"{base}_weight_zp", [0], "INT8")
        kind = "DEPTHWISE_CONV2D" if depthwise else "CONV2D"
        attr = _attr("DepthwiseConv2dAttribute" if depthwise else "Conv2dAttribute",
                     list(pad), list(stride), [1, 1], False, ts.DType.INT32)
        out = self.op(kind, [x, w, bias, izp, wzp], [n, oh, ow, oc], "INT32", attr, base)
        self._macs(kind, n * oh * ow * oc * kh * kw * (1 if depthwise else c))
        return out

    def matmul(self, a, b, a_zp, b_zp, base):
        n, h, c = self.shape[a]
        w = self.shape[b][2]
        azp = self.const(f"{base}_A_zp", [a_zp], "INT8")
        bzp = self.const(f"{base}_B_zp", [b_zp], "INT8")
        out = self.op("MATMUL", [a, b, azp, bzp], [n, h, w], "INT32",
                      _attr("MatMulAttribute"), base)
        self._macs("MATMUL", n * h * w * c)
        return out

    def avg_pool(self, x, kernel, stride, pad, in_zp, out_zp, base):
        n, ih, iw, c = self.shape[x]
        oh = (ih + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
        ow = (iw + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
        izp = self.const(f"{base}_input_zp", [in_zp], "INT8")
        ozp = self.const(f"{base}_output_zp", [out_zp], "INT8")
        attr = _attr("AvgPool2dAttribute", list(kernel), list(stride), list(pad), ts.DType.INT32)
        return self.op("AVG_POOL2D", [x, izp, ozp], [n, oh, ow, c], "INT8", attr, base)

    def max_pool(self, x, kernel, stride, pad, base):
        n, ih, iw, c = self.shape[x]
        assert (ih + pad[0] + pad[1] - kernel[0]) % stride[0] == 0
        assert (iw + pad[2] + pad[3] - kernel[1]) % stride[1] == 0
        oh = (ih + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
        ow = (iw + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
        attr = _attr("MaxPool2dAttribute", list(kernel), list(stride), list(pad),
                     ts.NanPropagationMode.PROPAGATE)
        return self.op("MAX_POOL2D", [x], [n, oh, ow, c], "INT8", attr, base)

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
        attr = _attr("RescaleAttribute", True, ROUND[rounding], per_channel, False, False)
        return self.op("RESCALE", [x, mul, sh, izp, ozp], self.shape[x], out_dtype, attr, base)

    def _bcast(self, a, b):
        return [max(p, q) for p, q in zip(self.shape[a], self.shape[b])]

    def add(self, a, b, base):
        return self.op("ADD", [a, b], self._bcast(a, b), "INT32", _attr("AddAttribute"), base)

    def sub(self, a, b, base):
        return self.op("SUB", [a, b], self._bcast(a, b), "INT32", _attr("SubAttribute"), base)

    def mul(self, a, b, base, shift=0):
        sh = self.const(f"{base}_shift", [shift], "INT8")
        return self.op("MUL", [a, b, sh], self._bcast(a, b), "INT32", _attr("MulAttribute"), base)

    def table(self, x, values, base):
        t = self.const(f"{base}_table", values, "INT8")
        return self.op("TABLE", [x, t], self.shape[x], "INT8", _attr("TableAttribute"), base)

    def reduce(self, kind, x, axis, base):
        shape = list(self.shape[x])
        shape[axis] = 1
        if kind == "REDUCE_MAX":
            attr = _attr("ReduceMaxAttribute", axis, ts.NanPropagationMode.PROPAGATE)
        else:
            attr = _attr("ReduceSumAttribute", axis)
        return self.op(kind, [x], shape, self.dtype[x], attr, base)

    # ---- data layout ---------------------------------------------------------
    def reshape(self, x, shape, base):
        assert np.prod(shape) == np.prod(self.shape[x]), (shape, self.shape[x])
        return self.op("RESHAPE", [x, self.shape_const(shape)], shape, self.dtype[x],
                       _attr("ReshapeAttribute"), base)

    def transpose(self, x, perms, base):
        shape = [self.shape[x][p] for p in perms]
        return self.op("TRANSPOSE", [x], shape, self.dtype[x],
                       _attr("TransposeAttribute", list(perms)), base)

    def slice(self, x, start, size, base):
        return self.op("SLICE", [x, self.shape_const(start), self.shape_const(size)], size,
                       self.dtype[x], _attr("SliceAttribute"), base)

    def concat(self, xs, axis, base):
        shape = list(self.shape[xs[0]])
        shape[axis] = sum(self.shape[x][axis] for x in xs)
        return self.op("CONCAT", xs, shape, self.dtype[xs[0]], _attr("ConcatAttribute", axis), base)

    # ---- result ----------------------------------------------------------------
    def serialize(self) -> bytes:
        return bytes(self.ser.serialize())
