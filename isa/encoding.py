"""Binary encoding of a Program (.npub).

Layout (little-endian):
  header   b"NPUB", u16 major, u16 minor, u32 section count
  sections u32 tag, u64 length, u32 CRC-32 of the payload, payload; tags: META (JSON),
           CMDS (binary commands), SEGS (image), each exactly once
Commands are encoded field by field with typed values, so a reader needs no Python pickles.
"""
from __future__ import annotations

import gc
import io
import json
import struct
import zlib

from .commands import ITEMSIZE, Compute, DmaCopy, DmaFill, TensorView
from .dtypes import BY_CODE, DTYPES
from .errors import ProgramError
from .opcodes import check
from .program import Binding, Layer, Program, Segment

MAGIC = b"NPUB"
VERSION = (3, 0)          # 3.0: a CRC-32 per section; 2.0: a string table, one record per view
_SECTIONS = (b"META", b"CMDS", b"SEGS")
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
        self.pack(f"BQBB{2 * rank}q", v.mem, v.addr, DTYPES[v.dtype].code, rank, *v.shape,
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
_VIEW_HEAD = 11            # a view's bytes before its shape and strides (8 bytes each a dim)


class _Reader:
    """Sequential reader of the string table and the sections' framing; struct.error on a
    short buffer is reported as a truncated program (the commands: _decode_commands)."""

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


_HEAD = struct.Struct("<BIiH")           # kind, id, layer, dependency count
_U8 = struct.Struct("<B")
_DEPS = [struct.Struct(f"<{n}q") for n in range(17)]
_RECENT_BLOCKS = 4         # attribute blocks remembered per opcode


def _byte_at(buf, pos: int) -> int:
    if pos >= len(buf):
        raise struct.error("unexpected end of data")
    return buf[pos]


def _new_view(key: bytes, seen: dict) -> TensorView:
    """The view that `key`, a view's encoding, holds; remembered in `seen` (struct.error if
    `key` is cut short)."""
    rank = key[10]                         # after mem (B), addr (Q) and dtype (B)
    v = (_VIEWS[rank] if rank < len(_VIEWS) else _struct(f"BQBB{2 * rank}q")).unpack(key)
    # tuple.__new__: the named tuple's own __new__ is a Python call per view
    view = seen[key] = tuple.__new__(TensorView, (v[0], v[1], v[4:4 + rank], v[4 + rank:],
                                                  BY_CODE[v[2]].name))
    return view


def _view_end(buf: bytes, pos: int) -> int:
    """Where the view encoded at `pos` ends: its rank is its byte after mem (B), addr (Q) and
    dtype (B)."""
    return pos + _VIEW_HEAD + 16 * buf[pos + 10]


def _view_at(buf: bytes, pos: int, seen: dict) -> tuple[TensorView, int]:
    """The view at `pos` and its end, one object per distinct encoding (`seen`): tile buffers
    recur, so most of a program's views repeat, and a lookup costs less than building one."""
    end = _view_end(buf, pos)
    key = buf[pos:end]
    return seen.get(key) or _new_view(key, seen), end


def _value_at(buf, pos: int, strings: list[str]):
    tag = _byte_at(buf, pos)
    pos += 1
    if tag == _T_INT:
        return _I64.unpack_from(buf, pos)[0], pos + 8
    if tag == _T_INTS:
        (n,) = _struct("H").unpack_from(buf, pos)
        pos += 2
        if not n:
            return (), pos
        s = _DEPS[n] if n < len(_DEPS) else _struct(f"{n}q")
        return s.unpack_from(buf, pos), pos + s.size
    if tag == _T_STR:
        return strings[_U32.unpack_from(buf, pos)[0]], pos + 4
    if tag == _T_BOOL:
        return bool(_byte_at(buf, pos)), pos + 1
    if tag == _T_NONE:
        return None, pos
    if tag == _T_FLOAT:
        return _F64.unpack_from(buf, pos)[0], pos + 8
    raise ProgramError(f"corrupt program: unknown value tag {tag}")


def _decode_commands(data: bytes):
    """The command list: one pass with the position in a local and every field read by a
    prebuilt struct (a program has tens of thousands of commands, each some twenty fields);
    an opcode's operand names are checked once per distinct set."""
    r = _Reader(data)
    r.read_table()
    (n,) = r.unpack("I")
    # bytes, not the memoryview: a slice of bytes is one object (the views' keys), of a
    # memoryview two
    buf, pos, strings = bytes(r.data), r.pos, r.strings
    head, u32, vhead = _HEAD, _U32, _VIEW_HEAD
    seen: dict[bytes, TensorView] = {}
    view_of = seen.get
    operands: dict[bytes, tuple[str, TensorView]] = {}
    checked: set[tuple] = set()       # (unit, opcode, operand names) that passed check()
    # opcode -> its latest distinct attribute blocks (bytes, attributes): a layer's tiles
    # share their attributes, and the encoding is self-delimiting, so bytes equal to a block
    # decoded before decode to the same attributes
    blocks: dict[str, list[tuple[bytes, dict]]] = {}
    size = len(buf)
    # Commands get the attributes their dataclass __init__ would set (they have no
    # __post_init__; tests/test_robust_program.py checks both), without its keyword call.
    new = object.__new__
    commands = []
    for _ in range(n):
        kind, cid, layer, nd = head.unpack_from(buf, pos)
        pos += 11
        if nd:
            s = _DEPS[nd] if nd < len(_DEPS) else _struct(f"{nd}q")
            deps = s.unpack_from(buf, pos)
            pos += s.size
        else:
            deps = ()
        if kind == _KIND_COPY:
            ch = buf[pos]
            pos += 1
            # _view_end inline, here and in the operand loop below: 4% of decoding
            end = pos + vhead + 16 * buf[pos + 10]
            key = buf[pos:end]
            src = view_of(key) or _new_view(key, seen)
            pos, end = end, end + vhead + 16 * buf[end + 10]
            key = buf[pos:end]
            dst = view_of(key) or _new_view(key, seen)
            pos = end
            command = new(DmaCopy)
            command.__dict__ = {"id": cid, "deps": deps, "layer": layer, "channel": ch,
                                "src": src, "dst": dst}
            commands.append(command)
        elif kind == _KIND_FILL:
            ch, value = _struct("Bq").unpack_from(buf, pos)
            dst, pos = _view_at(buf, pos + 9, seen)
            command = new(DmaFill)
            command.__dict__ = {"id": cid, "deps": deps, "layer": layer, "channel": ch,
                                "dst": dst, "value": value}
            commands.append(command)
        elif kind == _KIND_COMPUTE:
            unit = buf[pos]
            op = strings[u32.unpack_from(buf, pos + 1)[0]]
            pos += 5
            groups = []
            for _g in range(2):
                k = buf[pos]
                pos += 1
                group = {}
                for _ in range(k):
                    # an operand (its name's index, its view) recurs whole, as its view does
                    end = pos + 4 + vhead + 16 * buf[pos + 14]
                    key = buf[pos:end]
                    operand = operands.get(key)
                    if operand is None:
                        view = key[4:]
                        operand = operands[key] = (strings[u32.unpack_from(key)[0]],
                                                   view_of(view) or _new_view(view, seen))
                    group[operand[0]] = operand[1]
                    pos = end
                groups.append(group)
            recent = blocks.get(op)
            if recent is None:
                recent = blocks[op] = []
            for block, known in recent:
                if buf.startswith(block, pos):
                    attrs = dict(known)           # each command owns its attributes
                    pos += len(block)
                    break
            else:
                start = pos
                attrs = {}
                count = _byte_at(buf, pos)
                pos += 1
                for _ in range(count):
                    name = strings[u32.unpack_from(buf, pos)[0]]
                    if pos + 13 <= size and buf[pos + 4] == _T_INT:     # the commonest, inline
                        attrs[name] = _I64.unpack_from(buf, pos + 5)[0]
                        pos += 13
                    else:
                        attrs[name], pos = _value_at(buf, pos + 4, strings)
                recent.insert(0, (buf[start:pos], dict(attrs)))
                del recent[_RECENT_BLOCKS:]
            cmd = new(Compute)
            cmd.__dict__ = {"id": cid, "deps": deps, "layer": layer, "unit": _UNITS[unit],
                            "op": op, "inputs": groups[0], "outputs": groups[1], "attrs": attrs}
            signature = (unit, op, *groups[0], None, *groups[1])
            if signature not in checked:           # check() reads only these
                check(cmd)
                checked.add(signature)
            commands.append(cmd)
        else:
            raise ProgramError(f"corrupt program: unknown command kind {kind}")
    return commands


def _view_json(v: TensorView) -> dict:
    return {"mem": v.mem, "addr": v.addr, "shape": list(v.shape), "strides": list(v.strides),
            "dtype": v.dtype}


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
        out.write(tag + struct.pack("<QI", len(payload), zlib.crc32(payload)))
        out.write(payload)
    return out.getvalue()


def _sections(data: memoryview) -> dict[bytes, memoryview]:
    major, minor, count = struct.unpack_from("<HHI", data, 4)
    if major != VERSION[0]:
        raise ProgramError(f"program format {major}.{minor}; this npu-sim reads format "
                           f"{VERSION[0]}.{VERSION[1]} (any {VERSION[0]}.x): recompile the model "
                           "with npu-sim compile")
    pos, sections = 12, {}
    for _ in range(min(count, len(_SECTIONS) + 1)):
        tag = bytes(data[pos:pos + 4])
        length, crc = struct.unpack_from("<QI", data, pos + 4)
        name = tag.decode("ascii", "replace")
        payload = data[pos + 16:pos + 16 + length]
        if len(payload) != length:
            raise ProgramError(f"truncated program: section {name} holds {len(payload)} of "
                               f"{length} bytes")
        if zlib.crc32(payload) != crc:
            raise ProgramError(f"section {name} fails its checksum (CRC-32 0x{zlib.crc32(payload):08x}, "
                               f"stored 0x{crc:08x}): the file is corrupt")
        if tag not in _SECTIONS or tag in sections:
            raise ProgramError(f"corrupt program: {'unknown' if tag not in _SECTIONS else 'repeated'} "
                               f"section {name!r}")
        sections[tag] = payload
        pos += 16 + length
    missing = [t.decode() for t in _SECTIONS if t not in sections]
    if missing or count != len(_SECTIONS):
        raise ProgramError(f"corrupt program: {count} sections, expected {len(_SECTIONS)} "
                           f"(META, CMDS, SEGS)")
    if pos != len(data):
        raise ProgramError(f"corrupt program: {len(data) - pos} bytes after the last section")
    return sections


def _view_from(d) -> TensorView:
    shape, strides = tuple(d["shape"]), tuple(d["strides"])
    if not all(type(x) is int for x in (d["mem"], d["addr"], *shape, *strides)) \
            or d["dtype"] not in ITEMSIZE or len(shape) != len(strides):
        raise ProgramError(f"corrupt program: bad tensor view {str(d)[:80]}")
    return TensorView(d["mem"], d["addr"], shape, strides, d["dtype"])


def _binding(b) -> Binding:
    if not isinstance(b["name"], str):
        raise ProgramError(f"corrupt program: binding name {str(b['name'])[:40]}")
    return Binding(b["name"], _view_from(b["view"]))


def _program(meta, commands, segments) -> Program:
    if not isinstance(meta, dict) or not isinstance(meta["meta"], dict):
        raise ProgramError("corrupt program: metadata is not a JSON object")
    return Program(
        memories=list(meta["memories"]), memory_sizes=list(meta["memory_sizes"]),
        commands=commands, segments=segments,
        inputs=[_binding(b) for b in meta["inputs"]], outputs=[_binding(b) for b in meta["outputs"]],
        layers=[Layer(**d) for d in meta["layers"]], meta=meta["meta"],
        variables=[_binding(b) for b in meta.get("variables", [])])


def decode(data: bytes, source: str = "<bytes>") -> Program:
    """A Program from its encoding; checksums and framing are verified here, the program's
    structure by npu_sim.isa.verify."""
    # Decoding makes tens of thousands of objects and no reference cycles: the cyclic
    # collector's passes over them, each time the allocations reach its threshold, were a
    # fifth of the instructions of decoding MobileNetV2-224 for edge-256, so it waits.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _decode(data, source)
    finally:
        if collecting:
            gc.enable()


def _decode(data: bytes, source: str) -> Program:
    data = memoryview(data)      # sections and constant segments are views, not copies
    if data[:4] != MAGIC:
        raise ProgramError(f"{source}: not an npu-sim program (magic {bytes(data[:4])!r})")
    try:
        sections = _sections(data)
        meta = json.loads(bytes(sections[b"META"]))
        commands = _decode_commands(sections[b"CMDS"])
        r = _Reader(sections[b"SEGS"])
        segments = []
        for _ in range(r.unpack("I")[0]):
            mem, addr, n = r.unpack("BQQ")
            if r.pos + n > len(r.data):
                raise struct.error("unexpected end of data")
            segments.append(Segment(mem, addr, r.data[r.pos:r.pos + n]))
            r.pos += n
        return _program(meta, commands, segments)
    except ProgramError as exc:
        raise ProgramError(f"{source}: {exc}") from None
    except struct.error:
        raise ProgramError(f"{source}: truncated program: unexpected end of data") from None
    except (KeyError, ValueError, IndexError, TypeError, AttributeError, UnicodeDecodeError,
            RecursionError) as exc:
        raise ProgramError(f"{source}: corrupt program ({type(exc).__name__}: {str(exc)[:120]})") from None
