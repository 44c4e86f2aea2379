"""Capabilities: PerformanceInfo per supported OperandType, each the simulated time and energy
of a reference workload relative to the config's CPU baseline running the same workload (the
report's execTime and powerUsage; lower is better). The workloads:

- TENSOR_QUANT8_ASYMM, _SIGNED: CONV_2D 3x3, SAME, stride 1, fused RELU, 1x28x28x32 -> 32
  channels, then DEPTHWISE_CONV_2D 3x3 and ADD of the two (a residual block's layers);
- TENSOR_QUANT8_SYMM_PER_CHANNEL: the same block with per-channel filters on uint8 data;
- INT32 and BOOL scalars are compile-time parameters: they carry the TENSOR_QUANT8_ASYMM figure;
- TENSOR_INT32, TENSOR_QUANT16_SYMM, TENSOR_BOOL8 (data layout only): TRANSPOSE of a
  1x32x32x16 tensor to NCHW, then CONCATENATION with itself;
- TENSOR_FLOAT32 and TENSOR_FLOAT16: MUL, ADD and LOGISTIC on 1x28x28x32 in that type (vector
  operators, which every float config runs; `default`'s MAC array has no fp32 mode), FLOAT32
  and FLOAT16 scalars carry them, and both relaxed figures carry the fp16 one where the MAC
  array has an fp16 mode (relaxed models then compute in fp16), else the fp32 one.

A type whose workload the config cannot run (float on an integer-only config) is not
supported: FLT_MAX (left out of operandPerformance, as types.spec's convention has it).

ifPerformance and whilePerformance (types.spec: an IF costs ifPerformance plus its branch, a
WHILE whilePerformance per iteration plus its bodies) come from workloads whose bodies are as
small as a graph allows, so that the control flow's own cost dominates: an IF choosing between
an ADD and a SUB of two 1x8x8x8 TENSOR_QUANT8_ASYMM tensors, and a WHILE counting a
TENSOR_QUANT8_ASYMM [1] counter up to 4 (a LESS condition, an ADD body). Both run on the host
CPU model, as every COND_IF / WHILE_LOOP does; without EXT-CONTROLFLOW they are FLT_MAX."""
from __future__ import annotations

import numpy as np

from npu_sim.compiler.frontends.nnapi.model import OperandType as T

from ..config import HardwareConfig
from .builder import ModelBuilder
from .lowering import lower, relaxes_to_fp16
from .hal import UNSUPPORTED, Capabilities, ExecutionPreference, OperandPerformance, PerformanceInfo


def conv_block(kind: str = "TENSOR_QUANT8_ASYMM", per_channel: bool = False):
    rng = np.random.default_rng(7)
    signed = kind == "TENSOR_QUANT8_ASYMM_SIGNED"
    lo, hi, zp = (-128, 127, -3) if signed else (0, 255, 125)
    b = ModelBuilder(f"reference_{kind.lower()}{'_per_channel' if per_channel else ''}")
    x = b.input(kind, (1, 28, 28, 32), 0.05, zp)
    if per_channel:
        scales = list(np.linspace(0.002, 0.006, 32))
        w = b.operand("TENSOR_QUANT8_SYMM_PER_CHANNEL", (32, 3, 3, 32), 0.0, 0,
                      rng.integers(-127, 128, (32, 3, 3, 32)), scales, 0)
        bias = b.operand("TENSOR_INT32", (32,), 0.0, 0, rng.integers(-500, 500, 32))
    else:
        w = b.operand(kind, (32, 3, 3, 32), 0.004, zp, rng.integers(lo, hi + 1, (32, 3, 3, 32)))
        bias = b.operand("TENSOR_INT32", (32,), 0.05 * 0.004, 0, rng.integers(-500, 500, 32))
    y = b.operand(kind, (1, 28, 28, 32), 0.1, zp)
    b.op("CONV_2D", [x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1)], [y])
    dw = b.operand(kind, (1, 3, 3, 32), 0.01, zp, rng.integers(lo, hi + 1, (1, 3, 3, 32)))
    dbias = b.operand("TENSOR_INT32", (32,), 0.1 * 0.01, 0, rng.integers(-500, 500, 32))
    z = b.operand(kind, (1, 28, 28, 32), 0.1, zp)
    b.op("DEPTHWISE_CONV_2D", [y, dw, dbias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [z])
    out = b.operand(kind, (1, 28, 28, 32), 0.2, zp)
    b.op("ADD", [y, z, b.i32(0)], [out])
    b.output(out)
    return b.model()


def layout_block(kind: str):
    b = ModelBuilder(f"reference_{kind.lower()}")
    x = b.input(kind, (1, 32, 32, 16), 0.1 if kind == "TENSOR_QUANT16_SYMM" else 0.0, 0)
    y = b.operand(kind, (1, 16, 32, 32), 0.1 if kind == "TENSOR_QUANT16_SYMM" else 0.0, 0)
    b.op("TRANSPOSE", [x, b.operand("TENSOR_INT32", (4,), data=[0, 3, 1, 2])], [y])
    z = b.operand(kind, (1, 32, 32, 32), y and b.operands[y].scale, 0)
    b.op("CONCATENATION", [y, y, b.i32(1)], [z])
    b.output(z)
    return b.model()


def float_block(kind: str = "TENSOR_FLOAT32"):
    b = ModelBuilder(f"reference_{kind.lower()}")
    x = b.input(kind, (1, 28, 28, 32))
    k = b.operand(kind, (1, 1, 1, 32), data=np.linspace(0.5, 1.5, 32))
    y = b.operand(kind, (1, 28, 28, 32))
    b.op("MUL", [x, k, b.i32(0)], [y])
    z = b.operand(kind, (1, 28, 28, 32))
    b.op("ADD", [y, x, b.i32(1)], [z])
    out = b.operand(kind, (1, 28, 28, 32))
    b.op("LOGISTIC", [z], [out])
    b.output(out)
    return b.model()


def _operand(life, type="TENSOR_QUANT8_ASYMM", dims=(1,), data=(), scale=1.0):
    return {"type": type, "dimensions": list(dims), "lifetime": life, "data": list(data),
            "scale": scale if type.startswith("TENSOR_QUANT") else 0.0, "zeroPoint": 0}


def _subgraph(operands, operations, inputs, outputs):
    return {"operands": operands, "inputIndexes": inputs, "outputIndexes": outputs,
            "operations": [{"type": t, "inputs": i, "outputs": o} for t, i, o in operations]}


def _no_activation():
    return _operand("CONSTANT_COPY", "INT32", (), [0])


def if_block():
    from npu_sim.compiler.frontends.nnapi import model_from_dict
    shape = (1, 8, 8, 8)

    def branch(op):
        ops = [_operand("SUBGRAPH_INPUT", dims=shape), _operand("SUBGRAPH_INPUT", dims=shape),
               _no_activation(), _operand("SUBGRAPH_OUTPUT", dims=shape)]
        return _subgraph(ops, [(op, [0, 1, 2], [3])], [0, 1], [3])
    main = [_operand("SUBGRAPH_INPUT", "TENSOR_BOOL8"), _operand("SUBGRAPH_INPUT", dims=shape),
            _operand("SUBGRAPH_INPUT", dims=shape), _operand("SUBGRAPH", "SUBGRAPH", (), [0]),
            _operand("SUBGRAPH", "SUBGRAPH", (), [1]), _operand("SUBGRAPH_OUTPUT", dims=shape)]
    return model_from_dict({"name": "reference_if", "referenced": [branch("ADD"), branch("SUB")],
                            "main": _subgraph(main, [("IF", [0, 3, 4, 1, 2], [5])], [0, 1, 2], [5])})


def while_block():
    from npu_sim.compiler.frontends.nnapi import model_from_dict
    cond = _subgraph([_operand("SUBGRAPH_INPUT"), _operand("CONSTANT_COPY", data=[4]),
                      _operand("SUBGRAPH_OUTPUT", "TENSOR_BOOL8")], [("LESS", [0, 1], [2])], [0], [2])
    body = _subgraph([_operand("SUBGRAPH_INPUT"), _operand("CONSTANT_COPY", data=[1]),
                      _no_activation(), _operand("SUBGRAPH_OUTPUT")],
                     [("ADD", [0, 1, 2], [3])], [0], [3])
    main = [_operand("SUBGRAPH_INPUT"), _operand("SUBGRAPH", "SUBGRAPH", (), [0]),
            _operand("SUBGRAPH", "SUBGRAPH", (), [1]), _operand("SUBGRAPH_OUTPUT")]
    return model_from_dict({"name": "reference_while", "referenced": [cond, body],
                            "main": _subgraph(main, [("WHILE", [1, 2, 0], [3])], [0], [3])})


WORKLOADS = {
    T.TENSOR_FLOAT32: float_block,
    T.TENSOR_FLOAT16: lambda: float_block("TENSOR_FLOAT16"),
    T.TENSOR_INT32: lambda: layout_block("TENSOR_INT32"),
    T.TENSOR_QUANT8_ASYMM: lambda: conv_block("TENSOR_QUANT8_ASYMM"),
    T.TENSOR_QUANT16_SYMM: lambda: layout_block("TENSOR_QUANT16_SYMM"),
    T.TENSOR_BOOL8: lambda: layout_block("TENSOR_BOOL8"),
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL: lambda: conv_block("TENSOR_QUANT8_ASYMM", per_channel=True),
    T.TENSOR_QUANT8_ASYMM_SIGNED: lambda: conv_block("TENSOR_QUANT8_ASYMM_SIGNED"),
}
PARAMETERS = {T.INT32: T.TENSOR_QUANT8_ASYMM, T.BOOL: T.TENSOR_QUANT8_ASYMM,
              T.FLOAT32: T.TENSOR_FLOAT32, T.FLOAT16: T.TENSOR_FLOAT16}


def workload_info(model, cfg: HardwareConfig) -> PerformanceInfo:
    from npu_sim.report import build_report
    from . import schedule
    s, _ = schedule.choose(lower(model, cfg), cfg,
                           ExecutionPreference.FAST_SINGLE_ANSWER)
    from ..simulator import Machine
    sim = Machine(s.program, s.config, check_hazards=False).run(None, compute_values=False)
    perf = build_report(s.program, s.config, sim, True).performance_info
    return PerformanceInfo(round(perf["execTime"], 6), round(perf["powerUsage"], 6))


def _measured(make, cfg: HardwareConfig) -> PerformanceInfo | None:
    from npu_sim.isa.errors import NpuSimError
    try:
        return workload_info(make(), cfg)
    except NpuSimError:                  # the config cannot run it: unsupported
        return None


def measure_capabilities(cfg: HardwareConfig) -> Capabilities:
    infos = {t: info for t, make in WORKLOADS.items() if (info := _measured(make, cfg))}
    infos.update({t: infos[src] for t, src in PARAMETERS.items() if src in infos})
    relaxed = infos.get(T.TENSOR_FLOAT16 if relaxes_to_fp16(cfg) else T.TENSOR_FLOAT32,
                        UNSUPPORTED)
    return Capabilities(relaxed, relaxed,
                        [OperandPerformance(t, infos[t]) for t in sorted(infos)],
                        _measured(if_block, cfg) or UNSUPPORTED,
                        _measured(while_block, cfg) or UNSUPPORTED)
