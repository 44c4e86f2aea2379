"""The operator table: one row per TOSA operator, the contract both rooms read.

A row gives the operator's operands in flatbuffer order with the role each plays on the NPU,
the engine its steps run on, the ISA opcode its tiles run as (isa/opcodes.py), and its family.
The family names the module that holds the operator's code in each room, so everything about
one operator is found from its row:

    compiler/validation/<family>.py   its ERROR_IF, REQUIRE and level rules     CHECKS
    compiler/lowering/<family>.py     its tile space, DMA descriptors or        TILE_SPACES,
                                      chain micro-op attributes                 DMA_MOVES, MICRO_ATTRS
    npu_sim/ops/<family>.py           its kernels per opcode, their cost, its   MAC_KERNELS,
                                      chain micro-op and its host evaluation    VECTOR_KERNELS,
                                                                                VECTOR_WORK,
                                                                                MICRO_OPS, HOST_OPS
    compiler/validation/spec.py       its argument table and type-support rows (the dtypes)

`npu-sim op NAME` prints a row with the file and line of each of those entries.
"""
from __future__ import annotations

from .records import record

# Operand roles: how the NPU treats each input.
DATA = "data"        # a tensor an engine streams (feature maps, a MATMUL's B)
CONST = "const"      # a constant table the engine reads from memory (weights, bias, rescale
                     # multiplier and shift, lookup table)
ATTR = "attr"        # a compile-time constant the compiler folds into command attributes
                     # (zero points, shifts, paddings, shapes)

# Engines a step of the operator runs on.
# none: declares data, no step; rewrite: replaced by other operators' steps before scheduling
# (compiler/lowering REWRITES), e.g. FFT2D by DFT GEMMs on the MAC array
ENGINES = ("mac", "vector", "dma", "alias", "host", "none", "rewrite")

# Vector-unit operation classes, each costed per lane from the config (cycles and pJ):
# add/compare/logical/shift/select, a multiply, a RESCALE (32x32-bit multiply and 64-bit
# rounding shift), a table lookup, and divide/reciprocal (iterative).
VECTOR_CLASSES = ("add", "multiply", "rescale", "table", "divide")
# The float datapath's classes (PRO-FP configs): add/compare/min/max/select/round-to-integral
# and conversions, a multiply (fused multiply-add where an operator needs one), and the
# special-function path (EXP, LOG, SIN, COS, ERF, SIGMOID, TANH, POW, RECIPROCAL, RSQRT).
FLOAT_CLASSES = ("fp_add", "fp_multiply", "fp_special")


@record(frozen=True)
class OperatorDef:
    """One TOSA operator: its family, engine, operands and the ISA opcode of its tiles."""

    name: str
    family: str
    engine: str
    operands: tuple[tuple[str, str], ...] = ()   # (name, role), flatbuffer order
    opcode: str = ""                             # ISA opcode of its tiles (mac, vector, host)
    variadic: bool = False                       # a list of data inputs (CONCAT, control flow)
    internal: bool = False                       # made by the compiler, never by a frontend
    op_class: str = ""                           # VECTOR_CLASSES entry of a vector operator
    fp_class: tuple[str, ...] = ()               # its FLOAT_CLASSES passes on float operands
    draft: bool = False                          # experimental: a TOSA 1.1-draft operator

    @property
    def operand_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.operands)

    def role_of(self, index: int) -> str:
        if self.variadic:
            return DATA
        return self.operands[index][1] if index < len(self.operands) else ATTR

    def bound(self, inputs, *roles: str) -> list:
        """The entries of an operator's `inputs` whose operands play one of `roles`."""
        return [t for i, t in enumerate(inputs) if self.role_of(i) in roles]


def _op(name, family, engine, operands=(), opcode="", fp=(), **flags) -> OperatorDef:
    roles = tuple((n, r) for n, r in (o.split(":") if ":" in o else (o, DATA) for o in operands))
    return OperatorDef(name, family, engine, roles, opcode, fp_class=(fp,) if isinstance(fp, str) else fp,
                       **flags)


_CONV = ("input", "weight:const", "bias:const", "input_zp:attr", "weight_zp:attr")
_BINARY = ("input1", "input2")
_FP_BINARY = ("ADD", "SUB", "MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "GREATER_EQUAL")

_ROWS = [
    # tensor operators
    _op("ARGMAX", "tensor_ops", "vector", ("input",), "argmax", op_class="add",
        fp="fp_add"),
    _op("AVG_POOL2D", "tensor_ops", "vector", ("input", "input_zp:attr", "output_zp:attr"),
        "avg_pool2d", op_class="add", fp="fp_add"),
    _op("CONV2D", "tensor_ops", "mac", _CONV, "conv2d"),
    _op("CONV3D", "tensor_ops", "mac", _CONV, "conv3d"),
    _op("DEPTHWISE_CONV2D", "tensor_ops", "mac", _CONV, "depthwise_conv2d"),
    _op("TRANSPOSE_CONV2D", "tensor_ops", "mac", _CONV, "transpose_conv2d"),
    _op("MATMUL", "tensor_ops", "mac", ("A", "B", "A_zp:attr", "B_zp:attr"), "matmul"),
    _op("MAX_POOL2D", "tensor_ops", "vector", ("input",), "max_pool2d", op_class="add",
        fp="fp_add"),
    _op("FFT2D", "tensor_ops", "rewrite", ("input_real", "input_imag")),
    _op("RFFT2D", "tensor_ops", "rewrite", ("input_real",)),
    # elementwise: activation, binary, unary, ternary and comparison operators
    _op("CLAMP", "elementwise", "vector", ("input",), "elementwise", op_class="add", fp="fp_add"),
    *(_op(name, "elementwise", "vector", _BINARY, "elementwise",
          op_class="divide" if name == "INTDIV" else "add", fp="fp_add" if name in _FP_BINARY else ())
      for name in (
        "ADD", "SUB", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR",
        "INTDIV", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_LEFT_SHIFT",
        "LOGICAL_RIGHT_SHIFT", "MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "GREATER_EQUAL")),
    _op("MUL", "elementwise", "vector", _BINARY + ("shift:attr",), "elementwise",
        op_class="multiply", fp="fp_multiply"),
    _op("TABLE", "elementwise", "vector", ("input1", "table:const"), "elementwise",
        op_class="table"),
    *(_op(name, "elementwise", "vector", ("input1",), "elementwise", op_class="add",
          fp="fp_add" if name == "ABS" else ()) for name in ("ABS", "BITWISE_NOT", "CLZ", "LOGICAL_NOT")),
    # PRO-FP only: the float passes of the vector unit (POW: exp2(y * log2(x)), two passes of
    # the special-function path and a multiply; CEIL/FLOOR round to integral on the adder)
    _op("POW", "elementwise", "vector", _BINARY, "elementwise",
        fp=("fp_special", "fp_special", "fp_multiply")),
    *(_op(name, "elementwise", "vector", ("input1",), "elementwise", fp="fp_add")
      for name in ("CEIL", "FLOOR")),
    *(_op(name, "elementwise", "vector", ("input1",), "elementwise", fp="fp_special")
      for name in ("EXP", "LOG", "RECIPROCAL", "RSQRT", "SIN", "COS", "ERF", "SIGMOID", "TANH")),
    _op("NEGATE", "elementwise", "vector", ("input1", "input1_zp:attr", "output_zp:attr"),
        "elementwise", op_class="add", fp="fp_add"),
    _op("SELECT", "elementwise", "vector", ("input1", "input2", "input3"), "elementwise",
        op_class="add", fp="fp_add"),
    # reductions, data layout, scatter/gather and image operators
    *(_op(f"REDUCE_{fn}", "data_layout", "vector", ("input",), "reduce", op_class="add",
          fp="fp_add" if fn in ("MAX", "MIN", "SUM") else ()) for fn in ("ALL", "ANY", "MAX", "MIN", "SUM")),
    _op("REDUCE_PRODUCT", "data_layout", "vector", ("input",), "reduce", fp="fp_multiply"),
    _op("CONCAT", "data_layout", "dma", variadic=True),
    _op("PAD", "data_layout", "dma", ("input1", "padding:attr", "pad_const:attr")),
    _op("RESHAPE", "data_layout", "alias", ("input1", "shape:attr")),
    _op("REVERSE", "data_layout", "dma", ("input1",)),
    _op("SLICE", "data_layout", "dma", ("input1", "start:attr", "size:attr")),
    _op("TILE", "data_layout", "dma", ("input1", "multiples:attr")),
    _op("TRANSPOSE", "data_layout", "dma", ("input1",)),
    _op("GATHER", "data_layout", "host", ("values", "indices"), "host"),
    _op("SCATTER", "data_layout", "host", ("values_in", "indices", "input"), "host"),
    _op("RESIZE", "data_layout", "vector",
        ("input", "scale:attr", "offset:attr", "border:attr"), "resize", op_class="multiply",
        fp="fp_multiply"),
    # type conversion
    _op("CAST", "conversion", "vector", ("input",), "elementwise", op_class="add", fp="fp_add"),
    _op("RESCALE", "conversion", "vector", ("input", "multiplier:const", "shift:const",
                                            "input_zp:attr", "output_zp:attr"), "elementwise",
        op_class="rescale"),
    # data nodes, control flow and variables
    _op("CONST", "control", "none"),
    _op("CONST_SHAPE", "control", "none"),
    _op("IDENTITY", "control", "alias", ("input1",)),
    _op("COND_IF", "control", "host", opcode="host", variadic=True),
    _op("WHILE_LOOP", "control", "host", opcode="host", variadic=True),
    _op("VARIABLE", "control", "none"),
    _op("VARIABLE_READ", "control", "dma", variadic=True),
    _op("VARIABLE_WRITE", "control", "dma", variadic=True),
    # shape operators (TOSA 1.1 draft, EXT-SHAPE; experimental): shape_t values are resolved
    # when the graph is compiled, as the spec requires of every shape_t, so they have no step
    *(_op(name, "shape", "none", ("input1:attr", "input2:attr"), draft=True) for name in (
        "ADD_SHAPE", "SUB_SHAPE", "MUL_SHAPE", "DIV_CEIL_SHAPE", "DIV_FLOOR_SHAPE", "MOD_SHAPE",
        "MAX_SHAPE", "MIN_SHAPE", "ASSERT_EQUAL_SHAPE")),
    *(_op(name, "shape", "none", ("input:attr",), draft=True)
      for name in ("EXP2_SHAPE", "LOG2_CEIL_SHAPE", "LOG2_FLOOR_SHAPE")),
    _op("CONCAT_SHAPE", "shape", "none", variadic=True, draft=True),
    _op("SLICE_SHAPE", "shape", "none", ("input:attr", "start:attr", "size:attr"), draft=True),
    _op("DIM", "shape", "none", ("input1:attr",), draft=True),      # reads only the shape
    # one result of a packed multi-result host operator (compiler/steps.py)
    _op("HOST_UNPACK", "control", "host", ("packed",), "host", internal=True),
]

OPERATORS: dict[str, OperatorDef] = {row.name: row for row in _ROWS}
FAMILIES = ("tensor_ops", "elementwise", "data_layout", "conversion", "control", "shape")


def names(**match) -> frozenset[str]:
    """Operators whose fields equal `match`, e.g. names(engine="mac")."""
    return frozenset(o.name for o in _ROWS if all(getattr(o, k) == v for k, v in match.items()))


ELEMENTWISE = names(opcode="elementwise")      # fused into vector-unit chains
