"""The NPU as an NNAPI device (IDevice / IPreparedModel of HAL 1.3, in Python): capabilities,
getSupportedOperations, prepareModel and execute. Every call returns its ErrorStatus first,
as the HAL's callbacks do; nothing raises for a bad model or request."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npu_sim.compiler.frontends import nnapi as fe
from npu_sim.compiler.frontends.nnapi import params
from npu_sim.compiler.frontends.nnapi.model import NUMPY, Model, OperandType
from npu_sim.isa.errors import ModelError, NpuSimError, UnsupportedError

from ..config import HardwareConfig, load_config
from ..report import build_report
from ..simulator import Machine
from . import schedule as sched
from .lowering import lower, lower_operation
from .hal import (UINT64_MAX, ErrorStatus, ExecutionPreference, MeasureTiming, OutputShape,
                  Priority, Request, Timing)


def _compile(graph, cfg: HardwareConfig):
    from npu_sim.compiler.driver import compile_graph
    return compile_graph(graph.copy(), cfg, model_name=graph.source or "model")


class Device:
    def __init__(self, config: HardwareConfig | str | None = None):
        self.config = config if isinstance(config, HardwareConfig) else load_config(config)
        self._capabilities = None

    # IDevice ---------------------------------------------------------------------------

    def getCapabilities(self):
        from .capabilities import measure_capabilities
        if self._capabilities is None:
            self._capabilities = measure_capabilities(self.config)
        return ErrorStatus.NONE, self._capabilities

    def supported_operations(self, model: Model) -> list[tuple[bool, str]]:
        """(verdict, reason) per main-graph operation. Raises ModelError for an invalid model.
        An operation is supported when it lowers and compiles alone and the whole model
        compiles; if only the whole fails, every operation is refused with its reason. Shape
        parameters given as inputs are judged with stand-in values (params.py)."""
        bound = model
        if params.parameter_inputs(model.main):
            bound = params.bind(model, params.stand_ins(model))
        ops = model.main.operations
        for m in ([model] if bound is model else [model, bound]):
            try:
                fe.translate(m.main, referenced=m.referenced)
            except UnsupportedError:
                pass                         # judged operation by operation below
            except ModelError as exc:
                if m is model:
                    raise
                return [(False, f"shape parameters given at run time: stand-in values fail "
                         f"({_reason(exc)})")] * len(ops)
        model = bound
        try:
            _compile(lower(model, self.config), self.config)
            return [(True, "")] * len(ops)
        except ModelError:
            raise
        except NpuSimError as exc:
            whole = _reason(exc)
        verdicts = []
        for i in range(len(ops)):
            try:
                _compile(lower_operation(model, i, self.config), self.config)
                verdicts.append((True, ""))
            except NpuSimError as exc:
                verdicts.append((False, _reason(exc)))
        if all(v for v, _ in verdicts):
            verdicts = [(False, f"the model as a whole: {whole}")] * len(ops)
        return verdicts

    def getSupportedOperations(self, model: Model):
        try:
            return ErrorStatus.NONE, [v for v, _ in self.supported_operations(model)]
        except ModelError:
            return ErrorStatus.INVALID_ARGUMENT, []

    def prepareModel(self, model: Model, preference=ExecutionPreference.FAST_SINGLE_ANSWER,
                     priority=Priority.MEDIUM, deadline_us: float | None = None):
        """Preparation takes no simulated device time, so its deadline cannot be missed."""
        try:
            preference, priority = ExecutionPreference(preference), Priority(priority)
            prepared = PreparedModel(self, model, preference, priority)
            if prepared.parameters:           # compiled when a request brings their values
                lower(params.bind(model, params.stand_ins(model)), self.config)
            else:
                prepared.variant({})
        except (ValueError, ModelError):
            return ErrorStatus.INVALID_ARGUMENT, None
        except NpuSimError:
            return ErrorStatus.GENERAL_FAILURE, None
        return ErrorStatus.NONE, prepared

    def execute_concurrent(self, submissions):
        """Executions submitted together: [(prepared, request, measure, deadline_us)]. The device
        runs them one at a time, higher Priority first (submission order within one), back-to-
        back executions of a SUSTAINED_SPEED model as pairs; each Timing includes the wait.
        Returns the results in submission order."""
        order = sorted(range(len(submissions)), key=lambda i: -int(submissions[i][0].priority))
        results: list = [None] * len(submissions)
        clock_us = 0.0
        k = 0
        while k < len(order):
            i = order[k]
            prep = submissions[i][0]
            group = [i]
            if prep.preference == ExecutionPreference.SUSTAINED_SPEED and k + 1 < len(order) and \
                    submissions[order[k + 1]][0] is prep:
                group.append(order[k + 1])
            outs = prep._run([submissions[j][1] for j in group], start_us=clock_us)
            for j, res in zip(group, outs):
                sub = list(submissions[j])
                measure, deadline = (sub + [MeasureTiming.NO, None][len(sub) - 2:])[2:4]
                results[j] = prep._finish(res, measure, deadline)
            clock_us = max(r["end_us"] for r in outs if r is not None and "end_us" in r) \
                if any(r and "end_us" in r for r in outs) else clock_us
            k += len(group)
        return results


def _reason(exc: Exception) -> str:
    return " ".join(str(exc).split())


@dataclass
class _Io:
    index: int
    name: str
    operand: object


@dataclass
class _Variant:
    """The schedules of one set of shape-parameter values (the empty set without any)."""
    schedule: sched.Schedule
    pair: sched.Schedule | None
    names: dict[int, str]                # graph input name of each bound model input operand


class PreparedModel:
    def __init__(self, device: Device, model: Model, preference, priority):
        self.device, self.model = device, model
        self.preference, self.priority = preference, priority
        ins, outs = fe.io_names(model.main)
        ops = model.main.operands
        self.inputs = [_Io(k, n, ops[k]) for n, k in zip(ins, model.main.input_indexes)]
        self.outputs = [_Io(k, n, ops[k]) for n, k in zip(outs, model.main.output_indexes)]
        self.index_bounds = fe.index_inputs(model.main)
        self.parameters = params.parameter_inputs(model.main)
        self._variants: dict[tuple, _Variant] = {}

    @property
    def schedule(self) -> sched.Schedule:
        """The single-execution schedule (of the first parameter values seen, if any)."""
        return next(iter(self._variants.values())).schedule

    @property
    def pair(self) -> sched.Schedule | None:
        return next(iter(self._variants.values())).pair

    def variant(self, values: dict[int, np.ndarray]) -> _Variant:
        """Compiled for these parameter values (ModelError if types.spec forbids them)."""
        key = tuple((k, None if v is None else v.tobytes()) for k, v in sorted(values.items()))
        if key not in self._variants:
            model = params.bind(self.model, values) if values else self.model
            graph = lower(model, self.device.config)
            single, pair = sched.choose(graph, self.device.config, self.preference)
            names = dict(zip(model.main.input_indexes, fe.io_names(model.main)[0]))
            self._variants[key] = _Variant(single, pair, names)
        return self._variants[key]

    def execute(self, request: Request, measure=MeasureTiming.NO, deadline_us: float | None = None):
        """(ErrorStatus, [OutputShape], Timing, [output arrays]); Timing in microseconds."""
        return self._finish(self._run([request])[0], measure, deadline_us)

    # --------------------------------------------------------------------------------------

    def _check(self, request: Request):
        if not isinstance(request, Request) or len(request.inputs) != len(self.inputs):
            return ErrorStatus.INVALID_ARGUMENT, f"the model takes {len(self.inputs)} inputs"
        feeds = {}
        for io, value in zip(self.inputs, request.inputs):
            o = io.operand
            if value is None:
                if io.index in self.parameters:     # an omitted optional parameter
                    feeds[io.index] = None
                    continue
                return ErrorStatus.INVALID_ARGUMENT, f"input {io.name} is missing"
            arr = np.asarray(value)
            if tuple(arr.shape) != tuple(o.dimensions):
                return ErrorStatus.INVALID_ARGUMENT, (f"input {io.name} has dimensions "
                                                      f"{list(arr.shape)}, not {list(o.dimensions)}")
            want = np.dtype(NUMPY[o.type])
            fits = arr.dtype == want or (arr.dtype.kind in "iub" and want.kind in "iu" and (
                not arr.size or np.iinfo(want).min <= arr.min() <= arr.max() <= np.iinfo(want).max)
            ) or (arr.dtype.kind == "f" and want.kind == "f")
            if not fits:
                return ErrorStatus.INVALID_ARGUMENT, (f"input {io.name} holds {arr.dtype} values "
                                                      f"that are not {o.type.name}")
            arr = arr.astype(want)
            bound = self.index_bounds.get(io.index)
            if bound is not None and arr.size and not (0 <= arr.min() and arr.max() < bound):
                return ErrorStatus.INVALID_ARGUMENT, (f"input {io.name}: GATHER indices must be "
                                                      f"in [0, {bound})")
            feeds[io.index] = arr.view(np.int8) if want == np.uint8 else arr
        sizes = list(request.output_sizes or [])
        if sizes and len(sizes) != len(self.outputs):
            return ErrorStatus.INVALID_ARGUMENT, f"the model has {len(self.outputs)} outputs"
        shapes = []
        for io, size in zip(self.outputs, sizes + [None] * (len(self.outputs) - len(sizes))):
            need = io.operand.count * np.dtype(NUMPY[io.operand.type]).itemsize
            shapes.append(OutputShape(tuple(io.operand.dimensions), size is None or size >= need))
        if not all(s.isSufficient for s in shapes):
            return ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, shapes
        return ErrorStatus.NONE, feeds

    def _run(self, requests: list[Request], start_us: float = 0.0) -> list[dict]:
        checked = [self._check(r) for r in requests]
        results = [None if status == ErrorStatus.NONE else {"status": status, "detail": detail}
                   for status, detail in checked]
        good = [i for i, r in enumerate(results) if r is None]
        variants = {}
        for i in good:
            values = {k: checked[i][1][k] for k in self.parameters}
            try:
                variants[i] = self.variant(values)
            except ModelError as exc:             # values that make the model invalid
                results[i] = {"status": ErrorStatus.INVALID_ARGUMENT, "detail": str(exc)}
            except NpuSimError as exc:
                results[i] = {"status": ErrorStatus.GENERAL_FAILURE, "detail": str(exc)}
        good = [i for i in good if results[i] is None]
        if not good:
            return results
        v = variants[good[0]]
        pair = v.pair is not None and len(good) == v.pair.executions and \
            all(variants[i] is v for i in good)
        s = v.pair if pair else v.schedule
        good = good[:s.executions]
        feeds = {}
        for j, i in enumerate(good):
            for k, arr in checked[i][1].items():
                if k in v.names:
                    feeds[f"{v.names[k]}#{j}" if pair else v.names[k]] = arr
        cfg = s.config
        sim = Machine(s.program, cfg).run(feeds, compute_values=True)
        report = build_report(s.program, cfg, sim, False)
        device_us = report.seconds * 1e6
        for j, i in enumerate(good):
            outs = []
            for io in self.outputs:
                arr = sim.outputs[f"{io.name}#{j}" if pair else io.name]
                if io.operand.type == OperandType.TENSOR_QUANT8_ASYMM:
                    arr = arr.view(np.uint8)
                outs.append(arr.reshape(io.operand.dimensions))
            results[i] = {"status": ErrorStatus.NONE, "outputs": outs, "device_us": device_us,
                          "driver_us": start_us + device_us + cfg.driver_overhead_us,
                          "end_us": start_us + device_us, "energy_uj": report.energy_uj["total"],
                          "cycles": report.cycles}
        return results

    def _finish(self, res: dict, measure, deadline_us):
        status = res["status"]
        if status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
            return status, res["detail"], Timing(), []
        if status != ErrorStatus.NONE:
            return status, [], Timing(), []
        if deadline_us is not None and res["driver_us"] > deadline_us:
            return ErrorStatus.MISSED_DEADLINE_TRANSIENT, [], Timing(), []
        shapes = [OutputShape(tuple(io.operand.dimensions), True) for io in self.outputs]
        timing = Timing(int(np.ceil(res["device_us"])), int(np.ceil(res["driver_us"]))) \
            if MeasureTiming(measure) == MeasureTiming.YES else Timing(UINT64_MAX, UINT64_MAX)
        return status, shapes, timing, res["outputs"]
