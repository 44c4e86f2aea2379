"""Lowering of data nodes, control flow and variables.

CONST, CONST_SHAPE and VARIABLE declare data and have no step; COND_IF and WHILE_LOOP run on
the host CPU (compiler/steps.py attaches their sub-graphs). A variable access is a DMA copy
between the variable's storage and a tensor; an IDENTITY is an alias, or a copy when it
accesses a variable.
"""
from __future__ import annotations

from ..steps import Step
from .common import DMA_MOVES, FOLDS


@DMA_MOVES.register("IDENTITY", "VARIABLE_READ", "VARIABLE_WRITE")
def copy(low, step: Step):
    low.copy(low.p.view(step.main.inputs[0]), low.p.view(step.output))


FOLDS.register("IDENTITY")(lambda graph, op: graph.const(op.inputs[0]).copy())
