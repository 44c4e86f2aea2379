"""Structural validation of a program read from a file, before anything of it runs.

The checksums of the encoding catch damage; this catches a program that is well formed but
wrong (hand-edited, from another tool, or from a compiler bug): every view inside its memory,
each opcode's required attributes present and typed, operand shapes and dtypes that agree the
way the kernels need them (each opcode's check is registered beside its kernel, SHAPE_CHECKS
in npu_sim/ops), dependencies on earlier commands only (so they are in range and
acyclic). The first failure is a ProgramError naming the command.
"""
from __future__ import annotations

import bisect


from npu_sim.isa.commands import Compute, DmaCopy, DmaFill, TensorView
from npu_sim.isa.dtypes import ITEMSIZE
from npu_sim.isa.errors import ProgramError
from npu_sim.isa.opcodes import check
from npu_sim.isa.program import Program

from .ops import SHAPE_CHECKS

MAX_RANK = 8
MAX_INT = 1 << 31          # bound of every integer attribute: zero points, pads, sizes, origins
ARRAY_KINDS = ("gemm", "depthwise")     # isa/opcodes.py mac_problem
INTS, INT, BOOL, STR = "ints", "int", "bool", "str"
_ATTR_TYPES = {
    "pad": INTS, "stride": INTS, "dilation": INTS, "kernel": INTS, "clamp": INTS,
    "in_origin": INTS, "out_origin": INTS, "out_size": INTS, "in_size": INTS, "scale": INTS,
    "offset": INTS, "border": INTS, "strides": INTS,
    "input_zp": INT, "weight_zp": INT, "a_zp": INT, "b_zp": INT, "output_zp": INT,
    "out_pad_top": INT, "out_pad_left": INT, "axis": INT, "base": INT,
    "scale32": BOOL, "per_channel": BOOL,
    "acc_dtype": STR, "rounding_mode": STR, "fn": STR, "mode": STR, "program": STR, "tosa_op": STR,
    "nan_mode": STR,
}
_CHOICES = {"acc_dtype": ("int32", "int48", "fp16", "fp32"),
            "rounding_mode": ("SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND"),
            "fn": ("REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ALL", "REDUCE_ANY", "REDUCE_PRODUCT"),
            "mode": ("NEAREST", "BILINEAR"), "nan_mode": ("PROPAGATE", "IGNORE")}
_CONV = ("pad", "stride", "dilation", "input_zp", "weight_zp", "acc_dtype")
# What the kernels index without a default (npu_sim/execute.py), with tuple lengths.
_REQUIRED = {
    "conv2d": _CONV, "depthwise_conv2d": _CONV, "conv3d": _CONV,
    "transpose_conv2d": ("stride", "out_pad_top", "out_pad_left", "in_origin", "out_origin", "out_size",
                         "input_zp", "weight_zp", "acc_dtype"),
    "matmul": ("a_zp", "b_zp", "acc_dtype"),
    "elementwise": ("program",),
    "avg_pool2d": ("kernel", "stride", "pad", "input_zp", "output_zp"),
    "max_pool2d": ("kernel", "stride", "pad"),
    "reduce": ("fn", "axis"), "argmax": ("axis",),
    "resize": ("mode", "scale", "offset", "border", "in_origin", "out_origin", "out_size", "in_size"),
    "permute": ("base", "strides"),
    "host": ("tosa_op",),
}
_LENGTHS = {"clamp": 2, "in_origin": 2, "out_origin": 2, "out_size": 2, "in_size": 2, "scale": 4,
            "offset": 2, "border": 2, "kernel": 2}
_SPATIAL = {"conv2d": 2, "depthwise_conv2d": 2, "conv3d": 3, "avg_pool2d": 2, "max_pool2d": 2}


def verify(program: Program, dma_channels: int, source: str = "<program>") -> None:
    try:
        _verify(program, dma_channels)
    except ProgramError as exc:
        raise ProgramError(f"{source}: {exc}") from None


def _verify(p: Program, dma_channels: int) -> None:
    if not all(isinstance(m, str) for m in p.memories):
        raise ProgramError("memory names must be strings")
    sizes = p.memory_sizes
    if len(sizes) != len(p.memories) + 1 or not all(type(s) is int and 0 <= s <= 1 << 42 for s in sizes):
        raise ProgramError(f"memory_sizes {str(sizes)[:80]}: expected {len(p.memories) + 1} sizes in bytes")
    for i, layer in enumerate(p.layers):
        if not (isinstance(layer.name, str) and isinstance(layer.ops, list) and isinstance(layer.unit, str)
                and type(layer.macs) is int and type(layer.tiles) is int and isinstance(layer.min_bytes, dict)
                and all(type(v) is int for v in layer.min_bytes.values())
                and isinstance(layer.array_problems, list)):
            raise ProgramError(f"layer {i}: fields of the wrong type")
        _layer_figures(layer, p.memories, f"layer {i}")
    for kind, bindings in (("input", p.inputs), ("output", p.outputs), ("variable", p.variables)):
        for b in bindings:
            _view(b.view, sizes, f"{kind} '{b.name}'")
    for seg in p.segments:
        if not (type(seg.mem) is int and 0 <= seg.mem < len(sizes) and seg.addr + len(seg.data) <= max(sizes[seg.mem], 16)):
            raise ProgramError(f"constant segment at memory {seg.mem}:0x{seg.addr:x} ({len(seg.data)} B) "
                               "falls outside its memory")
    written = _constant_guard(p.segments)
    n_layers = len(p.layers)
    for index, cmd in enumerate(p.commands):
        where = f"command {index}"
        if cmd.id != index:
            raise ProgramError(f"{where}: has id {cmd.id}; commands are numbered in order")
        if any(not 0 <= d < index for d in cmd.deps):
            raise ProgramError(f"{where}: depends on {list(cmd.deps)[:8]}; a command may wait only "
                               "for earlier commands (in range, no cycles)")
        if not -1 <= cmd.layer < n_layers:
            raise ProgramError(f"{where}: layer {cmd.layer} of {n_layers}")
        if isinstance(cmd, (DmaCopy, DmaFill)):
            if not 0 <= cmd.channel < dma_channels:
                raise ProgramError(f"{where}: DMA channel {cmd.channel}, the config has {dma_channels}")
            dst = written(_view(cmd.dst, sizes, f"{where} dst"), f"{where} dst")
            if isinstance(cmd, DmaCopy):
                src = _view(cmd.src, sizes, f"{where} src")
                if src.shape != dst.shape or src.dtype != dst.dtype:
                    raise ProgramError(f"{where}: copies {src.dtype}{list(src.shape)} to "
                                       f"{dst.dtype}{list(dst.shape)}")
        elif isinstance(cmd, Compute):
            _compute(cmd, sizes, where)
            for name, v in cmd.outputs.items():
                written(v, f"{where} {name}")
        else:
            raise ProgramError(f"{where}: not a command")


def _layer_figures(layer, memories: list[str], where: str) -> None:
    """A layer's figures within the ranges the report's bounds compute with: its ops named,
    MACs and bytes under 2^62, each array problem (kind, m, n, k, dtypes...) of the array's
    kinds, positive sizes and known dtypes."""
    if not all(isinstance(op, str) for op in layer.ops):
        raise ProgramError(f"{where}: ops {str(layer.ops)[:60]} are not names")
    if not 0 <= layer.macs < 1 << 62 or not 0 <= layer.tiles < MAX_INT:
        raise ProgramError(f"{where}: macs {layer.macs} or tiles {layer.tiles} out of range")
    for mem, nbytes in layer.min_bytes.items():
        if mem not in memories or not 0 <= nbytes < 1 << 62:
            raise ProgramError(f"{where}: min_bytes {str(mem)[:40]}={nbytes}: not a memory of "
                               "the program, or out of range")
    for problem in layer.array_problems:
        ok = isinstance(problem, list) and 4 <= len(problem) <= 7 and \
            problem[0] in ARRAY_KINDS and \
            all(type(d) is int and 1 <= d < MAX_INT for d in problem[1:4]) and \
            all(isinstance(t, str) and t in ITEMSIZE for t in problem[4:])
        if not ok:
            raise ProgramError(f"{where}: array problem {str(problem)[:60]}: expected [kind, m, "
                               "n, k, dtypes...] with kind gemm or depthwise and positive sizes")


def _constant_guard(segments):
    """written(view, where): the view, or a ProgramError when it would write a constant
    segment (the program image is read-only, as the machine maps it)."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for seg in segments:
        if seg.data:
            spans.setdefault(seg.mem, []).append((seg.addr, seg.addr + len(seg.data)))
    index = {}
    for mem, pairs in spans.items():
        pairs.sort()
        reach, ends = 0, []          # the furthest end of the segments up to each start
        for _, end in pairs:
            reach = max(reach, end)
            ends.append(reach)
        index[mem] = ([start for start, _ in pairs], ends)

    def written(v: TensorView, where: str) -> TensorView:
        if v.mem in index and v.count:
            starts, ends = index[v.mem]
            lo, hi = v.footprint()
            i = bisect.bisect_left(starts, hi) - 1
            if i >= 0 and ends[i] > lo:
                raise ProgramError(f"{where}: writes {v.dtype}{list(v.shape)} at 0x{v.addr:x} over "
                                   "a constant segment, which is read-only")
        return v
    return written


def _view(v: TensorView, sizes: list[int], where: str) -> TensorView:
    if not 0 <= v.mem < len(sizes):
        raise ProgramError(f"{where}: memory {v.mem} does not exist")
    # more elements than the largest memory has bytes: only strides of 0 repeat that much
    if len(v.shape) > MAX_RANK or any(d < 0 for d in v.shape) or v.count > max(*sizes, 16):
        raise ProgramError(f"{where}: shape {list(v.shape)[:10]}: more elements than a memory "
                           "of the program has bytes" if v.count > 16 else f"{where}: shape "
                           f"{list(v.shape)[:10]}")
    lo, hi = v.footprint()
    if v.count and (lo < 0 or hi > max(sizes[v.mem], 16)):
        raise ProgramError(f"{where}: view {v.dtype}{list(v.shape)} at 0x{v.addr:x} spans bytes "
                           f"[{lo}, {hi}) of a {sizes[v.mem]} B memory")
    return v


def _attr(cmd: Compute, name: str, where: str):
    value = cmd.attrs[name]
    kind = _ATTR_TYPES.get(name)
    ok = {INTS: lambda x: isinstance(x, tuple) and all(type(i) is int and -MAX_INT < i < MAX_INT for i in x),
          INT: lambda x: type(x) is int and -MAX_INT < x < MAX_INT,
          BOOL: lambda x: type(x) is bool, STR: lambda x: isinstance(x, str),
          None: lambda x: True}[kind](value)
    if ok and name in _CHOICES:
        ok = value in _CHOICES[name]
    length = _LENGTHS.get(name) or (2 * _SPATIAL[cmd.op] if name == "pad" and cmd.op in _SPATIAL else
                                    _SPATIAL.get(cmd.op, 2) if name in ("stride", "dilation") else None)
    if ok and length is not None and kind == INTS:
        ok = len(value) == length
    if ok and name in ("stride", "dilation", "kernel"):
        ok = all(i >= 1 for i in value)
    if not ok:
        raise ProgramError(f"{where} {cmd.op}: attribute {name}={str(value)[:40]} is not a valid "
                           f"{kind or 'value'}{f' of length {length}' if length else ''}")
    return value


def _compute(cmd: Compute, sizes: list[int], where: str) -> None:
    check(cmd)
    for name in _REQUIRED.get(cmd.op, ()):
        if name not in cmd.attrs:
            raise ProgramError(f"{where} {cmd.op}: attribute {name} missing")
    # a host command carries its TOSA operator's own attributes, not the tile opcodes' ones
    a = {name: _attr(cmd, name, where) for name in cmd.attrs} if cmd.op != "host" else cmd.attrs
    x = {k: _view(v, sizes, f"{where} {k}") for k, v in cmd.inputs.items()}
    (out_name, out), *_ = [(k, _view(v, sizes, f"{where} {k}")) for k, v in cmd.outputs.items()] or [(None, None)]

    def need(ok: bool, what: str):
        if not ok:
            got = ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in {**x, out_name: out}.items() if v)
            raise ProgramError(f"{where} {cmd.op}: {what} ({got})")

    SHAPE_CHECKS[cmd.op](x, a, out, need)
