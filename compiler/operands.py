"""TOSA 1.0 operand names, in flatbuffer order, so passes can say op.input('weight')."""

_CONV = ("input", "weight", "bias", "input_zp", "weight_zp")
_BINARY = ("input1", "input2")
_UNARY = ("input1",)

OPERANDS: dict[str, tuple[str, ...]] = {
    "ARGMAX": ("input",),
    "AVG_POOL2D": ("input", "input_zp", "output_zp"),
    "CONV2D": _CONV,
    "CONV3D": _CONV,
    "DEPTHWISE_CONV2D": _CONV,
    "TRANSPOSE_CONV2D": _CONV,
    "MATMUL": ("A", "B", "A_zp", "B_zp"),
    "MAX_POOL2D": ("input",),
    "CLAMP": ("input",),
    "MUL": ("input1", "input2", "shift"),
    "TABLE": ("input1", "table"),
    "NEGATE": ("input1", "input1_zp", "output_zp"),
    "SELECT": ("input1", "input2", "input3"),
    "PAD": ("input1", "padding", "pad_const"),
    "RESHAPE": ("input1", "shape"),
    "SLICE": ("input1", "start", "size"),
    "TILE": ("input1", "multiples"),
    "GATHER": ("values", "indices"),
    "SCATTER": ("values_in", "indices", "input"),
    "RESIZE": ("input", "scale", "offset", "border"),
    "CAST": ("input",),
    "RESCALE": ("input", "multiplier", "shift", "input_zp", "output_zp"),
    "IDENTITY": _UNARY,
    "CONST": (),
    "CONST_SHAPE": (),
}
for _name in ("ADD", "SUB", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR",
              "INTDIV", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_LEFT_SHIFT",
              "LOGICAL_RIGHT_SHIFT", "MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "GREATER_EQUAL"):
    OPERANDS[_name] = _BINARY
for _name in ("ABS", "BITWISE_NOT", "CLZ", "LOGICAL_NOT", "REVERSE", "TRANSPOSE",
              "REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_SUM"):
    OPERANDS[_name] = _UNARY if not _name.startswith("REDUCE") else ("input",)

ELEMENTWISE_BINARY = frozenset({
    "ADD", "SUB", "MUL", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR",
    "INTDIV", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_LEFT_SHIFT",
    "LOGICAL_RIGHT_SHIFT", "MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "GREATER_EQUAL"})
ELEMENTWISE_UNARY = frozenset({"ABS", "BITWISE_NOT", "CLZ", "LOGICAL_NOT", "NEGATE", "CAST",
                               "CLAMP", "TABLE", "RESCALE"})
ELEMENTWISE = ELEMENTWISE_BINARY | ELEMENTWISE_UNARY | {"SELECT"}
REDUCTIONS = frozenset({"REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_SUM"})
MAC_OPS = frozenset({"CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "MATMUL"})
DATA_MOVEMENT = frozenset({"CONCAT", "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE", "TRANSPOSE",
                           "IDENTITY"})


def operand(op, name: str) -> str:
    """Tensor name bound to operand `name` of `op` ('' when absent)."""
    names = OPERANDS.get(op.op, ())
    if name in names:
        i = names.index(name)
        return op.inputs[i] if i < len(op.inputs) else ""
    return ""
