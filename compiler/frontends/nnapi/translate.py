"""An NNAPI subgraph rewritten as the TFLite frontend's operator records, then lowered by it.

NNAPI's reference CPU kernels are TFLite's, so each NNAPI operation maps onto the TFLite
builtin with the same arithmetic (ops.py): its scalar operands become the builtin's options
(fused activation codes are the same numbers; padding codes 1/2 become SAME/VALID, explicit
padding a pad tuple), NCHW layout becomes a TRANSPOSE on either side, and
TENSOR_QUANT8_ASYMM (uint8) operands become int8 ones with value and zeroPoint less 128, which
every quantized kernel computes identically (AOSP's own quantization-coupling tests rely on it).
A uint8 graph input or output is converted by an unsigned RESCALE, so the device reads and
writes the caller's uint8 bytes."""
from __future__ import annotations

import numpy as np

from npu_sim.isa.errors import ModelError, UnsupportedError

from ..tflite.reader import TflModel, TflOperator, TflTensor
from .model import OperandLifeTime, OperandType, Operation, Subgraph

_TFL_TYPE = {OperandType.TENSOR_QUANT8_ASYMM: "INT8", OperandType.TENSOR_QUANT8_ASYMM_SIGNED: "INT8",
             OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: "INT8", OperandType.TENSOR_QUANT8_SYMM: "INT8",
             OperandType.TENSOR_INT32: "INT32", OperandType.TENSOR_BOOL8: "BOOL",
             OperandType.TENSOR_QUANT16_SYMM: "INT16", OperandType.TENSOR_QUANT16_ASYMM: "UINT16",
             OperandType.TENSOR_FLOAT32: "FLOAT32", OperandType.TENSOR_FLOAT16: "FLOAT16",
             OperandType.INT32: "INT32", OperandType.UINT32: "UINT32", OperandType.BOOL: "BOOL",
             OperandType.FLOAT32: "FLOAT32", OperandType.FLOAT16: "FLOAT16",
             OperandType.SUBGRAPH: "SUBGRAPH"}
UINT8 = OperandType.TENSOR_QUANT8_ASYMM


def tfl_tensor(k: int, o, name: str, relaxed: bool = False) -> TflTensor:
    """Operand k as a TFLite tensor; `relaxed`: a TENSOR_FLOAT32 one is held in float16."""
    shift = 128 if o.type == UINT8 else 0
    half = relaxed and o.type == OperandType.TENSOR_FLOAT32
    data = None
    if o.is_constant and o.is_tensor:
        data = o.data.astype(np.int64) - shift if shift else o.data
        if shift:
            data = data.astype(np.int8)
        elif half:
            data = data.astype(np.float16)
    scales = o.channel_scales or ((float(np.float32(o.scale)),) if o.scale else ())
    zps = (o.zero_point - shift,) * max(len(scales), 1)
    return TflTensor(k, name, tuple(o.dimensions), "FLOAT16" if half else _TFL_TYPE[o.type],
                     scales, zps, o.channel_dim, data)


class Translator:
    """Builds the TflModel of one subgraph; ops.py's functions append its operator records."""

    def __init__(self, sg: Subgraph, names: list[str], referenced=(), stack=frozenset(),
                 relaxed: bool = False):
        self.sg = sg
        self.referenced, self.stack = list(referenced), frozenset(stack)
        self.relaxed = relaxed               # TENSOR_FLOAT32 computed in fp16
        self.regions: dict = {}              # region name -> (Subgraph, Translator), control.py
        self.tensors = [tfl_tensor(k, o, names[k], relaxed) for k, o in enumerate(sg.operands)]
        self.operators: list[TflOperator] = []
        self.labels: list[str] = []          # the NNAPI operation of each record, for messages
        self.index = -1                      # the NNAPI operation being translated
        self.op: Operation | None = None

    # operands of the current operation ------------------------------------------------------

    def operand(self, i: int):
        return self.sg.operands[self.op.inputs[i]]

    def output(self, i: int = 0):
        return self.sg.operands[self.op.outputs[i]]

    def n_inputs(self) -> int:
        return len(self.op.inputs)

    def scalar(self, i: int, *types: OperandType):
        o = self.operand(i)
        if o.is_tensor or (types and o.type not in types):
            self.invalid(f"input {i} must be a {' or '.join(t.name for t in types) or 'scalar'}, "
                         f"not {o.type.name}")
        if not o.is_constant:
            self.unsupported(f"input {i} ({o.type.name}) must be a constant")
        return o.scalar()

    def tensor_const(self, i: int) -> np.ndarray:
        o = self.operand(i)
        if not o.is_constant:
            self.unsupported(f"input {i} ({o.type.name}) must be a constant")
        return o.data

    def is_omitted(self, i: int) -> bool:
        return i >= self.n_inputs() or self.operand(i).lifetime == OperandLifeTime.NO_VALUE

    # rules --------------------------------------------------------------------------------

    def where(self) -> str:
        return f"operation #{self.index} {self.op.type.name}"

    def invalid(self, rule: str):
        raise ModelError(f"{self.where()}: {rule}")

    def unsupported(self, why: str):
        raise UnsupportedError(f"{self.where()}: {why}")

    def need(self, cond: bool, rule: str):
        if not cond:
            self.invalid(rule)

    def counts(self, inputs, outputs=(1,)):
        self.need(self.n_inputs() in inputs, f"takes {' or '.join(map(str, inputs))} inputs, "
                  f"got {self.n_inputs()}")
        self.need(len(self.op.outputs) in outputs, f"takes {' or '.join(map(str, outputs))} "
                  f"outputs, got {len(self.op.outputs)}")

    def types(self, allowed, *roles):
        """Inputs (ints) and outputs ('o0') in `roles` all of one type, from `allowed`."""
        ops = [self.operand(r) if isinstance(r, int) else self.output(int(r[1:])) for r in roles]
        t = ops[0].type
        self.need(all(o.type == t for o in ops), "operands "
                  f"{', '.join(map(str, roles))} must share one type, got "
                  f"{', '.join(o.type.name for o in ops)}")
        if t not in allowed:
            self.unsupported(f"operand type {t.name} is not supported "
                             f"(supported: {', '.join(a.name for a in sorted(allowed))})")
        return t

    def rank(self, i, ranks, what="input 0"):
        o = self.operand(i) if isinstance(i, int) else self.output(int(i[1:]))
        self.need(len(o.dimensions) in ranks, f"{what} must have rank "
                  f"{' or '.join(map(str, ranks))}, got {list(o.dimensions)}")

    def out_shape(self, shape, k: int = 0):
        """The declared output dimensions must be those the inputs give (a scalar result is
        declared [1], as the CPU reference reports it)."""
        declared = tuple(self.output(k).dimensions)
        shape = tuple(int(s) for s in shape)
        self.need(shape == declared or (not shape and declared == (1,)), f"output {k} dimensions "
                  f"{list(declared)} differ from the {list(map(int, shape))} the inputs give")

    # records --------------------------------------------------------------------------------

    def synth(self, shape, dtype: str, like: int | None = None, data=None) -> int:
        """A new tensor (with `like`'s quantization), for records between NNAPI operands."""
        base = self.tensors[like] if like is not None else None
        t = TflTensor(len(self.tensors), f"nnapi{self.index}_t{len(self.tensors)}", tuple(shape),
                      dtype, base.scales if base else (), base.zero_points if base else (),
                      base.quantized_dimension if base else 0,
                      None if data is None else np.asarray(data))
        self.tensors.append(t)
        return t.index

    def part(self, k: int, axis: int, start: int, size: int) -> int:
        """Entries [start, start + size) of tensor k along `axis`: sliced constant data (and
        per-channel scales along it), or a SLICE record of a run-time tensor."""
        src = self.tensors[k]
        shape = list(src.shape)
        shape[axis] = size
        per_channel = len(src.scales) > 1 and src.quantized_dimension == axis
        scales = src.scales[start:start + size] if per_channel else src.scales
        zps = src.zero_points[:len(scales)] if per_channel else src.zero_points
        data = None
        if src.data is not None:
            data = np.take(src.data, range(start, start + size), axis=axis)
        t = TflTensor(len(self.tensors), f"nnapi{self.index}_t{len(self.tensors)}", tuple(shape),
                      src.dtype, tuple(scales), tuple(zps), src.quantized_dimension, data)
        self.tensors.append(t)
        if data is None:
            begin = [0] * len(shape)
            begin[axis] = start
            self.emit("SLICE", [k, self.const(begin), self.const(shape)], [t.index])
        return t.index

    def const(self, values, dtype: str = "INT32") -> int:
        arr = np.asarray(values, np.int32 if dtype == "INT32" else None)
        return self.synth(arr.shape, dtype, data=arr)

    def emit(self, builtin: str, inputs: list[int], outputs: list[int], **options):
        self.operators.append(TflOperator(len(self.operators), builtin, list(inputs),
                                          list(outputs), options))
        self.labels.append(self.where())

    def to_nhwc(self, k: int) -> int:
        """Operand k (NCHW) transposed to a new NHWC tensor."""
        n, c, h, w = self.tensors[k].shape
        t = self.synth((n, h, w, c), self.tensors[k].dtype, like=k)
        self.emit("TRANSPOSE", [k, self.const([0, 2, 3, 1])], [t])
        return t

    def from_nhwc(self, k: int) -> int:
        """A new NHWC tensor that is transposed into operand k (NCHW) by a record emitted at
        `finish_layout`."""
        n, c, h, w = self.tensors[k].shape
        return self.synth((n, h, w, c), self.tensors[k].dtype, like=k)

    def nhwc_back(self, t: int, k: int):
        self.emit("TRANSPOSE", [t, self.const([0, 3, 1, 2])], [k])

    def model(self, inputs: list[int], outputs: list[int]) -> TflModel:
        return TflModel(self.tensors, self.operators, inputs, outputs)
