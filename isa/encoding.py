"""Binary encoding of a Program (.npub).

Layout (little-endian):
  header   b"NPUB", u16 major, u16 minor, u32 section count
  sections u32 tag, u64 length, payload; tags: META (JSON), CMDS (binary commands), SEGS (image)
Commands are encoded field by field with typed values, so a reader needs no Python pickles.
"""
from __future__ import annotations

import io
import json
import struct

from .commands import Compute, DmaCopy, DmaFill, TensorView
from .errors import ProgramError
from .opcodes import check
from .program import Binding, Layer, Program, Segment

MAGIC = b"NPUB"
VERSION = (2, 0)          # 2.0: a string table per command section, one record per view
_DTYPES = ["bool", "int4", "int8", "int16", "int32", "int48", "int64"]
_UNITS = ["mac", "vector", "host"]
_KIND_COPY, _KIND_FILL, _KIND_COMPUTE = 1, 2, 3
_T_INT, _T_BOOL, _T_STR, _T_INTS, _T_FLOAT, _T_NONE = range(6)


class _Writer:
    """Writes typed fields; strings go to a table and are written as indices into it."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.strings: dict[str, int] = {}

    def pack(self, fmt, *values):
        self.buf.write(struct.pack("<" + fmt, *values))

    def string(self, s: str):
        self.pack("I", self.strings.setdefault(s, len(self.strings)))

    def ints(self, values):
        self.pack("H", len(values))
        self.pack(f"{len(values)}q", *values)

    def view(self, v: TensorView):
        rank = len(v.shape)
        self.pack(f"BQBB{2 * rank}q", v.mem, v.addr, _DTYPES.index(v.dtype), rank, *v.shape,
                  *v.strides)

    def table(self) -> bytes:
        out = io.BytesIO()
        out.write(struct.pack("<I", len(self.strings)))
        for s in self.strings:               # insertion order = index order
            b = s.encode()
            out.write(struct.pack("<I", len(b)))
            out.write(b)
        return out.getvalue()

    def value(self, x):
        if x is None:
            self.pack("B", _T_NONE)
        elif isinstance(x, bool):
            self.pack("BB", _T_BOOL, x)
        elif isinstance(x, int):
            self.pack("Bq", _T_INT, x)
        elif isinstance(x, float):
            self.pack("Bd", _T_FLOAT, x)
        elif isinstance(x, str):
            self.pack("B", _T_STR)
            self.string(x)
        elif isinstance(x, (tuple, list)):
            self.pack("B", _T_INTS)
            self.ints([int(i) for i in x])
        else:
            raise ProgramError(f"cannot encode attribute value {x!r}")


_STRUCTS: dict[str, struct.Struct] = {}


def _struct(fmt: str) -> struct.Struct:
    s = _STRUCTS.get(fmt)
    if s is None:
        s = _STRUCTS[fmt] = struct.Struct("<" + fmt)
    return s


_U32, _I64, _F64 = struct.Struct("<I"), struct.Struct("<q"), struct.Struct("<d")
_VIEWS = [struct.Struct(f"<BQBB{2 * rank}q") for rank in range(9)]


class _Reader:
    """Sequential reader; struct.error on a short buffer is reported as a truncated program.
    The per-command readers take fixed-size fields with prebuilt structs and single bytes by
    indexing: a program has tens of thousands of commands, each some twenty fields."""

    def __init__(self, data: bytes):
        self.data, self.pos = memoryview(data), 0      # constant segments stay views
        self.strings: list[str] = []

    def read_table(self):
        (n,) = self.unpack("I")
        for _ in range(n):
            (size,) = self.unpack("I")
            self.strings.append(str(self.data[self.pos:self.pos + size], "utf-8"))
            self.pos += size

    def unpack(self, fmt):
        s = _struct(fmt)
        values = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return values

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise struct.error("unexpected end of data")
        self.pos += 1
        return self.data[self.pos - 1]

    def string(self) -> str:
        index = _U32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return self.strings[index]

    def ints(self) -> tuple[int, ...]:
        (n,) = self.unpack("H")
        return self.unpack(f"{n}q") if n else ()

    def view(self) -> TensorView:
        data, pos = self.data, self.pos
        if pos + 11 > len(data):
            raise struct.error("unexpected end of data")
        rank = data[pos + 10]                  # after mem (B), addr (Q) and dtype (B)
        s = _VIEWS[rank] if rank < len(_VIEWS) else _struct(f"BQBB{2 * rank}q")
        values = s.unpack_from(data, pos)
        self.pos = pos + s.size
        return TensorView(values[0], values[1], values[4:4 + rank], values[4 + rank:],
                          _DTYPES[values[2]])

    def value(self):
        tag = self.byte()
        if tag == _T_INT:
            value = _I64.unpack_from(self.data, self.pos)[0]
            self.pos += 8
            return value
        if tag == _T_INTS:
            return tuple(self.ints())
        if tag == _T_STR:
            return self.string()
        if tag == _T_BOOL:
            return bool(self.byte())
        if tag == _T_NONE:
            return None
        if tag == _T_FLOAT:
            value = _F64.unpack_from(self.data, self.pos)[0]
            self.pos += 8
            return value
        raise ProgramError(f"corrupt program: unknown value tag {tag}")


def _encode_commands(commands) -> bytes:
    w = _Writer()
    w.pack("I", len(commands))
    for c in commands:
        kind = _KIND_COPY if isinstance(c, DmaCopy) else _KIND_FILL if isinstance(c, DmaFill) \
            else _KIND_COMPUTE
        w.pack("BIi", kind, c.id, c.layer)
        w.ints(c.deps)
        if kind == _KIND_COPY:
            w.pack("B", c.channel)
            w.view(c.src)
            w.view(c.dst)
        elif kind == _KIND_FILL:
            w.pack("Bq", c.channel, c.value)
            w.view(c.dst)
        else:
            check(c)
            w.pack("B", _UNITS.index(c.unit))
            w.string(c.op)
            for group in (c.inputs, c.outputs):
                w.pack("B", len(group))
                for name, v in group.items():
                    w.string(name)
                    w.view(v)
            w.pack("B", len(c.attrs))
            for name, x in c.attrs.items():
                w.string(name)
                w.value(x)
    return w.table() + w.buf.getvalue()


def _decode_commands(data: bytes):
    r = _Reader(data)
    r.read_table()
    (n,) = r.unpack("I")
    commands = []
    for _ in range(n):
        kind, cid, layer = r.unpack("BIi")
        deps = tuple(r.ints())
        if kind == _KIND_COPY:
            (ch,) = r.unpack("B")
            commands.append(DmaCopy(id=cid, deps=deps, layer=layer, channel=ch, src=r.view(),
                                    dst=r.view()))
        elif kind == _KIND_FILL:
            ch, value = r.unpack("Bq")
            commands.append(DmaFill(id=cid, deps=deps, layer=layer, channel=ch, value=value,
                                    dst=r.view()))
        elif kind == _KIND_COMPUTE:
            unit = r.byte()
            op = r.string()
            groups = []
            for _g in range(2):
                k = r.byte()
                groups.append({r.string(): r.view() for _ in range(k)})
            attrs = {r.string(): r.value() for _ in range(r.byte())}
            cmd = Compute(id=cid, deps=deps, layer=layer, unit=_UNITS[unit], op=op,
                          inputs=groups[0], outputs=groups[1], attrs=attrs)
            check(cmd)
            commands.append(cmd)
        else:
            raise ProgramError(f"corrupt program: unknown command kind {kind}")
    return commands


def _view_json(v: TensorView) -> dict:
    return {"mem": v.mem, "addr": v.addr, "shape": list(v.shape), "strides": list(v.strides),
            "dtype": v.dtype}


def _view_from(d: dict) -> TensorView:
    return TensorView(d["mem"], d["addr"], tuple(d["shape"]), tuple(d["strides"]), d["dtype"])


def encode(program: Program) -> bytes:
    meta = {
        "memories": program.memories, "memory_sizes": program.memory_sizes,
        "inputs": [{"name": b.name, "view": _view_json(b.view)} for b in program.inputs],
        "outputs": [{"name": b.name, "view": _view_json(b.view)} for b in program.outputs],
        "variables": [{"name": b.name, "view": _view_json(b.view)} for b in program.variables],
        "layers": [vars(layer) for layer in program.layers],
        "meta": program.meta,
    }
    segs = _Writer()
    segs.pack("I", len(program.segments))
    for s in program.segments:
        segs.pack("BQQ", s.mem, s.addr, len(s.data))
        segs.buf.write(s.data)
    sections = [(b"META", json.dumps(meta).encode()), (b"CMDS", _encode_commands(program.commands)),
                (b"SEGS", segs.buf.getvalue())]
    out = io.BytesIO()
    out.write(MAGIC + struct.pack("<HHI", *VERSION, len(sections)))
    for tag, payload in sections:
        out.write(tag + struct.pack("<Q", len(payload)))
        out.write(payload)
    return out.getvalue()


def decode(data: bytes, source: str = "<bytes>") -> Program:
    data = memoryview(data)      # sections and constant segments are views, not copies
    if data[:4] != MAGIC:
        raise ProgramError(f"{source}: not an npu-sim program (magic {bytes(data[:4])!r})")
    try:
        major, minor, count = struct.unpack_from("<HHI", data, 4)
        if major != VERSION[0]:
            raise ProgramError(f"program format {major}.{minor}, this npu-sim reads "
                               f"{VERSION[0]}.x; recompile the model")
        pos, sections = 12, {}
        for _ in range(count):
            tag = bytes(data[pos:pos + 4])
            (length,) = struct.unpack_from("<Q", data, pos + 4)
            sections[tag] = data[pos + 12:pos + 12 + length]
            if len(sections[tag]) != length:
                raise ProgramError("truncated section")
            pos += 12 + length
        meta = json.loads(bytes(sections[b"META"]))
        commands = _decode_commands(sections[b"CMDS"])
        r = _Reader(sections[b"SEGS"])
        segments = []
        for _ in range(r.unpack("I")[0]):
            mem, addr, n = r.unpack("BQQ")
            segments.append(Segment(mem, addr, r.data[r.pos:r.pos + n]))
            r.pos += n
    except ProgramError as exc:
        raise ProgramError(f"{source}: {exc}") from None
    except struct.error:
        raise ProgramError(f"{source}: truncated program: unexpected end of data") from None
    except (KeyError, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise ProgramError(f"{source}: corrupt program ({type(exc).__name__}: {exc})") from None
    return Program(
        memories=meta["memories"], memory_sizes=meta["memory_sizes"], commands=commands,
        segments=segments,
        inputs=[Binding(b["name"], _view_from(b["view"])) for b in meta["inputs"]],
        outputs=[Binding(b["name"], _view_from(b["view"])) for b in meta["outputs"]],
        layers=[Layer(**d) for d in meta["layers"]], meta=meta["meta"],
        variables=[Binding(b["name"], _view_from(b["view"])) for b in meta.get("variables", [])])
