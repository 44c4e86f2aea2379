"""NNAPI frontend: an NNAPI model (model.py, types.spec's structures) lowered into the graph IR
through the TFLite frontend's builtin lowerings (translate.py explains the mapping); IF and
WHILE become COND_IF / WHILE_LOOP on regions of their subgraphs (control.py). Graph
inputs and outputs are the main subgraph's, in order, named `input<i>` and `output<i>`; a
TENSOR_QUANT8_ASYMM one holds the caller's uint8 bytes in an int8 tensor."""
from __future__ import annotations

import numpy as np

from npu_sim.isa.errors import ModelError, NpuSimError, UnsupportedError

from npu_sim.compiler.ir import Graph

from ..tflite import BUILTINS, FLOAT_BUILTINS
from ..tflite.context import FLOATS, Lowering, float_checked
from . import layout_ops as lay
from . import control, logical, norm_ops, ops
from .ops import FLOAT_TENSORS
from .model import (QUANT_TYPES, Model, Operand, OperandLifeTime, OperandType, Operation,
                    OperationType, Subgraph, model_from_dict)
from .translate import UINT8, Translator

_F32_TINY = np.finfo(np.float32).tiny    # a smaller scale has no finite fp32 reciprocal

__all__ = ["Model", "Operand", "Operation", "OperandType", "OperandLifeTime", "OperationType",
           "Subgraph", "model_from_dict", "lower_model", "single_operation", "OPERATIONS",
           "io_names", "index_inputs"]

O = OperationType
OPERATIONS = {
    O.ADD: ops.binary("ADD"), O.SUB: ops.binary("SUB"), O.MUL: ops.binary("MUL"),
    O.MAXIMUM: ops.binary("MAXIMUM", fused=False, requant=True),
    O.MINIMUM: ops.binary("MINIMUM", fused=False, requant=True),
    O.AVERAGE_POOL_2D: ops.pool("AVERAGE_POOL_2D"), O.MAX_POOL_2D: ops.pool("MAX_POOL_2D"),
    O.CONV_2D: ops.conv_2d, O.DEPTHWISE_CONV_2D: ops.depthwise_conv_2d,
    O.TRANSPOSE_CONV_2D: ops.transpose_conv_2d, O.GROUPED_CONV_2D: ops.grouped_conv_2d, O.FULLY_CONNECTED: ops.fully_connected,
    O.LOGISTIC: ops.logistic, O.TANH: ops.tanh, O.SOFTMAX: norm_ops.softmax,
    O.L2_NORMALIZATION: norm_ops.l2_normalization,
    O.INSTANCE_NORMALIZATION: norm_ops.instance_normalization,
    **{O[n]: ops.unary(n, FLOAT_TENSORS) for n in ("ABS", "EXP", "LOG", "RSQRT", "SIN", "SQRT")},
    O.NEG: ops.unary("NEG", FLOAT_TENSORS),
    O.DIV: ops.binary("DIV", types=FLOAT_TENSORS),
    O.POW: ops.binary("POW", fused=False, types=FLOAT_TENSORS),
    O.L2_POOL_2D: ops.pool("L2_POOL_2D", FLOAT_TENSORS),
    O.REDUCE_SUM: lay._reduce("SUM", FLOAT_TENSORS), O.REDUCE_PROD: lay._reduce("REDUCE_PROD", FLOAT_TENSORS),
    O.LOG_SOFTMAX: norm_ops.log_softmax,
    O.LOCAL_RESPONSE_NORMALIZATION: norm_ops.local_response_normalization,
    O.RELU: lay.relu("RELU"), O.RELU1: lay.relu("RELU_N1_TO_1"), O.RELU6: lay.relu("RELU6"),
    O.PRELU: lay.prelu,
    O.CONCATENATION: lay.concatenation, O.RESHAPE: lay.reshape, O.SQUEEZE: lay.squeeze,
    O.EXPAND_DIMS: lay.expand_dims, O.PAD: lay.pad, O.PAD_V2: lay.pad_v2,
    O.TRANSPOSE: lay.transpose, O.SLICE: lay.slice_, O.STRIDED_SLICE: lay.strided_slice,
    O.GATHER: lay.gather, O.TILE: lay.tile, O.SPACE_TO_BATCH_ND: lay.space_to_batch_nd,
    O.BATCH_TO_SPACE_ND: lay.batch_to_space_nd, O.SPLIT: lay.split, O.CHANNEL_SHUFFLE: lay.channel_shuffle,
    O.DEPTH_TO_SPACE: lay._block("DEPTH_TO_SPACE", True),
    O.SPACE_TO_DEPTH: lay._block("SPACE_TO_DEPTH", False),
    O.MEAN: lay._reduce("MEAN", need_same=False),
    O.REDUCE_MAX: lay._reduce("REDUCE_MAX"), O.REDUCE_MIN: lay._reduce("REDUCE_MIN"),
    O.ARGMAX: lay._arg("ARG_MAX"), O.ARGMIN: lay._arg("ARG_MIN"),
    O.RESIZE_BILINEAR: lay._resize("RESIZE_BILINEAR"),
    O.RESIZE_NEAREST_NEIGHBOR: lay._resize("RESIZE_NEAREST_NEIGHBOR"),
    **{O[n]: logical.comparison(n) for n in logical.COMPARE},
    **{O[n]: logical.logical(n) for n in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT")},
    O.REDUCE_ALL: logical.reduce_bool("REDUCE_ALL"), O.REDUCE_ANY: logical.reduce_bool("REDUCE_ANY"),
    O.SELECT: logical.select, O.DEQUANTIZE: ops.dequantize, O.QUANTIZE: ops.quantize,
    O.IF: control.if_, O.WHILE: control.while_,
}
LOWERINGS = {**BUILTINS, **logical.BUILTINS, **control.BUILTINS}


def io_names(sg: Subgraph) -> tuple[list[str], list[str]]:
    return ([f"input{i}" for i in range(len(sg.input_indexes))],
            [f"output{i}" for i in range(len(sg.output_indexes))])


def translate(sg: Subgraph, numbers: list[int] | None = None, referenced=(),
              stack: frozenset = frozenset(), relaxed: bool = False) -> Translator:
    """The TFLite records of the subgraph's operations; `numbers` are their numbers in the
    model (for messages) when sg holds a part of it; `referenced` the model's subgraphs, which
    IF/WHILE name; `stack` the subgraphs being translated around this one; `relaxed`: its
    TENSOR_FLOAT32 operands are computed in fp16."""
    names = [f"op{k}" for k in range(len(sg.operands))]
    t = Translator(sg, names, list(referenced), stack, relaxed)
    unsupported = None      # every operation's rules are checked before support is judged
    for i, op in enumerate(sg.operations):
        t.index, t.op = (numbers[i] if numbers else i), op
        try:
            _translate_one(t, sg)
        except UnsupportedError as exc:
            unsupported = unsupported or exc
    if unsupported:
        raise unsupported
    return t


def _translate_one(t: Translator, sg: Subgraph):
    lower = OPERATIONS.get(t.op.type)
    for k in t.op.inputs + t.op.outputs:
        if not 0 <= k < len(sg.operands):
            t.invalid(f"names operand {k}; there are {len(sg.operands)}")
    try:
        if lower is None:
            t.unsupported("this operation is not supported by the device")
        for k in t.op.inputs + t.op.outputs:
            o = sg.operands[k]
            if o.is_tensor and 0 in o.dimensions and not o.is_constant and \
                    o.lifetime != OperandLifeTime.NO_VALUE:       # an empty constant: omitted
                t.unsupported(f"operand {k} has a zero-sized or unspecified dimension "
                              f"{list(o.dimensions)}")
            scales = o.channel_scales or ((o.scale,) if o.type in QUANT_TYPES else ())
            if any(abs(np.float32(s)) < _F32_TINY for s in scales):
                t.unsupported(f"operand {k} has a subnormal quantization scale (the kernels "
                              "divide by it)")
        lower(t)
    except (IndexError, KeyError, TypeError, ValueError, OverflowError) as exc:
        t.invalid(f"operands do not fit its signature ({type(exc).__name__}: {exc})")


def lower_model(model: Model, source: str = "<nnapi>", relax_to_fp16: bool = False) -> Graph:
    """The graph of the model's main subgraph. ModelError: types.spec makes it invalid;
    UnsupportedError: valid, but not on this device. relax_to_fp16: a model that sets
    relaxComputationFloat32toFloat16 computes its TENSOR_FLOAT32 operands in fp16 (types.spec
    allows fp16's range and precision), its float32 inputs and outputs CAST at the edges."""
    sg = model.main
    relaxed = relax_to_fp16 and model.relax_computation_float32_to_float16
    return _root(sg, translate(sg, referenced=model.referenced, relaxed=relaxed), source)


def _root(sg: Subgraph, t: Translator, source: str) -> Graph:
    """The graph with the regions its IF/WHILE operations (nested ones too) run."""
    graph = _lower(sg, t, source)
    graph.regions = {name: _lower(rsg, rt, source, region=True)
                     for name, (rsg, rt) in t.regions.items()}
    return graph


def _lower(sg: Subgraph, t: Translator, source: str, region: bool = False) -> Graph:
    tfl = t.model(sg.input_indexes, sg.output_indexes)
    L = Lowering(tfl, source)
    L.fc_single_round = False           # NNAPI's FullyConnected: MultiplyByQuantizedMultiplier
    b = L.b
    ins, outs = io_names(sg)
    for name, k in zip(ins, sg.input_indexes):
        o, tensor = sg.operands[k], tfl.tensors[k]
        L.op = None
        dtype = _ir_dtype(o, source)
        if o.type == UINT8 and not region:   # the caller's uint8 bytes, less 128, by a RESCALE
            b.tensor(name, tensor.shape, "int8")
            _unsigned(b, name, L.names[k], o.zero_point, o.zero_point - 128, True)
        elif t.relaxed and o.type == OperandType.TENSOR_FLOAT32 and not region:
            b.tensor(name, tensor.shape, "fp32")      # the caller's float32, held in fp16
            b.op("CAST", [name], tensor.shape, "fp16", {}, L.names[k])
        else:
            dtype = "fp16" if t.relaxed and o.type == OperandType.TENSOR_FLOAT32 else dtype
            b.tensor(name, tensor.shape, dtype)
            L.names[k] = name
    for j, op in enumerate(tfl.operators):
        L.op = op
        label = t.labels[j]
        b.where = label.replace("operation #", "nnapi").replace(" ", "_").lower()
        b.origin = f"NNAPI {label}"
        try:
            floating = any(tfl.tensors[k].dtype in FLOATS for k in op.inputs[:1] + op.outputs)
            lower = (FLOAT_BUILTINS.get(op.op) if floating else None) or LOWERINGS[op.op]
            with float_checked():
                lower(L)
        except NpuSimError as exc:
            raise type(exc)(f"{label}: {exc}") from None
        except (ValueError, IndexError, KeyError, TypeError, OverflowError,
                ZeroDivisionError) as exc:
            raise ModelError(f"{label} is malformed ({type(exc).__name__}: {exc})") from None
    for name, k in zip(outs, sg.output_indexes):
        internal = L.names[k]
        if internal not in b.tensors:
            raise ModelError(f"{source}: output operand {k} is written by no operation")
        o = sg.operands[k]
        if o.type == UINT8 and not region:
            _unsigned(b, internal, name, o.zero_point - 128, o.zero_point, False)
        elif t.relaxed and o.type == OperandType.TENSOR_FLOAT32 and not region:
            b.op("CAST", [internal], b.shape_of(internal), "fp32", {}, name)
        else:      # a region's outputs have the declared shapes COND_IF/WHILE_LOOP check
            b.reshape(internal, tfl.tensors[k].shape if region else b.shape_of(internal), name)
    return b.graph(ins, outs)


def _ir_dtype(o: Operand, source: str) -> str:
    kind = {OperandType.TENSOR_QUANT8_ASYMM: "int8", OperandType.TENSOR_QUANT8_ASYMM_SIGNED: "int8",
            OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: "int8", OperandType.TENSOR_QUANT8_SYMM: "int8",
            OperandType.TENSOR_INT32: "int32", OperandType.TENSOR_FLOAT32: "fp32",
            OperandType.TENSOR_FLOAT16: "fp16",
            OperandType.TENSOR_BOOL8: "bool",
            OperandType.TENSOR_QUANT16_SYMM: "int16"}.get(o.type)
    if kind is None:
        raise UnsupportedError(f"{source}: a graph input of type {o.type.name} is not supported")
    return kind


def _unsigned(b, x: str, out: str, input_zp: int, output_zp: int, from_unsigned: bool):
    """An identity RESCALE between uint8 and int8 storage of the same real values."""
    shape = b.shape_of(x)
    as_i8 = lambda z: z - 256 if z > 127 else z       # noqa: E731  (a uint8 zp's int8 bits)
    inputs = [x, b.const([1 << 30], "int32", "multiplier"), b.const([30], "int8", "shift"),
              b.scalar(as_i8(input_zp), "int8"), b.scalar(as_i8(output_zp), "int8")]
    b.op("RESCALE", inputs, shape, "int8",
         {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
          "input_unsigned": from_unsigned, "output_unsigned": not from_unsigned}, out)


def index_inputs(sg: Subgraph) -> dict[int, int]:
    """Graph inputs read as GATHER indices, with the bound their values must stay below: a
    request is checked against it, since the device cannot refuse an index mid-run."""
    bounds: dict[int, int] = {}
    for op in sg.operations:
        if op.type == O.GATHER and len(op.inputs) == 3 and op.inputs[2] in sg.input_indexes:
            x, axis = sg.operands[op.inputs[0]], sg.operands[op.inputs[1]]
            rank = len(x.dimensions)
            if axis.data is not None and rank and -rank <= axis.scalar() < rank:
                n = x.dimensions[axis.scalar() % rank]
                bounds[op.inputs[2]] = min(n, bounds.get(op.inputs[2], n))
    return bounds


def single_operation(model: Model, i: int, source: str = "<nnapi>",
                     relax_to_fp16: bool = False) -> Graph:
    """Operation i alone, its non-constant tensor inputs as graph inputs, for
    getSupportedOperations' per-operation verdict."""
    sg = model.main
    op = sg.operations[i]
    operands = list(sg.operands)
    ins = []
    for k in dict.fromkeys(op.inputs):
        o = operands[k]
        if o.is_tensor and not o.is_constant and o.lifetime != OperandLifeTime.NO_VALUE:
            ins.append(k)
    sub = Subgraph(operands, [op], ins, list(op.outputs))
    relaxed = relax_to_fp16 and model.relax_computation_float32_to_float16
    return _root(sub, translate(sub, [i], model.referenced, relaxed=relaxed), source)
