"""Read a .tflite flatbuffer (schema from the `tflite` package) into plain records: tensors with
their quantization and constant data, operators with their builtin name and options as a dict.
Everything the lowering needs is checked here, so a corrupt or dynamic model fails with one line."""
from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass, field

import numpy as np

from npu_sim.isa.errors import ModelError, UnsupportedError

from ...flatbuf import verify

try:
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator
    from tflite.BuiltinOptions import BuiltinOptions
    from tflite.TensorType import TensorType
except ImportError:   # the optional extra; api.py names it before importing this module
    tflite = None

_NUMPY = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "INT32": np.int32,
          "INT64": np.int64, "BOOL": np.bool_, "FLOAT32": np.float32, "FLOAT16": np.float16}


def _names(enum_cls) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


@dataclass
class TflTensor:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str                              # TFLite type name: INT8, INT32, FLOAT32, ...
    scales: tuple[float, ...] = ()           # float32 values, as TFLite reads them
    zero_points: tuple[int, ...] = ()
    quantized_dimension: int = 0
    data: np.ndarray | None = None
    signature: tuple[int, ...] = ()           # the stored shape signature (-1: dynamic)

    @property
    def scale(self) -> float:
        return self.scales[0] if self.scales else 0.0

    @property
    def zero_point(self) -> int:
        return self.zero_points[0] if self.zero_points else 0


@dataclass
class TflOperator:
    index: int
    op: str                                  # builtin name, e.g. CONV_2D
    inputs: list[int]                        # tensor indices, -1 for an omitted optional input
    outputs: list[int]
    options: dict = field(default_factory=dict)


@dataclass
class TflModel:
    tensors: list[TflTensor]
    operators: list[TflOperator]
    inputs: list[int]
    outputs: list[int]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _options(op_fb) -> dict:
    code = op_fb.BuiltinOptionsType()
    kind = _names(BuiltinOptions).get(code)
    if kind is None:        # TFLite's verifier lets it pass, but its options cannot be read
        raise ModelError(f"builtin options type {code} is not in the TFLite schema npu-sim reads")
    table = op_fb.BuiltinOptions()
    if kind == "NONE" or table is None:
        return {}
    cls = getattr(importlib.import_module(f"tflite.{kind}"), kind)
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    out = {}
    for m in vars(cls):
        if not m[0].isupper() or m.startswith("GetRootAs") or m in ("Init",) or \
                m.endswith(("Length", "AsNumpy", "IsNone", "BufferHasIdentifier")):
            continue
        if f"{m}Length" in vars(cls):
            n = getattr(obj, f"{m}Length")()
            out[_snake(m)] = tuple(int(getattr(obj, m)(i)) for i in range(n))
        else:
            out[_snake(m)] = getattr(obj, m)()
    return out


def _tensor(t, i: int, buffers, type_names) -> TflTensor:
    name = t.Name().decode(errors="replace") if t.Name() else f"tensor{i}"
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    signature = tuple(int(d) for d in t.ShapeSignatureAsNumpy()) if t.ShapeSignatureLength() else ()
    dtype = type_names.get(t.Type(), f"type {t.Type()}")
    q = t.Quantization()
    scales, zps, qdim = (), (), 0
    if q is not None and q.ScaleLength():
        scales = tuple(float(s) for s in q.ScaleAsNumpy())
        zps = tuple(int(z) for z in q.ZeroPointAsNumpy()) if q.ZeroPointLength() else (0,) * len(scales)
        qdim = int(q.QuantizedDimension())
        _check_quantization(i, name, dtype, scales, zps)
    data = None
    b = t.Buffer()
    if b >= max(len(buffers), 1):          # buffer 0, the empty one, may be left out
        raise ModelError(f"tensor {i} '{name}' names buffer {b}; the model has {len(buffers)}")
    if b > 0 and buffers[b] is not None and buffers[b].DataLength():
        if dtype not in _NUMPY:
            raise UnsupportedError(f"tensor {i} '{name}' holds constant data of type {dtype}")
        if any(d < 0 for d in shape):
            raise ModelError(f"tensor {i} '{name}' holds constant data but has the dynamic "
                             f"shape {list(shape)}")
        raw = buffers[b].DataAsNumpy()
        np_dtype = np.dtype(_NUMPY[dtype]).newbyteorder("<")
        count = int(np.prod(shape, dtype=np.int64))
        if raw.size != count * np_dtype.itemsize:
            raise ModelError(f"tensor {i} '{name}': buffer holds {raw.size} bytes, "
                             f"{count * np_dtype.itemsize} expected")
        data = raw.view(np_dtype).astype(np_dtype.newbyteorder("=")).reshape(shape)
    return TflTensor(i, name, shape, dtype, scales, zps, qdim, data, signature)


# Zero points a quantized tensor of each type can hold (TFLite's kernels take them as the type).
_ZP_RANGE = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767)}


def _check_quantization(i: int, name: str, dtype: str, scales, zps) -> None:
    """Scales finite and non-negative; where activations are quantized, normal fp32 numbers
    (kernels divide by them: a zero or subnormal one has no finite reciprocal); zero points
    the tensor's type can hold; one zero point per scale."""
    if len(zps) != len(scales):
        raise ModelError(f"tensor {i} '{name}': {len(scales)} quantization scales but "
                         f"{len(zps)} zero points")
    activation = dtype in _ZP_RANGE
    least = float(np.finfo(np.float32).tiny) if activation else 0.0
    bad = next((s for s in scales if not (math.isfinite(s) and s >= least)), None)
    if bad is not None:
        kind = "a normal positive fp32" if activation else "a finite non-negative"
        shown = str(np.float32(bad))                   # as the file holds it
        raise ModelError(f"tensor {i} '{name}': quantization scale {shown} is not {kind} number")
    lo, hi = _ZP_RANGE.get(dtype, (-(1 << 31), (1 << 31) - 1))
    for zp in zps:
        if not lo <= zp <= hi:
            raise ModelError(f"tensor {i} '{name}': zero point {zp} is outside {dtype}'s "
                             f"range [{lo}, {hi}]")


def read_model(buf: bytes) -> TflModel:
    """The model's first subgraph; errors without the source path (the caller adds it)."""
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise ModelError("not a TFLite flatbuffer (file identifier 'TFL3' missing)")
    op_names, type_names = _names(BuiltinOperator), _names(TensorType)
    try:
        verify(buf, "tflite", "Model")
        model = tflite.Model.GetRootAsModel(buf, 0)
        if model.SubgraphsLength() < 1:
            raise ModelError("the model has no subgraph")
        buffers = [model.Buffers(i) for i in range(model.BuffersLength())]
        if any(b is not None and b.Offset() > 1 for b in buffers):
            raise UnsupportedError("constant buffers stored outside the flatbuffer (models over "
                                   "2 GB) are not supported")
        sg = model.Subgraphs(0)
        tensors = [_tensor(sg.Tensors(i), i, buffers, type_names) for i in range(sg.TensorsLength())]
        codes = []
        for i in range(model.OperatorCodesLength()):
            c = model.OperatorCodes(i)
            code = max(int(c.BuiltinCode()), int(c.DeprecatedBuiltinCode()))
            custom = c.CustomCode().decode(errors="replace") if c.CustomCode() else ""
            codes.append(f"custom op '{custom}'" if op_names.get(code) == "CUSTOM"
                         else op_names.get(code, f"builtin code {code}"))
        operators = []
        for i in range(sg.OperatorsLength()):
            o = sg.Operators(i)
            idx = int(o.OpcodeIndex())
            if idx >= len(codes):
                raise ModelError(f"operator #{i} names operator code {idx}, which the model lacks")
            ins = [int(x) for x in o.InputsAsNumpy()] if o.InputsLength() else []
            outs = [int(x) for x in o.OutputsAsNumpy()] if o.OutputsLength() else []
            for t in ins + outs:        # -1 marks an omitted optional input, never an output
                if t >= len(tensors) or t < (0 if t in outs else -1):
                    raise ModelError(f"operator #{i} {codes[idx]} names tensor {t}, which "
                                     "the subgraph lacks")
            try:
                options = _options(o)
            except ModelError as exc:
                raise ModelError(f"operator #{i} {codes[idx]}: {exc}") from None
            operators.append(TflOperator(i, codes[idx], ins, outs, options))
        inputs = [int(x) for x in sg.InputsAsNumpy()] if sg.InputsLength() else []
        outputs = [int(x) for x in sg.OutputsAsNumpy()] if sg.OutputsLength() else []
    except (ModelError, UnsupportedError):
        raise
    except Exception as exc:  # flatbuffers raises assorted errors on truncated input
        raise ModelError(f"corrupt TFLite flatbuffer ({type(exc).__name__}: {exc})") from None
    for t in inputs + outputs:
        if not 0 <= t < len(tensors):
            raise ModelError(f"subgraph input/output names tensor {t}, which it lacks")
    return TflModel(tensors, operators, inputs, outputs)
