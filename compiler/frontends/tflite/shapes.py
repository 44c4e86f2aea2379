"""The static shapes of a TFLite graph, worked out before lowering, as TFLite's interpreter works
them out when it allocates tensors.

A Keras model exported with a dynamic batch stores a batch of 1 (or -1) in every tensor's shape,
computes some shapes at run time (SHAPE, STRIDED_SLICE and PACK feeding a RESHAPE), and may
change the batch on the way (SPACE_TO_BATCH_ND around a dilated convolution), which the stored
shapes do not follow. infer_shapes() takes each operator's output shapes from its inputs' (the
graph inputs at their stored batch); evaluates the int32 shape arithmetic (SHAPE and what is
computed from it), whose results become constants and whose operators are folded away; and
refuses, in one line, a tensor whose shape it cannot work out. Where no input's shape differs
from the stored one and no output's signature is dynamic, the stored output shapes stand, so a
model exported with static shapes lowers as it is written."""
from __future__ import annotations

import numpy as np

from npu_sim.isa.errors import ModelError, NpuSimError, UnsupportedError

from .reader import TflModel, TflOperator

# the rank-preserving builtins whose outputs keep their input's batch (dim 0), the data input
# given where it is not input 0
BATCH_OPS = {
    "CONV_2D": 0, "DEPTHWISE_CONV_2D": 0, "TRANSPOSE_CONV": 2, "AVERAGE_POOL_2D": 0,
    "MAX_POOL_2D": 0, "L2_POOL_2D": 0, "RESIZE_BILINEAR": 0, "RESIZE_NEAREST_NEIGHBOR": 0,
    "DEPTH_TO_SPACE": 0, "SPACE_TO_DEPTH": 0,
}
# elementwise builtins (the broadcast of their inputs' shapes) and the others whose output has
# their input's shape
ELEMENTWISE = {
    "SOFTMAX", "LOG_SOFTMAX", "L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION",
    "ADD", "SUB", "MUL", "DIV", "FLOOR_DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW",
    "PRELU", "ABS", "NEG", "EXP", "LOG", "RSQRT", "SQRT", "SIN", "COS", "LOGISTIC", "TANH",
    "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "HARD_SWISH", "LEAKY_RELU", "GELU",
    "QUANTIZE", "DEQUANTIZE", "CAST", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER",
    "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "SELECT", "SELECT_V2",
}
SHAPE_TYPES = ("INT32",)
# builtins whose stored output shape is checked against the one their inputs make (the
# lowering takes it from the model)
CHECKED = {"SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND"}
_BAD_VALUES = (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError, OverflowError,
               FloatingPointError)


def infer_shapes(model: TflModel) -> set[int]:
    """Set every tensor's shape to the one it has when the graph runs, and the data of every
    tensor the shape arithmetic computes; returns the indices of the operators so folded."""
    tensors = model.tensors
    shapes: dict[int, tuple[int, ...]] = {}
    values: dict[int, np.ndarray] = {}
    for t in tensors:
        if t.data is not None:
            shapes[t.index], values[t.index] = tuple(t.data.shape), t.data
    for i in model.inputs:          # a -1 batch in the signature runs at the stored batch
        t = tensors[i]
        _check_static(model, i, t.shape + t.signature[1:], t.signature or t.shape)
        shapes[i] = t.shape
    folded, computed = set(), set()     # the folded operators, and the tensors they made
    for op in model.operators:
        ins = [i for i in op.inputs if i >= 0]
        for i in ins:
            if i not in shapes:       # read before any operator writes it: the lowering says so
                shapes[i] = tensors[i].shape
        try:
            with np.errstate(all="raise"):
                # SHAPE, and the arithmetic on what it computed (arithmetic on constants alone
                # stays in the program, as the compiler leaves it)
                value = _fold(op, model, shapes, values) \
                    if op.op == "SHAPE" or computed.intersection(ins) else None
                outs = None if value is not None else _outputs(op, model, shapes, values)
        except _BAD_VALUES as exc:
            raise ModelError(f"operator #{op.index} {op.op}: inconsistent shapes or values "
                             f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
        except NpuSimError as exc:
            text = str(exc)
            raise type(exc)(text if text.startswith(("operator #", "tensor ")) else
                            f"operator #{op.index} {op.op}: {text}") from None
        if value is not None:
            out = op.outputs[0]
            values[out], shapes[out] = value, tuple(value.shape)
            folded.add(op.index)
            computed.add(out)
            continue
        for o, shape in zip(op.outputs, outs):
            _check_static(model, o, shape)
            shapes[o] = tuple(int(d) for d in shape)
    for t in tensors:
        if t.index in shapes:
            t.shape = shapes[t.index]
        elif any(d < 0 for d in t.shape):
            _check_static(model, t.index, t.shape)
        if t.index in values and t.data is None:
            t.data = values[t.index]
    return folded


def _check_static(model: TflModel, index: int, shape, shown=None) -> None:
    if any(d < 0 for d in shape):
        t = model.tensors[index]
        raise UnsupportedError(f"tensor {index} '{t.name}' has a dynamic shape "
                               f"{list(shape if shown is None else shown)}; npu-sim needs static "
                               "shapes")


def _stored(model: TflModel, op: TflOperator, shapes) -> list[tuple[int, ...]] | None:
    """The stored output shapes, where every input has its stored shape."""
    if all(shapes[i] == model.tensors[i].shape for i in op.inputs if i >= 0):
        return [model.tensors[o].shape for o in op.outputs]
    return None


def _outputs(op: TflOperator, model: TflModel, shapes, values) -> list[tuple[int, ...]]:
    """The stored shapes where the inputs have theirs and no output's signature is dynamic (a
    model exported with static shapes lowers as it is written); else the operator's rule."""
    stored = _stored(model, op, shapes)
    dynamic = any(d < 0 for o in op.outputs for d in model.tensors[o].signature)
    if stored is not None and not dynamic and op.op not in CHECKED:
        return stored
    rule = _RULES.get(op.op)
    if rule is None and op.op in ELEMENTWISE:
        rule = _broadcast
    if rule is None and op.op in BATCH_OPS:
        rule = _batch
    if rule is not None:
        got = rule(op, model, shapes, values)
        if got is not None:
            got = [tuple(int(d) for d in shape) for shape in got]
            if any(d < 0 for shape in got for d in shape):
                raise ModelError(f"its inputs make the output shape {list(got[0])}, which has "
                                 "a negative dimension")
            if op.op in CHECKED and stored is not None and not dynamic and got != stored:
                raise ModelError(f"its output is stored as {list(stored[0])}; its inputs make "
                                 f"{list(got[0])}")
            return got
    if stored is not None and all(d >= 0 for shape in stored for d in shape):
        return stored
    seen = ", ".join(str(list(shapes[i])) for i in op.inputs if i >= 0)
    raise UnsupportedError(f"operator #{op.index} {op.op}: its inputs' shapes ({seen}) are not "
                           "those the model stores, and npu-sim cannot work out its output "
                           "shape from them; export the model with a fixed batch size")


def _value(op, values, k: int):
    i = op.inputs[k] if k < len(op.inputs) else -1
    return None if i < 0 or i not in values else values[i]


def _broadcast(op, model, shapes, values):
    ins = [shapes[i] for i in op.inputs if i >= 0]
    if op.op in ("SELECT", "SELECT_V2") or len(ins) > 1:
        return [tuple(np.broadcast_shapes(*ins))]
    return [ins[0]]


def _batch(op, model, shapes, values):
    """A rank-preserving operator on a batch other than the stored one: the stored output with
    the batch scaled alike."""
    k = BATCH_OPS[op.op]
    x, stored_in = shapes[op.inputs[k]], model.tensors[op.inputs[k]].shape
    out = model.tensors[op.outputs[0]].shape
    if len(x) != len(stored_in) or x[1:] != stored_in[1:] or not stored_in[0] or not out:
        return None
    if x[0] * out[0] % stored_in[0]:
        return None
    return [(x[0] * out[0] // stored_in[0],) + tuple(out[1:])]


def _reshape(op, model, shapes, values):
    target = _value(op, values, 1)
    target = op.options.get("new_shape") if target is None else target.reshape(-1).tolist()
    if target is None:
        return None
    size = int(np.prod(shapes[op.inputs[0]], dtype=np.int64))
    target = [int(d) for d in target]
    if -1 in target:
        known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
        target[target.index(-1)] = size // known if known else 0
    if int(np.prod(target, dtype=np.int64)) != size:
        raise UnsupportedError(f"operator #{op.index} RESHAPE: {list(shapes[op.inputs[0]])} "
                               f"cannot take the shape {target}")
    return [tuple(target)]


def _expand_dims(op, model, shapes, values):
    axis = _value(op, values, 1)
    if axis is None:
        return None
    x = list(shapes[op.inputs[0]])
    a = int(axis.reshape(-1)[0])
    a = a + len(x) + 1 if a < 0 else a
    return [tuple(x[:a] + [1] + x[a:])]


def _squeeze(op, model, shapes, values):
    x = shapes[op.inputs[0]]
    dims = {d + len(x) if d < 0 else d for d in op.options.get("squeeze_dims", ())}
    return [tuple(n for i, n in enumerate(x) if not (n == 1 and (not dims or i in dims)))]


def _transpose(op, model, shapes, values):
    perm = _value(op, values, 1)
    if perm is None:
        return None
    x = shapes[op.inputs[0]]
    return [tuple(x[int(p)] for p in perm.reshape(-1))]


def _axis(op, rank: int) -> int:
    a = op.options.get("axis", 0)
    return a + rank if a < 0 else a


def _concatenation(op, model, shapes, values):
    ins = [shapes[i] for i in op.inputs if i >= 0]
    a = _axis(op, len(ins[0]))
    return [ins[0][:a] + (sum(s[a] for s in ins),) + ins[0][a + 1:]]


def _pack(op, model, shapes, values):
    x = shapes[op.inputs[0]]
    a = _axis(op, len(x) + 1)
    return [x[:a] + (len(op.inputs),) + x[a:]]


def _fully_connected(op, model, shapes, values):
    x, w = shapes[op.inputs[0]], shapes[op.inputs[1]]
    n, k = w[0], w[-1]
    if op.options.get("keep_num_dims"):
        return [x[:-1] + (n,)]
    return [(int(np.prod(x, dtype=np.int64)) // k, n)]


def _batch_matmul(op, model, shapes, values):
    a, c = list(shapes[op.inputs[0]]), list(shapes[op.inputs[1]])
    if op.options.get("adj_x"):
        a[-2:] = a[-1], a[-2]
    if op.options.get("adj_y"):
        c[-2:] = c[-1], c[-2]
    return [tuple(np.broadcast_shapes(tuple(a[:-2]), tuple(c[:-2]))) + (a[-2], c[-1])]


def _reduce(op, model, shapes, values):
    axes = _value(op, values, 1)
    if axes is None:
        return None
    x = shapes[op.inputs[0]]
    axes = {int(a) + len(x) if int(a) < 0 else int(a) for a in axes.reshape(-1)}
    keep = op.options.get("keep_dims")
    return [tuple(1 if i in axes else n for i, n in enumerate(x) if keep or i not in axes)]


def _pad(op, model, shapes, values):
    pads = _value(op, values, 1)
    if pads is None:
        return None
    pads = [(int(a), int(b)) for a, b in pads.reshape(-1, 2)]
    if any(a < 0 or b < 0 for a, b in pads):
        raise ModelError(f"negative paddings {pads}")
    return [tuple(n + a + b for n, (a, b) in zip(shapes[op.inputs[0]], pads))]


def _tile(op, model, shapes, values):
    mult = _value(op, values, 1)
    if mult is None:
        return None
    mult = [int(m) for m in mult.reshape(-1)]
    if any(m < 0 for m in mult):
        raise ModelError(f"negative multiples {mult}")
    return [tuple(n * m for n, m in zip(shapes[op.inputs[0]], mult))]


def _gather(op, model, shapes, values):
    if op.options.get("batch_dims", 0):
        return None
    x, idx = shapes[op.inputs[0]], shapes[op.inputs[1]]
    a = _axis(op, len(x))
    return [x[:a] + tuple(idx) + x[a + 1:]]


def _slice(op, model, shapes, values):
    begin, size = _value(op, values, 1), _value(op, values, 2)
    if begin is None or size is None:
        return None
    x = shapes[op.inputs[0]]
    return [tuple(n - int(b) if int(s) == -1 else int(s)
                  for n, b, s in zip(x, begin.reshape(-1), size.reshape(-1)))]


def _strided_slice(op, model, shapes, values):
    ks = [_value(op, values, k) for k in (1, 2, 3)]
    if any(k is None for k in ks):
        return None
    plan = strided_plan(shapes[op.inputs[0]], *(k.reshape(-1) for k in ks), op.options)
    return [tuple(count for _, count, _, shrink in plan if not shrink)]


def _arg(op, model, shapes, values):
    axis = _value(op, values, 1)
    if axis is None:
        return None
    x = shapes[op.inputs[0]]
    a = int(axis.reshape(-1)[0])
    a = a + len(x) if a < 0 else a
    return [x[:a] + x[a + 1:]]


def _space_to_batch(op, model, shapes, values):
    args = _block_args(op, shapes, values)
    if args is None:
        return None
    x, block, pads = args
    padded = [n + a + b for n, (a, b) in zip(x[1:], pads)]
    if len(pads) != len(block) or any(a < 0 or b < 0 for a, b in pads) or \
            any(n % k for n, k in zip(padded, block)):
        raise ModelError(f"paddings {pads} do not make the spatial dims {list(x[1:1 + len(block)])} "
                         f"multiples of the block {block}")
    return [(x[0] * int(np.prod(block)),) + tuple(n // k for n, k in zip(padded, block))
            + tuple(x[1 + len(block):])]


def _batch_to_space(op, model, shapes, values):
    args = _block_args(op, shapes, values)
    if args is None:
        return None
    x, block, crops = args
    whole = [n * k for n, k in zip(x[1:], block)]
    if len(crops) != len(block) or x[0] % int(np.prod(block)) or \
            any(a < 0 or b < 0 or a + b > n for (a, b), n in zip(crops, whole)):
        raise ModelError(f"a batch of {x[0]} with the block {block} and crops {crops} do not fit")
    return [(x[0] // int(np.prod(block)),) + tuple(n - a - b for n, (a, b) in zip(whole, crops))
            + tuple(x[1 + len(block):])]


def _block_args(op, shapes, values):
    """SPACE_TO_BATCH_ND's and BATCH_TO_SPACE_ND's input shape, block and (before, after)
    pairs (paddings or crops), or None where the constants are not known: one positive block
    size per spatial dim (the input's rank less 2: 3-D and 4-D inputs, as TFLite's kernels
    take)."""
    block, pairs = _value(op, values, 1), _value(op, values, 2)
    if block is None or pairs is None:
        return None
    x = shapes[op.inputs[0]]
    block = [int(k) for k in block.reshape(-1)]
    if len(x) not in (3, 4) or len(block) != len(x) - 2 or min(block) < 1:
        raise ModelError(f"block {block} on a rank-{len(x)} input: one positive size per "
                         "spatial dim of a 3-D or 4-D input")
    return x, block, [(int(a), int(b)) for a, b in pairs.reshape(-1, 2)]


def _split(op, model, shapes, values):
    axis = _value(op, values, 0)
    if axis is None:
        return None
    x = shapes[op.inputs[1]]
    a = int(axis.reshape(-1)[0]) % len(x)
    n = len(op.outputs)
    if x[a] % n:
        raise ModelError(f"{x[a]} does not split evenly into {n}")
    return [x[:a] + (x[a] // n,) + x[a + 1:]] * n


def _split_v(op, model, shapes, values):
    sizes, axis = _value(op, values, 1), _value(op, values, 2)
    if sizes is None or axis is None:
        return None
    x = shapes[op.inputs[0]]
    a = int(axis.reshape(-1)[0]) % len(x)
    sizes = [int(v) for v in sizes.reshape(-1)]
    if -1 in sizes:
        sizes[sizes.index(-1)] = x[a] - (sum(sizes) + 1)
    return [x[:a] + (n,) + x[a + 1:] for n in sizes]


def _unpack(op, model, shapes, values):
    x = shapes[op.inputs[0]]
    a = _axis(op, len(x))
    return [x[:a] + x[a + 1:]] * len(op.outputs)


_RULES = {
    "SPLIT": _split, "SPLIT_V": _split_v, "UNPACK": _unpack,
    "RESHAPE": _reshape, "EXPAND_DIMS": _expand_dims, "SQUEEZE": _squeeze,
    "TRANSPOSE": _transpose, "CONCATENATION": _concatenation, "PACK": _pack,
    "FULLY_CONNECTED": _fully_connected, "BATCH_MATMUL": _batch_matmul, "MEAN": _reduce,
    "SUM": _reduce, "REDUCE_MAX": _reduce, "REDUCE_MIN": _reduce, "REDUCE_PROD": _reduce,
    "PAD": _pad, "PADV2": _pad, "MIRROR_PAD": _pad, "TILE": _tile, "GATHER": _gather,
    "SLICE": _slice, "STRIDED_SLICE": _strided_slice, "ARG_MAX": _arg, "ARG_MIN": _arg,
    "SPACE_TO_BATCH_ND": _space_to_batch, "BATCH_TO_SPACE_ND": _batch_to_space,
}


def strided_plan(shape, begin, end, strides, opt: dict) -> list[tuple[int, int, int, bool]]:
    """STRIDED_SLICE's (start, count, stride, shrunk) per axis, its masks resolved as TFLite's
    StartForAxis and StopForAxis do (ellipsis and new-axis masks are refused); axes past the
    indices given are taken whole, as TFLite expands a missing ellipsis at the end."""
    if opt.get("ellipsis_mask") or opt.get("new_axis_mask") or opt.get("offset"):
        raise UnsupportedError("ellipsis, new-axis masks and offset are not supported")
    plan = []
    for axis, n in enumerate(shape):
        if axis >= len(begin):          # indices for the leading axes only: the rest whole
            plan.append((0, n, 1, False))
            continue
        s = int(strides[axis])
        if s == 0:
            raise UnsupportedError("a zero stride")
        shrink = bool(opt.get("shrink_axis_mask", 0) >> axis & 1)
        lo = int(begin[axis]) + (n if int(begin[axis]) < 0 else 0)
        hi = int(end[axis]) + (n if int(end[axis]) < 0 else 0)
        lo, hi = (min(max(v, 0), n) for v in (lo, hi)) if s > 0 else \
            (min(max(v, -1), n - 1) for v in (lo, hi))
        if opt.get("begin_mask", 0) >> axis & 1:      # a shrunk axis too, as the kernel has it
            lo = 0 if s > 0 else n - 1
        if opt.get("end_mask", 0) >> axis & 1:
            hi = n if s > 0 else -1
        if shrink:
            if s < 0:
                raise UnsupportedError("a shrunk axis with a negative stride")
            hi = lo + 1 if lo < n else lo
        plan.append((lo, max(0, -(-(hi - lo) // s)), s, shrink))
    return plan


# the shape arithmetic: builtins on int32 constants, evaluated here
def _fold(op: TflOperator, model: TflModel, shapes, values) -> np.ndarray | None:
    out_type = model.tensors[op.outputs[0]].dtype if len(op.outputs) == 1 else None
    if op.op == "SHAPE" and out_type not in SHAPE_TYPES:
        raise UnsupportedError(f"out_type {out_type}: only INT32 shapes are supported")
    if out_type not in SHAPE_TYPES:
        return None
    if op.op == "SHAPE":
        return np.array(shapes[op.inputs[0]], np.int32)
    ins = [i for i in op.inputs if i >= 0]
    fold = _FOLDS.get(op.op)
    if fold is None or not ins or any(i not in values for i in ins) or \
            op.options.get("fused_activation_function", 0):
        return None
    out = fold(op, [values[i] if i >= 0 else None for i in op.inputs])
    if out is None:
        return None
    out = np.asarray(out)
    if out.size and not -(1 << 31) <= int(out.min()) <= int(out.max()) < 1 << 31:
        raise ModelError("its result passes int32")
    return out.astype(np.int32).reshape(_fold_shape(op, model, shapes, values, out))


def _fold_shape(op, model, shapes, values, out) -> tuple[int, ...]:
    rule = _RULES.get(op.op)
    got = rule(op, model, shapes, values) if rule is not None else None
    return tuple(got[0]) if got is not None else out.shape


def _fold_strided_slice(op, args):
    x = args[0]
    plan = strided_plan(x.shape, args[1].reshape(-1), args[2].reshape(-1),
                        args[3].reshape(-1), op.options)
    for axis, (lo, count, s, _) in enumerate(plan):
        x = np.take(x, lo + s * np.arange(count), axis=axis)
    return x


def _fold_gather(op, args):
    if op.options.get("batch_dims", 0):
        return None                         # the lowering refuses batch_dims
    axis = _axis(op, args[0].ndim)
    idx = args[1].astype(np.int64)
    if idx.size and not 0 <= int(idx.min()) <= int(idx.max()) < args[0].shape[axis]:
        raise ModelError(f"gather index out of range [0, {args[0].shape[axis]})")
    return np.take(args[0], idx, axis=axis)


def _fold_reduce(numpy_op):
    def fold(op, args):
        axes = tuple(int(a) % args[0].ndim for a in args[1].reshape(-1))
        return numpy_op(args[0].astype(np.int64), axis=axes,
                        keepdims=bool(op.options.get("keep_dims")))
    return fold


_FOLDS = {
    "STRIDED_SLICE": _fold_strided_slice,
    "SLICE": lambda op, a: a[0][tuple(slice(int(b), None if int(s) == -1 else int(b) + int(s))
                                      for b, s in zip(a[1].reshape(-1), a[2].reshape(-1)))],
    "PACK": lambda op, a: np.stack(a, axis=_axis(op, a[0].ndim + 1)),
    "CONCATENATION": lambda op, a: np.concatenate(a, axis=_axis(op, a[0].ndim)),
    "GATHER": _fold_gather,
    "RESHAPE": lambda op, a: a[0], "SQUEEZE": lambda op, a: a[0],
    "EXPAND_DIMS": lambda op, a: a[0],
    "REDUCE_PROD": _fold_reduce(np.prod), "SUM": _fold_reduce(np.sum),
    "REDUCE_MAX": _fold_reduce(np.max), "REDUCE_MIN": _fold_reduce(np.min),
    "ADD": lambda op, a: a[0].astype(np.int64) + a[1], "SUB": lambda op, a: a[0].astype(np.int64) - a[1],
    "MUL": lambda op, a: a[0].astype(np.int64) * a[1],
    "FLOOR_DIV": lambda op, a: np.floor_divide(a[0].astype(np.int64), a[1]),   # /0 raises
    "MAXIMUM": lambda op, a: np.maximum(a[0], a[1]), "MINIMUM": lambda op, a: np.minimum(a[0], a[1]),
    "CAST": lambda op, a: a[0] if a[0].dtype.kind in "iub" else None,
}
