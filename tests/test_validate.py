"""compiler.validate: TOSA 1.0 PRO-INT ERROR_IF, REQUIRE and level rules.

Hand-built graphs (tosa_serializer, read back with the loader, or IR built directly) break one
representative rule of each operator family; each must be refused with the right error type, a
message naming the operator, and the rule.
(Real models and Arm's generated tests are in test_validate_generated.py.)
"""
from __future__ import annotations

import numpy as np
import pytest

from npu_sim.compiler.ir import Graph, Operator, Tensor
from npu_sim.compiler.loader import load_bytes
from npu_sim.compiler.validate import validate
from npu_sim.isa.errors import UnsupportedError, ValidationError

ts = pytest.importorskip("tosa_serializer")
DType, Op = ts.DType, ts.Op

ALL_EXT = ("EXT-INT16", "EXT-INT4", "EXT-DOUBLEROUND", "EXT-INEXACTROUND", "EXT-CONTROLFLOW",
           "EXT-VARIABLE")


# ---------------------------------------------------------------------------------------------
# hand-built graphs
# ---------------------------------------------------------------------------------------------

_DT = {"bool": DType.BOOL, "int4": DType.INT4, "int8": DType.INT8, "int16": DType.INT16,
       "int32": DType.INT32, "int48": DType.INT48, "shape": DType.SHAPE}
_NP = {"bool": np.bool_, "int4": np.int8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
       "int48": np.int64, "shape": np.int64}


class G:
    """A small TOSA 1.0 graph built with tosa_serializer and read back through the loader."""

    def __init__(self):
        self.ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)

    def inp(self, shape, dt="int8"):
        return self.ser.addPlaceholder(list(shape), _DT[dt]).name

    def const(self, values, dt="int8"):
        arr = np.asarray(values, dtype=_NP[dt])
        return self.ser.addConst(list(arr.shape), _DT[dt], arr).name

    def zp(self, value=0, dt="int8"):
        return self.const([value], dt)

    def shape(self, values):
        return self.ser.addConst([len(values)], DType.SHAPE, np.asarray(values, np.int64)).name

    def out(self, shape, dt):
        return self.ser.addOutput(list(shape), _DT[dt]).name

    def op(self, op, inputs, outputs, attr: str, *args):
        a = ts.TosaSerializerAttribute()
        getattr(a, attr)(*args)
        self.ser.addOperator(op, list(inputs), list(outputs), a)
        return self

    def graph(self) -> Graph:
        return load_bytes(self.ser.serialize(), "<test>")


def conv2d(in_shape=(1, 8, 8, 4), w_shape=(2, 3, 3, 4), out_shape=(1, 6, 6, 2), pad=(0, 0, 0, 0),
           stride=(1, 1), dilation=(1, 1), in_dt="int8", w_dt="int8", bias_dt="int32", out_dt="int32",
           acc=DType.INT32, in_zp=0, w_zp=0, bias_len=None, zp_as_input=False, drop_input=False,
           bias_as_input=False):
    g = G()
    x = g.inp(in_shape, in_dt)
    w = g.const(np.ones(w_shape), w_dt)
    b_shape = [bias_len or w_shape[0]]
    b = g.inp(b_shape, bias_dt) if bias_as_input else g.const(np.zeros(b_shape), bias_dt)
    izp = g.inp([1], in_dt) if zp_as_input else g.zp(in_zp, in_dt)
    wzp = g.zp(w_zp, w_dt)
    ins = [x, w, b, izp] + ([] if drop_input else [wzp])
    return g.op(Op.CONV2D, ins, [g.out(out_shape, out_dt)], "Conv2dAttribute", list(pad), list(stride),
                list(dilation), False, acc).graph()


def depthwise(out_shape=(1, 6, 6, 8), bias_len=8):
    g = G()
    x, w = g.inp((1, 8, 8, 4)), g.const(np.ones((3, 3, 4, 2)))
    ins = [x, w, g.const(np.zeros(bias_len), "int32"), g.zp(), g.zp()]
    return g.op(Op.DEPTHWISE_CONV2D, ins, [g.out(out_shape, "int32")], "DepthwiseConv2dAttribute",
                [0, 0, 0, 0], [1, 1], [1, 1], False, DType.INT32).graph()


def conv3d(out_shape=(1, 2, 6, 6, 2)):
    g = G()
    ins = [g.inp((1, 4, 8, 8, 4)), g.const(np.ones((2, 3, 3, 3, 4))), g.const(np.zeros(2), "int32"),
           g.zp(), g.zp()]
    return g.op(Op.CONV3D, ins, [g.out(out_shape, "int32")], "Conv3dAttribute", [0] * 6, [1, 1, 1],
                [1, 1, 1], False, DType.INT32).graph()


def transpose_conv2d(out_shape=(1, 10, 10, 2), out_pad=(0, 0, 0, 0), stride=(1, 1)):
    g = G()
    ins = [g.inp((1, 8, 8, 4)), g.const(np.ones((2, 3, 3, 4))), g.const(np.zeros(2), "int32"), g.zp(),
           g.zp()]
    return g.op(Op.TRANSPOSE_CONV2D, ins, [g.out(out_shape, "int32")], "TransposeConv2dAttribute",
                list(out_pad), list(stride), False, DType.INT32).graph()


def avg_pool(kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0), out_shape=(1, 4, 4, 3), dt="int8", zp=0):
    g = G()
    ins = [g.inp((1, 8, 8, 3), dt), g.zp(zp, dt), g.zp(0, dt)]
    return g.op(Op.AVG_POOL2D, ins, [g.out(out_shape, dt)], "AvgPool2dAttribute", list(kernel),
                list(stride), list(pad), DType.INT32).graph()


def max_pool(kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0), in_shape=(1, 8, 8, 3), out_shape=(1, 4, 4, 3)):
    g = G()
    return g.op(Op.MAX_POOL2D, [g.inp(in_shape)], [g.out(out_shape, "int8")], "MaxPool2dAttribute",
                list(kernel), list(stride), list(pad), ts.NanPropagationMode.PROPAGATE).graph()


def matmul(dt="int16", out_dt="int48", a_zp=0, b_shape=(1, 4, 5)):
    g = G()
    ins = [g.inp((1, 3, 4), dt), g.inp(b_shape, dt), g.zp(a_zp, dt), g.zp(0, dt)]
    return g.op(Op.MATMUL, ins, [g.out((1, 3, 5), out_dt)], "MatMulAttribute").graph()


def argmax(axis=1, out_shape=(2, 4)):
    g = G()
    return g.op(Op.ARGMAX, [g.inp((2, 3, 4))], [g.out(out_shape, "int32")], "ArgMaxAttribute", axis,
                ts.NanPropagationMode.PROPAGATE).graph()


def binary(op=Op.ADD, attr="AddAttribute", s1=(2, 3), s2=(2, 3), out=(2, 3), dt="int32", out_dt=None):
    g = G()
    return g.op(op, [g.inp(s1, dt), g.inp(s2, dt)], [g.out(out, out_dt or dt)], attr).graph()


def mul(dt="int8", shift=0):
    g = G()
    ins = [g.inp((2, 3), dt), g.inp((2, 3), dt), g.const([shift], "int8")]
    return g.op(Op.MUL, ins, [g.out((2, 3), "int32")], "MulAttribute").graph()


def table(size=256):
    g = G()
    return g.op(Op.TABLE, [g.inp((4, 4)), g.const(np.zeros(size))], [g.out((4, 4), "int8")],
                "TableAttribute").graph()


def clamp(lo=-10, hi=10):
    g = G()
    return g.op(Op.CLAMP, [g.inp((4, 4))], [g.out((4, 4), "int8")], "ClampAttribute",
                list(np.int8(lo).tobytes()), list(np.int8(hi).tobytes()),
                ts.NanPropagationMode.PROPAGATE).graph()


def negate(dt="int16", zp=0):
    g = G()
    return g.op(Op.NEGATE, [g.inp((4,), dt), g.zp(zp, dt), g.zp(0, dt)], [g.out((4,), dt)],
                "NegateAttribute").graph()


def select(cond_dt="bool"):
    g = G()
    ins = [g.inp((2, 3), cond_dt), g.inp((2, 3)), g.inp((2, 3))]
    return g.op(Op.SELECT, ins, [g.out((2, 3), "int8")], "SelectAttribute").graph()


def reduce_sum(axis=1, out_shape=(2, 1, 4)):
    g = G()
    return g.op(Op.REDUCE_SUM, [g.inp((2, 3, 4), "int32")], [g.out(out_shape, "int32")],
                "ReduceSumAttribute", axis).graph()


def concat(out_shape=(2, 7), axis=1):
    g = G()
    return g.op(Op.CONCAT, [g.inp((2, 3)), g.inp((2, 4))], [g.out(out_shape, "int8")],
                "ConcatAttribute", axis).graph()


def pad(padding=(1, 1, 0, 2), out_shape=(4, 5)):
    g = G()
    ins = [g.inp((2, 3)), g.shape(padding), g.const([0])]
    return g.op(Op.PAD, ins, [g.out(out_shape, "int8")], "PadAttribute").graph()


def reshape(new_shape=(3, 4)):
    g = G()
    return g.op(Op.RESHAPE, [g.inp((2, 6)), g.shape(new_shape)], [g.out(new_shape, "int8")],
                "ReshapeAttribute").graph()


def reverse(axis=1):
    g = G()
    return g.op(Op.REVERSE, [g.inp((2, 3))], [g.out((2, 3), "int8")], "ReverseAttribute", axis).graph()


def slice_(start=(0, 1), size=(2, 2)):
    g = G()
    ins = [g.inp((2, 3)), g.shape(start), g.shape(size)]
    return g.op(Op.SLICE, ins, [g.out(size, "int8")], "SliceAttribute").graph()


def tile(multiples=(2, 1), out_shape=(4, 3)):
    g = G()
    return g.op(Op.TILE, [g.inp((2, 3)), g.shape(multiples)], [g.out(out_shape, "int8")],
                "TileAttribute").graph()


def transpose(perms=(1, 0), out_shape=(3, 2)):
    g = G()
    return g.op(Op.TRANSPOSE, [g.inp((2, 3))], [g.out(out_shape, "int8")], "TransposeAttribute",
                list(perms)).graph()


def gather(idx_shape=(1, 5)):
    g = G()
    return g.op(Op.GATHER, [g.inp((1, 4, 3)), g.inp(idx_shape, "int32")], [g.out((1, 5, 3), "int8")],
                "GatherAttribute").graph()


def scatter(input_shape=(1, 2, 3)):
    g = G()
    ins = [g.inp((1, 4, 3)), g.inp((1, 2), "int32"), g.inp(input_shape)]
    return g.op(Op.SCATTER, ins, [g.out((1, 4, 3), "int8")], "ScatterAttribute").graph()


def resize(scale=(2, 1, 2, 1), offset=(0, 0), border=(0, 0), in_hw=(4, 4), out_hw=(7, 7),
           mode=ts.ResizeMode.NEAREST, out_dt="int8"):
    g = G()
    ins = [g.inp((1, *in_hw, 2)), g.shape(scale), g.shape(offset), g.shape(border)]
    return g.op(Op.RESIZE, ins, [g.out((1, *out_hw, 2), out_dt)], "ResizeAttribute", mode).graph()


def cast(in_dt="int8", out_dt="int32"):
    g = G()
    return g.op(Op.CAST, [g.inp((4,), in_dt)], [g.out((4,), out_dt)], "CastAttribute").graph()


def rescale(in_dt="int32", out_dt="int8", shape=(2, 3), scale32=True, rounding=ts.RoundingMode.SINGLE_ROUND,
            per_channel=False, in_u=False, out_u=False, n_mult=None, mul_dt=None, shift=30, in_zp=0,
            out_zp=0):
    g = G()
    n = n_mult if n_mult is not None else (shape[-1] if per_channel else 1)
    ins = [g.inp(shape, in_dt), g.const([1 << 14] * n, mul_dt or ("int32" if scale32 else "int16")),
           g.const([shift] * n, "int8"), g.zp(in_zp, in_dt), g.zp(out_zp, out_dt)]
    return g.op(Op.RESCALE, ins, [g.out(shape, out_dt)], "RescaleAttribute", scale32, rounding,
                per_channel, in_u, out_u).graph()


def identity(dt="int48"):
    g = G()
    return g.op(Op.IDENTITY, [g.inp((4,), dt)], [g.out((4,), dt)], "IdentityAttribute").graph()


def unary_op(op, attr, dt="int8"):
    g = G()
    return g.op(op, [g.inp((4,), dt)], [g.out((4,), dt)], attr).graph()


def cond_if(then_in=(2,), nested=0):
    """COND_IF over (bool[1], int32[2]); with `nested` > 0 each then-branch holds the next COND_IF.

    Every branch takes (condition, x) and returns x; `then_in` changes x in the innermost
    then-branch of a non-nested COND_IF, to break the list-shape rule.
    """
    g = G()

    def cond_if_op(level):
        c = g.inp((1,), "bool")
        g.op(Op.COND_IF, [c, c, g.inp((2,), "int32")], [g.out((2,), "int32")], "CondIfAttribute",
             f"then{level}", f"else{level}")

    cond_if_op(0)
    for level in range(nested + 1):
        for kind in ("then", "else"):
            g.ser.startRegion(f"{kind}{level}")
            g.ser.addBasicBlock(f"{kind}{level}")
            if kind == "then" and level < nested:
                cond_if_op(level + 1)
                continue
            shape = then_in if (kind == "then" and nested == 0) else (2,)
            g.inp((1,), "bool")
            g.op(Op.IDENTITY, [g.inp(shape, "int32")], [g.out(shape, "int32")], "IdentityAttribute")
    return g.graph()


def custom():
    g = G()
    return g.op(Op.CUSTOM, [g.inp((4,))], [g.out((4,), "int8")], "CustomAttribute", "my_op", "my_domain",
                []).graph()


# ---- IR graphs for graph-level rules (the loader refuses some of these forms itself) ----------

def ir_graph(tensors, ops, inputs, outputs):
    t = {name: Tensor(name, tuple(shape), dt, None if data is None else np.asarray(data))
         for name, shape, dt, data in tensors}
    return Graph(t, [Operator(*o[:3], o[3] if len(o) > 3 else {}, index=i) for i, o in enumerate(ops)],
                 list(inputs), list(outputs))


def ir_shape_input():
    return ir_graph([("s", (2,), "shape", None)], [], ["s"], ["s"])


def ir_produced_twice():
    return ir_graph([("x", (4,), "int32", None), ("y", (4,), "int32", None)],
                    [("ABS", ["x"], ["y"]), ("CLZ", ["x"], ["y"])], ["x"], ["y"])


def ir_undeclared():
    return ir_graph([("x", (4,), "int32", None), ("y", (4,), "int32", None)],
                    [("ABS", ["ghost"], ["y"])], ["x"], ["y"])


def ir_unproduced():
    return ir_graph([("x", (4,), "int32", None), ("t", (4,), "int32", None), ("y", (4,), "int32", None)],
                    [("ADD", ["x", "t"], ["y"])], ["x"], ["y"])


def ir_cycle():
    return ir_graph([("x", (4,), "int32", None), ("a", (4,), "int32", None), ("b", (4,), "int32", None)],
                    [("ADD", ["x", "b"], ["a"]), ("ABS", ["a"], ["b"])], ["x"], ["b"])


def ir_out_of_order():
    return ir_graph([("x", (4,), "int32", None), ("a", (4,), "int32", None), ("b", (4,), "int32", None)],
                    [("ABS", ["a"], ["b"]), ("CLZ", ["x"], ["a"])], ["x"], ["b"])


def ir_variable_declares_a_plain_tensor():
    return ir_graph([("x", (4,), "int8", None), ("y", (4,), "int8", None)],
                    [("VARIABLE", ["x"], ["y"])], ["x"], ["y"])


def ir_huge(dt="int32"):
    return ir_graph([("x", (1 << 29,), dt, None), ("y", (1 << 29,), dt, None)],
                    [("ABS", ["x"], ["y"])], ["x"], ["y"])


def ir_rank7():
    s = (1, 2, 1, 2, 1, 2, 1)
    return ir_graph([("a", s, "int32", None), ("b", s, "int32", None), ("y", s, "int32", None)],
                    [("ADD", ["a", "b"], ["y"])], ["a", "b"], ["y"])


def ir_version():
    g = ir_graph([("x", (4,), "int32", None), ("y", (4,), "int32", None)], [("ABS", ["x"], ["y"])],
                 ["x"], ["y"])
    g.version = (1, 1, 0)
    return g


VALID = [
    ("conv2d", conv2d, {}),
    ("conv2d_int16", lambda: conv2d(in_dt="int16", bias_dt="int48", out_dt="int48", acc=DType.INT48),
     {"extensions": ("EXT-INT16",)}),
    ("conv2d_int4", lambda: conv2d(w_dt="int4"), {"extensions": ("EXT-INT4",)}),
    ("conv2d_stride2_pad", lambda: conv2d(pad=(1, 0, 1, 0), stride=(2, 2), out_shape=(1, 4, 4, 2)), {}),
    ("conv2d_bias1", lambda: conv2d(bias_len=1), {}),
    ("depthwise", depthwise, {}), ("conv3d", conv3d, {}), ("transpose_conv2d", transpose_conv2d, {}),
    ("avg_pool", avg_pool, {}), ("max_pool", max_pool, {}), ("matmul", matmul, {"extensions": ALL_EXT}),
    ("argmax", argmax, {}), ("add_broadcast", lambda: binary(s2=(1, 3)), {}),
    ("equal", lambda: binary(Op.EQUAL, "EqualAttribute", out_dt="bool"), {}),
    ("mul_i32_shift", lambda: mul("int32", 15), {}), ("table", table, {}), ("clamp", clamp, {}),
    ("negate", lambda: negate("int8", 5), {}), ("select", select, {}), ("reduce_sum", reduce_sum, {}),
    ("concat", concat, {}), ("pad", pad, {}), ("reshape", reshape, {}), ("reverse", reverse, {}),
    ("slice", slice_, {}), ("tile", tile, {}), ("transpose", transpose, {}), ("gather", gather, {}),
    ("scatter", scatter, {}), ("resize", resize, {}),
    ("resize_bilinear", lambda: resize(mode=ts.ResizeMode.BILINEAR, out_dt="int32"), {}),
    ("cast", cast, {}), ("rescale", rescale, {}),
    ("rescale_per_channel", lambda: rescale(per_channel=True), {}),
    ("rescale_uint8_in", lambda: rescale("int8", "int8", in_u=True, in_zp=-128), {}),
    ("rescale_uint16_out", lambda: rescale("int8", "int16", out_u=True, out_zp=-32768), {}),
    ("rescale_double_round", lambda: rescale(rounding=ts.RoundingMode.DOUBLE_ROUND),
     {"extensions": ("EXT-DOUBLEROUND",)}),
    ("rescale_int48", lambda: rescale("int48", "int16", scale32=False, shift=14), {"extensions": ALL_EXT}),
    ("cond_if", cond_if, {"extensions": ("EXT-CONTROLFLOW",)}),
    ("cond_if_nested_6", lambda: cond_if(nested=5), {"extensions": ("EXT-CONTROLFLOW",)}),
    ("identity_int48", identity, {"extensions": ("EXT-INT16",)}),
    ("clz", lambda: unary_op(Op.CLZ, "ClzAttribute", "int32"), {}),
]


@pytest.mark.parametrize("build,kwargs", [v[1:] for v in VALID], ids=[v[0] for v in VALID])
def test_valid_graphs_pass(build, kwargs):
    assert validate(build(), **kwargs) is None


V, U = ValidationError, UnsupportedError
INVALID = [
    # (id, builder, validate kwargs, error type, operator named in the message, text in the rule)
    # -- tensor operators
    ("conv2d_output_shape", lambda: conv2d(out_shape=(1, 7, 6, 2)), {}, V, "CONV2D",
     "OH != idiv_check(IH - 1 + pad_top + pad_bottom - (KH - 1) * dilation_y, stride_y) + 1"),
    ("conv2d_non_integer_output", lambda: conv2d(stride=(2, 2), out_shape=(1, 3, 3, 2)), {}, V, "CONV2D",
     "idiv_check"),
    ("conv2d_negative_pad", lambda: conv2d(pad=(-1, 0, 0, 0)), {}, V, "CONV2D", "pad_top < 0"),
    ("conv2d_dilation_zero", lambda: conv2d(dilation=(0, 1)), {}, V, "CONV2D", "dilation_y < 1"),
    ("conv2d_int16_input_zp", lambda: conv2d(in_dt="int16", bias_dt="int48", out_dt="int48",
                                             acc=DType.INT48, in_zp=3), {"extensions": ("EXT-INT16",)},
     V, "CONV2D", "!is_same<in_t,i8_t>() && input_zp != 0"),
    ("conv2d_int16_needs_ext", lambda: conv2d(in_dt="int16", bias_dt="int48", out_dt="int48",
                                              acc=DType.INT48, bias_as_input=True), {}, U, "CONV2D",
     "EXT-INT16"),
    ("conv2d_int48_bias_const_needs_ext", lambda: conv2d(in_dt="int16", bias_dt="int48", out_dt="int48",
                                                         acc=DType.INT48), {}, U, "CONST", "EXT-INT16"),
    ("conv2d_acc_type", lambda: conv2d(acc=DType.INT48), {}, V, "CONV2D", "WrongAccumulatorType"),
    ("conv2d_bias_type", lambda: conv2d(bias_dt="int16"), {}, V, "CONV2D", "WrongBiasType"),
    ("conv2d_output_type", lambda: conv2d(out_dt="int8"), {}, V, "CONV2D", "WrongOutputType"),
    ("conv2d_bias_shape", lambda: conv2d(bias_len=3), {}, V, "CONV2D", "BC != OC && BC != 1"),
    ("conv2d_zp_not_ctc", lambda: conv2d(zp_as_input=True), {}, V, "CONV2D", "compile-time constant"),
    ("conv2d_rank", lambda: conv2d(in_shape=(1, 1, 8, 8, 4)), {}, V, "CONV2D", "rank(input) != 4"),
    ("conv2d_channels", lambda: conv2d(w_shape=(2, 3, 3, 5)), {}, V, "CONV2D",
     "shape(weight) != [OC,KH,KW,IC]"),
    ("conv2d_input_list", lambda: conv2d(drop_input=True), {}, V, "CONV2D", "WrongInputList"),
    ("conv2d_int4_needs_ext", lambda: conv2d(w_dt="int4"), {}, U, "CONST", "EXT-INT4"),
    ("conv2d_dilation_kernel_level", lambda: conv2d(in_shape=(1, 8193, 1, 4), w_shape=(2, 2, 1, 4),
                                                    out_shape=(1, 1, 1, 2), dilation=(8192, 1)),
     {}, V, "CONV2D", "LEVEL 8K: dilation_y * KH <= MAX_KERNEL"),
    ("conv2d_pad_level", lambda: conv2d(in_shape=(1, 1, 2, 4), w_shape=(2, 1, 1, 4), out_shape=(1, 1, 2, 2),
                                        pad=(0, 0, 0, 8193), stride=(1, 8194)),
     {}, V, "CONV2D", "LEVEL 8K: pad_right <= MAX_KERNEL"),
    ("depthwise_bias_shape", lambda: depthwise(bias_len=4), {}, V, "DEPTHWISE_CONV2D",
     "BC != C*M && BC != 1"),
    ("depthwise_channels", lambda: depthwise(out_shape=(1, 6, 6, 4), bias_len=1), {}, V,
     "DEPTHWISE_CONV2D", "[N,OH,OW,C*M]"),
    ("conv3d_output_shape", lambda: conv3d(out_shape=(1, 3, 6, 6, 2)), {}, V, "CONV3D", "OD != idiv_check"),
    ("transpose_conv2d_output", lambda: transpose_conv2d(out_shape=(1, 11, 10, 2)), {}, V,
     "TRANSPOSE_CONV2D", "OH != (IH - 1) * stride_y + out_pad_top + out_pad_bottom + KH"),
    ("transpose_conv2d_out_pad", lambda: transpose_conv2d(out_pad=(-3, 0, 0, 0), out_shape=(1, 7, 10, 2)),
     {}, V, "TRANSPOSE_CONV2D", "out_pad_top <= -KH"),
    ("avg_pool_pad_ge_kernel", lambda: avg_pool(pad=(2, 0, 0, 0), out_shape=(1, 5, 4, 3)), {}, V,
     "AVG_POOL2D", "pad_top >= kernel_y"),
    ("avg_pool_kernel_zero", lambda: avg_pool(kernel=(0, 2)), {}, V, "AVG_POOL2D", "kernel_y < 1"),
    ("avg_pool_int16_zp", lambda: avg_pool(dt="int16", zp=1), {"extensions": ("EXT-INT16",)}, V,
     "AVG_POOL2D", "input_zp != 0"),
    ("max_pool_non_integer", lambda: max_pool(kernel=(3, 3), out_shape=(1, 3, 3, 3)), {}, V, "MAX_POOL2D",
     "OH != idiv_check(IH + pad_top + pad_bottom - kernel_y, stride_y) + 1"),
    ("matmul_int16_zp", lambda: matmul(a_zp=2), {"extensions": ALL_EXT}, V, "MATMUL", "A_zp != 0"),
    ("matmul_shapes", lambda: matmul(b_shape=(1, 6, 5)), {"extensions": ALL_EXT}, V, "MATMUL",
     "shape(B) != [N,C,W]"),
    ("argmax_axis", lambda: argmax(axis=3), {}, V, "ARGMAX", "axis < 0 || axis >= rank(shape1)"),
    ("argmax_output", lambda: argmax(out_shape=(2, 3)), {}, V, "ARGMAX", "flatten(left_shape, right_shape)"),
    # -- elementwise
    ("add_broadcast", lambda: binary(s2=(2, 4), out=(2, 4)), {}, V, "ADD", "broadcast_shape"),
    ("add_output_shape", lambda: binary(out=(2, 4)), {}, V, "ADD", "shape != broadcast_shape(shape1, shape2)"),
    ("add_rank", lambda: binary(s2=(3,)), {}, V, "ADD", "rank(shape1) != rank(shape2)"),
    ("add_int8", lambda: binary(dt="int8"), {}, V, "ADD", "WrongInputType"),
    ("equal_output_type", lambda: binary(Op.EQUAL, "EqualAttribute", out_dt="int32"), {}, V, "EQUAL",
     "WrongOutputType"),
    ("mul_shift_int8", lambda: mul("int8", 2), {}, V, "MUL", "REQUIRE: is_same<in_t,int32_t>() || shift == 0"),
    ("mul_shift_range", lambda: mul("int32", 64), {}, V, "MUL", "0 <= shift && shift <= 63"),
    ("table_size", lambda: table(255), {}, V, "TABLE", "length(table) == TABLE_SIZE"),
    ("clamp_max_lt_min", lambda: clamp(5, -5), {}, V, "CLAMP", "max_val < min_val"),
    ("negate_int16_zp", lambda: negate("int16", 3), {}, V, "NEGATE", "input1_zp != 0"),
    ("select_condition_type", lambda: select("int8"), {}, V, "SELECT", "type(input1) != bool"),
    ("abs_int8", lambda: unary_op(Op.ABS, "AbsAttribute", "int8"), {}, V, "ABS", "WrongInputType"),
    # -- reductions and data layout
    ("reduce_axis_not_one", lambda: reduce_sum(out_shape=(2, 3, 4)), {}, V, "REDUCE_SUM", "shape[axis] != 1"),
    ("reduce_axis_range", lambda: reduce_sum(axis=3), {}, V, "REDUCE_SUM", "axis >= rank(shape1)"),
    ("concat_sum", lambda: concat(out_shape=(2, 8)), {}, V, "CONCAT", "axis_sum != shape[axis]"),
    ("concat_dims", lambda: concat(out_shape=(2, 7), axis=0), {}, V, "CONCAT",
     "shapes1[shape_index][axis_index] != shapes1[0][axis_index]"),
    ("pad_negative", lambda: pad(padding=(-1, 1, 0, 2), out_shape=(2, 5)), {}, V, "PAD",
     "padding[i * 2] < 0"),
    ("pad_length", lambda: pad(padding=(1, 1)), {}, V, "PAD", "length(padding) != 2*rank(shape1)"),
    ("pad_output", lambda: pad(out_shape=(4, 6)), {}, V, "PAD", "shape[i] != padding[i * 2] + shape1[i]"),
    ("reshape_size", lambda: reshape((3, 5)), {}, V, "RESHAPE", "tensor_size(shape1) != tensor_size(shape)"),
    ("reverse_axis", lambda: reverse(2), {}, V, "REVERSE", "axis >= rank(shape)"),
    ("slice_bounds", lambda: slice_(start=(0, 2), size=(2, 2)), {}, V, "SLICE",
     "start[index] + size[index] > shape1[index]"),
    ("tile_output", lambda: tile(out_shape=(4, 6)), {}, V, "TILE", "shape1[i] * multiples[i] != shape[i]"),
    ("transpose_perms", lambda: transpose(perms=(0, 0), out_shape=(2, 3)), {}, V, "TRANSPOSE",
     "indexes_used[index] == true"),
    ("transpose_output", lambda: transpose(perms=(0, 1), out_shape=(3, 2)), {}, V, "TRANSPOSE",
     "shape1[perms[i]] != shape[i]"),
    ("gather_batch", lambda: gather(idx_shape=(2, 5)), {}, V, "GATHER", "shape(indices) != [N,W]"),
    ("scatter_channels", lambda: scatter(input_shape=(1, 2, 4)), {}, V, "SCATTER", "shape(input) != [N,W,C]"),
    ("resize_scale_n", lambda: resize(scale=(4096, 2048, 2, 1)), {}, V, "RESIZE", "scale_y_n > (1 << 11)"),
    ("resize_output", lambda: resize(out_hw=(8, 7)), {}, V, "RESIZE", "OH != idiv_check"),
    ("resize_offset", lambda: resize(offset=(-3, 0)), {}, V, "RESIZE", "offset_y < -scale_y_n"),
    ("resize_mode_type", lambda: resize(out_dt="int32"), {}, V, "RESIZE", "WrongOutputType"),
    # -- type conversion
    ("cast_same_type", lambda: cast("int8", "int8"), {}, V, "CAST", "WrongOutputType"),
    ("rescale_scale32_int48", lambda: rescale("int48", "int8", scale32=True), {"extensions": ALL_EXT}, V,
     "RESCALE", "scale32 && is_same<in_t,i48_t>()"),
    ("rescale_double_round_scale16", lambda: rescale(scale32=False, rounding=ts.RoundingMode.DOUBLE_ROUND,
                                                     shift=14), {"extensions": ALL_EXT}, V, "RESCALE",
     "!scale32 && (rounding_mode == DOUBLE_ROUND)"),
    ("rescale_double_round_ext", lambda: rescale(rounding=ts.RoundingMode.DOUBLE_ROUND), {}, U, "RESCALE",
     "EXT-DOUBLEROUND"),
    ("rescale_inexact_ext", lambda: rescale(rounding=ts.RoundingMode.INEXACT_ROUND), {}, U, "RESCALE",
     "EXT-INEXACTROUND"),
    ("rescale_both_unsigned", lambda: rescale("int8", "int8", in_u=True, out_u=True), {}, V, "RESCALE",
     "input_unsigned && output_unsigned"),
    ("rescale_per_channel_rank0", lambda: rescale("int8", "int8", shape=(), per_channel=True, n_mult=1),
     {}, V, "RESCALE", "per_channel && rank(input) < 1"),
    ("rescale_multiplier_count", lambda: rescale(per_channel=True, n_mult=2), {}, V, "RESCALE",
     "shape(multiplier) != [NC]"),
    ("rescale_multiplier_type", lambda: rescale(mul_dt="int16"), {}, V, "RESCALE", "type(multiplier) != mul_t"),
    ("rescale_zero_point", lambda: rescale(in_zp=5), {}, V, "RESCALE", "input_zp != 0"),
    ("rescale_uint16_zp", lambda: rescale("int16", "int8", in_u=True, in_zp=5), {}, V, "RESCALE",
     "input_zp != 32768"),
    ("rescale_shift_range", lambda: rescale(shift=63), {}, V, "RESCALE", "REQUIRE: 2 <= shift"),
    # -- data nodes, extensions, unsupported operators
    ("identity_int48_needs_ext", identity, {}, U, "IDENTITY", "EXT-INT16"),
    ("sigmoid_is_pro_fp", lambda: unary_op(Op.SIGMOID, "SigmoidAttribute"), {}, U, "SIGMOID", "PRO-FP"),
    ("custom", custom, {}, U, "CUSTOM", "implementation-defined"),
    ("cond_if_needs_ext", cond_if, {}, U, "COND_IF", "EXT-CONTROLFLOW"),
    ("cond_if_branch_mismatch", lambda: cond_if(then_in=(3,)), {"extensions": ("EXT-CONTROLFLOW",)}, V,
     "COND_IF", "tensor_list_shape(input_list) != tosa_input_shape(then_graph)"),
    ("cond_if_nesting", lambda: cond_if(nested=6), {"extensions": ("EXT-CONTROLFLOW",)}, V, "COND_IF",
     "tosa_nesting_depth >= MAX_NESTING"),
    # -- graph-level rules (IR built directly)
    ("graph_input_shape_t", ir_shape_input, {}, V, "", "shape_t"),
    ("tensor_produced_twice", ir_produced_twice, {}, V, "CLZ", "produced more than once"),
    ("undeclared_tensor", ir_undeclared, {}, V, "ABS", "not a tensor of the graph"),
    ("tensor_never_produced", ir_unproduced, {}, V, "ADD", "operator input is not defined"),
    ("cycle", ir_cycle, {}, V, "", "acyclic"),
    ("read_before_written", ir_out_of_order, {}, V, "ABS", "tensor read before it is written"),
    ("variable_names_plain_tensor", ir_variable_declares_a_plain_tensor,
     {"extensions": ("EXT-VARIABLE",)}, V, "VARIABLE", "operand is not a variable tensor"),
    ("tensor_size_level", ir_huge, {}, V, "ABS", "LEVEL 8K: tensor size in bytes < 2^MAX_LOG2_SIZE"),
    ("rank7_level", ir_rank7, {}, V, "ADD", "LEVEL 8K: rank(input1) <= MAX_RANK"),
    ("stride_level", lambda: max_pool(kernel=(1, 1), stride=(8193, 1), in_shape=(1, 1, 1, 1),
                                      out_shape=(1, 1, 1, 1)), {}, V, "MAX_POOL2D",
     "LEVEL 8K: stride_y <= MAX_STRIDE"),
    ("resize_scale_level", lambda: resize(scale=(512, 1, 2, 1), in_hw=(2, 4), out_hw=(513, 7)), {}, V,
     "RESIZE", "LEVEL 8K: scale_y_n/scale_y_d <= MAX_SCALE"),
]


@pytest.mark.parametrize("build,kwargs,exc,op_name,rule", [c[1:] for c in INVALID],
                         ids=[c[0] for c in INVALID])
def test_invalid_graphs_refused(build, kwargs, exc, op_name, rule):
    graph = build()
    with pytest.raises(exc) as info:
        validate(graph, **kwargs)
    err = info.value
    text = str(err)
    assert "\n" not in text
    assert op_name in text
    if exc is ValidationError:
        assert err.rule.startswith(("ERROR_IF: ", "REQUIRE: ", "LEVEL 8K: ")), err.rule
        assert rule in err.rule, text
        if op_name:
            assert op_name in err.op
    else:
        assert rule in text


# ---- level 8K against no level -----------------------------------------------------------------

LEVEL_CASES = [
    ("stride_8193_pool", lambda: max_pool(kernel=(1, 1), stride=(8193, 1), in_shape=(1, 1, 1, 1),
                                          out_shape=(1, 1, 1, 1))),
    ("stride_8193_conv", lambda: conv2d(in_shape=(1, 1, 1, 4), w_shape=(2, 1, 1, 4), out_shape=(1, 1, 1, 2),
                                        stride=(1, 8193))),
    ("rank_7", ir_rank7),
    ("tensor_4GiB", ir_huge),
    ("resize_scale_512", lambda: resize(scale=(512, 1, 2, 1), in_hw=(2, 4), out_hw=(513, 7))),
]


@pytest.mark.parametrize("build", [c[1] for c in LEVEL_CASES], ids=[c[0] for c in LEVEL_CASES])
def test_level_8k_refuses_what_no_level_accepts(build):
    graph = build()
    with pytest.raises(ValidationError) as info:
        validate(graph, level="8K")
    assert info.value.rule.startswith("LEVEL 8K: ")
    validate(graph, level="none")


def test_configuration_errors():
    graph = binary()
    with pytest.raises(UnsupportedError, match="unknown TOSA 1.0 profile"):
        validate(graph, profiles="PRO-MI")
    with pytest.raises(UnsupportedError, match="EXT-BF16 extends PRO-FP"):
        validate(graph, extensions=("EXT-BF16",))
    validate(graph, profiles=("PRO-INT", "tosa-pro-fp"), extensions=("bf16", "EXT-FFT"))
    with pytest.raises(UnsupportedError, match="TOSA 1.1"):
        validate(graph, extensions=("EXT-INT64",))
    with pytest.raises(UnsupportedError, match="level"):
        validate(graph, level="16K")
    with pytest.raises(UnsupportedError, match="TOSA version 1.1"):
        validate(ir_version())
    # spellings the config and the conformance descriptors use
    validate(graph, profiles="tosa-pro-int", extensions=("tosa-ext-int16", "int4"), level="none")


def test_message_format():
    with pytest.raises(ValidationError) as info:
        validate(conv2d(out_shape=(1, 7, 6, 2)))
    text = str(info.value)
    assert text.startswith("operator #")
    assert "CONV2D -> result-0" in text
    assert "output height 7 does not equal" in text and "= 6 [" in text
    assert text.endswith("]") and "[ERROR_IF: OH != idiv_check(" in text
