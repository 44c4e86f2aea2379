"""Flatbuffers as npu-sim reads them: `Table`, a reader of one table by vtable slot (the TOSA
loader's, cheaper than the generated classes' layers of calls), and `verify`, which checks a
whole file (a .tosa or .tflite model) as flatbuffers' verifier does before the TOSA reference
model or TFLite reads one: every table, vector, string and scalar reachable from the root lies
within the buffer, aligned, with a sane vtable, strings terminated (a union value of a type
the schema lacks is left unread, as there). Both refuse a file that fails this; read as it
comes, such a file could give a model of garbage that looks valid. It checks less than C++
does in places (offsets' own alignment, depth limits) and, on every damaged file the tests
and a review built, no more.

The field layout comes from the schema's generated classes (the `tosa` and `tflite`
packages): each accessor's source names its vtable slot and how it reads the field (a scalar,
a string, a table, a vector of scalars, strings or tables, or a union), so the verifier follows
the schema the readers use.
"""
from __future__ import annotations

import importlib.util
import re
import struct

import numpy as np


U8, U16, I32, U32 = (struct.Struct(f).unpack_from for f in ("<B", "<H", "<i", "<I"))


class Table:
    """One flatbuffer table of `buf` at `pos`, read as the generated tosa classes read it
    (the same offsets and defaults), without their per-field layers of calls. A field is
    named by its vtable slot (4, 6, 8, ...: the generated accessor's Offset() argument)."""

    __slots__ = ("buf", "pos", "vt", "vt_size")

    def __init__(self, buf, pos: int):
        if pos & 3:
            raise ValueError(f"table at {pos}: not 4-byte aligned")
        vt = pos - I32(buf, pos)[0]
        if vt < 0:
            raise ValueError(f"table at {pos}: vtable offset {vt}")
        verify_vtable(buf, vt)
        self.buf, self.pos, self.vt, self.vt_size = buf, pos, vt, U16(buf, vt)[0]

    def field(self, slot: int) -> int:
        """Where the field is, or 0 when absent."""
        if slot >= self.vt_size:
            return 0
        off = U16(self.buf, self.vt + slot)[0]
        return self.pos + off if off else 0

    def scalar(self, slot: int, unpack, default=0):
        at = self.field(slot)
        return unpack(self.buf, at)[0] if at else default

    def table(self, slot: int) -> Table | None:
        at = self.field(slot)
        return Table(self.buf, at + U32(self.buf, at)[0]) if at else None

    def string(self, slot: int) -> bytes | None:
        at = self.field(slot)
        return read_string(self.buf, at) if at else None

    def vector(self, slot: int) -> tuple[int, int]:
        """(start, length) of a vector field; (0, 0) when absent."""
        at = self.field(slot)
        if not at:
            return 0, 0
        at += U32(self.buf, at)[0]
        return at + 4, U32(self.buf, at)[0]

    def tables(self, slot: int) -> list[Table]:
        start, n = self.vector(slot)
        buf = self.buf
        return [Table(buf, e + U32(buf, e)[0]) for e in range(start, start + 4 * n, 4)]

    def strings(self, slot: int) -> list[str]:
        start, n = self.vector(slot)
        buf = self.buf
        return [read_string(buf, e).decode() for e in range(start, start + 4 * n, 4)]

    def array(self, slot: int, dtype: str) -> np.ndarray | None:
        """A vector of scalars as a numpy view of the buffer, None when absent."""
        start, n = self.vector(slot)
        return np.frombuffer(self.buf, dtype, count=n, offset=start) if start else None


def verify_vtable(buf, vt: int) -> None:
    """A vtable as flatbuffers' verifier takes it (the TOSA reference model and TFLite refuse
    a file that fails this): 2-byte aligned, its size even, within the buffer. Each field it
    places is checked where it is read."""
    if vt & 1 or U16(buf, vt)[0] & 1 or vt + U16(buf, vt)[0] > len(buf):
        raise ValueError(f"vtable at {vt}: misaligned or past the end of the buffer")


def read_string(buf, at: int) -> bytes:
    at += U32(buf, at)[0]
    n = U32(buf, at)[0]
    if at & 3 or at + 4 + n >= len(buf) or buf[at + 4 + n]:
        raise ValueError(f"string at {at}: not a terminated string within the buffer")
    return bytes(buf[at + 4:at + 4 + n])



_SLOT = re.compile(r"self\._tab\.Offset\((\d+)\)")
_CLASS = re.compile(r"from \w+\.(\w+) import")
_SIZE = re.compile(r"j \* (\d+)\)")
_STRIDE = re.compile(r"py_type\(j\) \* (\d+)")
_SCALAR = re.compile(r"number_types\.(\w+)Flags, o \+ self\._tab\.Pos")
_BYTES = {"Bool": 1, "Int8": 1, "Uint8": 1, "Int16": 2, "Uint16": 2, "Int32": 4, "Uint32": 4,
          "Float32": 4, "Int64": 8, "Uint64": 8, "Float64": 8}
_MAX_VECTOR = 1 << 31           # elements: a length beyond this is no real model's


_METHOD = re.compile(r"^    def (\w+)\(self[^)]*\):\n(.*?)(?=^    def |^\S|\Z)", re.M | re.S)


def _fields(source: str) -> list[tuple[int, str, object]]:
    """(slot, kind, detail) of each field of a generated table class, from its module's
    source: kind one of "scalar" (detail: its bytes), "string", "table" (detail: class),
    "scalars" (detail: element bytes), "strings", "tables" (detail: class) or "union"
    (detail: the field's name; its type is the field before it). A test holds every slot
    of the schemas' reachable classes to a kind."""
    out, seen = [], set()
    for name, src in _METHOD.findall(source):
        if name.endswith(("AsNumpy", "Length", "IsNone")) or name.startswith("GetRoot"):
            continue
        slot = _SLOT.search(src)
        if slot is None or int(slot.group(1)) in seen:
            continue
        slot = int(slot.group(1))
        named = _CLASS.search(src)
        if "self._tab.Union(" in src:
            field = ("union", name)
        elif "self._tab.Vector(o)" in src and "self._tab.String(" in src:
            field = ("strings", None)
        elif "self._tab.Vector(o)" in src and named and "self._tab.Indirect(" in src:
            field = ("tables", named.group(1))
        elif "self._tab.Vector(o)" in src:     # of scalars, or of structs of j's stride
            size = _SIZE.search(src) or _STRIDE.search(src)
            if size is None:
                continue
            field = ("scalars", int(size.group(1)))
        elif "self._tab.String(" in src:
            field = ("string", None)
        elif "self._tab.Indirect(" in src and named:
            field = ("table", named.group(1))
        elif _SCALAR.search(src):
            field = ("scalar", _BYTES[_SCALAR.search(src).group(1)])
        else:
            continue
        seen.add(slot)
        out.append((slot, *field))
    return out


_LAYOUTS: dict[tuple[str, str], list] = {}


def _layout(package: str, cls_name: str) -> list:
    if (package, cls_name) not in _LAYOUTS:
        spec = importlib.util.find_spec(f"{package}.{cls_name}")     # read, not imported
        with open(spec.origin, encoding="utf-8") as f:
            _LAYOUTS[package, cls_name] = _fields(f.read())
    return _LAYOUTS[package, cls_name]


# union fields whose enum is named otherwise than the field (TFLite's)
_UNION_ENUMS = {"Details": "QuantizationDetails", "ArraySegments": "SparseIndexVector",
                "ArrayIndices": "SparseIndexVector"}
_MEMBERS: dict[tuple[str, str], dict[int, str]] = {}


def _union_members(package: str, field: str) -> dict[int, str]:
    """Type code -> table class of a union field (BuiltinOptions: 1 -> Conv2DOptions, ...)."""
    if (package, field) not in _MEMBERS:
        union = _UNION_ENUMS.get(field, field)
        enum = getattr(importlib.import_module(f"{package}.{union}"), union)
        _MEMBERS[package, field] = {v: k for k, v in vars(enum).items()
                                    if not k.startswith("_") and isinstance(v, int)
                                    and k != "NONE"}
    return _MEMBERS[package, field]


def _vector(buf, at: int, size: int) -> tuple[int, int]:
    """(start, length) of the vector a field at `at` points to, checked within the buffer."""
    at += U32(buf, at)[0]
    n = U32(buf, at)[0]
    if at & 3 or n > _MAX_VECTOR or at + 4 + n * size > len(buf):
        raise ValueError(f"vector at {at}: {n} elements of {size} B run past the buffer")
    return at + 4, n


def verify(buf: bytes, package: str, root: str) -> None:
    """Raise ValueError naming the first structure that fails, as flatbuffers' verifier would;
    `package` holds the schema's generated classes, `root` names the root table's."""
    try:
        done: set[tuple[int, str]] = set()
        todo = [(U32(buf, 0)[0], root)]
        while todo:
            pos, cls = todo.pop()
            if (pos, cls) in done:
                continue
            done.add((pos, cls))
            table = Table(buf, pos)
            for slot, kind, detail in _layout(package, cls):
                at = table.field(slot)
                if not at:
                    continue
                if kind == "scalar":
                    if at % detail or at + detail > len(buf):
                        raise ValueError(f"table at {pos}: a {detail}-byte field at {at} is "
                                         "misaligned or past the end of the buffer")
                elif kind == "string":
                    read_string(buf, at)
                elif kind == "table":
                    todo.append((at + U32(buf, at)[0], detail))
                elif kind == "scalars":
                    _vector(buf, at, detail)
                elif kind in ("strings", "tables"):
                    start, n = _vector(buf, at, 4)
                    for e in range(start, start + 4 * n, 4):
                        if kind == "strings":
                            read_string(buf, e)
                        else:
                            todo.append((e + U32(buf, e)[0], detail))
                else:                                   # a union: its type field is the slot before
                    code = U8(buf, table.field(slot - 2))[0] if table.field(slot - 2) else 0
                    member = _union_members(package, detail).get(code)
                    if member is not None:      # NONE or a type this schema does not know:
                        todo.append((at + U32(buf, at)[0], member))     # unread, as in C++
    except struct.error as exc:
        raise ValueError(f"a read past the end of the buffer ({exc})") from None
