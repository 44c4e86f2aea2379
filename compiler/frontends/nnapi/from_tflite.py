"""An NNAPI model from a .tflite, each builtin mapped to the NNAPI operation TFLite's NNAPI
delegate emits for it (its options become scalar operands: padding code, strides, fused
activation; a missing bias becomes zeros). int8 tensors are TENSOR_QUANT8_ASYMM_SIGNED,
per-channel filters TENSOR_QUANT8_SYMM_PER_CHANNEL."""
from __future__ import annotations

import numpy as np

from npu_sim.isa.errors import UnsupportedError

from ..tflite.reader import read_model
from ..tflite.shapes import infer_shapes
from .model import Model, Operand, OperandLifeTime, OperandType, Operation, OperationType, Subgraph

T, L = OperandType, OperandLifeTime
_TYPES = {"INT8": T.TENSOR_QUANT8_ASYMM_SIGNED, "UINT8": T.TENSOR_QUANT8_ASYMM,
          "INT32": T.TENSOR_INT32, "INT16": T.TENSOR_QUANT16_SYMM, "BOOL": T.TENSOR_BOOL8,
          "FLOAT32": T.TENSOR_FLOAT32, "FLOAT16": T.TENSOR_FLOAT16}
_PAD = {0: 1, 1: 2}                  # TFLite SAME/VALID -> NNAPI PADDING_SAME/VALID
_SAME_NAME = {"ADD", "SUB", "MUL", "LOGISTIC", "TANH", "RELU", "RELU6", "MAXIMUM", "MINIMUM",
              "PRELU", "TRANSPOSE", "PAD", "SLICE", "STRIDED_SLICE", "DEPTH_TO_SPACE",
              "SPACE_TO_DEPTH", "RESHAPE", "SQUEEZE", "MEAN", "CONCATENATION", "SOFTMAX",
              "FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D",
              "GATHER", "EXPAND_DIMS", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "SPLIT",
              "QUANTIZE", "DEQUANTIZE"}
_RENAMED = {"RELU_N1_TO_1": "RELU1", "ARG_MAX": "ARGMAX", "ARG_MIN": "ARGMIN",
            "PADV2": "PAD_V2", "TRANSPOSE_CONV": "TRANSPOSE_CONV_2D", "REDUCE_MAX": "REDUCE_MAX",
            "REDUCE_MIN": "REDUCE_MIN"}


class _Builder:
    def __init__(self, tfl):
        self.tfl = tfl
        self.operands: list[Operand] = []
        self.map: dict[int, int] = {}
        self.operations: list[Operation] = []

    def tensor(self, i: int) -> int:
        if i in self.map:
            return self.map[i]
        t = self.tfl.tensors[i]
        kind = _TYPES.get(t.dtype)
        if kind is None:
            raise UnsupportedError(f"tensor {i} '{t.name}' of type {t.dtype} has no NNAPI type")
        scales, dim = (), 0
        scale = float(t.scale) if t.scales else 0.0
        zp = int(t.zero_point)
        if kind == T.TENSOR_QUANT8_ASYMM_SIGNED and len(t.scales) > 1:
            kind, scales, dim, scale, zp = (T.TENSOR_QUANT8_SYMM_PER_CHANNEL, tuple(t.scales),
                                            t.quantized_dimension, 0.0, 0)
        life = L.CONSTANT_COPY if t.data is not None else L.TEMPORARY_VARIABLE
        self.operands.append(Operand(kind, tuple(t.shape), scale, zp, life, scales, dim, t.data,
                                     t.name))
        self.map[i] = len(self.operands) - 1
        return self.map[i]

    def scalar(self, kind, value) -> int:
        from .model import NUMPY
        self.operands.append(Operand(kind, (), 0.0, 0, L.CONSTANT_COPY,
                                     data=np.array([value], NUMPY[kind])))
        return len(self.operands) - 1

    def i32(self, v) -> int:
        return self.scalar(T.INT32, int(v))

    def const(self, values, shape=None) -> int:
        arr = np.asarray(values, np.int32).reshape(shape if shape is not None else (-1,))
        self.operands.append(Operand(T.TENSOR_INT32, arr.shape, 0.0, 0, L.CONSTANT_COPY, data=arr))
        return len(self.operands) - 1

    def bias(self, op, k: int, n: int) -> int:
        if k < len(op.inputs) and op.inputs[k] >= 0:
            return self.tensor(op.inputs[k])
        x, w = self.tfl.tensors[op.inputs[0]], self.tfl.tensors[op.inputs[1]]
        self.operands.append(Operand(T.TENSOR_INT32, (n,), float(x.scale) * float(w.scale), 0,
                                     L.CONSTANT_COPY, data=np.zeros(n, np.int32)))
        return len(self.operands) - 1


def _operation(b: _Builder, op) -> tuple[str, list[int]]:
    o, ins = op.options, [b.tensor(i) for i in op.inputs if i >= 0]
    act = lambda: b.i32(o.get("fused_activation_function", 0))       # noqa: E731
    name = _RENAMED.get(op.op, op.op)
    if op.op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        n = b.tfl.tensors[op.inputs[1]].shape[0 if op.op == "CONV_2D" else 3]
        args = [ins[0], ins[1], b.bias(op, 2, n), b.i32(_PAD[o.get("padding", 1)]),
                b.i32(o.get("stride_w", 1)), b.i32(o.get("stride_h", 1))]
        if op.op == "DEPTHWISE_CONV_2D":
            args.append(b.i32(o.get("depth_multiplier", 1) or 1))
        return name, args + [act(), b.scalar(T.BOOL, False), b.i32(o.get("dilation_w_factor", 1)),
                             b.i32(o.get("dilation_h_factor", 1))]
    if op.op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        return name, [ins[0], b.i32(_PAD[o.get("padding", 1)]), b.i32(o.get("stride_w", 1)),
                      b.i32(o.get("stride_h", 1)), b.i32(o.get("filter_width", 1)),
                      b.i32(o.get("filter_height", 1)), act()]
    if op.op == "TRANSPOSE_CONV":
        n = b.tfl.tensors[op.inputs[1]].shape[0]
        bias = b.bias(type(op)(op.index, op.op, [op.inputs[2], op.inputs[1]] + op.inputs[3:],
                               op.outputs), 2, n)
        return name, [b.tensor(op.inputs[2]), b.tensor(op.inputs[1]), bias, b.tensor(op.inputs[0]),
                      b.i32(_PAD[o.get("padding", 1)]), b.i32(o.get("stride_w", 1)),
                      b.i32(o.get("stride_h", 1)), act(), b.scalar(T.BOOL, False)]
    if op.op == "FULLY_CONNECTED":
        n = b.tfl.tensors[op.inputs[1]].shape[0]
        return name, [ins[0], ins[1], b.bias(op, 2, n), act()]
    if op.op in ("ADD", "SUB", "MUL"):
        return name, ins[:2] + [act()]
    if op.op == "SOFTMAX":
        return name, [ins[0], b.scalar(T.FLOAT32, float(o.get("beta", 1.0)))]
    if op.op == "CONCATENATION":
        if o.get("fused_activation_function", 0):
            raise UnsupportedError(f"operator #{op.index} CONCATENATION with a fused activation "
                                   "has no NNAPI mapping")
        rank = len(b.tfl.tensors[op.outputs[0]].shape)
        return name, ins + [b.i32(o.get("axis", 0) % rank)]
    if op.op in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS") and op.op != "EXPAND_DIMS":
        return "RESHAPE", [ins[0], b.const(b.tfl.tensors[op.outputs[0]].shape)]
    if op.op == "EXPAND_DIMS":
        return "RESHAPE", [ins[0], b.const(b.tfl.tensors[op.outputs[0]].shape)]
    if op.op in ("MEAN", "REDUCE_MAX", "REDUCE_MIN"):
        return name, [ins[0], ins[1], b.i32(int(bool(o.get("keep_dims", False))))]
    if op.op in ("ARG_MAX", "ARG_MIN"):
        return name, [ins[0], b.i32(int(b.tfl.tensors[op.inputs[1]].data.reshape(-1)[0]))]
    if op.op in ("DEPTH_TO_SPACE", "SPACE_TO_DEPTH"):
        return name, [ins[0], b.i32(o.get("block_size", 2))]
    if op.op == "STRIDED_SLICE":
        return name, ins[:4] + [b.i32(o.get("begin_mask", 0)), b.i32(o.get("end_mask", 0)),
                                b.i32(o.get("shrink_axis_mask", 0))]
    if op.op == "GATHER":
        return name, [ins[0], b.i32(o.get("axis", 0)), ins[1]]
    if op.op == "SPLIT":
        return name, [ins[1], b.i32(int(b.tfl.tensors[op.inputs[0]].data.reshape(-1)[0])),
                      b.i32(o.get("num_splits", len(op.outputs)))]
    if op.op == "QUANTIZE" and b.operands[ins[0]].type != T.TENSOR_FLOAT32:
        # NNAPI quantizes floats only: the delegate maps a requantization to DEQUANTIZE, QUANTIZE
        x = b.operands[ins[0]]
        b.operands.append(Operand(T.TENSOR_FLOAT32, x.dimensions, name=f"{x.name}/dequantized"))
        b.operations.append(Operation(OperationType.DEQUANTIZE, ins[:1], [len(b.operands) - 1]))
        return name, [len(b.operands) - 1]
    if op.op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
        _, oh, ow, _ = b.tfl.tensors[op.outputs[0]].shape
        return name, [ins[0], b.i32(ow), b.i32(oh), b.scalar(T.BOOL, False),
                      b.scalar(T.BOOL, bool(o.get("align_corners", False))),
                      b.scalar(T.BOOL, bool(o.get("half_pixel_centers", False)))]
    if op.op in _SAME_NAME or op.op in _RENAMED:
        return name, ins
    raise UnsupportedError(f"operator #{op.index} {op.op} has no NNAPI mapping")


def model_from_tflite(buf: bytes, source: str = "<tflite>") -> Model:
    tfl = read_model(buf)
    folded = infer_shapes(tfl)          # static shapes; SHAPE's arithmetic become constants
    b = _Builder(tfl)
    inputs = [b.tensor(i) for i in tfl.inputs]
    for op in tfl.operators:
        if op.index in folded and op.outputs[0] not in tfl.outputs:   # (an output: refused)
            continue
        name, args = _operation(b, op)
        outs = [b.tensor(i) for i in op.outputs]
        b.operations.append(Operation(OperationType[name], args, outs))
    outputs = [b.tensor(i) for i in tfl.outputs]
    for k in inputs:
        b.operands[k].lifetime = L.SUBGRAPH_INPUT
    for k in outputs:
        b.operands[k].lifetime = L.SUBGRAPH_OUTPUT
    from .model import check_subgraph
    sg = Subgraph(b.operands, b.operations, inputs, outputs)
    check_subgraph(sg, source, 0)
    return Model(sg, [], False, source.rsplit("/", 1)[-1])
