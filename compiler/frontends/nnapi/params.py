"""Shape parameters given as model inputs (a RESHAPE's shape, a PAD's paddings, a SLICE's begin
and size ...): the compiled program needs their values, so the device compiles when a request
brings them (`bind`). Every value types.spec allows lowers to the same layout operators, so
getSupportedOperations judges the model with stand-in values that agree with the declared
output dimensions (`stand_ins`); values a request brings that types.spec forbids make the bound
model invalid (INVALID_ARGUMENT for that request)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .model import Model, OperandLifeTime, OperandType, OperationType, Subgraph

O = OperationType
POSITIONS = {O.RESHAPE: (1,), O.SQUEEZE: (1,), O.TRANSPOSE: (1,), O.SLICE: (1, 2), O.PAD: (1,),
             O.PAD_V2: (1,), O.MEAN: (1,), O.REDUCE_MAX: (1,), O.REDUCE_MIN: (1,),
             O.STRIDED_SLICE: (1, 2, 3), O.TILE: (1,), O.SPACE_TO_BATCH_ND: (1, 2),
             O.BATCH_TO_SPACE_ND: (1,)}


def parameter_inputs(sg: Subgraph) -> list[int]:
    """Main inputs of type TENSOR_INT32 read only as shape parameters."""
    uses: dict[int, bool] = {}
    for op in sg.operations:
        for pos, k in enumerate(op.inputs):
            uses[k] = uses.get(k, True) and pos in POSITIONS.get(op.type, ())
    return [k for k in sg.input_indexes
            if sg.operands[k].type == OperandType.TENSOR_INT32 and uses.get(k, False)]


def bind(model: Model, values: dict[int, np.ndarray]) -> Model:
    """The model with those inputs as constants (None: omitted), no longer inputs."""
    sg = model.main
    operands = list(sg.operands)
    for k, v in values.items():
        o = operands[k]
        operands[k] = replace(o, lifetime=OperandLifeTime.NO_VALUE, data=None) if v is None \
            else replace(o, lifetime=OperandLifeTime.CONSTANT_COPY,
                         data=np.asarray(v, np.int32).reshape(o.dimensions))
    main = Subgraph(operands, sg.operations, [k for k in sg.input_indexes if k not in values],
                    sg.output_indexes, sg.name)
    return replace(model, main=main)


def _align(inp, out) -> list[int]:
    """Positions of inp dropped to leave out (greedy, dropping only 1s)."""
    dropped, j = [], 0
    for i, d in enumerate(inp):
        if j < len(out) and out[j] == d:
            j += 1
        else:
            dropped.append(i)
    return dropped


def _flag(sg: Subgraph, k: int) -> bool:
    o = sg.operands[k]
    return o.type == OperandType.BOOL and o.data is not None and bool(o.scalar())


def _stand_in(sg: Subgraph, op, pos: int):
    x, y = sg.operands[op.inputs[0]].dimensions, sg.operands[op.outputs[0]].dimensions
    rank = len(x)
    if op.type == O.RESHAPE:
        return list(y)
    if op.type == O.SQUEEZE:
        return _align(x, y)
    if op.type == O.TRANSPOSE:
        free, perm = list(range(rank)), []
        for d in y:
            i = next((i for i in free if x[i] == d), free[0] if free else 0)
            perm.append(i)
            if i in free:
                free.remove(i)
        return perm
    if op.type == O.SLICE:
        return [0] * rank if pos == 1 else list(y)
    if op.type in (O.PAD, O.PAD_V2):
        return [[0, max(b - a, 0)] for a, b in zip(x, y)]
    if op.type in (O.MEAN, O.REDUCE_MAX, O.REDUCE_MIN):
        if len(y) == rank:
            axes = [i for i in range(rank) if x[i] != y[i]]
            return axes or [next((i for i in range(rank) if x[i] == 1), 0)]
        return _align(x, y) or [0]
    if op.type == O.TILE:
        return [b // a if a else 1 for a, b in zip(x, y)]
    if op.type in (O.SPACE_TO_BATCH_ND, O.BATCH_TO_SPACE_ND):
        nchw = len(op.inputs) > 3 - (op.type == O.BATCH_TO_SPACE_ND) and _flag(sg, op.inputs[-1])
        (xh, xw), (yh, yw) = ((x[2:], y[2:]) if nchw else (x[1:3], y[1:3]))
        block = sg.operands[op.inputs[1]]
        if op.type == O.BATCH_TO_SPACE_ND:
            return [max(yh // max(xh, 1), 1), max(yw // max(xw, 1), 1)]
        if block.data is not None and block.count == 2:
            bh, bw = (int(v) for v in block.data.reshape(-1))
        else:                           # the first block the output's batch and sizes allow
            ratio = y[0] // max(x[0], 1)
            bh = next((d for d in range(1, ratio + 1) if ratio % d == 0 and d * yh >= xh
                       and (ratio // d) * yw >= xw), 1)
            bw = ratio // bh
        if pos == 1:
            return [bh, bw]
        return [[0, max(yh * bh - xh, 0)], [0, max(yw * bw - xw, 0)]]
    if op.type == O.STRIDED_SLICE:
        masks = [sg.operands[op.inputs[i]] for i in (4, 5, 6)]
        bm, em, sm = (int(m.scalar()) if m.data is not None else 0 for m in masks)
        if pos == 3:
            return [1] * rank
        kept = iter(y)
        size = [1 if sm >> a & 1 else next(kept, x[a]) for a in range(rank)]
        if pos == 1:                    # with a masked end the slice runs to the axis' end
            return [x[a] - size[a] if em >> a & 1 and not sm >> a & 1 else 0
                    for a in range(rank)]
        return size
    return None


def stand_ins(model: Model) -> dict[int, np.ndarray]:
    sg = model.main
    params = set(parameter_inputs(sg))
    values: dict[int, np.ndarray] = {}
    for op in sg.operations:
        for pos in POSITIONS.get(op.type, ()):
            k = op.inputs[pos] if pos < len(op.inputs) else None
            if k in params and k not in values:
                v = _stand_in(sg, op, pos)
                o = sg.operands[k]
                arr = np.asarray(v if v is not None else [], np.int64).reshape(-1)
                if arr.size != o.count:        # a parameter of another size: left to the rules
                    arr = np.resize(arr if arr.size else np.zeros(1, np.int64), o.count)
                values[k] = arr.astype(np.int32)
    return values
