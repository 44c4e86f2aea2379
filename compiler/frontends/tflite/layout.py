"""Data-layout builtins: the TOSA layout operator each maps to (quantization passes through;
where TFLite would requantize, the input and output quantization must agree)."""
from __future__ import annotations

import numpy as np

from npu_sim.isa.errors import UnsupportedError

from .context import Lowering
from .shapes import strided_plan


def _same_quant(L: Lowering, *ks: int):
    o = L.o()
    for k in ks:
        t = L.t(k)
        if t.dtype == "INT8" and len(t.scales) <= 1 and (
                t.scales[:1] != o.scales[:1] or t.zero_point != o.zero_point):   # per channel: sliced
            L.fail(f"input '{t.name}' and output '{o.name}' have different quantization")


def reshape(L: Lowering):
    _same_quant(L, 0)
    L.dtype(L.o())
    L.b.reshape(L.value(0), L.o().shape, L.out())


squeeze = expand_dims = reshape


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def concatenation(L: Lowering):
    ks = [k for k in range(len(L.op.inputs)) if L.has_input(k)]
    _same_quant(L, *ks)
    o = L.o()
    axis = _axis(L.op.options.get("axis", 0), len(o.shape))
    y = L.b.op("CONCAT", [L.value(k) for k in ks], o.shape, L.dtype(o), {"axis": axis})
    _activation_or_rename(L, y)


def _activation_or_rename(L: Lowering, y: str):
    fused = L.op.options.get("fused_activation_function", 0)
    if fused:
        lo, hi = L.act_range(fused, L.o())
        L.b.clamp(y, lo, hi, L.out())
    else:
        L.b.reshape(y, L.o().shape, L.out())


def pack(L: Lowering):
    ks = list(range(len(L.op.inputs)))
    _same_quant(L, *ks)
    o = L.o()
    axis = _axis(L.op.options.get("axis", 0), len(o.shape))
    parts = []
    for k in ks:
        s = list(L.t(k).shape)
        parts.append(L.b.reshape(L.value(k), s[:axis] + [1] + s[axis:]))
    y = L.b.op("CONCAT", parts, o.shape, L.dtype(o), {"axis": axis})
    L.b.reshape(y, o.shape, L.out())


def _slices(L: Lowering, x: str, axis: int, sizes: list[int], outs: list[int | None]):
    """SLICE x along axis into consecutive pieces; piece j goes to output outs[j] (None: a new
    tensor), reshaped to that output's shape."""
    shape = L.b.shape_of(x)
    start = 0
    for j, size in enumerate(sizes):
        begin = [0] * len(shape)
        begin[axis] = start
        piece_shape = list(shape)
        piece_shape[axis] = size
        piece = L.b.op("SLICE", [x, L.b.shape(begin), L.b.shape(piece_shape)], piece_shape,
                       L.b.dtype_of(x))
        L.b.reshape(piece, L.o(outs[j]).shape, L.out(outs[j]))
        start += size


def unpack(L: Lowering):
    x = L.t(0)
    axis = _axis(L.op.options.get("axis", 0), len(x.shape))
    n = len(L.op.outputs)
    _slices(L, L.value(0), axis, [1] * n, list(range(n)))


def split(L: Lowering):
    x = L.t(1)
    axis = _axis(int(L.const_input(0).reshape(-1)[0]), len(x.shape))
    n = len(L.op.outputs)
    _slices(L, L.value(1), axis, [x.shape[axis] // n] * n, list(range(n)))


def split_v(L: Lowering):
    x = L.t(0)
    axis = _axis(int(L.const_input(2).reshape(-1)[0]), len(x.shape))
    sizes = [int(s) for s in L.const_input(1).reshape(-1)]
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    _slices(L, L.value(0), axis, sizes, list(range(len(L.op.outputs))))


def _pad(L: Lowering, pad_value: int):
    x, o = L.t(0), L.o()
    _same_quant(L, 0)
    paddings = L.const_input(1).reshape(-1, 2)
    L.b.op("PAD", [L.value(0), L.b.shape(paddings.reshape(-1)),
                   L.b.scalar(pad_value, L.dtype(x))], o.shape, L.dtype(o), {}, L.out())


def pad(L: Lowering):
    _pad(L, L.t(0).zero_point if L.t(0).dtype == "INT8" else 0)


def padv2(L: Lowering):
    _pad(L, L.const_input(2).reshape(-1)[0].item())


def mirror_pad(L: Lowering):
    """REFLECT or SYMMETRIC padding: each side is a REVERSE of a SLICE next to the edge,
    CONCATenated axis by axis."""
    _same_quant(L, 0)
    mode = L.op.options.get("mode", 0)                 # 0 REFLECT, 1 SYMMETRIC
    paddings = L.const_input(1).reshape(-1, 2)
    b, y = L.b, L.value(0)
    for axis, (before, after) in enumerate(paddings):
        shape = b.shape_of(y)
        parts = []
        for count, at_start in ((int(before), True), (int(after), False)):
            if not count:
                parts.append(None)
                continue
            offset = (1 - mode) if at_start else shape[axis] - count - (1 - mode)
            begin = [0] * len(shape)
            begin[axis] = offset
            size = list(shape)
            size[axis] = count
            piece = b.op("SLICE", [y, b.shape(begin), b.shape(size)], size, b.dtype_of(y))
            parts.append(b.op("REVERSE", [piece], size, b.dtype_of(y), {"axis": axis}))
        pieces = [p for p in (parts[0], y, parts[1]) if p is not None]
        if len(pieces) > 1:
            out_shape = list(shape)
            out_shape[axis] += int(before) + int(after)
            y = b.op("CONCAT", pieces, out_shape, b.dtype_of(y), {"axis": axis})
    b.reshape(y, L.o().shape, L.out())


def transpose(L: Lowering):
    _same_quant(L, 0)
    perm = tuple(int(p) for p in L.const_input(1).reshape(-1))
    L.b.op("TRANSPOSE", [L.value(0)], L.o().shape, L.dtype(L.o()), {"perms": perm}, L.out())


def tile(L: Lowering):
    _same_quant(L, 0)
    mult = tuple(int(m) for m in L.const_input(1).reshape(-1))
    L.b.op("TILE", [L.value(0), L.b.shape(mult)], L.o().shape, L.dtype(L.o()), {}, L.out())


def slice_(L: Lowering):
    _same_quant(L, 0)
    x = L.t(0)
    begin = [int(v) for v in L.const_input(1).reshape(-1)]
    size = [x.shape[i] - begin[i] if int(s) == -1 else int(s)
            for i, s in enumerate(L.const_input(2).reshape(-1))]
    L.b.op("SLICE", [L.value(0), L.b.shape(begin), L.b.shape(size)], L.o().shape,
           L.dtype(L.o()), {}, L.out())


def strided_slice(L: Lowering):
    """Constant begin/end/strides with the masks resolved as TFLite does (strided_plan); a
    stride other than 1 is a SLICE, a RESHAPE splitting the axis into (count, stride) and a
    SLICE of the first."""
    _same_quant(L, 0)
    x = L.t(0)
    try:
        plan = strided_plan(x.shape, *(L.const_input(k).reshape(-1).astype(int)
                                       for k in (1, 2, 3)), L.op.options)
    except UnsupportedError as exc:
        L.fail(str(exc))
    b, y = L.b, L.value(0)
    for axis, (lo, count, s, _) in enumerate(plan):
        n = x.shape[axis]
        if s < 0:               # the axis reversed: element lo + k*s is (n-1-lo) + k*|s| of it
            y = b.op("REVERSE", [y], b.shape_of(y), b.dtype_of(y), {"axis": axis})
            lo, s = n - 1 - lo, -s
        if (lo, count, s) == (0, n, 1):
            continue
        cur = b.shape_of(y)
        span = min(count * s, cur[axis] - lo)
        begin_v = [0] * len(cur)
        begin_v[axis] = lo
        size = list(cur)
        size[axis] = span
        y = b.op("SLICE", [y, b.shape(begin_v), b.shape(size)], size, b.dtype_of(y))
        if s > 1:
            if span < count * s:       # pad the last group to a whole stride
                pads = [0] * (2 * len(cur))
                pads[2 * axis + 1] = count * s - span
                size = list(size)
                size[axis] = count * s
                y = b.op("PAD", [y, b.shape(pads), b.scalar(0, b.dtype_of(y))], size, b.dtype_of(y))
            split_shape = size[:axis] + [count, s] + size[axis + 1:]
            y = b.reshape(y, split_shape)
            first = list(split_shape)
            first[axis + 1] = 1
            y = b.op("SLICE", [y, b.shape([0] * len(split_shape)), b.shape(first)], first,
                     b.dtype_of(y))
            size[axis] = count
            y = b.reshape(y, size)
    b.reshape(y, L.o().shape, L.out())


def space_to_batch_nd(L: Lowering):
    """PAD (with the output's zero point, as the kernel fills), RESHAPE each spatial dim into
    (dim / block, block), TRANSPOSE the blocks ahead of the batch, RESHAPE: output batch
    (shift_h * block_w + shift_w) * batch + n, as SpaceToBatchND orders it."""
    _same_quant(L, 0)
    x, o, b = L.t(0), L.o(), L.b
    block = [int(v) for v in L.const_input(1).reshape(-1)]
    pads = L.const_input(2).reshape(-1, 2)
    m, rest = len(block), list(x.shape[1 + len(block):])
    fill = o.zero_point if o.dtype == "INT8" else 0
    padded = [n + int(p[0]) + int(p[1]) for n, p in zip(x.shape[1:1 + m], pads)]
    y = b.op("PAD", [L.value(0), b.shape([0, 0] + [int(v) for v in pads.reshape(-1)]
                                          + [0, 0] * len(rest)), b.scalar(fill, L.dtype(x))],
             [x.shape[0]] + padded + rest, L.dtype(x))
    split = [x.shape[0]]                              # [N, H / bh, bh, W / bw, bw, rest...]
    for n, k in zip(padded, block):
        split += [n // k, k]
    split += rest
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + \
        list(range(1 + 2 * m, len(split)))
    y = b.op("TRANSPOSE", [b.reshape(y, split)], [split[p] for p in perm], L.dtype(x),
             {"perms": tuple(perm)})
    b.reshape(y, o.shape, L.out())


def batch_to_space_nd(L: Lowering):
    """The inverse: RESHAPE the batch into (blocks..., batch), TRANSPOSE each block next to its
    spatial dim, RESHAPE, and SLICE the crops away."""
    _same_quant(L, 0)
    x, o, b = L.t(0), L.o(), L.b
    block = [int(v) for v in L.const_input(1).reshape(-1)]
    crops = L.const_input(2).reshape(-1, 2)
    m, rest = len(block), list(x.shape[1 + len(block):])
    batch = x.shape[0] // int(np.prod(block))
    y = b.reshape(L.value(0), block + [batch] + list(x.shape[1:]))
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    full = block + [batch] + list(x.shape[1:])
    y = b.op("TRANSPOSE", [y], [full[p] for p in perm], L.dtype(x), {"perms": tuple(perm)})
    uncropped = [batch] + [n * k for n, k in zip(x.shape[1:1 + m], block)] + rest
    y = b.reshape(y, uncropped)
    begin = [0] + [int(c[0]) for c in crops] + [0] * len(rest)
    y = b.op("SLICE", [y, b.shape(begin), b.shape(o.shape)], o.shape, L.dtype(x))
    b.reshape(y, o.shape, L.out())


def gather(L: Lowering):
    """GATHER along `axis` with constant or int32 indices, as TOSA GATHER on [N, K, C]."""
    _same_quant(L, 0)
    x, idx, o = L.t(0), L.t(1), L.o()
    axis = _axis(L.op.options.get("axis", 0), len(x.shape))
    if L.op.options.get("batch_dims", 0):
        L.fail("batch_dims is not supported")
    if idx.dtype != "INT32":
        L.fail(f"indices are {idx.dtype}; int32 expected")
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    w = int(np.prod(idx.shape, dtype=np.int64))
    b = L.b
    values = b.reshape(L.value(0), (outer, x.shape[axis], inner))
    ind = b.reshape(L.value(1), (1, w))
    if outer > 1:
        ind = b.op("TILE", [ind, b.shape((outer, 1))], (outer, w), "int32")
    y = b.op("GATHER", [values, ind], (outer, w, inner), L.dtype(o))
    b.reshape(y, o.shape, L.out())


def depth_to_space(L: Lowering):
    _same_quant(L, 0)
    n, h, w, c = L.t(0).shape
    s = L.op.options.get("block_size", 2)
    b = L.b
    y = b.reshape(L.value(0), (n, h, w, s, s, c // (s * s)))
    y = b.op("TRANSPOSE", [y], (n, h, s, w, s, c // (s * s)), b.dtype_of(y),
             {"perms": (0, 1, 3, 2, 4, 5)})
    b.reshape(y, L.o().shape, L.out())


def space_to_depth(L: Lowering):
    _same_quant(L, 0)
    n, h, w, c = L.t(0).shape
    s = L.op.options.get("block_size", 2)
    b = L.b
    y = b.reshape(L.value(0), (n, h // s, s, w // s, s, c))
    y = b.op("TRANSPOSE", [y], (n, h // s, w // s, s, s, c), b.dtype_of(y),
             {"perms": (0, 1, 3, 2, 4, 5)})
    b.reshape(y, L.o().shape, L.out())
