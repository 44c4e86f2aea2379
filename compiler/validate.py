"""Validate a graph against TOSA 1.0 PRO-INT and PRO-FP (+ extensions) and a level before compiling it.

The rules live in compiler/validation/ (one module per operator family); this module is the
stable entry point: `validate(graph, profiles=("PRO-INT",), extensions=(), level="8K")`.
"""
from .validation import CHECKS, SPECS, validate

__all__ = ["validate", "CHECKS", "SPECS"]
