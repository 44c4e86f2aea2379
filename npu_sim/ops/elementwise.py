"""The elementwise operators on the machine: the vector unit's chain program (`elementwise`
opcode) and each operator as one of its micro-ops, and their whole-tensor host evaluations."""
from __future__ import annotations

import json
from functools import lru_cache

import numpy as np

from npu_sim.isa.dtypes import DTYPES, STORAGE

from .. import datapath as dp
from .common import HOST_OPS, MICRO_OPS, SHAPE_CHECKS, VECTOR_KERNELS, VECTOR_WORK, HostCall, \
    classed

# Binary, unary, ternary and comparison operators that dp.elementwise computes; their only
# attributes are MUL's shift, ARITHMETIC_RIGHT_SHIFT's round and NEGATE's zero points.
_DIRECT = ("ADD", "SUB", "MUL", "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT",
           "LOGICAL_RIGHT_SHIFT", "INTDIV", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR",
           "BITWISE_NOT", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_NOT", "MAXIMUM",
           "MINIMUM", "ABS", "CLZ", "NEGATE", "SELECT", "EQUAL", "GREATER", "GREATER_EQUAL",
           "POW", "CEIL", "FLOOR", "EXP", "LOG", "RECIPROCAL", "RSQRT", "SIN", "COS", "ERF",
           "SIGMOID", "TANH")
_MICRO_ATTRS = ("shift", "round", "input_zp", "output_zp", "nan_mode")
# A layer's tiles share one chain program: each text is parsed once (callers only read it).
_parsed = lru_cache(maxsize=256)(json.loads)


@VECTOR_KERNELS.register("elementwise")
def run_program(x: dict, a: dict, out: np.ndarray):
    """Run a chain: each micro-op reads operands (in*, c*) or earlier results (%i); the
    intermediates stay in the unit's registers, only the last result is written."""
    results: list[np.ndarray] = []
    for u in _parsed(a["program"]):
        args = [results[int(r[1:])] if r[0] == "%" else x[r] for r in u["args"]]
        tables = [x[t] for t in u["tables"]]
        results.append(MICRO_OPS[u["fn"]](args, tables, u, STORAGE[u["dtype"]]))
    out[...] = results[-1]


@VECTOR_WORK.register("elementwise")
def program_work(cmd) -> dict:
    """One pass per micro-op over its result, of that micro-op's operator's class: the whole
    tile, or the smaller box of an intermediate that broadcasts (a softmax's row maximum);
    the last one writes every element of the tile, whatever its operands' shapes."""
    work: dict[str, int] = {}
    made: list[tuple[str, tuple]] = []      # each micro-op's result dtype and shape
    program = _parsed(cmd.attrs["program"])
    for i, u in enumerate(program):
        args = [made[int(r[1:])] if r[0] == "%" else (cmd.inputs[r].dtype, cmd.inputs[r].shape)
                for r in u["args"]]
        shape = np.broadcast_shapes(*(s for _, s in args)) if args else ()
        if i == len(program) - 1:
            shape = next(iter(cmd.outputs.values())).shape
        made.append((u["dtype"], shape))
        # a micro-op computes in float when an operand or its result is float (CAST included)
        fp = next((t for t in [t for t, _ in args] + [u["dtype"]]
                   if DTYPES[t].kind == "float"), "")
        for c, n in classed(u["fn"], int(np.prod(shape, dtype=np.int64)), fp).items():
            work[c] = work.get(c, 0) + n
    return work


def _direct(fn: str):
    def micro(args, tables, u, dtype):
        return dp.elementwise(fn, args, dtype, **{k: u[k] for k in _MICRO_ATTRS if k in u})
    return micro


for _name in _DIRECT:
    MICRO_OPS.register(_name)(_direct(_name))
MICRO_OPS.register("TABLE")(lambda args, tables, u, dtype: dp.table(args[0], tables[0]))
MICRO_OPS.register("CLAMP")(lambda args, tables, u, dtype: dp.clamp(args[0], u["lo"], u["hi"],
                                                                 u.get("nan_mode", "PROPAGATE")))


# ---- host evaluation ---------------------------------------------------------------------------

@HOST_OPS.register(*(n for n in _DIRECT if n not in ("MUL", "ARITHMETIC_RIGHT_SHIFT", "NEGATE")))
def elementwise_host(call: HostCall) -> list:
    nan = {"nan_mode": call.attrs["nan_mode"]} if "nan_mode" in call.attrs else {}
    return [dp.elementwise(call.op, call.inputs, call.out_dtypes[0], **nan)]


@HOST_OPS.register("MUL")
def mul_host(call: HostCall) -> list:
    return [dp.elementwise("MUL", call.inputs[:2], call.out_dtypes[0], shift=call.scalar(2))]


@HOST_OPS.register("ARITHMETIC_RIGHT_SHIFT")
def ars_host(call: HostCall) -> list:
    return [dp.elementwise("ARITHMETIC_RIGHT_SHIFT", call.inputs, call.out_dtypes[0],
                           round=bool(call.attrs.get("round", False)))]


@HOST_OPS.register("NEGATE")
def negate_host(call: HostCall) -> list:
    return [dp.elementwise("NEGATE", call.inputs[:1], call.out_dtypes[0],
                           input_zp=call.scalar(1), output_zp=call.scalar(2))]


HOST_OPS.register("CLAMP")(lambda call: [dp.clamp(call.inputs[0], call.attrs["min_val"],
                                                  call.attrs["max_val"],
                                                  call.attrs.get("nan_mode", "PROPAGATE"))])
HOST_OPS.register("TABLE")(lambda call: [dp.table(call.inputs[0], call.inputs[1])])


# ---- structural checks of loaded programs --------------------------------------------------------

# micro-op attributes the micro-ops above index without a default
_MICRO_KEYS = {"RESCALE": ("input_zp", "output_zp", "scale32", "rounding_mode", "per_channel",
                           "input_unsigned", "output_unsigned"), "CLAMP": ("lo", "hi")}


def _broadcasts(shape: tuple, to: tuple) -> bool:
    if len(shape) > len(to):
        return all(d == 1 for d in shape[:len(shape) - len(to)]) and \
            _broadcasts(shape[len(shape) - len(to):], to)
    return all(d in (1, t) for d, t in zip(reversed(shape), reversed(to)))


@SHAPE_CHECKS.register("elementwise")
def check_program(x: dict, a: dict, out, need) -> None:
    try:
        program = json.loads(a["program"])
    except (ValueError, RecursionError):
        program = None
    need(isinstance(program, list) and program, "program is not a JSON list of micro-ops")
    for i, u in enumerate(program):
        ok = (isinstance(u, dict) and u.get("fn") in MICRO_OPS and isinstance(u.get("args"), list)
              and isinstance(u.get("tables", []), list) and u.get("dtype") in STORAGE)
        need(ok and all(k in u for k in _MICRO_KEYS.get(u["fn"], ())), f"micro-op {i} is malformed")
        if u["fn"] == "RESCALE" and not u.get("tables"):
            need("multiplier" in u and "shift" in u, f"micro-op {i} has no multiplier and shift")
        need(u["fn"] != "TABLE" or u.get("tables"), f"micro-op {i} has no table")
        for arg in u["args"]:
            ref = isinstance(arg, str) and arg[:1] == "%" and arg[1:].isdigit() and int(arg[1:]) < i
            need(ref or (isinstance(arg, str) and arg in x and _broadcasts(x[arg].shape, out.shape)),
                 f"micro-op {i} reads {str(arg)[:20]}, which is no operand that broadcasts to the output")
        need(all(t in x for t in u.get("tables", [])), f"micro-op {i} names a table that is no operand")
