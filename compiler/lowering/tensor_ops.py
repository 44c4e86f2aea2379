"""Lowering of the tensor operators: convolutions and MATMUL on the MAC array, pooling and
ARGMAX on the vector unit. Each builder returns (TileSpace, opcode, static attributes); boxes
are in tensor coordinates, per-tile attributes (tile-local padding, origins) come from
TileSpace.attrs (see compiler/tiling.py for the search)."""
from __future__ import annotations

import numpy as np

from npu_sim.isa.dft import gemm_weights
from npu_sim.isa.dtypes import DTYPES, STORAGE
from npu_sim.isa.opcodes import mac_problem

from ..ir import Graph, Operator, Tensor
from ..steps import Step, stage_table_name
from ..tiling import TileSpace, window
from .common import REWRITES, STAGE_COLUMNS, TILE_SPACES, Context, Window, acc_dtype, const_int, \
    operand, stage_attrs


def _acc_itemsize(g, op) -> int:
    return {"int48": 8, "fp16": 2}.get(acc_dtype(g, op), 4)


def _stage_operand(ctx: Context, step: Step, dim: str, channels=None):
    channels = channels or (lambda t: t[dim])
    return ctx.operand("stage", stage_table_name(step), (dim,),
                       lambda t: (channels(t), (0, STAGE_COLUMNS)))


def conv_attrs(g, step: Step) -> dict:
    op = step.main
    return {"stride": tuple(op.attrs["stride"]), "dilation": tuple(op.attrs["dilation"]),
            "input_zp": const_int(g, operand(op, "input_zp")),
            "weight_zp": const_int(g, operand(op, "weight_zp")),
            **stage_attrs(g, step, acc_dtype(g, op))}


@TILE_SPACES.register("CONV2D")
def conv2d(step: Step, ctx: Context):
    g, op = ctx.graph, step.main
    n, h, w, ic = g.tensors[op.inputs[0]].shape
    oc, kh, kw, _ = g.tensors[op.inputs[1]].shape
    _, oh, ow, _ = g.tensors[step.output].shape
    win = Window(op, h, w, kh, kw)
    space = TileSpace(
        dims={"n": n, "oh": oh, "ow": ow, "oc": oc, "ic": ic},
        levels={"oc": 0, "oh": 0, "n": 1, "ow": 1, "ic": 2},
        orders=[("oc", "n", "oh", "ow", "ic"), ("n", "oh", "ow", "oc", "ic")],
        inputs=[ctx.operand("ifm", op.inputs[0], ("n", "oh", "ow", "ic"),
                            lambda t: (t["n"], *win.box(t), t["ic"])),
                ctx.operand("weights", op.inputs[1], ("oc", "ic"),
                            lambda t: (t["oc"], (0, kh), (0, kw), t["ic"])),
                _stage_operand(ctx, step, "oc")],
        output=ctx.operand("ofm", step.output, ("n", "oh", "ow", "oc"),
                           lambda t: (t["n"], t["oh"], t["ow"], t["oc"])),
        reduction="ic", acc_itemsize=_acc_itemsize(g, op),
        attrs=lambda t: {"pad": win.pad(t)},
        **ctx.mac_costs(lambda s: mac_problem(
            "conv2d", (s["n"], s["oh"], s["ow"], s["oc"]), (s["oc"], kh, kw, s["ic"])), op),
        folds=ctx.folds("oc", "ic" if (kh, kw) == (1, 1) else ""))
    return space, "conv2d", conv_attrs(g, step)


@TILE_SPACES.register("DEPTHWISE_CONV2D")
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
                _stage_operand(ctx, step, "c", out_channels)],
        output=ctx.operand("ofm", step.output, ("n", "oh", "ow", "c"),
                           lambda t: (t["n"], t["oh"], t["ow"], out_channels(t))),
        attrs=lambda t: {"pad": win.pad(t)},
        **ctx.mac_costs(lambda s: mac_problem(
            "depthwise_conv2d", (s["n"], s["oh"], s["ow"], s["c"] * m), (kh, kw, s["c"], m)), op))
    return space, "depthwise_conv2d", conv_attrs(g, step)


@TILE_SPACES.register("TRANSPOSE_CONV2D")
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
                _stage_operand(ctx, step, "oc")],
        output=ctx.operand("ofm", step.output, ("n", "oh", "ow", "oc"),
                           lambda t: (t["n"], t["oh"], t["ow"], t["oc"])),
        reduction="ic", acc_itemsize=_acc_itemsize(g, op),
        attrs=lambda t: {"in_origin": (ifm_box(t)[1][0], ifm_box(t)[2][0]),
                         "out_origin": (t["oh"][0], t["ow"][0]),
                         "out_size": (t["oh"][1], t["ow"][1])},
        **ctx.mac_costs(lambda s: mac_problem(
            "transpose_conv2d", (s["n"], s["oh"], s["ow"], s["oc"]), (s["oc"], kh, kw, s["ic"]),
            (sy, sx)), op))
    attrs = {"stride": (sy, sx), "out_pad_top": opt, "out_pad_left": opl,
             "input_zp": const_int(g, operand(op, "input_zp")),
             "weight_zp": const_int(g, operand(op, "weight_zp")),
             **stage_attrs(g, step, acc_dtype(g, op))}
    return space, "transpose_conv2d", attrs


@TILE_SPACES.register("CONV3D")
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
                _stage_operand(ctx, step, "oc")],
        output=ctx.operand("ofm", step.output, ("n", "od", "oh", "ow", "oc"),
                           lambda t: (t["n"], t["od"], t["oh"], t["ow"], t["oc"])),
        reduction="ic", acc_itemsize=_acc_itemsize(g, op),
        attrs=lambda t: {"pad": tuple(p for s in spans(t) for p in s[2:])},
        **ctx.mac_costs(lambda s: mac_problem(
            "conv3d", (s["n"], s["od"], s["oh"], s["ow"], s["oc"]),
            (s["oc"], kd, kh, kw, s["ic"])), op))
    return space, "conv3d", conv_attrs(g, step)


@TILE_SPACES.register("MATMUL")
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
                _stage_operand(ctx, step, "w")],
        output=ctx.operand("ofm", step.output, ("n", "h", "w"),
                           lambda t: (t["n"], t["h"], t["w"])),
        reduction="k", acc_itemsize=_acc_itemsize(g, op),
        **ctx.mac_costs(lambda s: mac_problem(
            "matmul", (s["n"], s["h"], s["w"]), (s["n"], s["k"], s["w"])), op),
        folds=ctx.folds("w", "k"))
    attrs = {"a_zp": const_int(g, operand(op, "A_zp")), "b_zp": const_int(g, operand(op, "B_zp")),
             **stage_attrs(g, step, acc_dtype(g, op))}
    return space, "matmul", attrs


@TILE_SPACES.register("AVG_POOL2D", "MAX_POOL2D")
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
    if DTYPES[g.tensors[op.inputs[0]].dtype].kind == "float" and op.op == "MAX_POOL2D":
        attrs["nan_mode"] = op.attrs.get("nan_mode", "PROPAGATE")
    if op.op == "AVG_POOL2D":
        attrs.update(input_zp=const_int(g, operand(op, "input_zp")),
                     output_zp=const_int(g, operand(op, "output_zp")))
        return space, "avg_pool2d", attrs
    return space, "max_pool2d", attrs


@TILE_SPACES.register("ARGMAX")
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
    nan = ({"nan_mode": op.attrs.get("nan_mode", "PROPAGATE")}
           if DTYPES[g.tensors[op.inputs[0]].dtype].kind == "float" else {})
    return space, "argmax", {"axis": axis, **nan}


# ---- FFT2D / RFFT2D: DFT passes as GEMMs on the MAC array ----------------------------------------

@REWRITES.register("FFT2D", "RFFT2D")
def dft_gemms(graph: Graph, op: Operator) -> list[Operator]:
    """An NPU without an FFT unit computes the 2-D DFT as two GEMM passes on the MAC array (as
    TPUs do), fp32 x fp32 with fp32 accumulation: along W, each row's [re | im] (2W terms;
    W for RFFT2D's real input) times the [2W, 2W'] block DFT matrix (isa/dft.py); then the
    result transposed (a DMA) so each column's [re | im] (2H terms) meets the [2H, 2H]
    matrix; then transposed back and split into the real and imaginary outputs. Each pass is a
    1x1 CONV2D whose weights are the matrix: 4NHW(W' + H) MACs (W' = W, or W/2 + 1), where an
    FFT would take O(NHW log HW) operations."""
    b = _Builder(graph, op)
    n, h, w = graph.tensors[op.inputs[0]].shape
    sign = -1.0 if op.attrs.get("inverse") else 1.0
    real = op.op == "RFFT2D"
    w_out = w // 2 + 1 if real else w
    local = bool(op.attrs.get("local_bound", False))
    if real:
        rows, k = op.inputs[0], w
    else:
        rows, k = b.op("CONCAT", list(op.inputs), (n, h, 2 * w), {"axis": 2}), 2 * w
    t = b.gemm(b.reshape(rows, (n, h, 1, k)), gemm_weights(w, sign, w_out, not real), local)
    cols = b.op("TRANSPOSE", [b.reshape(t, (n, h, 2, w_out))], (n, w_out, 2, h),
                {"perms": (0, 3, 2, 1)})
    o = b.gemm(b.reshape(cols, (n, w_out, 1, 2 * h)), gemm_weights(h, sign, h, True), local)
    parts = b.op("TRANSPOSE", [b.reshape(o, (n, w_out, 2, h))], (2, n, h, w_out),
                 {"perms": (2, 0, 3, 1)})
    for i, name in enumerate(op.outputs):
        part = b.op("SLICE", [parts, b.shape((i, 0, 0, 0)), b.shape((1, n, h, w_out))],
                    (1, n, h, w_out))
        b.reshape(part, (n, h, w_out), out=name)
    return b.ops


class _Builder:
    """New fp32 tensors and operators standing in for one operator, named after its output."""

    def __init__(self, graph: Graph, op: Operator):
        self.graph, self.base, self.ops, self.index = graph, op.outputs[0], [], op.index
        self.location = op.location

    def _tensor(self, shape, dtype="fp32", data=None) -> str:
        name = f"{self.base}::dft{len(self.graph.tensors)}"
        self.graph.tensors[name] = Tensor(name, tuple(int(d) for d in shape), dtype, data)
        return name

    def op(self, kind, inputs, shape, attrs=None, out=None) -> str:
        out = out or self._tensor(shape)
        self.ops.append(Operator(kind, list(inputs), [out], dict(attrs or {}), self.location,
                                 self.index))
        return out

    def const(self, data, dtype="fp32") -> str:
        name = self._tensor(np.shape(data), dtype, np.ascontiguousarray(data, STORAGE[dtype]))
        self.ops.append(Operator("CONST_SHAPE" if dtype == "shape" else "CONST", [], [name],
                                 location=self.location, index=self.index))
        return name

    def shape(self, values) -> str:
        return self.const(np.asarray(values, np.int64), "shape")

    def reshape(self, x, shape, out=None) -> str:
        return self.op("RESHAPE", [x, self.shape(shape)], shape, out=out)

    def gemm(self, x, matrix: np.ndarray, local_bound: bool) -> str:
        """x [N, A, 1, K] times matrix [K, M] as a 1x1 CONV2D -> [N, A, 1, M]."""
        n, a, _, _ = self.graph.tensors[x].shape
        weights = matrix.T.reshape(matrix.shape[1], 1, 1, matrix.shape[0])
        zero = self.const(np.zeros(1))
        return self.op("CONV2D", [x, self.const(weights), zero, zero, zero],
                       (n, a, 1, matrix.shape[1]),
                       {"pad": (0, 0, 0, 0), "stride": (1, 1), "dilation": (1, 1),
                        "local_bound": local_bound, "acc_type": "fp32"})
