"""Read a TOSA 1.0 flatbuffer (.tosa) into the graph IR.

Attributes are read reflectively from the generated flatbuffer classes, so every operator's
attribute table is covered by one mechanism. Constant data stays a numpy view of the file bytes
wherever the dtype allows (no copies of weights).
"""
from __future__ import annotations

import importlib
import math
import os
import re
import sys

import numpy as np

from npu_sim.isa.dtypes import DTYPES, STORAGE
from npu_sim.isa.errors import ModelError, UnsupportedError

from .ir import Graph, Operator, Tensor

try:
    from tosa.Attribute import Attribute as _AttributeEnum
    from tosa.DType import DType as _DTypeEnum
    from tosa.Op import Op as _OpEnum
    from tosa.TosaGraph import TosaGraph
except ImportError as exc:  # pragma: no cover - tosa-tools is a hard dependency
    raise ImportError("npu-sim needs tosa-tools (pip install tosa-tools)") from exc


def _enum_names(enum_cls) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


OP_NAMES = _enum_names(_OpEnum)
ATTRIBUTE_NAMES = _enum_names(_AttributeEnum)
DTYPE_NAMES = _enum_names(_DTypeEnum)
_ENUM_FIELDS = {
    "rounding_mode": {1: "SINGLE_ROUND", 2: "INEXACT_ROUND", 3: "DOUBLE_ROUND"},
    "mode": {1: "NEAREST", 2: "BILINEAR"},
    "nan_mode": {1: "PROPAGATE", 2: "IGNORE"},
    "acc_type": {k: v.lower() for k, v in DTYPE_NAMES.items()},
}
_VECTOR_SUFFIXES = ("Length", "AsNumpy", "IsNone")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _attribute_fields(cls) -> list[tuple[str, str, bool]]:
    """(method, snake_name, is_vector) for every field accessor of a generated table class."""
    methods = [m for m in vars(cls) if m[0].isupper() and callable(getattr(cls, m))]
    fields = []
    for m in methods:
        if m.startswith("GetRootAs") or m.endswith(_VECTOR_SUFFIXES) or m in ("Init",) \
                or m.endswith("BufferHasIdentifier"):
            continue
        fields.append((m, _snake(m), f"{m}Length" in methods))
    return fields


_ATTR_CLASS_CACHE: dict[str, tuple[type, list]] = {}


_VARIABLE_ACCESS = {"VariableReadAttribute": "variable_read",
                    "VariableWriteAttribute": "variable_write"}


def _read_attributes(op_fb) -> dict:
    kind = ATTRIBUTE_NAMES.get(op_fb.AttributeType(), "NONE")
    if kind in _VARIABLE_ACCESS:            # IDENTITY on a variable, as tosa-opt writes it
        return {_VARIABLE_ACCESS[kind]: True}
    if kind == "NONE" or op_fb.Attribute() is None:
        return {}
    if kind not in _ATTR_CLASS_CACHE:
        cls = getattr(importlib.import_module(f"tosa.{kind}"), kind)
        _ATTR_CLASS_CACHE[kind] = (cls, _attribute_fields(cls))
    cls, fields = _ATTR_CLASS_CACHE[kind]
    table = op_fb.Attribute()
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    attrs = {}
    for method, name, is_vector in fields:
        if is_vector:
            if getattr(obj, f"{method}IsNone")():
                value = ()
            else:
                value = tuple(int(x) for x in getattr(obj, f"{method}AsNumpy")())
        else:
            value = getattr(obj, method)()
            if isinstance(value, bytes):
                value = value.decode()
            elif name in _ENUM_FIELDS and isinstance(value, int):
                value = _ENUM_FIELDS[name].get(value, value)
        attrs[name] = value
    return attrs


def decode_data(raw: np.ndarray, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Little-endian TOSA tensor bytes -> numpy array in its storage dtype.

    The length of `raw` may exceed the payload (the MLIR translator pads to 8 bytes).
    """
    count = math.prod(shape)
    raw = np.asarray(raw, dtype=np.uint8)
    if dtype == "int4":
        need = (count + 1) // 2
        packed = raw[:need].view(np.int8)
        low = (packed << 4) >> 4                   # sign-extend the low nibble
        high = packed >> 4
        values = np.stack([low, high], axis=-1).reshape(-1)[:count]
    elif dtype == "int48":
        b = raw[: count * 6].reshape(count, 6).astype(np.int64)
        values = sum(b[:, i] << (8 * i) for i in range(6))
        values = (values << 16) >> 16              # sign-extend from bit 47
    elif dtype == "bool":
        values = raw[:count] != 0
    else:
        storage = STORAGE[dtype]
        size = storage.itemsize
        if raw.size < count * size:
            raise ModelError(f"constant holds {raw.size} bytes, {count * size} needed")
        # little-endian words of the element's width, reinterpreted in place (a view, no copy)
        words = raw[: count * size].view(f"<u{size}")
        values = (words if sys.byteorder == "little" else words.astype(f"=u{size}")).view(storage)
    return values.reshape(shape)


# Attributes serialized as the little-endian bytes of one value of the operator's input type
# (CLAMP's bounds): decoded into a plain number, so nothing downstream reads serializations.
_VALUE_FIELDS = frozenset({"min_val", "max_val"})


def _decode_value(raw: tuple, dtype: str):
    """The value, or None when the bytes hold no value of `dtype` (validation says why)."""
    storage = STORAGE.get(dtype)
    data = bytes(b & 0xFF for b in raw)
    if storage is None or dtype == "shape" or len(data) < storage.itemsize:
        return None
    value = decode_data(np.frombuffer(data, np.uint8), dtype, ())
    return float(value) if DTYPES[dtype].kind == "float" else value.item()


# TOSA 1.0's element types (the others are 1.1-draft MX and int64 types).
_TOSA_1_0_DTYPES = ("bool", "int4", "int8", "int16", "int32", "int48", "shape", "fp32", "fp16", "bf16",
                    "fp8e4m3", "fp8e5m2")


def _tensor_dtype(code: int, name: str) -> str:
    dtype = DTYPE_NAMES.get(code, f"code {code}").lower()
    if dtype not in _TOSA_1_0_DTYPES:
        raise UnsupportedError(f"tensor '{name}' has dtype {dtype.upper()}, which is not a TOSA 1.0 "
                               "element type")
    return dtype


def _read_block(block, source: str) -> Graph:
    tensors: dict[str, Tensor] = {}
    for i in range(block.TensorsLength()):
        t = block.Tensors(i)
        name = t.Name().decode()
        shape = tuple(t.ShapeAsNumpy().tolist()) if t.ShapeLength() else ()
        dtype = _tensor_dtype(t.Type(), name)
        if any(d < 0 for d in shape):
            raise ModelError(f"tensor '{name}' has a dynamic or negative shape {list(shape)}")
        data = None
        if t.DataLength():
            data = decode_data(t.DataAsNumpy(), dtype, shape)
        vname = t.VariableName().decode() if t.VariableName() else ""
        tensors[name] = Tensor(name, shape, dtype, data, bool(t.Variable()), vname)
    for i in range(block.ShapesLength()):
        s = block.Shapes(i)
        name = s.Name().decode()
        rank = int(s.Rank())
        data = decode_data(s.DataAsNumpy(), "shape", (rank,)) if s.DataLength() else None
        tensors[name] = Tensor(name, (rank,), "shape", data)
    operators = []
    for i in range(block.OperatorsLength()):
        o = block.Operators(i)
        op_name = OP_NAMES.get(o.Op(), f"op code {o.Op()}")
        inputs = [o.Inputs(j).decode() for j in range(o.InputsLength())]
        outputs = [o.Outputs(j).decode() for j in range(o.OutputsLength())]
        location = ""
        if hasattr(o, "Location") and o.Location() is not None and o.Location().Text():
            location = o.Location().Text().decode()
        for name in inputs + outputs:
            if name not in tensors:
                raise ModelError(f"operator #{i} {op_name} names tensor '{name}', which the block "
                                 "does not declare")
        attrs = _read_attributes(o)
        for key in _VALUE_FIELDS.intersection(attrs):
            attrs[key] = _decode_value(attrs[key], tensors[inputs[0]].dtype if inputs else "")
        operators.append(Operator(op_name, inputs, outputs, attrs, location, i))
        if op_name == "CONST_SHAPE" and outputs and tensors[outputs[0]].data is None \
                and tensors[outputs[0]].shape == (0,):
            tensors[outputs[0]].data = np.zeros(0, np.int64)   # the empty shape_t has no bytes
    graph_inputs = [block.Inputs(j).decode() for j in range(block.InputsLength())]
    graph_outputs = [block.Outputs(j).decode() for j in range(block.OutputsLength())]
    for name in graph_inputs + graph_outputs:
        if name not in tensors:
            raise ModelError(f"graph input/output '{name}' is not a tensor of the block")
    return Graph(tensors, operators, graph_inputs, graph_outputs, source=source)


def version_text(version, draft: bool = False) -> str:
    return ".".join(map(str, version)) + ("-draft" if draft else "")


def load_bytes(buf: bytes, source: str = "<bytes>") -> Graph:
    if len(buf) < 8 or not TosaGraph.TosaGraphBufferHasIdentifier(buf, 0):
        raise ModelError(f"{source}: not a TOSA flatbuffer (file identifier 'TOSA' missing)")
    try:
        fb = TosaGraph.GetRootAs(buf, 0)
        v = fb.Version()
        version = (v._Major(), v._Minor(), v._Patch()) if v is not None else (0, 0, 0)
        draft = bool(v._Draft()) if v is not None else False
        regions = {}
        for r in range(fb.RegionsLength()):
            region = fb.Regions(r)
            if region.BlocksLength() < 1:
                raise ModelError(f"region '{region.Name().decode()}' has no basic block")
            regions[region.Name().decode()] = _read_block(region.Blocks(0), source)
    except ModelError as exc:
        raise ModelError(f"{source}: {exc}") from None
    except UnsupportedError as exc:   # a well-formed file beyond PRO-INT is not corrupt
        raise UnsupportedError(f"{source}: {exc}") from None
    except Exception as exc:  # flatbuffers raises assorted errors on corrupt input
        raise ModelError(f"{source}: corrupt TOSA flatbuffer ({type(exc).__name__}: {exc})") from None
    if not regions:
        raise ModelError(f"{source}: the flatbuffer has no regions")
    main = regions.pop("main", None)
    if main is None:
        raise ModelError(f"{source}: no region named 'main' (found: {', '.join(regions)})")
    if version[:2] != (1, 0) and not (version[:2] == (1, 1) and draft):
        raise UnsupportedError(f"{source}: TOSA version {version_text(version, draft)}; npu-sim "
                               "implements TOSA 1.0 (and, experimentally, the 1.1 draft's EXT-SHAPE)")
    main.version = version
    main.draft = version[:2] == (1, 1)           # (1.0 files often carry the flag's default, set)
    main.regions = regions
    return main


def load_model(path: str | os.PathLike) -> Graph:
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except IsADirectoryError:
        raise ModelError(f"{path}: is a directory, expected a .tosa file") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc.strerror})") from None
    return load_bytes(buf, path)
