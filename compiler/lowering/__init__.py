"""Lowering of each operator into NPU steps, one module per operator family (the family of
each operator is in isa/operators.py). Importing the package registers every family."""
from . import control, conversion, data_layout, elementwise, tensor_ops  # noqa: F401  (register)
from .common import DMA_MOVES, FOLDS, MICRO_ATTRS, REWRITES, TILE_SPACES, Context

__all__ = ["DMA_MOVES", "FOLDS", "MICRO_ATTRS", "REWRITES", "TILE_SPACES", "Context"]
