"""TFLite frontend: a .tflite flatbuffer lowered into the graph IR, operator by operator, with
TFLite's integer semantics reproduced exactly by TOSA operators (see each module) and its float32
and float16 builtins, and the QUANTIZE/DEQUANTIZE at a float-edged model's edges, as TOSA fp32
and fp16 operators (floats.py). Graph inputs and outputs keep their TFLite names, dtypes and shapes."""
from __future__ import annotations

from npu_sim.isa.errors import ModelError, NpuSimError, UnsupportedError

from npu_sim.compiler.ir import Graph

from . import elementwise, floats, fmath, layout, mac, norms, pool, reduce, softmax, unary
from .context import FLOATS, Lowering, float_checked
from .reader import read_model
from .shapes import infer_shapes

INPUT_TYPES = {"INT8": "int8", "INT16": "int16", "INT32": "int32", "FLOAT32": "fp32",
               "FLOAT16": "fp16"}

BUILTINS = {
    "CONV_2D": mac.conv_2d, "DEPTHWISE_CONV_2D": mac.depthwise_conv_2d,
    "TRANSPOSE_CONV": mac.transpose_conv, "FULLY_CONNECTED": mac.fully_connected,
    "BATCH_MATMUL": mac.batch_matmul,
    "MAX_POOL_2D": pool.max_pool_2d, "AVERAGE_POOL_2D": pool.average_pool_2d,
    "SOFTMAX": softmax.softmax, "LOG_SOFTMAX": softmax.log_softmax,
    "RESHAPE": layout.reshape, "SQUEEZE": layout.squeeze, "EXPAND_DIMS": layout.expand_dims,
    "SPACE_TO_BATCH_ND": layout.space_to_batch_nd, "BATCH_TO_SPACE_ND": layout.batch_to_space_nd,
    "CONCATENATION": layout.concatenation, "PACK": layout.pack, "UNPACK": layout.unpack,
    "SPLIT": layout.split, "SPLIT_V": layout.split_v, "PAD": layout.pad, "PADV2": layout.padv2,
    "MIRROR_PAD": layout.mirror_pad, "TRANSPOSE": layout.transpose, "SLICE": layout.slice_,
    "TILE": layout.tile,
    "STRIDED_SLICE": layout.strided_slice, "GATHER": layout.gather,
    "DEPTH_TO_SPACE": layout.depth_to_space, "SPACE_TO_DEPTH": layout.space_to_depth,
    **elementwise.BUILTINS, **unary.BUILTINS, **reduce.BUILTINS,
}
# builtins whose float32 form (or float edge) lowers apart; the data-layout builtins, REDUCE_MAX
# and REDUCE_MIN, GATHER and RESIZE_NEAREST_NEIGHBOR serve every type from BUILTINS
FLOAT_BUILTINS = {**floats.BUILTINS, **fmath.BUILTINS, **norms.BUILTINS}


def load_tflite_bytes(buf: bytes, source: str = "<bytes>") -> Graph:
    """The graph of a .tflite file's bytes; every error names `source`."""
    try:
        model = read_model(buf)
        return _lower(model, source)
    except NpuSimError as exc:
        raise type(exc)(f"{source}: {exc}") from None


def _lower(model, source: str) -> Graph:
    try:
        folded = infer_shapes(model)       # SHAPE and the int32 arithmetic on it, evaluated
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as exc:
        raise ModelError(f"inconsistent shapes ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:120]})") from None
    L = Lowering(model, source)
    for t in model.inputs:
        tensor = model.tensors[t]
        L.op = None
        if tensor.dtype not in INPUT_TYPES:
            raise UnsupportedError(f"input '{tensor.name}' is {tensor.dtype}; inputs may be "
                                   f"{', '.join(INPUT_TYPES)}")
        L.b.tensor(L.names[t], tensor.shape, INPUT_TYPES[tensor.dtype])
    for op in model.operators:
        if op.index in folded:
            out = model.tensors[op.outputs[0]]
            if out.index in model.outputs:          # a graph output: its constant value
                L.b.const_named(L.names[out.index], out.data, "int32")
            continue
        floating = any(model.tensors[t].dtype in FLOATS for t in op.inputs[:1] + op.outputs
                       if t >= 0)
        lower = (FLOAT_BUILTINS.get(op.op) if floating else None) or BUILTINS.get(op.op)
        if lower is None and op.op in FLOAT_BUILTINS:
            kinds = {model.tensors[t].dtype for t in op.inputs[:1] + op.outputs if t >= 0}
            raise UnsupportedError(f"operator #{op.index} {op.op} is supported on float32 and "
                                   f"float16 tensors only; this one is {', '.join(sorted(kinds))}")
        if lower is None:
            raise UnsupportedError(f"operator #{op.index} {op.op} is not supported by the TFLite "
                                   f"frontend (supported builtins: "
                                   f"{', '.join(sorted({*BUILTINS, *FLOAT_BUILTINS, 'SHAPE'}))})")
        L.op = op
        L.b.where = f"tfl{op.index}_{op.op.lower()}"
        L.b.origin = f"TFLite operator #{op.index} {op.op}"
        try:
            with float_checked(f"operator #{op.index} {op.op}"):
                lower(L)
        except (ValueError, IndexError, KeyError, TypeError, OverflowError, ZeroDivisionError) as exc:
            # a parseable but inconsistent operator (input count, shapes, options)
            raise ModelError(f"operator #{op.index} {op.op} is malformed "
                             f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
    outputs = []
    for t in model.outputs:
        name = L.names[t]
        if name not in L.b.tensors:
            raise ModelError(f"output '{name}' is written by no operator")
        outputs.append(name)
    return L.b.graph([L.names[t] for t in model.inputs], outputs)
