"""The TOSA 1.0 argument and type-support tables (PRO-INT, PRO-FP and extensions), as data.

One `Spec` per operator, transcribed from the argument tables and <typesupport> rows of the
specification (tosa.xml, v1.0.2). The generic checks in `operands.py` read it for operand
counts, ranks, shapes (dimension symbols such as N, IC, OC are unified across operands),
element types, compile-time-constant (CTC) status and the extension a type row needs.

Shape templates:
  "N,IH,IW,IC"  fixed rank; symbols are unified across operands; integers must match;
                tokens that are not plain symbols (C*M, ?) are left to the operator's check
  "@shape1"     the whole shape is a symbol (rank range in `rank`, None = MAX_RANK,
                "MAX-1" = MAX_RANK - 1); operands with the same symbol must have equal shapes
  "*"           any shape in the `rank` range; the operator's check handles it
"""
from __future__ import annotations

from npu_sim.isa.records import record

MAX = None          # rank bound: the level's MAX_RANK
MAX_1 = "MAX-1"     # rank bound: MAX_RANK - 1

I4, I8, I16, I32, I48, BOOL, SHAPE = "int4", "int8", "int16", "int32", "int48", "bool", "shape"
FP32, FP16, BF16, FP8E4M3, FP8E5M2 = "fp32", "fp16", "bf16", "fp8e4m3", "fp8e5m2"
PRO_FP = "PRO-FP"       # the need of a PRO-FP type row (rows without a need are PRO-INT's)
TYPE_VARS = ("in_t", "out_t", "in_out_t", "weight_t", "acc_t", "table_t", "index_t", "mode")


@record(frozen=True)
class Arg:
    name: str
    type: str | None            # type variable (in_t, ...), a literal dtype, or None (op checks it)
    shape: str                  # template, see module docstring
    rank: tuple = (0, MAX)      # for "@..." and "*" templates
    ctc: bool = False           # must be produced by CONST / CONST_SHAPE (unless EXT-DYNAMIC)
    is_list: bool = False       # tensor_list_t: takes all remaining operands
    role: str = ""              # "bias" for WrongBiasType messages

    @property
    def dims(self) -> tuple | None:
        if self.shape.startswith("@") or self.shape == "*":
            return None
        return tuple(int(t) if t.lstrip("-").isdigit() else t for t in self.shape.split(","))


@record(frozen=True)
class Spec:
    inputs: tuple
    outputs: tuple
    rows: tuple                            # type-support rows: dicts, key "ext" = extension
    attr_types: tuple = ()                 # (type variable, attribute key), e.g. ("acc_t", "acc_type")
    extension: str | None = None           # extension the operator itself needs


def T(name, type_, shape, rank=(0, MAX), ctc=False, role=""):
    return Arg(name, type_, shape, rank, ctc, False, role)


def L(name, type_, rank=(0, MAX), ctc=False):
    return Arg(name, type_, "*", rank, ctc, True)


def R(ext=None, **types):
    row = dict(types)
    row["ext"] = ext
    return row


def _rows(var: str, *dtypes, **ext_dtypes):
    """Rows for a single type variable: plain PRO-INT dtypes, then ext=(dtype, ...) extras."""
    rows = [R(**{var: d}) for d in dtypes]
    for ext, ds in ext_dtypes.items():
        rows += [R(ext, **{var: d}) for d in ds]
    return tuple(rows)


# ---- shared argument lists -----------------------------------------------------------------

def _zp(name, type_):
    return T(name, type_, "1", ctc=True)


_CONV_ROWS = (
    R(None, in_t=I8, weight_t=I8, out_t=I32, acc_t=I32),
    R("EXT-INT4", in_t=I8, weight_t=I4, out_t=I32, acc_t=I32),
    R("EXT-INT16", in_t=I16, weight_t=I8, out_t=I48, acc_t=I48),
    R("EXT-FP8E4M3", in_t=FP8E4M3, weight_t=FP8E4M3, out_t=FP16, acc_t=FP16),
    R("EXT-FP8E5M2", in_t=FP8E5M2, weight_t=FP8E5M2, out_t=FP16, acc_t=FP16),
    R(PRO_FP, in_t=FP16, weight_t=FP16, out_t=FP16, acc_t=FP16),
    R(PRO_FP, in_t=FP16, weight_t=FP16, out_t=FP16, acc_t=FP32),
    R("EXT-BF16", in_t=BF16, weight_t=BF16, out_t=BF16, acc_t=FP32),
    R(PRO_FP, in_t=FP32, weight_t=FP32, out_t=FP32, acc_t=FP32),
)


def _conv(input_shape, weight_shape, output_shape):
    return Spec(
        inputs=(T("input", "in_t", input_shape), T("weight", "weight_t", weight_shape),
                T("bias", "out_t", "BC", role="bias"), _zp("input_zp", "in_t"),
                _zp("weight_zp", "weight_t")),
        outputs=(T("output", "out_t", output_shape),),
        rows=_CONV_ROWS, attr_types=(("acc_t", "acc_type"),))


def _binary(rows, in_var="in_out_t", out_var="in_out_t"):
    return Spec(inputs=(T("input1", in_var, "@shape1"), T("input2", in_var, "@shape2")),
                outputs=(T("output", out_var, "@shape"),), rows=rows)


def _unary(rows, in_var="in_out_t", out_var="in_out_t"):
    return Spec(inputs=(T("input1", in_var, "@shape"),), outputs=(T("output", out_var, "@shape"),),
                rows=rows)


def _reduce(rows):
    return Spec(inputs=(T("input", "in_out_t", "@shape1", (1, MAX)),),
                outputs=(T("output", "in_out_t", "@shape", (1, MAX)),), rows=rows)


_I8_16_32 = _rows("in_out_t", I8, I16, I32)
_I32 = _rows("in_out_t", I32)
_FP = {PRO_FP: (FP16, FP32), "EXT-BF16": (BF16,)}                 # PRO-FP's float rows
_FP_ALL = {**_FP, "EXT-FP8E4M3": (FP8E4M3,), "EXT-FP8E5M2": (FP8E5M2,)}   # ... with fp8
_I32_FP = _rows("in_out_t", I32, **_FP)
_FP_ONLY = _rows("in_out_t", **_FP)
_I8_16_32_FP = _rows("in_out_t", I8, I16, I32, **_FP)
_LAYOUT_FP = _rows("in_out_t", BOOL, I8, I16, I32, **_FP_ALL)


def _fp_rows(var: str, exts=_FP, **other):
    """One row per float type of `exts` for type variable `var` (plus fixed `other` types)."""
    return tuple(R(ext, **{var: d}, **other) for ext, ds in exts.items() for d in ds)
_BOOL = _rows("in_out_t", BOOL)
_LAYOUT = _rows("in_out_t", BOOL, I8, I16, I32)
_CMP = (R(in_t=I32, out_t=BOOL),) + _fp_rows("in_t", out_t=BOOL)
# bool GATHER/SCATTER: tosa.xml adds the row in 1.1 (version_added="1.1"), but Arm's generator
# makes 1.0 PRO-INT tests of it and the reference model runs them; npu-sim follows the model.
_GATHER_ROWS = tuple(R(in_out_t=d, index_t=I32) for d in (BOOL, I8, I16, I32)) \
    + _fp_rows("in_out_t", _FP_ALL, index_t=I32)

# CAST's float rows, by the extension (or profile) each needs ([SPEC] tosa.xml CAST)
_FP_CASTS = {
    PRO_FP: [(i, f) for i in (I8, I16, I32) for f in (FP16, FP32)]
    + [(f, i) for f in (FP16, FP32) for i in (I8, I16, I32)] + [(FP16, FP32), (FP32, FP16)],
    "EXT-BF16": [(i, BF16) for i in (I8, I16, I32)] + [(BF16, i) for i in (I8, I16, I32)]
    + [(BF16, FP8E4M3), (BF16, FP8E5M2), (BF16, FP32), (FP32, BF16)],
    "EXT-FP8E4M3": [(FP8E4M3, f) for f in (FP16, BF16, FP32)] + [(FP16, FP8E4M3), (FP32, FP8E4M3)],
    "EXT-FP8E5M2": [(FP8E5M2, f) for f in (FP16, BF16, FP32)] + [(FP16, FP8E5M2), (FP32, FP8E5M2)],
}


def _SHAPE_ARG(name, ctc=False):
    return T(name, SHAPE, "*", (1, 1), ctc=ctc)


def _shape(inputs: int, outputs: int = 1) -> Spec:
    """An elementwise shape operator: shape_t operands (compile-time constants) of one length."""
    names = ("input1", "input2") if inputs == 2 else ("input",)
    return Spec(inputs=tuple(_SHAPE_ARG(n, ctc=True) for n in names),
                outputs=(_SHAPE_ARG("output"),) * outputs, rows=(R(),), extension="EXT-SHAPE")


SPECS: dict[str, Spec] = {
    # ---- tensor operators ------------------------------------------------------------------
    "ARGMAX": Spec(inputs=(T("input", "in_t", "@shape1", (1, MAX)),),
                   outputs=(T("output", "out_t", "@shape", (0, MAX_1)),),
                   rows=(R(in_t=I8, out_t=I32), R("EXT-INT16", in_t=I16, out_t=I32))
                   + _fp_rows("in_t", _FP_ALL, out_t=I32)),
    "AVG_POOL2D": Spec(
        inputs=(T("input", "in_out_t", "N,IH,IW,C"), _zp("input_zp", "in_out_t"),
                _zp("output_zp", "in_out_t")),
        outputs=(T("output", "in_out_t", "N,OH,OW,C"),),
        rows=(R(in_out_t=I8, acc_t=I32), R("EXT-INT16", in_out_t=I16, acc_t=I32),
              R("EXT-FP8E4M3", in_out_t=FP8E4M3, acc_t=FP16),
              R("EXT-FP8E5M2", in_out_t=FP8E5M2, acc_t=FP16),
              R(PRO_FP, in_out_t=FP16, acc_t=FP16), R(PRO_FP, in_out_t=FP16, acc_t=FP32),
              R("EXT-BF16", in_out_t=BF16, acc_t=FP32), R(PRO_FP, in_out_t=FP32, acc_t=FP32)),
        attr_types=(("acc_t", "acc_type"),)),
    "CONV2D": _conv("N,IH,IW,IC", "OC,KH,KW,IC", "N,OH,OW,OC"),
    "CONV3D": _conv("N,ID,IH,IW,IC", "OC,KD,KH,KW,IC", "N,OD,OH,OW,OC"),
    "DEPTHWISE_CONV2D": _conv("N,IH,IW,C", "KH,KW,C,M", "N,OH,OW,C*M"),
    "TRANSPOSE_CONV2D": _conv("N,IH,IW,IC", "OC,KH,KW,IC", "N,OH,OW,OC"),
    "MATMUL": Spec(
        inputs=(T("A", "in_t", "N,H,C"), T("B", "in_t", "N,C,W"), _zp("A_zp", "in_t"),
                _zp("B_zp", "in_t")),
        outputs=(T("output", "out_t", "N,H,W"),),
        rows=(R(in_t=I8, out_t=I32), R("EXT-INT16", in_t=I16, out_t=I48),
              R("EXT-FP8E4M3", in_t=FP8E4M3, out_t=FP16), R("EXT-FP8E5M2", in_t=FP8E5M2, out_t=FP16),
              R(PRO_FP, in_t=FP16, out_t=FP16), R(PRO_FP, in_t=FP16, out_t=FP32),
              R("EXT-BF16", in_t=BF16, out_t=FP32), R(PRO_FP, in_t=FP32, out_t=FP32))),
    "FFT2D": Spec(inputs=(T("input_real", "in_out_t", "N,H,W"), T("input_imag", "in_out_t", "N,H,W")),
                  outputs=(T("output_real", "in_out_t", "N,H,W"),
                           T("output_imag", "in_out_t", "N,H,W")),
                  rows=(R("EXT-FFT", in_out_t=FP32),), extension="EXT-FFT"),
    "RFFT2D": Spec(inputs=(T("input_real", "in_out_t", "N,H,W"),),
                   outputs=(T("output_real", "in_out_t", "N,H,WO"),
                            T("output_imag", "in_out_t", "N,H,WO")),
                   rows=(R("EXT-FFT", in_out_t=FP32),), extension="EXT-FFT"),
    "MAX_POOL2D": Spec(inputs=(T("input", "in_out_t", "N,IH,IW,C"),),
                       outputs=(T("output", "in_out_t", "N,OH,OW,C"),),
                       rows=_rows("in_out_t", I8, **{"EXT-INT16": (I16,)}, **_FP_ALL)),
    # ---- activation --------------------------------------------------------------------------
    "CLAMP": Spec(inputs=(T("input", "in_out_t", "@shape"),),
                  outputs=(T("output", "in_out_t", "@shape"),),
                  rows=_rows("in_out_t", I8, **{"EXT-INT16": (I16,)}, **_FP)),
    # ---- elementwise binary --------------------------------------------------------------------
    "ADD": _binary(_I32_FP), "SUB": _binary(_I32_FP), "INTDIV": _binary(_I32),
    "MAXIMUM": _binary(_I32_FP), "MINIMUM": _binary(_I32_FP), "POW": _binary(_FP_ONLY),
    "ARITHMETIC_RIGHT_SHIFT": _binary(_I8_16_32), "LOGICAL_LEFT_SHIFT": _binary(_I8_16_32),
    "LOGICAL_RIGHT_SHIFT": _binary(_I8_16_32),
    "BITWISE_AND": _binary(_I8_16_32), "BITWISE_OR": _binary(_I8_16_32),
    "BITWISE_XOR": _binary(_I8_16_32),
    "LOGICAL_AND": _binary(_BOOL), "LOGICAL_OR": _binary(_BOOL), "LOGICAL_XOR": _binary(_BOOL),
    "MUL": Spec(inputs=(T("input1", "in_t", "@shape1"), T("input2", "in_t", "@shape2"),
                        T("shift", I8, "1", ctc=True)),
                outputs=(T("output", "out_t", "@shape"),),
                rows=(R(in_t=I8, out_t=I32), R(in_t=I16, out_t=I32), R(in_t=I32, out_t=I32))
                + tuple(R(ext, in_t=d, out_t=d) for ext, ds in _FP.items() for d in ds)),
    "TABLE": Spec(inputs=(T("input1", "in_t", "@shape"), T("table", "table_t", "TABLE_SIZE", ctc=True)),
                  outputs=(T("output", "out_t", "@shape"),),
                  rows=(R(in_t=I8, table_t=I8, out_t=I8, TABLE_SIZE=256),
                        R("EXT-INT16", in_t=I16, table_t=I16, out_t=I32, TABLE_SIZE=513))),
    # ---- elementwise unary ---------------------------------------------------------------------
    "ABS": _unary(_I32_FP), **{name: _unary(_FP_ONLY) for name in (
        "CEIL", "FLOOR", "EXP", "LOG", "RECIPROCAL", "RSQRT", "SIN", "COS", "ERF", "SIGMOID",
        "TANH")},
    "CLZ": _unary(_I32), "BITWISE_NOT": _unary(_I8_16_32),
    "LOGICAL_NOT": _unary(_BOOL),
    "NEGATE": Spec(inputs=(T("input1", "in_out_t", "@shape"), _zp("input1_zp", "in_out_t"),
                           _zp("output_zp", "in_out_t")),
                   outputs=(T("output", "in_out_t", "@shape"),), rows=_I8_16_32_FP),
    # ---- elementwise ternary / comparison --------------------------------------------------------
    "SELECT": Spec(inputs=(T("input1", BOOL, "@shape1"), T("input2", "in_out_t", "@shape2"),
                           T("input3", "in_out_t", "@shape3")),
                   outputs=(T("output", "in_out_t", "@shape"),),
                   rows=_rows("in_out_t", BOOL, I8, I16, I32, **_FP)),
    "EQUAL": _binary(_CMP, "in_t", "out_t"), "GREATER": _binary(_CMP, "in_t", "out_t"),
    "GREATER_EQUAL": _binary(_CMP, "in_t", "out_t"),
    # ---- reductions ----------------------------------------------------------------------------
    "REDUCE_ALL": _reduce(_BOOL), "REDUCE_ANY": _reduce(_BOOL),
    "REDUCE_MAX": _reduce(_I8_16_32_FP), "REDUCE_MIN": _reduce(_I8_16_32_FP),
    "REDUCE_SUM": _reduce(_I32_FP), "REDUCE_PRODUCT": _reduce(_FP_ONLY),
    # ---- data layout ---------------------------------------------------------------------------
    "CONCAT": Spec(inputs=(L("input1", "in_out_t", (1, MAX)),),
                   outputs=(T("output", "in_out_t", "@shape", (1, MAX)),),
                   rows=_rows("in_out_t", BOOL, I8, I32, **{"EXT-INT16": (I16,)}, **_FP_ALL)),
    "PAD": Spec(inputs=(T("input1", "in_out_t", "@shape1", (1, MAX)),
                        T("padding", SHAPE, "*", (1, 1), ctc=True),
                        T("pad_const", "in_out_t", "1", ctc=True)),
                outputs=(T("output", "in_out_t", "@shape", (1, MAX)),), rows=_LAYOUT_FP),
    "RESHAPE": Spec(inputs=(T("input1", "in_out_t", "@shape1"), T("shape", SHAPE, "*", (1, 1), ctc=True)),
                    outputs=(T("output", "in_out_t", "@shape"),), rows=_LAYOUT_FP),
    "REVERSE": Spec(inputs=(T("input1", "in_out_t", "@shape", (1, MAX)),),
                    outputs=(T("output", "in_out_t", "@shape", (1, MAX)),), rows=_LAYOUT_FP),
    "SLICE": Spec(inputs=(T("input1", "in_out_t", "@shape1", (1, MAX)),
                          T("start", SHAPE, "*", (1, 1), ctc=True),
                          T("size", SHAPE, "*", (1, 1), ctc=True)),
                  outputs=(T("output", "in_out_t", "@shape", (1, MAX)),), rows=_LAYOUT_FP),
    "TILE": Spec(inputs=(T("input1", "in_out_t", "@shape1", (1, MAX)),
                         T("multiples", SHAPE, "*", (1, 1), ctc=True)),
                 outputs=(T("output", "in_out_t", "@shape", (1, MAX)),), rows=_LAYOUT_FP),
    "TRANSPOSE": Spec(inputs=(T("input1", "in_out_t", "@shape1", (1, MAX)),),
                      outputs=(T("output", "in_out_t", "@shape", (1, MAX)),), rows=_LAYOUT_FP),
    # ---- scatter / gather ------------------------------------------------------------------------
    "GATHER": Spec(inputs=(T("values", "in_out_t", "N,K,C"), T("indices", "index_t", "N,W")),
                   outputs=(T("output", "in_out_t", "N,W,C"),),
                   rows=_GATHER_ROWS),
    "SCATTER": Spec(inputs=(T("values_in", "in_out_t", "N,K,C"), T("indices", "index_t", "N,W"),
                            T("input", "in_out_t", "N,W,C")),
                    outputs=(T("values_out", "in_out_t", "N,K,C"),), rows=_GATHER_ROWS),
    # ---- image -----------------------------------------------------------------------------------
    "RESIZE": Spec(inputs=(T("input", "in_t", "N,IH,IW,C"), T("scale", SHAPE, "4", ctc=True),
                           T("offset", SHAPE, "2", ctc=True), T("border", SHAPE, "2", ctc=True)),
                   outputs=(T("output", "out_t", "N,OH,OW,C"),),
                   rows=(R(in_t=I8, mode="BILINEAR", out_t=I32), R(in_t=I8, mode="NEAREST", out_t=I8),
                         R("EXT-INT16", in_t=I16, mode="BILINEAR", out_t=I48),
                         R("EXT-INT16", in_t=I16, mode="NEAREST", out_t=I16))
                   + tuple(R(ext, in_t=d, mode=m, out_t=d) for ext, ds in _FP.items() for d in ds
                           for m in ("BILINEAR", "NEAREST")),
                   attr_types=(("mode", "mode"),)),
    # ---- type conversion -------------------------------------------------------------------------
    "CAST": Spec(inputs=(T("input", "in_t", "@shape"),), outputs=(T("output", "out_t", "@shape"),),
                 rows=tuple(R(in_t=a, out_t=b) for a, b in (
                     (BOOL, I8), (BOOL, I16), (BOOL, I32), (I8, BOOL), (I8, I16), (I8, I32),
                     (I16, BOOL), (I16, I8), (I16, I32), (I32, BOOL), (I32, I8), (I32, I16)))
                 + tuple(R(ext, in_t=a, out_t=b) for ext, pairs in _FP_CASTS.items() for a, b in pairs)),
    "RESCALE": Spec(inputs=(T("input", "in_t", "@shape"), T("multiplier", None, "NC", ctc=True),
                            T("shift", I8, "NC", ctc=True), _zp("input_zp", "in_t"),
                            _zp("output_zp", "out_t")),
                    outputs=(T("output", "out_t", "@shape"),),
                    rows=tuple(R(in_t=a, out_t=b) for a in (I8, I16, I32) for b in (I8, I16, I32))
                    + tuple(R("EXT-INT16", in_t=I48, out_t=b) for b in (I8, I16, I32))),
    # ---- data nodes ------------------------------------------------------------------------------
    "CONST": Spec(inputs=(), outputs=(T("output", "out_t", "@shape"),),
                  rows=_rows("out_t", BOOL, I8, I16, I32, **{"EXT-INT4": (I4,), "EXT-INT16": (I48,)},
                             **_FP_ALL)),
    "CONST_SHAPE": Spec(inputs=(), outputs=(T("output", SHAPE, "*", (1, 1)),), rows=(R(),)),
    "IDENTITY": Spec(inputs=(T("input1", "in_out_t", "@shape"),),
                     outputs=(T("output", "in_out_t", "@shape"),),
                     rows=_rows("in_out_t", BOOL, I8, I16, I32,
                                **{"EXT-INT4": (I4,), "EXT-INT16": (I48,)}, **_FP_ALL)),
    # ---- shape operators (TOSA 1.1 draft, EXT-SHAPE) -------------------------------------------
    **{name: _shape(2) for name in ("ADD_SHAPE", "SUB_SHAPE", "MUL_SHAPE", "DIV_CEIL_SHAPE",
                                    "DIV_FLOOR_SHAPE", "MOD_SHAPE", "MAX_SHAPE", "MIN_SHAPE")},
    **{name: _shape(1) for name in ("EXP2_SHAPE", "LOG2_CEIL_SHAPE", "LOG2_FLOOR_SHAPE")},
    "ASSERT_EQUAL_SHAPE": _shape(2, outputs=0),
    "CONCAT_SHAPE": Spec(inputs=(L("input", SHAPE, (1, 1), ctc=True),),
                         outputs=(_SHAPE_ARG("output"),), rows=(R(),), extension="EXT-SHAPE"),
    "SLICE_SHAPE": Spec(inputs=(_SHAPE_ARG("input", ctc=True), T("start", I32, "1", ctc=True),
                                T("size", I32, "1", ctc=True)),
                        outputs=(_SHAPE_ARG("output"),), rows=(R(),), extension="EXT-SHAPE"),
    # DIM reads only its input's shape. tosa.xml marks input1 CTC, but Arm's generator feeds it
    # from a graph input and the reference model runs that; npu-sim follows the model.
    "DIM": Spec(inputs=(T("input1", "in_t", "@shape", (1, MAX)),), outputs=(_SHAPE_ARG("output"),),
                rows=_rows("in_t", BOOL, I8, I16, I32, **_FP_ALL), extension="EXT-SHAPE"),
}

# Operators of TOSA 1.0 that are not in PRO-INT, and TOSA 1.1 additions (for messages).
PRO_FP_ONLY = frozenset({"FFT2D", "RFFT2D", "ERF", "SIGMOID", "TANH", "POW", "CEIL", "COS", "EXP",
                         "FLOOR", "LOG", "RECIPROCAL", "RSQRT", "SIN", "REDUCE_PRODUCT"})
TOSA_1_1_ONLY = frozenset({
    "MATMUL_T_BLOCK_SCALED", "CAST_FROM_BLOCK_SCALED", "CAST_TO_BLOCK_SCALED",
    "CONV2D_BLOCK_SCALED", "MAX_POOL2D_ADAPTIVE", "AVG_POOL2D_ADAPTIVE",
    "RESHAPE_BLOCK_SCALED", "ROW_GATHER_BLOCK_SCALED", "ROW_GATHER", "MATMUL_T"})
