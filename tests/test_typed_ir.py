"""The graph IR holds plain typed values: a graph built in Python, without any flatbuffer (as
the frontends build theirs), compiles exactly like the same graph loaded from a .tosa file."""
import numpy as np

from npu_sim import api
from npu_sim.compiler.ir import Graph, Operator, Tensor
from npu_sim.compiler.loader import load_bytes
from oracle import DType, GraphBuilder
from ops_sim_support import clamp_attr, const, conv_attr, rescale, scalar

W = (np.arange(8 * 3 * 3 * 4).reshape(8, 3, 3, 4) % 7 - 3).astype(np.int8)
BIAS = (np.arange(8) * 100 - 300).astype(np.int32)
MULT, SHIFT = np.full(8, 1 << 30, np.int32), np.full(8, 38, np.int8)


def _serialized() -> Graph:
    g = GraphBuilder()
    x = g.tensor([1, 6, 6, 4], DType.INT8)
    acc = g.intermediate([1, 6, 6, 8], DType.INT32)
    g.op("CONV2D", [x, const(g, W, DType.INT8), const(g, BIAS, DType.INT32),
                    scalar(g, 5, DType.INT8), scalar(g, 0, DType.INT8)], [acc],
         conv_attr((1, 1, 1, 1), (1, 1), (1, 1)))
    r = rescale(g, acc, (1, 6, 6, 8), DType.INT32, DType.INT8, MULT, SHIFT, 0, 3,
                per_channel=True, output=False)
    out = g.output([1, 6, 6, 8], DType.INT8)
    g.op("CLAMP", [r], [out], clamp_attr(DType.INT8, -100, 90))
    return load_bytes(g.serialize(), "built.tosa")


def _in_python() -> Graph:
    def t(name, shape, dtype, data=None):
        return Tensor(name, tuple(shape), dtype, None if data is None else np.asarray(data))
    tensors = [t("x", (1, 6, 6, 4), "int8"), t("w", W.shape, "int8", W),
               t("b", (8,), "int32", BIAS), t("izp", (1,), "int8", [5]),
               t("wzp", (1,), "int8", [0]), t("acc", (1, 6, 6, 8), "int32"),
               t("mult", (8,), "int32", MULT), t("shift", (8,), "int8", SHIFT),
               t("rzp_in", (1,), "int32", [0]), t("rzp_out", (1,), "int8", [3]),
               t("scaled", (1, 6, 6, 8), "int8"), t("y", (1, 6, 6, 8), "int8")]
    ops = [Operator("CONST", [], [x.name]) for x in tensors if x.data is not None] + [
        Operator("CONV2D", ["x", "w", "b", "izp", "wzp"], ["acc"],
                 {"pad": (1, 1, 1, 1), "stride": (1, 1), "dilation": (1, 1),
                  "local_bound": False, "acc_type": "int32"}),
        Operator("RESCALE", ["acc", "mult", "shift", "rzp_in", "rzp_out"], ["scaled"],
                 {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": True,
                  "input_unsigned": False, "output_unsigned": False}),
        Operator("CLAMP", ["scaled"], ["y"], {"min_val": -100, "max_val": 90,
                                               "nan_mode": "PROPAGATE"}),
    ]
    return Graph({x.name: x for x in tensors}, ops, ["x"], ["y"])


def test_a_graph_built_in_python_compiles_like_the_loaded_one():
    loaded = _serialized()
    clamp = next(op for op in loaded.operators if op.op == "CLAMP")
    assert (clamp.attrs["min_val"], clamp.attrs["max_val"]) == (-100, 90)   # decoded, typed
    cfg = api.load_config("default").with_overrides({"sram.size": "4 KiB"})  # so that it tiles
    a, b = api.compile_model(loaded, cfg), api.compile_model(_in_python(), cfg)
    assert len(a.commands) > 3
    assert a.commands == b.commands
    assert [(s.mem, s.addr, bytes(s.data)) for s in a.segments] == \
           [(s.mem, s.addr, bytes(s.data)) for s in b.segments]
    x = np.random.default_rng(0).integers(-128, 128, (1, 6, 6, 4)).astype(np.int8)
    ya = api.simulate(a, cfg, {loaded.inputs[0]: x}).outputs[loaded.outputs[0]]
    yb = api.simulate(b, cfg, {"x": x}).outputs["y"]
    assert np.array_equal(ya, yb) and ya.min() >= -100 and ya.max() <= 90
