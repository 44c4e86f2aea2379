"""NNAPI data-layout, reduction and resize operations as TFLite builtin records (see ops.py)."""
from __future__ import annotations

import numpy as np

from .model import OperandLifeTime
from .model import OperandType as T
from .ops import ANY, FLOAT_TENSORS, Q8, Q8_INT, Q8F, io_tensors, layout, nhwc, requantized
from .translate import Translator


def _axis(t: Translator, axis: int, rank: int) -> int:
    t.need(-rank <= axis < rank, f"axis {axis} is outside rank {rank}")
    return axis % rank


def concatenation(t: Translator):
    t.need(t.n_inputs() >= 2, "takes at least one tensor and the axis")
    n = t.n_inputs() - 1
    first = t.operand(0)
    rank = len(first.dimensions)
    axis = _axis(t, t.scalar(n, T.INT32), rank)
    dims = list(first.dimensions)
    for k in range(1, n):
        d = t.operand(k).dimensions
        t.need(len(d) == rank and all(d[i] == dims[i] for i in range(rank) if i != axis),
               f"input {k} dimensions {list(d)} do not match input 0's off axis {axis}")
        dims[axis] += d[axis]
    t.out_shape(dims)
    kind = t.types(ANY, *range(n), "o0")
    ins = [requantized(t, k, t.op.outputs[0]) if kind in Q8 else k for k in t.op.inputs[:n]]
    t.emit("CONCATENATION", ins, t.op.outputs, axis=axis)


def reshape(t: Translator):
    t.counts((2,))
    x = t.operand(0)
    shape = [int(v) for v in t.tensor_const(1).reshape(-1)]
    t.need(shape.count(-1) <= 1, "at most one -1 in the new shape")
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    if -1 in shape:
        t.need(known > 0 and x.count % known == 0, f"shape {shape} does not fit {x.count} elements")
        shape[shape.index(-1)] = x.count // known
    t.need(int(np.prod(shape, dtype=np.int64)) == x.count, f"shape {shape} does not hold "
           f"{x.count} elements")
    t.out_shape(shape)
    _same_types(t)
    t.emit("RESHAPE", [t.op.inputs[0]], t.op.outputs)


def _same_types(t: Translator):
    t.types(ANY, 0, "o0")
    x, o = t.operand(0), t.output()
    if x.type in Q8:
        t.need(x.scale == o.scale and x.zero_point == o.zero_point, "input and output must have "
               "the same scale and zeroPoint")


def squeeze(t: Translator):
    t.counts((1, 2))
    x = t.operand(0)
    rank = len(x.dimensions)
    if t.is_omitted(1):
        axes = [i for i, d in enumerate(x.dimensions) if d == 1]
    else:
        axes = [_axis(t, int(a), rank) for a in t.tensor_const(1).reshape(-1)]
        t.need(all(x.dimensions[a] == 1 for a in axes), "squeezed dimensions must be 1")
    t.out_shape([d for i, d in enumerate(x.dimensions) if i not in axes])
    _same_types(t)
    t.emit("RESHAPE", [t.op.inputs[0]], t.op.outputs)


def expand_dims(t: Translator):
    t.counts((2,))
    dims = list(t.operand(0).dimensions)
    axis = _axis(t, t.scalar(1, T.INT32), len(dims) + 1)
    t.out_shape(dims[:axis] + [1] + dims[axis:])
    _same_types(t)
    t.emit("RESHAPE", [t.op.inputs[0]], t.op.outputs)


def _pad_common(t: Translator):
    x = t.operand(0)
    pads = t.tensor_const(1)
    rank = len(x.dimensions)
    t.need(pads.shape == (rank, 2), f"paddings must be [{rank}, 2], got {list(pads.shape)}")
    t.need(bool((pads >= 0).all()), "paddings must be non-negative")
    t.out_shape([d + int(a) + int(b) for d, (a, b) in zip(x.dimensions, pads)])
    _same_types(t)


def pad(t: Translator):
    t.counts((2,))
    _pad_common(t)
    t.emit("PAD", t.op.inputs[:2], t.op.outputs)


def pad_v2(t: Translator):
    t.counts((3,))
    _pad_common(t)
    x = t.operand(0)
    if x.type in Q8 or x.type == T.TENSOR_INT32:
        value = t.scalar(2, T.INT32)
    else:
        value = float(t.scalar(2, T.FLOAT32, T.FLOAT16))
    if x.type == T.TENSOR_QUANT8_ASYMM:
        t.need(0 <= value <= 255, f"pad value {value} outside uint8")
        value -= 128
    elif x.type == T.TENSOR_QUANT8_ASYMM_SIGNED:
        t.need(-128 <= value <= 127, f"pad value {value} outside int8")
    t.emit("PADV2", [t.op.inputs[0], t.op.inputs[1], t.const([value], t.tensors[t.op.inputs[0]].dtype)],
           t.op.outputs)


def transpose(t: Translator):
    t.counts((1, 2))
    x = t.operand(0)
    rank = len(x.dimensions)
    perm = list(range(rank))[::-1] if t.is_omitted(1) or t.operand(1).count == 0 else \
        [int(p) for p in t.tensor_const(1).reshape(-1)]
    t.need(sorted(perm) == list(range(rank)), f"perm {perm} is not a permutation of {rank} axes")
    t.out_shape([x.dimensions[p] for p in perm])
    _same_types(t)
    t.emit("TRANSPOSE", [t.op.inputs[0], t.const(perm)], t.op.outputs)


def slice_(t: Translator):
    t.counts((3,))
    x = t.operand(0)
    begin = [int(v) for v in t.tensor_const(1).reshape(-1)]
    size = [int(v) for v in t.tensor_const(2).reshape(-1)]
    rank = len(x.dimensions)
    t.need(len(begin) == rank == len(size), "begin and size need one entry per dimension")
    size = [x.dimensions[i] - begin[i] if s == -1 else s for i, s in enumerate(size)]
    t.need(all(0 <= b and 0 <= s and b + s <= d for b, s, d in zip(begin, size, x.dimensions)),
           f"slice begin {begin} size {size} is outside {list(x.dimensions)}")
    t.out_shape(size)
    _same_types(t)
    t.emit("SLICE", [t.op.inputs[0], t.const(begin), t.const(size)], t.op.outputs)


def strided_slice(t: Translator):
    t.counts((7,))
    x = t.operand(0)
    rank = len(x.dimensions)
    begin, end, strides = (t.tensor_const(k).reshape(-1).astype(int) for k in (1, 2, 3))
    t.need(len(begin) == len(end) == len(strides) == rank, "begin, end and strides need one "
           "entry per dimension")
    bm, em, sm = (t.scalar(k, T.INT32) for k in (4, 5, 6))
    dims = []
    for a in range(rank):
        n, s = x.dimensions[a], int(strides[a])
        t.need(s != 0, "strides must be non-zero")
        if sm >> a & 1:
            t.need(s > 0, f"axis {a} is shrunk, so its stride must be positive")
        lo = (0 if s > 0 else n - 1) if bm >> a & 1 else int(begin[a])
        hi = (n if s > 0 else -1) if em >> a & 1 else int(end[a])
        lo = lo + n if lo < 0 else lo
        if not em >> a & 1:
            hi = hi + n if hi < 0 else hi
        lo, hi = (min(max(lo, 0), n), min(max(hi, 0), n)) if s > 0 else \
            (min(max(lo, -1), n - 1), min(max(hi, -1), n - 1))
        count = max(0, -(-(hi - lo) // s))
        if sm >> a & 1:
            t.need(count == 1, f"shrunk axis {a} must select exactly one element, not {count}")
            continue
        dims.append(count)
    t.out_shape(dims)
    _same_types(t)
    t.emit("STRIDED_SLICE", list(t.op.inputs[:4]), t.op.outputs, begin_mask=bm, end_mask=em,
           shrink_axis_mask=sm)


def gather(t: Translator):
    t.counts((3,))
    x, idx = t.operand(0), t.operand(2)
    rank = len(x.dimensions)
    axis = _axis(t, t.scalar(1, T.INT32), rank)
    t.need(idx.type == T.TENSOR_INT32, "indices must be TENSOR_INT32")
    t.out_shape(x.dimensions[:axis] + idx.dimensions + x.dimensions[axis + 1:])
    _same_types(t)
    if idx.is_constant:
        t.need(bool(((idx.data >= 0) & (idx.data < x.dimensions[axis])).all()),
               f"indices must be in [0, {x.dimensions[axis]})")
    elif idx.lifetime != OperandLifeTime.SUBGRAPH_INPUT:
        t.unsupported("indices computed inside the model (an index out of range would not be "
                      "refused); indices given as a model input are checked in the request")
    t.emit("GATHER", [t.op.inputs[0], t.op.inputs[2]], t.op.outputs, axis=axis)


def _block(builtin: str, inverse: bool):
    def lower(t: Translator):
        t.counts((2, 3))
        t.rank(0, (4,))
        s = t.scalar(1, T.INT32)
        nchw = layout(t, 2)
        n, h, w, c = nhwc(t.operand(0).dimensions, nchw)
        t.need(s >= 1, "block size must be at least 1")
        if inverse:
            t.need(c % (s * s) == 0, f"depth {c} is not a multiple of block size squared")
            out = (n, h * s, w * s, c // (s * s))
        else:
            t.need(h % s == 0 and w % s == 0, f"height and width must be multiples of {s}")
            out = (n, h // s, w // s, c * s * s)
        t.out_shape((out[0], out[3], out[1], out[2]) if nchw else out)
        _same_types(t)
        x, y, done = io_tensors(t, nchw)
        t.emit(builtin, [x], [y], block_size=s)
        done()
    return lower


def _reduce(builtin: str, types=Q8F, need_same=True):
    def lower(t: Translator):
        t.counts((3,))
        x = t.operand(0)
        rank = len(x.dimensions)
        axes = sorted({_axis(t, int(a), rank) for a in t.tensor_const(1).reshape(-1)})
        keep = t.scalar(2, T.INT32, T.BOOL)
        dims = [1 if i in axes else d for i, d in enumerate(x.dimensions)] if keep else \
            [d for i, d in enumerate(x.dimensions) if i not in axes]
        t.out_shape(dims)
        t.types(types, 0, "o0")
        if need_same:
            _same_types(t)
        t.emit(builtin, [t.op.inputs[0], t.const(axes)], t.op.outputs, keep_dims=bool(keep))
    return lower


def _arg(builtin: str):
    def lower(t: Translator):
        t.counts((2,))
        x = t.operand(0)
        axis = _axis(t, t.scalar(1, T.INT32), len(x.dimensions))
        t.out_shape([d for i, d in enumerate(x.dimensions) if i != axis])
        t.need(t.output().type == T.TENSOR_INT32, "the output must be TENSOR_INT32")
        t.types(Q8F, 0)
        t.emit(builtin, [t.op.inputs[0], t.const([axis])], t.op.outputs)
    return lower


def _resize(builtin: str):
    def lower(t: Translator):
        t.counts((3, 4, 5, 6))
        t.rank(0, (4,))
        nchw = layout(t, 3)
        align = False if t.is_omitted(4) else bool(t.scalar(4, T.BOOL))
        half = False if t.is_omitted(5) else bool(t.scalar(5, T.BOOL))
        t.need(not (align and half), "align_corners and half_pixel_centers are exclusive")
        n, h, w, c = nhwc(t.operand(0).dimensions, nchw)
        kind = t.operand(1).type
        if kind == T.INT32:
            ow, oh = t.scalar(1, T.INT32), t.scalar(2, T.INT32)
        else:
            sw, sh = t.scalar(1, T.FLOAT32, T.FLOAT16), t.scalar(2, T.FLOAT32, T.FLOAT16)
            ow, oh = int(np.floor(np.float32(w) * np.float32(sw))), int(np.floor(np.float32(h) * np.float32(sh)))
        t.need(oh > 0 and ow > 0, "the output size must be positive")
        t.out_shape((n, c, oh, ow) if nchw else (n, oh, ow, c))
        _same_types(t) if builtin == "RESIZE_BILINEAR" else t.types(Q8_INT | FLOAT_TENSORS, 0, "o0")
        x, y, done = io_tensors(t, nchw)
        t.emit(builtin, [x], [y], align_corners=align, half_pixel_centers=half)
        done()
    return lower


def relu(builtin: str):
    def lower(t: Translator):
        t.counts((1,))
        t.out_shape(t.operand(0).dimensions)
        t.types(Q8F, 0, "o0")
        t.emit(builtin, t.op.inputs[:1], t.op.outputs)
    return lower


def prelu(t: Translator):
    t.counts((2,))
    x, a = t.operand(0), t.operand(1)
    try:
        shape = np.broadcast_shapes(tuple(x.dimensions), tuple(a.dimensions))
    except ValueError:
        t.invalid("alpha does not broadcast against the input")
    t.out_shape(shape)
    t.types(Q8F, 0, 1, "o0")
    t.need(tuple(shape) == tuple(x.dimensions), "alpha must broadcast to the input's shape")
    t.emit("PRELU", t.op.inputs[:2], t.op.outputs)


def split(t: Translator):
    t.counts((3,), tuple(range(1, 65)))
    x = t.operand(0)
    axis = _axis(t, t.scalar(1, T.INT32), len(x.dimensions))
    n = t.scalar(2, T.INT32)
    t.need(n == len(t.op.outputs) and n > 0 and x.dimensions[axis] % n == 0,
           f"{n} splits of dimension {x.dimensions[axis]} into {len(t.op.outputs)} outputs")
    dims = list(x.dimensions)
    dims[axis] //= n
    for k in range(n):
        t.out_shape(dims, k)
    t.types(ANY, 0, *(f"o{k}" for k in range(n)))
    t.emit("SPLIT", [t.const([axis]), t.op.inputs[0]], t.op.outputs, num_splits=n)


def channel_shuffle(t: Translator):
    """RESHAPE to [..., groups, C/groups], TRANSPOSE the two, RESHAPE back."""
    t.counts((3,))
    x = t.operand(0)
    rank = len(x.dimensions)
    g = t.scalar(1, T.INT32)
    axis = _axis(t, t.scalar(2, T.INT32), rank)
    c = x.dimensions[axis]
    t.need(g > 0 and c % g == 0, f"{g} groups do not divide dimension {c}")
    t.out_shape(x.dimensions)
    _same_types(t)
    dims = list(x.dimensions)
    split = dims[:axis] + [g, c // g] + dims[axis + 1:]
    perm = list(range(rank + 1))
    perm[axis], perm[axis + 1] = perm[axis + 1], perm[axis]
    src = t.op.inputs[0]
    a = t.synth(split, t.tensors[src].dtype, like=src)
    t.emit("RESHAPE", [src], [a])
    b = t.synth([split[p] for p in perm], t.tensors[src].dtype, like=src)
    t.emit("TRANSPOSE", [a, t.const(perm)], [b])
    t.emit("RESHAPE", [b], t.op.outputs)


def _chain(t: Translator, x: int, steps, out: int):
    """Records RESHAPE/TRANSPOSE/PAD in turn from x: steps are (kind, shape, arg); the last
    writes `out`."""
    cur = x
    for j, (kind, shape, arg) in enumerate(steps):
        nxt = out if j == len(steps) - 1 else t.synth(shape, t.tensors[x].dtype, like=x)
        if kind == "RESHAPE":
            t.emit("RESHAPE", [cur], [nxt])
        elif kind == "TRANSPOSE":
            t.emit("TRANSPOSE", [cur, t.const(arg)], [nxt])
        else:
            t.emit("PAD", [cur, t.const(arg)], [nxt])
        cur = nxt


def _block_shape(t: Translator):
    block = [int(v) for v in t.tensor_const(1).reshape(-1)]
    t.need(len(block) == 2 and min(block) >= 1, f"block shape {block} must be two sizes >= 1")
    return block


def space_to_batch_nd(t: Translator):
    """PAD, RESHAPE to [n, H/bh, bh, W/bw, bw, c], TRANSPOSE the block to the front, RESHAPE."""
    t.counts((3, 4))
    t.rank(0, (4,))
    bh, bw = _block_shape(t)
    pads = t.tensor_const(2).astype(int)
    t.need(pads.shape == (2, 2) and bool((pads >= 0).all()), "paddings must be [2, 2], >= 0")
    nchw = layout(t, 3)
    n, h, w, c = nhwc(t.operand(0).dimensions, nchw)
    ph, pw = h + int(pads[0].sum()), w + int(pads[1].sum())
    t.need(ph % bh == 0 and pw % bw == 0, "the padded height and width must be multiples of "
           "the block shape")
    out = (n * bh * bw, ph // bh, pw // bw, c)
    t.out_shape((out[0], c, out[1], out[2]) if nchw else out)
    _same_types(t)
    x, y, done = io_tensors(t, nchw)
    _chain(t, x, [("PAD", (n, ph, pw, c), [[0, 0], list(pads[0]), list(pads[1]), [0, 0]]),
                  ("RESHAPE", (n, ph // bh, bh, pw // bw, bw, c), None),
                  ("TRANSPOSE", (bh, bw, n, ph // bh, pw // bw, c), [2, 4, 0, 1, 3, 5]),
                  ("RESHAPE", out, None)], y)
    done()


def batch_to_space_nd(t: Translator):
    t.counts((2, 3))
    t.rank(0, (4,))
    bh, bw = _block_shape(t)
    nchw = layout(t, 2)
    nb, h, w, c = nhwc(t.operand(0).dimensions, nchw)
    t.need(nb % (bh * bw) == 0, f"batch {nb} is not a multiple of the block size {bh * bw}")
    n = nb // (bh * bw)
    out = (n, h * bh, w * bw, c)
    t.out_shape((n, c, h * bh, w * bw) if nchw else out)
    _same_types(t)
    x, y, done = io_tensors(t, nchw)
    _chain(t, x, [("RESHAPE", (bh, bw, n, h, w, c), None),
                  ("TRANSPOSE", (n, h, bh, w, bw, c), [2, 3, 0, 4, 1, 5]),
                  ("RESHAPE", out, None)], y)
    done()


def tile(t: Translator):
    t.counts((2,))
    x = t.operand(0)
    mult = [int(v) for v in t.tensor_const(1).reshape(-1)]
    t.need(len(mult) == len(x.dimensions) and min(mult, default=1) >= 1,
           "multiples need one entry >= 1 per dimension")
    t.out_shape([d * m for d, m in zip(x.dimensions, mult)])
    _same_types(t)
    t.emit("TILE", [t.op.inputs[0], t.const(mult)], t.op.outputs)
