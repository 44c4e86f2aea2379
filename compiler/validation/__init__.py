"""TOSA 1.0 PRO-INT graph validation, split by operator family.

    context.py      levels, profile/extensions, the per-operator check context
    spec.py         argument and type-support tables of every PRO-INT operator (data)
    generic.py      checks driven by spec.py: operand lists, ranks, types, CTCs, shapes, sizes
    registry.py     CHECKS: op name -> operator-specific rules; shared helpers
    tensor_ops.py   ARGMAX, pooling, convolutions, MATMUL
    elementwise.py  CLAMP, binary/unary/ternary/comparison, MUL, TABLE, NEGATE
    data_layout.py  reductions, CONCAT, PAD, RESHAPE, REVERSE, SLICE, TILE, TRANSPOSE,
                    GATHER, SCATTER, RESIZE
    conversion.py   CAST, RESCALE
    control.py      CONST, CONST_SHAPE, IDENTITY, COND_IF, WHILE_LOOP, VARIABLE*
    shape.py        the TOSA 1.1-draft shape operators (EXT-SHAPE), computed as they are checked
    graph.py        the driver and the graph-level rules
"""
from . import control, conversion, data_layout, elementwise, shape, tensor_ops  # noqa: F401  (register checks)
from .context import LEVELS, Level
from .graph import validate
from .registry import CHECKS
from .spec import SPECS

__all__ = ["validate", "CHECKS", "SPECS", "LEVELS", "Level"]
