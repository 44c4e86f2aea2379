"""NNAPI models as types.spec defines them (HAL 1.3): operands with their OperandType,
dimensions, scale, zeroPoint, channel quantization, lifetime and constant data; operations by
OperationType with operand indexes; the main subgraph and the subgraphs IF/WHILE reference.
`model_from_dict` reads the JSON form of the AOSP generated tests and checks its structure, so
every later stage may index operands freely. A field of the wrong JSON type, or a number its
types.spec field cannot hold (int32 zeroPoint, float32 scale, uint32 sizes and indexes), is a
CaseFormatError: the case file is malformed, not merely an invalid model."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from npu_sim.isa.errors import ModelError


class CaseFormatError(ModelError):
    """A case's JSON does not follow the schema (the CTS runner stops at it, rather than
    counting the case as an invalid model)."""


class OperandType(IntEnum):
    FLOAT32 = 0
    INT32 = 1
    UINT32 = 2
    TENSOR_FLOAT32 = 3
    TENSOR_INT32 = 4
    TENSOR_QUANT8_ASYMM = 5
    BOOL = 6
    TENSOR_QUANT16_SYMM = 7
    TENSOR_FLOAT16 = 8
    TENSOR_BOOL8 = 9
    FLOAT16 = 10
    TENSOR_QUANT8_SYMM_PER_CHANNEL = 11
    TENSOR_QUANT16_ASYMM = 12
    TENSOR_QUANT8_SYMM = 13
    TENSOR_QUANT8_ASYMM_SIGNED = 14
    SUBGRAPH = 15


class OperandLifeTime(IntEnum):
    TEMPORARY_VARIABLE = 0
    SUBGRAPH_INPUT = 1
    SUBGRAPH_OUTPUT = 2
    CONSTANT_COPY = 3
    CONSTANT_REFERENCE = 4
    NO_VALUE = 5
    SUBGRAPH = 6


_OPERATIONS = (
    "ADD AVERAGE_POOL_2D CONCATENATION CONV_2D DEPTHWISE_CONV_2D DEPTH_TO_SPACE DEQUANTIZE "
    "EMBEDDING_LOOKUP FLOOR FULLY_CONNECTED HASHTABLE_LOOKUP L2_NORMALIZATION L2_POOL_2D "
    "LOCAL_RESPONSE_NORMALIZATION LOGISTIC LSH_PROJECTION LSTM MAX_POOL_2D MUL RELU RELU1 RELU6 "
    "RESHAPE RESIZE_BILINEAR RNN SOFTMAX SPACE_TO_DEPTH SVDF TANH BATCH_TO_SPACE_ND DIV MEAN PAD "
    "SPACE_TO_BATCH_ND SQUEEZE STRIDED_SLICE SUB TRANSPOSE ABS ARGMAX ARGMIN "
    "AXIS_ALIGNED_BBOX_TRANSFORM BIDIRECTIONAL_SEQUENCE_LSTM BIDIRECTIONAL_SEQUENCE_RNN "
    "BOX_WITH_NMS_LIMIT CAST CHANNEL_SHUFFLE DETECTION_POSTPROCESSING EQUAL EXP EXPAND_DIMS GATHER "
    "GENERATE_PROPOSALS GREATER GREATER_EQUAL GROUPED_CONV_2D HEATMAP_MAX_KEYPOINT "
    "INSTANCE_NORMALIZATION LESS LESS_EQUAL LOG LOGICAL_AND LOGICAL_NOT LOGICAL_OR LOG_SOFTMAX "
    "MAXIMUM MINIMUM NEG NOT_EQUAL PAD_V2 POW PRELU QUANTIZE QUANTIZED_16BIT_LSTM "
    "RANDOM_MULTINOMIAL REDUCE_ALL REDUCE_ANY REDUCE_MAX REDUCE_MIN REDUCE_PROD REDUCE_SUM "
    "ROI_ALIGN ROI_POOLING RSQRT SELECT SIN SLICE SPLIT SQRT TILE TOPK_V2 TRANSPOSE_CONV_2D "
    "UNIDIRECTIONAL_SEQUENCE_LSTM UNIDIRECTIONAL_SEQUENCE_RNN RESIZE_NEAREST_NEIGHBOR "
    "QUANTIZED_LSTM IF WHILE ELU HARD_SWISH FILL RANK").split()
OperationType = IntEnum("OperationType", {n: i for i, n in enumerate(_OPERATIONS)})
OperationType.__doc__ = "types.spec OperationType: the codes 0 (ADD) to 100 (RANK)."

TENSOR_TYPES = {OperandType.TENSOR_FLOAT32, OperandType.TENSOR_INT32,
                OperandType.TENSOR_QUANT8_ASYMM, OperandType.TENSOR_QUANT16_SYMM,
                OperandType.TENSOR_FLOAT16, OperandType.TENSOR_BOOL8,
                OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL, OperandType.TENSOR_QUANT16_ASYMM,
                OperandType.TENSOR_QUANT8_SYMM, OperandType.TENSOR_QUANT8_ASYMM_SIGNED}
FLOAT_TYPES = {OperandType.FLOAT32, OperandType.FLOAT16, OperandType.TENSOR_FLOAT32,
               OperandType.TENSOR_FLOAT16}
QUANT_TYPES = {OperandType.TENSOR_QUANT8_ASYMM, OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
               OperandType.TENSOR_QUANT8_SYMM, OperandType.TENSOR_QUANT16_SYMM,
               OperandType.TENSOR_QUANT16_ASYMM}
# numpy storage of each type's elements; zeroPoint range of the quantized ones
NUMPY = {OperandType.FLOAT32: np.float32, OperandType.INT32: np.int32, OperandType.UINT32: np.uint32,
         OperandType.TENSOR_FLOAT32: np.float32, OperandType.TENSOR_INT32: np.int32,
         OperandType.TENSOR_QUANT8_ASYMM: np.uint8, OperandType.BOOL: np.bool_,
         OperandType.TENSOR_QUANT16_SYMM: np.int16, OperandType.TENSOR_FLOAT16: np.float16,
         OperandType.TENSOR_BOOL8: np.bool_, OperandType.FLOAT16: np.float16,
         OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: np.int8,
         OperandType.TENSOR_QUANT16_ASYMM: np.uint16, OperandType.TENSOR_QUANT8_SYMM: np.int8,
         OperandType.TENSOR_QUANT8_ASYMM_SIGNED: np.int8, OperandType.SUBGRAPH: np.uint32}
_ZP_RANGE = {OperandType.TENSOR_QUANT8_ASYMM: (0, 255), OperandType.TENSOR_QUANT16_ASYMM: (0, 65535),
             OperandType.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127)}


@dataclass
class Operand:
    type: OperandType
    dimensions: tuple[int, ...]
    scale: float = 0.0
    zero_point: int = 0
    lifetime: OperandLifeTime = OperandLifeTime.TEMPORARY_VARIABLE
    channel_scales: tuple[float, ...] = ()      # SymmPerChannelQuantParams.scales
    channel_dim: int = 0
    data: np.ndarray | None = None              # constants; the SUBGRAPH index for SUBGRAPH
    name: str = ""

    @property
    def is_constant(self) -> bool:
        return self.lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)

    @property
    def is_tensor(self) -> bool:
        return self.type in TENSOR_TYPES

    @property
    def count(self) -> int:
        return math.prod(self.dimensions)

    def scalar(self):
        return self.data.reshape(-1)[0].item()

    def describe(self) -> str:
        q = f" scale {self.scale:g} zp {self.zero_point}" if self.type in QUANT_TYPES else ""
        return f"{self.type.name}{list(self.dimensions)}{q}"


@dataclass
class Operation:
    type: OperationType
    inputs: list[int]
    outputs: list[int]


@dataclass
class Subgraph:
    operands: list[Operand]
    operations: list[Operation]
    input_indexes: list[int]
    output_indexes: list[int]
    name: str = ""


@dataclass
class Model:
    main: Subgraph
    referenced: list[Subgraph] = field(default_factory=list)
    relax_computation_float32_to_float16: bool = False
    name: str = "model"


def _enum(cls, value, what: str):
    try:
        return cls[value] if isinstance(value, str) else cls(int(value))
    except (KeyError, ValueError, TypeError):
        raise ModelError(f"{what}: unknown {cls.__name__} {str(value)[:40]!r}") from None


def finite_f32(x) -> bool:
    """x rounds to a finite float32 (the C type of scale), without numpy overflow warnings."""
    try:
        with np.errstate(over="ignore"):
            return bool(np.isfinite(np.float32(x)))
    except (OverflowError, TypeError, ValueError):
        return False


# JSON kind -> (accepted Python types, what the message says is expected, value check)
_KINDS = {
    "int32": (int, "an int32 integer", lambda v: -2 ** 31 <= v < 2 ** 31),
    "uint32": (int, "a uint32 integer", lambda v: 0 <= v < 2 ** 32),
    "float32": ((int, float), "a finite float32 number", finite_f32),
    "bool": (bool, "true or false", None), "list": (list, "a list", None),
    "object": (dict, "an object", None), "enum": ((str, int), "a name or a code", None)}


def check_value(value, kind: str, key: str, what: str):
    """The one check of a JSON field's value against its kind in _KINDS (bools are not numbers);
    CaseFormatError '<what>: field '<key>' is <value or type>, expected <kind>'."""
    types, expected, ok = _KINDS[kind]
    if (isinstance(value, bool) and kind != "bool") or not isinstance(value, types) or \
            (ok is not None and not ok(value)):
        shown = f"{value:.6g}" if isinstance(value, float) else \
            str(value) if isinstance(value, int) and not isinstance(value, bool) else \
            type(value).__name__
        raise CaseFormatError(f"{what}: field '{key}' is {shown[:40]}, expected {expected}")
    return value


def optional(d: dict, key: str, kind: str, default, what: str):
    """Field `key` of d, checked by check_value; absent or null: `default`."""
    value = d.get(key)
    return default if value is None else check_value(value, kind, key, what)


def _field(d: dict, key: str, kind: str, what: str):
    if not isinstance(d, dict):
        raise CaseFormatError(f"{what}: is {type(d).__name__}, expected an object")
    if key not in d:
        raise CaseFormatError(f"{what}: missing field '{key}'")
    return check_value(d[key], kind, key, what)


def _int_list(d: dict, key: str, what: str) -> list[int]:
    values = _field(d, key, "list", what)
    for i, v in enumerate(values):
        check_value(v, "uint32", f"{key}[{i}]", what)
    return values


def _operand(d: dict, what: str) -> Operand:
    otype = _enum(OperandType, _field(d, "type", "enum", what), what)
    dims = tuple(_int_list(d, "dimensions", what))
    if len(dims) > 6:
        raise ModelError(f"{what}: dimensions {list(dims)} must be at most 6 sizes")
    if otype not in TENSOR_TYPES and otype != OperandType.SUBGRAPH and dims:
        raise ModelError(f"{what}: a {otype.name} scalar has dimensions {list(dims)}")
    life = _enum(OperandLifeTime, _field(d, "lifetime", "enum", what), what)
    optional(d, "isIgnored", "bool", False, what)
    cq = optional(d, "channelQuant", "object", {}, what)
    scales = optional(cq, "scales", "list", [], f"{what} channelQuant")
    for i, s in enumerate(scales):
        check_value(s, "float32", f"scales[{i}]", f"{what} channelQuant")
    op = Operand(otype, dims, float(optional(d, "scale", "float32", 0.0, what)),
                 optional(d, "zeroPoint", "int32", 0, what), life, tuple(map(float, scales)),
                 optional(cq, "channelDim", "uint32", 0, f"{what} channelQuant"),
                 name=str(d.get("name", ""))[:80])
    data = optional(d, "data", "list", [], what)
    if op.is_constant or life == OperandLifeTime.SUBGRAPH:
        op.data = _array(data, op, what)
    elif data and life in (OperandLifeTime.SUBGRAPH_INPUT, OperandLifeTime.SUBGRAPH_OUTPUT):
        op.data = _array(data, op, what)          # a test case's input or expected output
    return op


def _array(data: list, op: Operand, what: str) -> np.ndarray:
    n = 1 if op.type == OperandType.SUBGRAPH else op.count
    if len(data) != n:
        raise ModelError(f"{what}: 'data' holds {len(data)} values, dimensions "
                         f"{list(op.dimensions)} need {n}")
    dtype = np.dtype(NUMPY[op.type])
    try:
        if dtype.kind == "f":
            if not all(isinstance(v, (int, float)) for v in data):
                raise ValueError("not numbers")
            wide = np.array(data, np.float64)
            with np.errstate(over="ignore"):
                arr = wide.astype(np.float32).astype(dtype)
            if (np.isinf(arr) & np.isfinite(wide)).any():
                raise CaseFormatError(f"{what}: 'data' holds values outside "
                                      f"{op.type.name}'s range")
        elif dtype.kind == "b":
            if not all(isinstance(v, bool) or v in (0, 1) for v in data):
                raise CaseFormatError(f"{what}: boolean data must be true/false")
            arr = np.array(data, np.bool_)
        else:
            if not all(isinstance(v, int) for v in data):
                raise ValueError("not integers")
            wide = np.array(data, np.int64) if data else np.zeros(0, np.int64)
            info = np.iinfo(dtype)
            if wide.size and (wide.min() < info.min or wide.max() > info.max):
                raise CaseFormatError(f"{what}: 'data' holds values outside "
                                      f"{op.type.name}'s range")
            arr = wide.astype(dtype)
    except (ValueError, TypeError, OverflowError):
        raise CaseFormatError(f"{what}: 'data' is not a list of {op.type.name} values") from None
    return arr.reshape(op.dimensions if op.type != OperandType.SUBGRAPH else (1,))


def _subgraph(d: dict, what: str) -> Subgraph:
    operands = [_operand(o, f"{what} operand {i}")
                for i, o in enumerate(_field(d, "operands", "list", what))]
    ops = []
    for i, o in enumerate(_field(d, "operations", "list", what)):
        w = f"{what} operation {i}"
        code = _field(o, "type", "enum", w)
        ops.append(Operation(_enum(OperationType, code, w), _int_list(o, "inputs", w),
                             _int_list(o, "outputs", w)))
    sg = Subgraph(operands, ops, _int_list(d, "inputIndexes", what),
                  _int_list(d, "outputIndexes", what), str(d.get("name") or ""))
    return sg


def check_subgraph(sg: Subgraph, what: str, n_referenced: int):
    """types.spec's structural rules: indexes in range, each operand written once, by the right
    party for its lifetime, read only after it is written, zero points in range."""
    n = len(sg.operands)
    for role, idx in (("inputIndexes", sg.input_indexes), ("outputIndexes", sg.output_indexes)):
        for k in idx:
            if not 0 <= k < n:
                raise ModelError(f"{what}: {role} names operand {k}; there are {n}")
    for k, o in enumerate(sg.operands):
        if (o.type == OperandType.SUBGRAPH) != (o.lifetime == OperandLifeTime.SUBGRAPH):
            raise ModelError(f"{what} operand {k}: an operand of type {o.type.name} cannot have "
                             f"lifetime {o.lifetime.name}: types.spec gives lifetime SUBGRAPH "
                             "to exactly the operands of type SUBGRAPH")
        if not (finite_f32(o.scale) and o.scale >= 0):
            raise ModelError(f"{what} operand {k}: scale {o.scale:g} must be a finite float32 "
                             ">= 0")
        if o.type in _ZP_RANGE:
            lo, hi = _ZP_RANGE[o.type]
            if not lo <= o.zero_point <= hi:
                raise ModelError(f"{what} operand {k}: zeroPoint {o.zero_point} outside "
                                 f"[{lo}, {hi}] for {o.type.name}")
        if o.type in QUANT_TYPES and not np.float32(o.scale) > 0:
            raise ModelError(f"{what} operand {k}: {o.type.name} needs a scale > 0")
        if o.type == OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            if not 0 <= o.channel_dim < len(o.dimensions) or \
                    len(o.channel_scales) != o.dimensions[o.channel_dim] or \
                    not all(finite_f32(s) and np.float32(s) > 0 for s in o.channel_scales):
                raise ModelError(f"{what} operand {k}: per-channel quantization needs one scale "
                                 f"> 0 per entry of dimension channelDim {o.channel_dim}")
        if o.lifetime == OperandLifeTime.SUBGRAPH and not 0 <= int(o.data[0]) < n_referenced:
            user = next((f" (input {op.inputs.index(k)} of operation {i} {op.type.name})"
                         for i, op in enumerate(sg.operations) if k in op.inputs), "")
            raise ModelError(f"{what} operand {k}{user}: references subgraph {int(o.data[0])}; "
                             f"there are {n_referenced}")
        if o.is_constant and o.data is None:
            raise ModelError(f"{what} operand {k}: a constant without data")
    want = {k: OperandLifeTime.SUBGRAPH_INPUT for k in sg.input_indexes}
    want.update({k: OperandLifeTime.SUBGRAPH_OUTPUT for k in sg.output_indexes})
    for k, o in enumerate(sg.operands):
        if (o.lifetime in (OperandLifeTime.SUBGRAPH_INPUT, OperandLifeTime.SUBGRAPH_OUTPUT)) != \
                (k in want) or (k in want and o.lifetime != want[k]):
            raise ModelError(f"{what} operand {k}: lifetime {o.lifetime.name} disagrees with "
                             "the subgraph's inputIndexes/outputIndexes")
    written = {k for k, o in enumerate(sg.operands)
               if o.lifetime not in (OperandLifeTime.TEMPORARY_VARIABLE,
                                     OperandLifeTime.SUBGRAPH_OUTPUT)}
    for i, op in enumerate(sg.operations):
        w = f"{what} operation {i} {op.type.name}"
        for k in op.inputs + op.outputs:
            if not 0 <= k < n:
                raise ModelError(f"{w}: names operand {k}; there are {n}")
        for k in op.inputs:
            if k not in written:
                raise ModelError(f"{w}: input operand {k} is read before any operation writes it")
        for k in op.outputs:
            if k in written:
                raise ModelError(f"{w}: output operand {k} is already written (a constant, "
                                 "input or another operation's output)")
            written.add(k)
    for k in sg.output_indexes:
        if k not in written:
            raise ModelError(f"{what}: output operand {k} is written by no operation")


def model_from_dict(case: dict, source: str = "<case>") -> Model:
    """An NNAPI model from one JSON case (schema of the AOSP generated tests' export)."""
    if not isinstance(case, dict):
        raise CaseFormatError(f"{source}: a case must be a JSON object")
    name = str(case.get("name") or "model")[:120]
    what = f"{source} case '{name}'"
    main = _subgraph(_field(case, "main", "object", what), f"{what} main")
    refs = [_subgraph(r, f"{what} subgraph {i}")
            for i, r in enumerate(optional(case, "referenced", "list", [], what))]
    relaxed = optional(case, "isRelaxed", "bool", False, what)
    for sg, w in [(main, f"{what} main")] + [(r, f"{what} subgraph {i}") for i, r in enumerate(refs)]:
        check_subgraph(sg, w, len(refs))
    return Model(main, refs, relaxed, name)
