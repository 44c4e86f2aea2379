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

from .flatbuf import I32, U8, U32, Table, verify
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
_OP_NAME_SET = frozenset(OP_NAMES.values())
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


def _own_attribute(op_name: str) -> str:
    """The attribute table an operator carries in the schema (CONV2D: Conv2dAttribute)."""
    return _OWN_ATTRIBUTE.get(op_name.replace("_", "").lower(), "")


_OWN_ATTRIBUTE = {name[:-len("Attribute")].lower(): name for name in ATTRIBUTE_NAMES.values()
                  if name.endswith("Attribute")}


def _read_attributes(op: Table, op_name: str) -> dict:
    """An operator's attribute table (TosaOperator's union: type in slot 6, table in 8)."""
    code = op.scalar(6, U8)
    kind = ATTRIBUTE_NAMES.get(code)
    if kind is None:
        raise ModelError(f"attribute type {code} is not one of the TOSA 1.0 schema's")
    if kind in _VARIABLE_ACCESS:            # IDENTITY on a variable, as tosa-opt writes it
        return {_VARIABLE_ACCESS[kind]: True}
    if kind != "NONE" and kind != _own_attribute(op_name) and op_name in _OP_NAME_SET:
        raise ModelError(f"carries a {kind}, not {_own_attribute(op_name) or 'no attribute'}")
    at = op.field(8)
    if kind == "NONE" or not at:
        return {}
    if kind not in _ATTR_CLASS_CACHE:
        cls = getattr(importlib.import_module(f"tosa.{kind}"), kind)
        _ATTR_CLASS_CACHE[kind] = (cls, _attribute_fields(cls))
    cls, fields = _ATTR_CLASS_CACHE[kind]
    table = Table(op.buf, at + U32(op.buf, at)[0])       # verified, read by the class
    obj = cls()
    obj.Init(op.buf, table.pos)
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


def _read_block(block: Table, source: str) -> Graph:
    """A TosaBasicBlock (operators 6, tensors 8, inputs 10, outputs 12, shapes 14)."""
    tensors: dict[str, Tensor] = {}
    for t in block.tables(8):           # TosaTensor: name 4, shape 6, type 8, data 10,
        name = t.string(4).decode()     # variable 12, variable_name 16
        dims = t.array(6, "<i4")
        shape = tuple(dims.tolist()) if dims is not None and len(dims) else ()
        dtype = _tensor_dtype(t.scalar(8, U32), name)
        if any(d < 0 for d in shape):
            raise ModelError(f"tensor '{name}' has a dynamic or negative shape {list(shape)}")
        data = None
        raw = t.array(10, "<u1")
        if raw is not None and len(raw):
            data = decode_data(raw, dtype, shape)
        vname = t.string(16)
        tensors[name] = Tensor(name, shape, dtype, data, bool(t.scalar(12, U8)),
                               vname.decode() if vname else "")
    for s in block.tables(14):          # TosaShape: name 4, rank 6, data 8
        name = s.string(4).decode()
        rank = int(s.scalar(6, U32))
        raw = s.array(8, "<u1")
        data = decode_data(raw, "shape", (rank,)) if raw is not None and len(raw) else None
        tensors[name] = Tensor(name, (rank,), "shape", data)
    operators = []
    for i, o in enumerate(block.tables(6)):     # TosaOperator: op 4, attribute 6 and 8,
        code = o.scalar(4, U32)                # inputs 10, outputs 12, location 14
        op_name = OP_NAMES.get(code, f"op code {code}")
        inputs, outputs = o.strings(10), o.strings(12)
        location = ""
        where = o.table(14)                     # OpLocation: text 4
        if where is not None and where.string(4):
            location = where.string(4).decode()
        for name in inputs + outputs:
            if name not in tensors:
                raise ModelError(f"operator #{i} {op_name} names tensor '{name}', which the block "
                                 "does not declare")
        try:
            attrs = _read_attributes(o, op_name)
        except ModelError as exc:
            raise ModelError(f"operator #{i} {op_name}: {exc}") from None
        for key in _VALUE_FIELDS.intersection(attrs):
            attrs[key] = _decode_value(attrs[key], tensors[inputs[0]].dtype if inputs else "")
        operators.append(Operator(op_name, inputs, outputs, attrs, location, i))
        if op_name == "CONST_SHAPE" and outputs and tensors[outputs[0]].data is None \
                and tensors[outputs[0]].shape == (0,):
            tensors[outputs[0]].data = np.zeros(0, np.int64)   # the empty shape_t has no bytes
    graph_inputs, graph_outputs = block.strings(10), block.strings(12)
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
        verify(buf, "tosa", "TosaGraph")
        fb = Table(buf, U32(buf, 0)[0])       # TosaGraph: version 4, regions 6
        v = fb.table(4)                         # Version: major 4, minor 6, patch 8, draft 10
        version = tuple(v.scalar(slot, I32, -1) for slot in (4, 6, 8)) if v is not None \
            else (0, 0, 0)
        draft = bool(v.scalar(10, U8, True)) if v is not None else False
        regions = {}
        for region in fb.tables(6):             # TosaRegion: name 4, blocks 6
            blocks = region.tables(6)
            if not blocks:
                raise ModelError(f"region '{region.string(4).decode()}' has no basic block")
            regions[region.string(4).decode()] = _read_block(blocks[0], source)
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
