"""Single-operator TFLite models built with the schema writers ai-edge-litert ships (no
TensorFlow), the reference-kernel oracle, and the compare harness of tests/test_tflite_ops.py."""
from __future__ import annotations

import flatbuffers
import numpy as np
import ai_edge_litert.schema_py_generated as S
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from npu_sim import api
from npu_sim.compiler.frontends.tflite import load_tflite_bytes

TYPES = {np.int8: S.TensorType.INT8, np.int16: S.TensorType.INT16, np.int32: S.TensorType.INT32,
         np.int64: S.TensorType.INT64, np.float32: S.TensorType.FLOAT32, np.float16: S.TensorType.FLOAT16,
         np.bool_: S.TensorType.BOOL}


class Model:
    def __init__(self):
        self.tensors, self.buffers, self.ops, self.codes = [], [S.BufferT()], [], []
        self.inputs, self.outputs = [], []

    def tensor(self, shape, dtype=np.int8, scale=None, zp=None, data=None, name=None,
               qdim=0) -> int:
        t = S.TensorT()
        t.shape = list(shape)
        t.type = TYPES[np.dtype(dtype).type]
        t.name = name or f"t{len(self.tensors)}"
        t.buffer = 0
        if data is not None:
            b = S.BufferT()
            b.data = np.ascontiguousarray(np.asarray(data, dtype)).view(np.uint8).reshape(-1).tolist()
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        if scale is not None:
            q = S.QuantizationParametersT()
            q.scale = [float(s) for s in np.atleast_1d(scale)]
            q.zeroPoint = [int(z) for z in np.broadcast_to(np.atleast_1d(zp or 0), (len(q.scale),))]
            q.quantizedDimension = qdim
            t.quantization = q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def input(self, shape, scale=0.05, zp=0, dtype=np.int8, name=None) -> int:
        i = self.tensor(shape, dtype, scale, zp, name=name or f"in{len(self.inputs)}")
        self.inputs.append(i)
        return i

    def output(self, shape, scale=0.05, zp=0, dtype=np.int8, name=None) -> int:
        i = self.tensor(shape, dtype, scale, zp, name=name or f"out{len(self.outputs)}")
        self.outputs.append(i)
        return i

    def const(self, data, dtype=np.int32, scale=None, zp=None, qdim=0) -> int:
        data = np.asarray(data, dtype)
        return self.tensor(data.shape, dtype, scale, zp, data, qdim=qdim)

    def op(self, name: str, inputs, outputs, options=None, options_type: str | None = None):
        code = getattr(S.BuiltinOperator, name)
        key = (code, name)
        if key not in self.codes:
            self.codes.append(key)
        o = S.OperatorT()
        o.opcodeIndex = self.codes.index(key)
        o.inputs, o.outputs = list(inputs), list(outputs)
        if options is not None:
            o.builtinOptionsType = getattr(S.BuiltinOptions, options_type)
            o.builtinOptions = options
        self.ops.append(o)

    def serialize(self) -> bytes:
        m = S.ModelT()
        m.version = 3
        m.operatorCodes = []
        for code, _ in self.codes:
            c = S.OperatorCodeT()
            c.builtinCode = code
            c.deprecatedBuiltinCode = min(code, 127)
            c.version = 1
            m.operatorCodes.append(c)
        sg = S.SubGraphT()
        sg.tensors, sg.operators = self.tensors, self.ops
        sg.inputs, sg.outputs = self.inputs, self.outputs
        m.subgraphs = [sg]
        m.buffers = self.buffers
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def float_input(m: "Model", shape):
    return m.input(shape, None, None, dtype=np.float32)


def float_output(m: "Model", shape):
    return m.output(shape, None, None, dtype=np.float32)


def options(cls_name: str, **fields):
    o = getattr(S, cls_name + "T")()
    for k, v in fields.items():
        setattr(o, k, v)
    return o


def reference(buf: bytes, feed: dict, kernels=OpResolverType.BUILTIN_REF) -> dict:
    interp = Interpreter(model_content=buf, experimental_op_resolver_type=kernels)
    interp.allocate_tensors()
    for d in interp.get_input_details():
        interp.set_tensor(d["index"], feed[d["name"]])
    interp.invoke()
    return {d["name"]: interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()}


_CONFIGS = {}


def config(name: str = "default"):
    """A preset by name, or the default preset with a buffer of `name` bytes ("4 KiB")."""
    if name not in _CONFIGS:
        sized = name.endswith("B")
        base = api.load_config("default" if sized else name)
        _CONFIGS[name] = base.with_overrides({"sram.size": name}) if sized else base
    return _CONFIGS[name]


def random_feed(m: Model, rng) -> dict:
    """Uniform over the integer range for integer inputs, standard normal for float32 ones."""
    feed = {}
    for i in m.inputs:
        t = m.tensors[i]
        if t.type == S.TensorType.FLOAT32:
            feed[t.name] = rng.standard_normal(t.shape).astype(np.float32)
            continue
        dtype = {S.TensorType.INT8: np.int8, S.TensorType.INT16: np.int16,
                 S.TensorType.INT32: np.int32}[t.type]
        info = np.iinfo(dtype)
        feed[t.name] = rng.integers(info.min, info.max, t.shape, endpoint=True).astype(dtype)
    return feed


def run_both(m: Model, rng, cfg: str = "default", feed: dict | None = None,
             kernels=OpResolverType.BUILTIN_REF):
    """(feed, TFLite's outputs (its reference kernels unless `kernels` says), simulated outputs)."""
    buf = m.serialize()
    feed = feed if feed is not None else random_feed(m, rng)
    ref = reference(buf, feed, kernels)
    c = config(cfg)
    result = api.simulate(api.compile_model(load_tflite_bytes(buf, "single-op.tflite"), c), c, feed)
    return feed, ref, {name: result.outputs[name] for name in ref}


def float_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| relative to the reference output's range (its largest magnitude for a
    constant output)."""
    want64 = want.astype(np.float64)
    span = np.ptp(want64) or np.abs(want64).max() or 1.0
    return float(np.abs(got.astype(np.float64) - want64).max() / span)


def check_float(m: Model, rng, cfg: str = "default", feed: dict | None = None,
                rtol: float = 1e-5, kernels=OpResolverType.BUILTIN_REF) -> float:
    """Float outputs within `rtol` of the reference's range, integer outputs equal; returns the
    largest relative error."""
    _, ref, got = run_both(m, rng, cfg, feed, kernels)
    worst = 0.0
    for name, want in ref.items():
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        if want.dtype.kind == "f":
            worst = max(worst, float_error(got[name], want))
            assert worst <= rtol, f"{name}: error {worst:.3g} of the output range"
        else:
            assert np.array_equal(got[name], want), f"{name}: {np.sum(got[name] != want)} differ"
    return worst


def check(m: Model, rng, cfg: str = "default", feed: dict | None = None):
    """The model on TFLite's reference kernels and compiled and simulated; equal bit for bit."""
    buf = m.serialize()
    feed = feed if feed is not None else random_feed(m, rng)
    ref = reference(buf, feed)
    graph = load_tflite_bytes(buf, "single-op.tflite")
    c = config(cfg)
    result = api.simulate(api.compile_model(graph, c), c, feed)
    for name, want in ref.items():
        got = result.outputs[name]
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape,
                                                                    want.dtype, want.shape)
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)
            first = tuple(int(i) for i in bad[0])
            raise AssertionError(f"{name}: {len(bad)}/{want.size} differ; first at {first}: "
                                 f"got {got[first]}, reference {want[first]}")
