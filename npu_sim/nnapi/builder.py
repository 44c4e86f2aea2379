"""Building NNAPI models in code (as ANeuralNetworksModel_addOperand/addOperation do): the
capabilities' reference workloads and tests use it."""
from __future__ import annotations

import numpy as np

from npu_sim.compiler.frontends.nnapi.model import (NUMPY, Model, Operand, OperandLifeTime,
                                                    OperandType, Operation, OperationType,
                                                    Subgraph, check_subgraph)

L = OperandLifeTime


class ModelBuilder:
    def __init__(self, name: str = "model"):
        self.name = name
        self.operands: list[Operand] = []
        self.operations: list[Operation] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def operand(self, type_, dims=(), scale=0.0, zero_point=0, data=None, channel_scales=(),
                channel_dim=0) -> int:
        t = OperandType[type_] if isinstance(type_, str) else OperandType(type_)
        life = L.TEMPORARY_VARIABLE
        arr = None
        if data is not None:
            life = L.CONSTANT_COPY
            arr = np.asarray(data).astype(NUMPY[t]).reshape(tuple(dims))
        self.operands.append(Operand(t, tuple(dims), scale, zero_point, life,
                                     tuple(channel_scales), channel_dim, arr))
        return len(self.operands) - 1

    def scalar(self, type_, value) -> int:
        return self.operand(type_, (), data=[value])

    def i32(self, value) -> int:
        return self.scalar("INT32", value)

    def input(self, *args, **kw) -> int:
        k = self.operand(*args, **kw)
        self.operands[k].lifetime = L.SUBGRAPH_INPUT
        self.inputs.append(k)
        return k

    def output(self, k: int) -> int:
        self.operands[k].lifetime = L.SUBGRAPH_OUTPUT
        self.outputs.append(k)
        return k

    def op(self, type_, inputs, outputs):
        t = OperationType[type_] if isinstance(type_, str) else OperationType(type_)
        self.operations.append(Operation(t, list(inputs), list(outputs)))
        return outputs[0] if len(outputs) == 1 else outputs

    def model(self) -> Model:
        sg = Subgraph(self.operands, self.operations, self.inputs, self.outputs)
        check_subgraph(sg, self.name, 0)
        return Model(sg, [], False, self.name)
