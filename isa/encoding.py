"""Binary encoding of a Program (.npub).

Layout (little-endian):
  header   b"NPUB", u16 major, u16 minor, u32 section count
  sections u32 tag, u64 length, u32 CRC-32 of the payload, payload; tags: META (JSON),
           CMDS (binary commands), SEGS (image), each exactly once
CMDS     tables, each a u32 count and distinct entries: strings (u32 length, UTF-8), layouts
         (u8 rank, shape, strides), views (mem, addr, dtype, layout), attribute blocks (names
         and typed values: a reader needs no Python pickles), compute signatures (unit,
         opcode, input and output names); a u32 count and one fixed-size record a command,
         indexing the tables (_COMMAND); then, each a u32 count and values in command order,
         every command's dependencies and every compute's operand views (inputs, outputs)
"""
from __future__ import annotations

import gc
import io
import json
import os
import struct
import zlib
from operator import itemgetter
from types import MappingProxyType

from .commands import ITEMSIZE, Compute, DmaCopy, DmaFill, TensorView
from .dtypes import BY_CODE, DTYPES
from .errors import ProgramError
from .opcodes import check
from .program import Binding, Layer, Program, Segment

MAGIC = b"NPUB"
VERSION = (4, 0)   # 4.0: tables of views, attribute blocks and compute signatures; 3.0: CRC-32s
_SECTIONS = (b"META", b"CMDS", b"SEGS")
_UNITS = ["mac", "vector", "host"]
_KIND_COPY, _KIND_FILL, _KIND_COMPUTE = 1, 2, 3
_T_INT, _T_BOOL, _T_STR, _T_INTS, _T_FLOAT, _T_NONE = range(6)


class _Writer:
    """Writes the commands as fixed-size records, their dependencies and operands as arrays;
    strings, layouts (a view's shape and strides), views, attribute blocks and compute
    signatures go to tables, each distinct one once (keyed by its bytes, so 1 and True stay
    apart), and are written as indices into them."""

    def __init__(self):
        self.records = io.BytesIO()
        self.deps: list[int] = []
        self.operands: list[int] = []
        self.strings: dict[str, int] = {}
        self.layouts: dict[bytes, int] = {}
        self.views: dict[bytes, int] = {}
        self.blocks: dict[bytes, int] = {}
        self.signatures: dict[bytes, int] = {}

    def command(self, kind, c, channel=0, x=0, y=0, value=0):
        self.records.write(_COMMAND.pack(kind, c.id, c.layer, len(c.deps), channel, x, y, value))
        self.deps += c.deps

    def string(self, s: str) -> int:
        return self.strings.setdefault(s, len(self.strings))

    def view(self, v: TensorView) -> int:
        rank = len(v.shape)
        layout = struct.pack(f"<B{2 * rank}q", rank, *v.shape, *v.strides)
        key = _VIEW.pack(v.mem, v.addr, DTYPES[v.dtype].code,
                         self.layouts.setdefault(layout, len(self.layouts)))
        return self.views.setdefault(key, len(self.views))

    def block(self, attrs: dict) -> int:
        key = struct.pack("<B", len(attrs)) + b"".join(
            struct.pack("<I", self.string(name)) + self.value(x) for name, x in attrs.items())
        return self.blocks.setdefault(key, len(self.blocks))

    def signature(self, c: Compute) -> int:
        names = [[self.string(n) for n in group] for group in (c.inputs, c.outputs)]
        key = struct.pack(f"<BIB{len(names[0])}IB{len(names[1])}I", _UNITS.index(c.unit),
                          self.string(c.op), len(names[0]), *names[0], len(names[1]), *names[1])
        return self.signatures.setdefault(key, len(self.signatures))

    def value(self, x) -> bytes:
        if x is None:
            return struct.pack("<B", _T_NONE)
        if isinstance(x, bool):
            return struct.pack("<BB", _T_BOOL, x)
        if isinstance(x, int):
            return struct.pack("<Bq", _T_INT, x)
        if isinstance(x, float):
            return struct.pack("<Bd", _T_FLOAT, x)
        if isinstance(x, str):
            return struct.pack("<BI", _T_STR, self.string(x))
        if isinstance(x, (tuple, list)):
            return struct.pack(f"<BH{len(x)}q", _T_INTS, len(x), *(int(i) for i in x))
        raise ProgramError(f"cannot encode attribute value {x!r}")

    def payload(self, count: int) -> bytes:
        out = [struct.pack("<I", len(self.strings))]
        for s in self.strings:               # insertion order = index order
            b = s.encode()
            out += [struct.pack("<I", len(b)), b]
        for table in (self.layouts, self.views, self.blocks, self.signatures):
            out += [struct.pack("<I", len(table)), *table]
        out += [struct.pack("<I", count), self.records.getvalue(),
                struct.pack(f"<I{len(self.deps)}q", len(self.deps), *self.deps),
                struct.pack(f"<I{len(self.operands)}I", len(self.operands), *self.operands)]
        return b"".join(out)


_STRUCTS: dict[str, struct.Struct] = {}


def _struct(fmt: str) -> struct.Struct:
    s = _STRUCTS.get(fmt)
    if s is None:
        s = _STRUCTS[fmt] = struct.Struct("<" + fmt)
    return s


# kind, id, layer, dependency count, channel, x, y, value: a copy's x and y are its source and
# destination views, a fill's y its destination and value its value, a compute's x and y its
# signature and attribute block; the fields a kind does not use are 0
_COMMAND = struct.Struct("<BIiHBIIq")
_VIEW = struct.Struct("<BQBI")           # mem, addr, dtype code, layout


class _Reader:
    """Sequential reader of the tables and the sections' framing; struct.error on a short
    buffer is reported as a truncated program."""

    def __init__(self, data):
        self.data, self.pos = data, 0      # constant segments stay views of a memoryview
        self.strings: list[str] = []

    def unpack(self, fmt):
        s = _struct(fmt)
        values = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return values

    def byte(self) -> int:
        return self.unpack("B")[0]

    def take(self, size: int):
        """The next `size` bytes (struct.error if fewer are left)."""
        if self.pos + size > len(self.data):
            raise struct.error("unexpected end of data")
        self.pos += size
        return self.data[self.pos - size:self.pos]

    def array(self, code: str) -> tuple:
        """A u32 count, then that many values of struct type `code` (8 bytes at most)."""
        (n,) = self.unpack("I")
        return struct.unpack(f"<{n}{code}", self.take(n * struct.calcsize("<" + code)))

    def read_strings(self):
        for _ in range(self.unpack("I")[0]):
            (size,) = self.unpack("I")
            self.strings.append(str(self.take(size), "utf-8"))

    def views(self) -> list[TensorView]:
        """The layouts' table (shapes and strides), then the views': fixed-size records, built
        in one comprehension, as a program holds thousands."""
        shapes, strides = [], []
        for _ in range(self.unpack("I")[0]):
            rank = self.byte()
            dims = self.unpack(f"{2 * rank}q")
            shapes.append(dims[:rank])
            strides.append(dims[rank:])
        (n,) = self.unpack("I")
        names = {code: d.name for code, d in BY_CODE.items()}
        # tuple.__new__: the named tuple's own __new__ is a Python call per view
        return [tuple.__new__(TensorView, (mem, addr, shapes[k], strides[k], names[code]))
                for mem, addr, code, k in _VIEW.iter_unpack(self.take(n * _VIEW.size))]

    def value(self):
        tag = self.byte()
        if tag == _T_INT:
            return self.unpack("q")[0]
        if tag == _T_INTS:
            return self.unpack(f"{self.unpack('H')[0]}q")
        if tag == _T_STR:
            return self.strings[self.unpack("I")[0]]
        if tag == _T_BOOL:
            return bool(self.byte())
        if tag == _T_NONE:
            return None
        if tag == _T_FLOAT:
            return self.unpack("d")[0]
        raise ProgramError(f"corrupt program: unknown value tag {tag}")

    def block(self) -> dict:
        return {self.strings[self.unpack("I")[0]]: self.value() for _ in range(self.byte())}

    def signature(self) -> tuple:
        unit, op = _UNITS[self.byte()], self.strings[self.unpack("I")[0]]
        inputs, outputs = (tuple(self.strings[i] for i in self.unpack(f"{self.byte()}I"))
                           for _ in range(2))
        return unit, op, inputs, outputs, len(inputs) + len(outputs)

    def table(self, read) -> list:
        return [read() for _ in range(self.unpack("I")[0])]


def _encode_commands(commands) -> bytes:
    w = _Writer()
    for c in commands:
        try:
            if isinstance(c, DmaCopy):
                w.command(_KIND_COPY, c, c.channel, w.view(c.src), w.view(c.dst))
            elif isinstance(c, DmaFill):
                w.command(_KIND_FILL, c, c.channel, y=w.view(c.dst), value=c.value)
            else:
                check(c)
                w.operands += [w.view(v) for group in (c.inputs, c.outputs) for v in group.values()]
                w.command(_KIND_COMPUTE, c, x=w.signature(c), y=w.block(c.attrs))
        except struct.error as exc:      # e.g. 65,536 dependencies, a channel past 255
            raise ProgramError(f"cannot encode command {c.id}: a field outside the format's "
                               f"range ({exc})") from None
    return w.payload(len(commands))


def _decode_commands(data) -> list:
    """The command list: the tables once, then one pass over the commands' fixed-size records
    (a program has tens of thousands of commands; most of their views, attributes and operand
    names recur), slicing their dependencies and operands off arrays decoded whole."""
    r = _Reader(data if type(data) is bytes else bytes(data))   # quicker than from a view
    r.read_strings()
    views, blocks, signatures = r.views(), r.table(r.block), r.table(r.signature)
    (n,) = r.unpack("I")
    records = r.take(n * _COMMAND.size)
    all_deps, operands = r.array("q"), r.array("I")
    # One int object per command id, shared by the command and every dependency naming it
    # (an int past 256 is an object of its own, 32 bytes: the id and each mention of it in a
    # dependency had been one each).
    ids = list(range(n))
    if len(all_deps) > 1 and min(all_deps) >= 0:
        try:
            all_deps = itemgetter(*all_deps)(ids)
        except IndexError:
            pass                     # one past the last command: verify() names it, as read
    d = o = 0                        # dependencies and operands the commands took so far
    # the computes with the same signature and operands (a layer's tiles alternate between
    # a few buffers) share one read-only view each of their inputs and outputs, as of their
    # attributes: a dict each took about 0.3 KB a compute
    operand_maps: dict[tuple, tuple] = {}
    checked: set[tuple] = set()      # (signature, block) pairs that passed check()
    # Commands get the attributes their dataclass __init__ would set (they have no
    # __post_init__; tests/test_robust_program.py checks both), without its keyword call.
    # The commands sharing an attribute block share one read-only view of it (its values are
    # numbers, strings and tuples of them): a copy each took 0.2-0.6 KB a command.
    blocks = [MappingProxyType(block) for block in blocks]
    new = object.__new__
    commands = []
    for kind, cid, layer, nd, ch, x, y, value in _COMMAND.iter_unpack(records):
        if 0 <= cid < n:
            cid = ids[cid]
        deps = all_deps[d:d + nd]
        d += nd
        if kind == _KIND_COPY:
            command = new(DmaCopy)
            command.id, command.deps, command.layer = cid, deps, layer
            command.channel, command.src, command.dst = ch, views[x], views[y]
        elif kind == _KIND_COMPUTE:
            unit, op, in_names, out_names, count = signatures[x]
            key = x, operands[o:o + count]
            o += count
            maps = operand_maps.get(key)
            if maps is None:
                found = map(views.__getitem__, key[1])     # the inputs take the first ones
                maps = operand_maps[key] = (MappingProxyType(dict(zip(in_names, found))),
                                            MappingProxyType(dict(zip(out_names, found))))
            command = new(Compute)
            command.id, command.deps, command.layer = cid, deps, layer
            command.unit, command.op = unit, op
            command.inputs, command.outputs = maps
            command.attrs = blocks[y]
            if (x, y) not in checked:             # check() reads only these two
                check(command)
                checked.add((x, y))
        elif kind == _KIND_FILL:
            command = new(DmaFill)
            command.id, command.deps, command.layer = cid, deps, layer
            command.channel, command.dst, command.value = ch, views[y], value
        else:
            raise ProgramError(f"corrupt program: unknown command kind {kind}")
        commands.append(command)
    # the arrays' slices and iterator run short quietly: their totals tell
    if d != len(all_deps) or o != len(operands):
        raise ProgramError(f"corrupt program: the commands take {d} dependencies and {o} "
                           f"operands of {len(all_deps)} and {len(operands)}")
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
    segs = [struct.pack("<I", len(program.segments))]
    for s in program.segments:
        segs += [struct.pack("<BQQ", s.mem, s.addr, len(s.data)), s.data]
    sections = [(b"META", json.dumps(meta).encode()), (b"CMDS", _encode_commands(program.commands)),
                (b"SEGS", b"".join(segs))]
    out = io.BytesIO()
    out.write(MAGIC + struct.pack("<HHI", *VERSION, len(sections)))
    for tag, payload in sections:
        out.write(tag + struct.pack("<QI", len(payload), zlib.crc32(payload)))
        out.write(payload)
    return out.getvalue()


class _Framing:
    """The file's framing read in order, from bytes (views of them, no copies) or from a
    binary file (each section a bytes object of its own: the command records then go once
    decoded, where views would keep the whole file alive beside the constants)."""

    def __init__(self, data):
        self.file = data if hasattr(data, "read") else None
        if self.file is None:
            self.data, self.pos = memoryview(data), 0
        else:                        # a length is never read past the file's end
            self.left = os.fstat(data.fileno()).st_size - data.tell()

    def take(self, size: int):
        """The next `size` bytes, or all that are left if fewer."""
        if self.file is not None:
            size = max(0, min(size, self.left))
            self.left -= size
            return self.file.read(size)
        self.pos += size
        return self.data[self.pos - size:self.pos]

    def remaining(self) -> int:
        return self.left if self.file is not None else max(0, len(self.data) - self.pos)


def _sections(framing: _Framing) -> dict:
    major, minor, count = struct.unpack("<HHI", framing.take(8))
    if major != VERSION[0]:
        raise ProgramError(f"program format {major}.{minor}; this npu-sim reads format "
                           f"{VERSION[0]}.{VERSION[1]} (any {VERSION[0]}.x): recompile the model "
                           "with npu-sim compile")
    sections = {}
    for _ in range(min(count, len(_SECTIONS) + 1)):
        head = framing.take(16)
        tag = bytes(head[:4])
        length, crc = struct.unpack_from("<QI", head, 4)
        name = tag.decode("ascii", "replace")
        payload = framing.take(length)
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
    missing = [t.decode() for t in _SECTIONS if t not in sections]
    if missing or count != len(_SECTIONS):
        raise ProgramError(f"corrupt program: {count} sections, expected {len(_SECTIONS)} "
                           f"(META, CMDS, SEGS)")
    if framing.remaining():
        raise ProgramError(f"corrupt program: {framing.remaining()} bytes after the last section")
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


def decode(data, source: str = "<bytes>") -> Program:
    """A Program from its encoding (bytes, or a binary file open at its start); checksums and
    framing are verified here, the program's structure by npu_sim.isa.verify."""
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


def _decode(data, source: str) -> Program:
    framing = _Framing(data)         # constant segments are views of the bytes read, not copies
    magic = bytes(framing.take(4))
    if magic != MAGIC:
        raise ProgramError(f"{source}: not an npu-sim program (it does not begin with "
                           f"{MAGIC.decode()}; write one with npu-sim compile)")
    try:
        sections = _sections(framing)
        meta = json.loads(bytes(sections[b"META"]))
        commands = _decode_commands(sections.pop(b"CMDS"))
        r = _Reader(memoryview(sections[b"SEGS"]))
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
