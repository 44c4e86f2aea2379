"""Iteration spaces of the tiled operator families (see tiling.py for the search).

Each builder returns (TileSpace, opcode, unit, static attrs). Boxes are in tensor coordinates;
per-tile attributes (tile-local padding, origins) come from TileSpace.attrs.
"""
from __future__ import annotations

import math

import numpy as np

from npu_sim.isa.errors import UnsupportedError

from .chains import chain_space
from .ir import Graph, itemsize
from .operands import ELEMENTWISE, REDUCTIONS, operand
from .steps import Step, stage_table_name
from .tiling import Operand, TileSpace, window

STAGE_COLUMNS = 3            # bias, multiplier, shift per output channel (int32 each)


def const_int(graph: Graph, name: str, default: int = 0) -> int:
    if not name:
        return default
    data = graph.const(name)
    return default if data is None or data.size == 0 else int(np.asarray(data).reshape(-1)[0])


def clamp_bounds(op, dtype: str) -> tuple[int, int]:
    np_dtype = {"int8": "<i1", "int16": "<i2", "int32": "<i4"}[dtype]
    size = np.dtype(np_dtype).itemsize
    lo = np.frombuffer(bytes(op.attrs["min_val"][:size]), np_dtype)[0]
    hi = np.frombuffer(bytes(op.attrs["max_val"][:size]), np_dtype)[0]
    return int(lo), int(hi)


class Context:
    """What the families need from placement: residency and memory cost of each tensor."""

    # Tiling balances transfers against compute on a fixed reference array and vector unit,
    # not the configured ones: a program's tiles then depend only on the buffer and memories,
    # so a larger MAC array or vector unit runs the same program and never costs cycles.
    REF_ROWS = REF_COLS = 32
    REF_LANES = 64

    def __init__(self, graph, on_chip, cost_per_byte):
        self.graph, self._on_chip, self._cost = graph, on_chip, cost_per_byte

    def mac_work(self, m: int, n: int, k: int) -> float:
        """Reference-array cycles of an M x N x K tile (M outputs, N channels, K reduction),
        quantised like an array: a 2-channel tile still occupies every column."""
        return math.ceil(k / self.REF_ROWS) * math.ceil(n / self.REF_COLS) * m

    def depthwise_work(self, m: int, c: int, taps: int) -> float:
        return math.ceil(m / self.REF_ROWS) * math.ceil(c / self.REF_COLS) * taps

    def vector_work(self, *factors) -> float:
        return math.prod(factors) / self.REF_LANES

    def operand(self, role, tensor, depends, box, dtype=None):
        t = self.graph.tensors[tensor]
        dtype = dtype or t.dtype
        return Operand(role, tensor, dtype, tuple(depends), box, itemsize(dtype),
                       self._on_chip(tensor), self._cost(tensor), tuple(t.shape))


def _r(tile, d):
    return tile[d]


def stage_attrs(graph: Graph, step: Step, acc_dtype: str) -> dict:
    attrs = {"acc_dtype": acc_dtype}
    if step.rescale is not None:
        r = step.rescale
        attrs.update(scale32=bool(r.attrs["scale32"]), rounding_mode=r.attrs["rounding_mode"],
                     output_zp=const_int(graph, r.inputs[4]))
    if step.clamp is not None:
        attrs["clamp"] = clamp_bounds(step.clamp, graph.tensors[step.output].dtype)
    return attrs


def _acc_dtype(graph, op) -> str:
    return "int48" if graph.tensors[op.outputs[0]].dtype == "int48" else "int32"


class Window:
    """The input rows and columns a tile of a sliding-window op reads, and the padding it sees."""

    def __init__(self, op, h: int, w: int, kh: int, kw: int):
        sy, sx = op.attrs["stride"]
        dy, dx = op.attrs.get("dilation", (1, 1))
        pt, _, pl, _ = op.attrs["pad"]
        self.rows = lambda t: window(t["oh"][0], t["oh"][1], sy, pt, (kh - 1) * dy + 1, h)
        self.cols = lambda t: window(t["ow"][0], t["ow"][1], sx, pl, (kw - 1) * dx + 1, w)

    def box(self, t):
        return self.rows(t)[:2], self.cols(t)[:2]

    def pad(self, t):
        r, c = self.rows(t), self.cols(t)
        return (r[2], r[3], c[2], c[3])


def conv_attrs(g: Graph, step: Step) -> dict:
    op = step.main
    return {"stride": tuple(op.attrs["stride"]), "dilation": tuple(op.attrs["dilation"]),
            "input_zp": const_int(g, operand(op, "input_zp")),
            "weight_zp": const_int(g, operand(op, "weight_zp")),
            **stage_attrs(g, step, _acc_dtype(g, op))}


def conv2d(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    n, h, w, ic = g.tensors[op.inputs[0]].shape
    oc, kh, kw, _ = g.tensors[op.inputs[1]].shape
    out = g.tensors[step.output]
    _, oh, ow, _ = out.shape
    win = Window(op, h, w, kh, kw)
    space = TileSpace(
        dims={"n": n, "oh": oh, "ow": ow, "oc": oc, "ic": ic},
        levels={"oc": 0, "oh": 0, "n": 1, "ow": 1, "ic": 2},
        orders=[("oc", "n", "oh", "ow", "ic"), ("n", "oh", "ow", "oc", "ic")],
        inputs=[ctx.operand("ifm", op.inputs[0], ("n", "oh", "ow", "ic"),
                            lambda t: (t["n"], *win.box(t), t["ic"])),
                ctx.operand("weights", op.inputs[1], ("oc", "ic"),
                            lambda t: (t["oc"], (0, kh), (0, kw), t["ic"])),
                ctx.operand("stage", stage_table_name(step), ("oc",),
                            lambda t: (t["oc"], (0, STAGE_COLUMNS)))],
        output=ctx.operand("ofm", step.output, ("n", "oh", "ow", "oc"),
                           lambda t: (t["n"], t["oh"], t["ow"], t["oc"])),
        reduction="ic", acc_itemsize=8 if _acc_dtype(g, op) == "int48" else 4,
        attrs=lambda t: {"pad": win.pad(t)},
        work=lambda s: ctx.mac_work(s["n"] * s["oh"] * s["ow"], s["oc"], s["ic"] * kh * kw))
    return space, "conv2d", conv_attrs(g, step)


def depthwise_conv2d(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    n, h, w, c = g.tensors[op.inputs[0]].shape
    kh, kw, _, m = g.tensors[op.inputs[1]].shape
    _, oh, ow, _ = g.tensors[step.output].shape
    win = Window(op, h, w, kh, kw)

    def out_channels(t):
        return (t["c"][0] * m, t["c"][1] * m)

    space = TileSpace(
        dims={"n": n, "oh": oh, "ow": ow, "c": c},
        levels={"oh": 0, "c": 0, "n": 1, "ow": 1},
        orders=[("n", "c", "oh", "ow"), ("n", "oh", "ow", "c")],
        inputs=[ctx.operand("ifm", op.inputs[0], ("n", "oh", "ow", "c"),
                            lambda t: (t["n"], *win.box(t), t["c"])),
                ctx.operand("weights", op.inputs[1], ("c",),
                            lambda t: ((0, kh), (0, kw), t["c"], (0, m))),
                ctx.operand("stage", stage_table_name(step), ("c",),
                            lambda t: (out_channels(t), (0, STAGE_COLUMNS)))],
        output=ctx.operand("ofm", step.output, ("n", "oh", "ow", "c"),
                           lambda t: (t["n"], t["oh"], t["ow"], out_channels(t))),
        attrs=lambda t: {"pad": win.pad(t)},
        work=lambda s: ctx.depthwise_work(s["n"] * s["oh"] * s["ow"], s["c"] * m, kh * kw))
    return space, "depthwise_conv2d", conv_attrs(g, step)


def transpose_conv2d(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    n, ih, iw, ic = g.tensors[op.inputs[0]].shape
    oc, kh, kw, _ = g.tensors[op.inputs[1]].shape
    _, oh, ow, _ = g.tensors[step.output].shape
    opt, opb, opl, opr = op.attrs["out_pad"]
    sy, sx = op.attrs["stride"]

    def span(start, count, s, pad, k, full):
        lo = -((-(start - pad - k + 1)) // s)          # ceil division
        hi = (start + count - 1 - pad) // s
        lo, hi = max(lo, 0), min(hi, full - 1)
        return (lo, hi - lo + 1) if hi >= lo else (0, 0)

    def ifm_box(t):
        return (t["n"], span(*t["oh"], sy, opt, kh, ih), span(*t["ow"], sx, opl, kw, iw), t["ic"])

    space = TileSpace(
        dims={"n": n, "oh": oh, "ow": ow, "oc": oc, "ic": ic},
        levels={"oc": 0, "oh": 0, "n": 1, "ow": 1, "ic": 2},
        orders=[("oc", "n", "oh", "ow", "ic"), ("n", "oh", "ow", "oc", "ic")],
        inputs=[ctx.operand("ifm", op.inputs[0], ("n", "oh", "ow", "ic"), ifm_box),
                ctx.operand("weights", op.inputs[1], ("oc", "ic"),
                            lambda t: (t["oc"], (0, kh), (0, kw), t["ic"])),
                ctx.operand("stage", stage_table_name(step), ("oc",),
                            lambda t: (t["oc"], (0, STAGE_COLUMNS)))],
        output=ctx.operand("ofm", step.output, ("n", "oh", "ow", "oc"),
                           lambda t: (t["n"], t["oh"], t["ow"], t["oc"])),
        reduction="ic", acc_itemsize=8 if _acc_dtype(g, op) == "int48" else 4,
        attrs=lambda t: {"in_origin": (ifm_box(t)[1][0], ifm_box(t)[2][0]),
                         "out_origin": (t["oh"][0], t["ow"][0]),
                         "out_size": (t["oh"][1], t["ow"][1])},
        work=lambda s: ctx.mac_work(s["n"] * s["oh"] * s["ow"], s["oc"],
                                    s["ic"] * -(-kh // sy) * -(-kw // sx)))
    attrs = {"stride": (sy, sx), "out_pad_top": opt, "out_pad_left": opl,
             "input_zp": const_int(g, operand(op, "input_zp")),
             "weight_zp": const_int(g, operand(op, "weight_zp")),
             **stage_attrs(g, step, _acc_dtype(g, op))}
    return space, "transpose_conv2d", attrs


def matmul(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    n, h, c = g.tensors[op.inputs[0]].shape
    _, _, w = g.tensors[op.inputs[1]].shape
    space = TileSpace(
        dims={"n": n, "h": h, "w": w, "k": c},
        levels={"h": 0, "w": 0, "n": 1, "k": 2},
        orders=[("n", "w", "h", "k"), ("n", "h", "w", "k")],
        inputs=[ctx.operand("a", op.inputs[0], ("n", "h", "k"), lambda t: (t["n"], t["h"], t["k"])),
                ctx.operand("b", op.inputs[1], ("n", "k", "w"), lambda t: (t["n"], t["k"], t["w"])),
                ctx.operand("stage", stage_table_name(step), ("w",),
                            lambda t: (t["w"], (0, STAGE_COLUMNS)))],
        output=ctx.operand("ofm", step.output, ("n", "h", "w"),
                           lambda t: (t["n"], t["h"], t["w"])),
        reduction="k", acc_itemsize=8 if _acc_dtype(g, op) == "int48" else 4,
        work=lambda s: ctx.mac_work(s["n"] * s["h"], s["w"], s["k"]))
    attrs = {"a_zp": const_int(g, op.inputs[2]), "b_zp": const_int(g, op.inputs[3]),
             **stage_attrs(g, step, _acc_dtype(g, op))}
    return space, "matmul", attrs


def pool2d(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    n, h, w, c = g.tensors[op.inputs[0]].shape
    _, oh, ow, _ = g.tensors[step.output].shape
    ky, kx = op.attrs["kernel"]
    win = Window(op, h, w, ky, kx)
    space = TileSpace(
        dims={"n": n, "oh": oh, "ow": ow, "c": c},
        levels={"oh": 0, "c": 0, "n": 1, "ow": 1},
        orders=[("n", "c", "oh", "ow"), ("n", "oh", "ow", "c")],
        inputs=[ctx.operand("in0", op.inputs[0], ("n", "oh", "ow", "c"),
                            lambda t: (t["n"], *win.box(t), t["c"]))],
        output=ctx.operand("out", step.output, ("n", "oh", "ow", "c"),
                           lambda t: (t["n"], t["oh"], t["ow"], t["c"])),
        attrs=lambda t: {"pad": win.pad(t)},
        work=lambda s: ctx.vector_work(s["n"], s["oh"], s["ow"], s["c"], ky, kx))
    attrs = {"kernel": (ky, kx), "stride": tuple(op.attrs["stride"])}
    if op.op == "AVG_POOL2D":
        attrs.update(input_zp=const_int(g, op.inputs[1]), output_zp=const_int(g, op.inputs[2]))
        return space, "avg_pool2d", attrs
    return space, "max_pool2d", attrs


def _dims(shape):
    return {f"d{i}": s for i, s in enumerate(shape)}


def reduction(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    shape = g.tensors[op.inputs[0]].shape
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
        reduction=red, acc_itemsize=itemsize(g.tensors[step.output].dtype),
        work=lambda s: ctx.vector_work(*s.values()))
    return space, "reduce", {"fn": op.op, "axis": axis}


def argmax(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    shape = g.tensors[op.inputs[0]].shape
    axis = op.attrs["axis"]
    out_names = [f"d{i}" for i in range(len(shape)) if i != axis]
    dims = {d: shape[int(d[1:])] for d in out_names}

    def in_box(t):
        return tuple((0, shape[i]) if i == axis else t[f"d{i}"] for i in range(len(shape)))

    space = TileSpace(
        dims=dims, levels={d: i for i, d in enumerate(out_names)}, orders=[tuple(out_names)],
        inputs=[ctx.operand("in0", op.inputs[0], tuple(out_names), in_box)],
        output=ctx.operand("out", step.output, tuple(out_names),
                           lambda t: tuple(t[d] for d in out_names)),
        work=lambda s: ctx.vector_work(shape[axis], *s.values()))
    return space, "argmax", {"axis": axis}


def resize(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    n, ih, iw, c = g.tensors[op.inputs[0]].shape
    _, oh, ow, _ = g.tensors[step.output].shape
    yn, yd, xn, xd = (int(v) for v in g.const(op.inputs[1]))
    offy, offx = (int(v) for v in g.const(op.inputs[2]))
    border = tuple(int(v) for v in g.const(op.inputs[3]))

    def span(start, count, num, den, off, full):
        lo = (start * den + off) // num
        hi = ((start + count - 1) * den + off) // num + 1
        lo, hi = min(max(lo, 0), full - 1), min(max(hi, 0), full - 1)
        return (lo, hi - lo + 1)

    def in_box(t):
        return (t["n"], span(*t["oh"], yn, yd, offy, ih), span(*t["ow"], xn, xd, offx, iw), t["c"])

    space = TileSpace(
        dims={"n": n, "oh": oh, "ow": ow, "c": c},
        levels={"oh": 0, "c": 0, "n": 1, "ow": 1},
        orders=[("n", "c", "oh", "ow"), ("n", "oh", "ow", "c")],
        inputs=[ctx.operand("in0", op.inputs[0], ("n", "oh", "ow", "c"), in_box)],
        output=ctx.operand("out", step.output, ("n", "oh", "ow", "c"),
                           lambda t: (t["n"], t["oh"], t["ow"], t["c"])),
        attrs=lambda t: {"in_origin": (in_box(t)[1][0], in_box(t)[2][0]),
                         "out_origin": (t["oh"][0], t["ow"][0]),
                         "out_size": (t["oh"][1], t["ow"][1])},
        work=lambda s: ctx.vector_work(4, *s.values()))
    attrs = {"mode": op.attrs["mode"], "scale": (yn, yd, xn, xd), "offset": (offy, offx),
             "border": border, "in_size": (ih, iw)}
    return space, "resize", attrs


def conv3d(step: Step, ctx: Context):
    """CONV3D on the MAC array: conv2d's iteration space with an output depth dimension."""
    g, op = ctx.graph, step.main
    n, d, h, w, ic = g.tensors[op.inputs[0]].shape
    oc, kd, kh, kw, _ = g.tensors[op.inputs[1]].shape
    _, od, oh, ow, _ = g.tensors[step.output].shape
    sz, sy, sx = op.attrs["stride"]
    dz, dy, dx = op.attrs["dilation"]
    p_d, _, p_t, _, p_l, _ = op.attrs["pad"]

    def spans(t):
        return (window(t["od"][0], t["od"][1], sz, p_d, (kd - 1) * dz + 1, d),
                window(t["oh"][0], t["oh"][1], sy, p_t, (kh - 1) * dy + 1, h),
                window(t["ow"][0], t["ow"][1], sx, p_l, (kw - 1) * dx + 1, w))

    space = TileSpace(
        dims={"n": n, "od": od, "oh": oh, "ow": ow, "oc": oc, "ic": ic},
        levels={"oc": 0, "oh": 0, "od": 1, "n": 1, "ow": 1, "ic": 2},
        orders=[("oc", "n", "od", "oh", "ow", "ic"), ("n", "od", "oh", "ow", "oc", "ic")],
        inputs=[ctx.operand("ifm", op.inputs[0], ("n", "od", "oh", "ow", "ic"),
                            lambda t: (t["n"], *(s[:2] for s in spans(t)), t["ic"])),
                ctx.operand("weights", op.inputs[1], ("oc", "ic"),
                            lambda t: (t["oc"], (0, kd), (0, kh), (0, kw), t["ic"])),
                ctx.operand("stage", stage_table_name(step), ("oc",),
                            lambda t: (t["oc"], (0, STAGE_COLUMNS)))],
        output=ctx.operand("ofm", step.output, ("n", "od", "oh", "ow", "oc"),
                           lambda t: (t["n"], t["od"], t["oh"], t["ow"], t["oc"])),
        reduction="ic", acc_itemsize=8 if _acc_dtype(g, op) == "int48" else 4,
        attrs=lambda t: {"pad": tuple(p for s in spans(t) for p in s[2:])},
        work=lambda s: ctx.mac_work(s["n"] * s["od"] * s["oh"] * s["ow"], s["oc"],
                                    s["ic"] * kd * kh * kw))
    return space, "conv3d", conv_attrs(g, step)


FAMILIES = {"CONV2D": conv2d, "DEPTHWISE_CONV2D": depthwise_conv2d, "CONV3D": conv3d,
            "TRANSPOSE_CONV2D": transpose_conv2d, "MATMUL": matmul,
            "AVG_POOL2D": pool2d, "MAX_POOL2D": pool2d, "RESIZE": resize, "ARGMAX": argmax}
FAMILIES.update({name: reduction for name in REDUCTIONS})
FAMILIES.update({name: chain_space for name in ELEMENTWISE})


def build_space(step: Step, ctx: Context):
    family = FAMILIES.get(step.main.op)
    if family is None:
        raise UnsupportedError(f"{step.main.describe()}: no NPU lowering")
    return family(step, ctx)
