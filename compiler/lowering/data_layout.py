"""Lowering of reductions, data layout, scatter/gather and image operators.

Reductions and RESIZE are tiled on the vector unit. TRANSPOSE, SLICE, CONCAT, PAD, TILE and
REVERSE are strided DMA descriptors over whole tensors; on constants they fold at compile time.
"""
from __future__ import annotations

import numpy as np

from npu_sim.isa.commands import TensorView
from npu_sim.isa.dtypes import DTYPES, fill_word

from ..ir import itemsize
from ..assembly import box_view
from ..staging import side_cycles
from ..steps import Step
from ..tiling import TileSpace
from .common import DMA_MOVES, FOLDS, TILE_SPACES, Context, const_ints


def _dims(shape):
    return {f"d{i}": s for i, s in enumerate(shape)}


@TILE_SPACES.register("REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_SUM",
                       "REDUCE_PRODUCT")
def reduction(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    shape = g.tensors[op.inputs[0]].shape
    attrs = {"fn": op.op, "axis": op.attrs["axis"]}
    acc = g.tensors[step.output].dtype
    if DTYPES[acc].kind == "float":
        attrs["nan_mode"] = op.attrs.get("nan_mode", "PROPAGATE")
        if op.op in ("REDUCE_SUM", "REDUCE_PRODUCT"):
            acc = attrs["acc_dtype"] = "fp32"      # a split sum carries fp32 partials
    axis = op.attrs["axis"]
    dims = _dims(shape)
    names = list(dims)
    red = names[axis]
    levels = {d: (i if d != red else len(names)) for i, d in enumerate(names)}
    space = TileSpace(
        dims=dims, levels=levels, orders=[tuple(d for d in names if d != red) + (red,)],
        inputs=[ctx.operand("in0", op.inputs[0], tuple(names), lambda t: tuple(t[d] for d in names))],
        output=ctx.operand("out", step.output, tuple(d for d in names if d != red),
                           lambda t: tuple((0, 1) if d == red else t[d] for d in names)),
        reduction=red, acc_itemsize=itemsize(acc),
        work=lambda s: ctx.vector_work(*s.values()))
    return space, "reduce", attrs


def resize_geometry(g, op):
    """(source, box_attrs, attrs, work) of a RESIZE: `source` maps a box of its NHWC output to
    the box of its input that box samples, `box_attrs` gives a command computing that box its
    origins and size, `attrs` are the operator's own and `work` is the element operations per
    output element (four products for bilinear)."""
    _, ih, iw, _ = g.tensors[op.inputs[0]].shape
    yn, yd, xn, xd = const_ints(g, op.inputs[1])
    offy, offx = const_ints(g, op.inputs[2])
    border = tuple(const_ints(g, op.inputs[3]))

    def span(start, count, num, den, off, full):
        lo = (start * den + off) // num
        hi = ((start + count - 1) * den + off) // num + 1
        lo, hi = min(max(lo, 0), full - 1), min(max(hi, 0), full - 1)
        return (lo, hi - lo + 1)

    def source(box):
        n, oh, ow, c = box
        return (n, span(*oh, yn, yd, offy, ih), span(*ow, xn, xd, offx, iw), c)

    def box_attrs(box):
        src = source(box)
        return {"in_origin": (src[1][0], src[2][0]), "out_origin": (box[1][0], box[2][0]),
                "out_size": (box[1][1], box[2][1])}

    attrs = {"mode": op.attrs["mode"], "scale": (yn, yd, xn, xd), "offset": (offy, offx),
             "border": border, "in_size": (ih, iw)}
    return source, box_attrs, attrs, 4 if op.attrs["mode"] == "BILINEAR" else 1


@TILE_SPACES.register("RESIZE")
def resize(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    n, _, _, c = g.tensors[op.inputs[0]].shape
    _, oh, ow, _ = g.tensors[step.output].shape
    source, box_attrs, attrs, per_element = resize_geometry(g, op)

    def out_box(t):
        return (t["n"], t["oh"], t["ow"], t["c"])

    space = TileSpace(
        dims={"n": n, "oh": oh, "ow": ow, "c": c},
        levels={"oh": 0, "c": 0, "n": 1, "ow": 1},
        orders=[("n", "c", "oh", "ow"), ("n", "oh", "ow", "c")],
        inputs=[ctx.operand("in0", op.inputs[0], ("n", "oh", "ow", "c"),
                            lambda t: source(out_box(t)))],
        output=ctx.operand("out", step.output, ("n", "oh", "ow", "c"), out_box),
        attrs=lambda t: box_attrs(out_box(t)),
        work=lambda s: ctx.vector_work(per_element, *s.values()))
    return space, "resize", attrs


# ---- data movement: DMA descriptors (`low` is the compiler.lower.Lowering emitting them) ------

@DMA_MOVES.register("TRANSPOSE")
def transpose(low, step: Step):
    op, src = step.main, low.p.view(step.main.inputs[0])
    perms = op.attrs["perms"]
    low.copy(TensorView(src.mem, src.addr, low.g.tensors[step.output].shape,
                        tuple(src.strides[i] for i in perms), src.dtype), low.p.view(step.output))


@DMA_MOVES.register("SLICE")
def slice_(low, step: Step):
    op = step.main
    start = const_ints(low.g, op.inputs[1])
    box = tuple(zip(start, low.g.tensors[step.output].shape))
    low.copy(low.p.view(op.inputs[0], box), low.p.view(step.output))


@DMA_MOVES.register("CONCAT")
def concat(low, step: Step):
    axis, offset, parts = step.main.attrs["axis"], 0, []
    for name in step.main.inputs:
        shape = low.g.tensors[name].shape
        parts.append((low.p.view(name),
                      tuple((offset if i == axis else 0, n) for i, n in enumerate(shape))))
        offset += shape[axis]
    low.assemble(low.p.view(step.output), parts)


@DMA_MOVES.register("PAD")
def pad(low, step: Step):
    g, op = low.g, step.main
    pads = const_ints(g, op.inputs[1])
    pad_const = np.asarray(g.const(op.inputs[2])).reshape(-1)[0]
    word = fill_word(pad_const, g.tensors[step.output].dtype)
    out = low.p.view(step.output)
    inner = tuple(zip(pads[::2], g.tensors[op.inputs[0]].shape))
    whole = tuple((0, n) for n in out.shape)
    # The border alone (disjoint slabs, axis by axis), unless its runs are so short that
    # filling the whole output in long runs, the input's box written twice, costs less.
    border = [inner[:i] + (slab,) + whole[i + 1:] for i, (lo, n) in enumerate(inner)
              for slab in ((0, lo), (lo + n, out.shape[i] - lo - n)) if slab[1]]
    cost = lambda boxes: sum(low.hw.dma.setup_cycles
                             + side_cycles(box_view(out, b), low.hw, low.port_cost) for b in boxes)
    fills = min(border, [whole], key=cost)
    low.assemble(out, [(word, b) for b in fills] + [(low.p.view(op.inputs[0]), inner)])


@DMA_MOVES.register("TILE")
def tile(low, step: Step):
    src, dst = low.p.view(step.main.inputs[0]), low.p.view(step.output)
    shape, s_str, d_str = [], [], []
    for m, n, s, d in zip(const_ints(low.g, step.main.inputs[1]), src.shape, src.strides,
                          dst.strides):
        shape += [m, n]
        s_str += [0, s]
        d_str += [n * d, d]
    low.copy(TensorView(src.mem, src.addr, tuple(shape), tuple(s_str), src.dtype),
             TensorView(dst.mem, dst.addr, tuple(shape), tuple(d_str), dst.dtype))


@DMA_MOVES.register("REVERSE")
def reverse(low, step: Step):
    src = low.p.view(step.main.inputs[0])
    axis = step.main.attrs["axis"]
    strides = list(src.strides)
    addr = src.addr + (src.shape[axis] - 1) * strides[axis]
    strides[axis] = -strides[axis]
    low.copy(TensorView(src.mem, addr, src.shape, tuple(strides), src.dtype),
             low.p.view(step.output))


# ---- constant folding ----------------------------------------------------------------------

def _const(graph, op, i=0):
    return graph.const(op.inputs[i])


FOLDS.register("TRANSPOSE")(lambda g, op: np.transpose(_const(g, op), op.attrs["perms"]))
FOLDS.register("RESHAPE")(lambda g, op: _const(g, op).reshape(g.tensors[op.outputs[0]].shape))
FOLDS.register("CONCAT")(lambda g, op: np.concatenate([g.const(n) for n in op.inputs],
                                                      axis=op.attrs["axis"]))
FOLDS.register("TILE")(lambda g, op: np.tile(_const(g, op), const_ints(g, op.inputs[1])))
FOLDS.register("REVERSE")(lambda g, op: np.flip(_const(g, op), axis=op.attrs["axis"]))


@FOLDS.register("SLICE")
def _fold_slice(g, op):
    start, size = const_ints(g, op.inputs[1]), const_ints(g, op.inputs[2])
    return _const(g, op)[tuple(slice(s, s + n) for s, n in zip(start, size))]


@FOLDS.register("PAD")
def _fold_pad(g, op):
    x, pads = _const(g, op), const_ints(g, op.inputs[1])
    value = np.asarray(_const(g, op, 2)).reshape(-1)[0]
    return np.pad(x, [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)], constant_values=value)
