"""TOSA 1.1-draft shape operators (EXT-SHAPE, experimental) and shape_t graph outputs.

Graphs are built with tosa-tools' serializer (which writes the 1.1 draft by default); the
reference model computes the expected values. Cases are drawn from a seeded generator: random
lengths and values, negative operands and divisors included (the reference model computes them
with C arithmetic; compiler/validation/shape.py says where that departs from the
spec). Arm's generated shape tests run in tests/test_conformance.py.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tosa_serializer as ts

from npu_sim import api
from npu_sim.compiler.loader import load_bytes
from npu_sim.isa.errors import UnsupportedError, ValidationError
from conformance_suite import reference_binary
from oracle import make_attr

Op, DType = ts.Op, ts.DType
RNG_SEED = 11


def reference(buf: bytes, feeds: dict, outputs: list[str]) -> dict:
    """Run the graph on the reference model through a test descriptor (which, unlike the
    command-line tensor lists, also takes graphs without inputs)."""
    with tempfile.TemporaryDirectory(prefix="shape_ref_") as tmp:
        t = Path(tmp)
        (t / "test.tosa").write_bytes(buf)
        for i, x in enumerate(feeds.values()):
            np.save(t / f"in{i}.npy", x)
        (t / "desc.json").write_text(json.dumps({
            "tosa_file": "test.tosa", "ifm_name": list(feeds),
            "ifm_file": [f"in{i}.npy" for i in range(len(feeds))], "ofm_name": outputs,
            "ofm_file": [f"out{i}.npy" for i in range(len(outputs))], "expected_failure": False}))
        proc = subprocess.run([reference_binary(), "--test_desc", str(t / "desc.json"), "--output_dir", tmp],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return {n: np.load(t / f"out{i}.npy") for i, n in enumerate(outputs)}


def run_npu(buf: bytes, feeds: dict, config: str = "default"):
    cfg = api.load_config(config)
    return api.simulate(api.compile_model(load_bytes(buf, "shape.tosa"), cfg), cfg, feeds)


def same(got: dict, want: dict) -> None:
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w), (name, g, w)


def const_shape(ser, values):
    return ser.addConst([len(values)], DType.SHAPE, np.array(values, np.int64))


def shape_graph(op, operands, out_len, draft=True):
    """CONST_SHAPE operands -> op -> a shape_t graph output; and an ABS of an input beside it."""
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=1 if draft else 0, targetPatch=0,
                            targetDraft=draft)
    x = ser.addPlaceholder([3], DType.INT32, None)
    y = ser.addOutput([3], DType.INT32)
    ser.addOperator(Op.ABS, [x.name], [y.name], make_attr(Op.ABS))
    names = [const_shape(ser, v).name if not isinstance(v, str) else v for v in operands]
    z = ser.addIntermediateShape(out_len)
    ser.addOperator(op, names, [z.name], make_attr(op))
    ser.addOutputTensor(z)
    return ser.serialize(), {x.name: np.array([-1, 2, -3], np.int32)}, [y.name, z.name]


def _cases():
    rng = np.random.default_rng(RNG_SEED)
    cases = []
    for op in (Op.ADD_SHAPE, Op.SUB_SHAPE, Op.MUL_SHAPE, Op.MAX_SHAPE, Op.MIN_SHAPE,
               Op.DIV_FLOOR_SHAPE, Op.DIV_CEIL_SHAPE, Op.MOD_SHAPE):
        for _ in range(3):
            n = int(rng.integers(1, 7))
            a = rng.integers(-1000, 1000, n)
            b = rng.integers(-50, 50, n)
            b[b == 0] = 7
            cases.append((op, [a.tolist(), b.tolist()], n))
    for _ in range(3):
        n = int(rng.integers(1, 7))
        cases.append((Op.EXP2_SHAPE, [rng.integers(0, 31, n).tolist()], n))
        cases.append((Op.LOG2_CEIL_SHAPE, [rng.integers(1, 1 << 40, n).tolist()], n))
        cases.append((Op.LOG2_FLOOR_SHAPE, [[1, 2, 3, 4, 5][:n] + rng.integers(1, 99, max(0, n - 5)).tolist()], n))
    parts = [rng.integers(1, 20, int(rng.integers(1, 5))).tolist() for _ in range(3)]
    cases.append((Op.CONCAT_SHAPE, parts, sum(len(p) for p in parts)))
    return cases


@pytest.mark.parametrize("op, operands, out_len", _cases(),
                         ids=lambda v: str(v).split(".")[-1] if isinstance(v, Op) else None)
def test_shape_operator_matches_the_reference_model(op, operands, out_len):
    buf, feeds, outs = shape_graph(op, operands, out_len)
    same(run_npu(buf, feeds).outputs, reference(buf, feeds, outs))


def test_shape_values_flow_into_tensor_operators():
    """DIM, SLICE_SHAPE, MUL_SHAPE and CONCAT_SHAPE give the shape of a RESHAPE and the
    multiples of a TILE (which run on the machine: the shapes only steer them)."""
    ser = ts.TosaSerializer("")
    x = ser.addPlaceholder([2, 3, 4], DType.INT8, None)
    d0, d2 = ser.addIntermediateShape(1), ser.addIntermediateShape(1)
    a0, a2 = ts.TosaSerializerAttribute(), ts.TosaSerializerAttribute()
    a0.DimAttribute(0)
    a2.DimAttribute(2)
    ser.addOperator(Op.DIM, [x.name], [d0.name], a0)
    ser.addOperator(Op.DIM, [x.name], [d2.name], a2)
    full = const_shape(ser, [1, 3, 2, 5])
    start = ser.addConst([1], DType.INT32, np.array([1], np.int32))
    size = ser.addConst([1], DType.INT32, np.array([1], np.int32))
    three = ser.addIntermediateShape(1)
    ser.addOperator(Op.SLICE_SHAPE, [full.name, start.name, size.name], [three.name],
                    make_attr(Op.SLICE_SHAPE))
    wide = ser.addIntermediateShape(1)
    ser.addOperator(Op.MUL_SHAPE, [three.name, d2.name], [wide.name], make_attr(Op.MUL_SHAPE))
    new_shape = ser.addIntermediateShape(2)
    ser.addOperator(Op.CONCAT_SHAPE, [d0.name, wide.name], [new_shape.name], make_attr(Op.CONCAT_SHAPE))
    flat = ser.addIntermediate([2, 12], DType.INT8)
    ser.addOperator(Op.RESHAPE, [x.name, new_shape.name], [flat.name], make_attr(Op.RESHAPE))
    tiled = ser.addOutput([4, 12], DType.INT8)
    ser.addOperator(Op.TILE, [flat.name, const_shape(ser, [2, 1]).name], [tiled.name],
                    make_attr(Op.TILE))
    ser.addOutputTensor(new_shape)
    buf = ser.serialize()
    feeds = {x.name: np.arange(24, dtype=np.int8).reshape(2, 3, 4)}
    result = run_npu(buf, feeds)
    same(result.outputs, reference(buf, feeds, [tiled.name, new_shape.name]))
    assert result.report.operators["npu"] >= 1


def test_reference_departures_from_the_spec():
    """Negative DIV_FLOOR/DIV_CEIL/MOD operands are computed (C arithmetic, as the reference
    model does), a division by zero and an int64 overflow of ADD_SHAPE are REQUIRE failures,
    MUL_SHAPE wraps like the model."""
    a, b = [-7, 7, -7, 7, 0], [2, -2, -2, 2, 3]
    for op, want in ((Op.DIV_FLOOR_SHAPE, [-3, -3, 3, 3, 0]), (Op.DIV_CEIL_SHAPE, [-2, -2, 4, 4, 0]),
                     (Op.MOD_SHAPE, [-1, 1, -1, 1, 0])):
        buf, feeds, outs = shape_graph(op, [a, b], 5)
        assert run_npu(buf, feeds).outputs[outs[1]].tolist() == want
        same(run_npu(buf, feeds).outputs, reference(buf, feeds, outs))
    buf, feeds, outs = shape_graph(Op.MUL_SHAPE, [[1 << 40, 3], [1 << 30, 2]], 2)
    same(run_npu(buf, feeds).outputs, reference(buf, feeds, outs))
    for op, operands in ((Op.DIV_FLOOR_SHAPE, [[5], [0]]), (Op.ADD_SHAPE, [[1 << 62], [1 << 62]]),
                         (Op.EXP2_SHAPE, [[31]]), (Op.LOG2_CEIL_SHAPE, [[0]])):
        buf, _, _ = shape_graph(op, operands, 1)
        with pytest.raises(ValidationError, match="REQUIRE"):
            api.compile_model(load_bytes(buf, "s.tosa"), api.load_config("default"))


@pytest.mark.parametrize("build, error, needle", [
    (lambda: shape_graph(Op.ADD_SHAPE, [[1, 2], [3]], 2), ValidationError, "length(input1) != length(input2)"),
    (lambda: shape_graph(Op.ADD_SHAPE, [[1, 2], [3, 4]], 3), ValidationError, "length(output) != length(result)"),
    (lambda: shape_graph(Op.CONCAT_SHAPE, [[1], []], 1), ValidationError, "input[i] == []"),
    (lambda: shape_graph(Op.ADD_SHAPE, [[1] * 17, [1] * 17], 17), ValidationError, "MAX_SHAPE_LEN"),
    (lambda: shape_graph(Op.ADD_SHAPE, [[1], [2]], 1, draft=False), UnsupportedError, "declares TOSA 1.0"),
])
def test_shape_rules(build, error, needle):
    buf, _, _ = build()
    with pytest.raises(error) as info:
        api.compile_model(load_bytes(buf, "s.tosa"), api.load_config("default"))
    assert needle in str(info.value)


def test_const_shape_graph_output_in_tosa_1_0():
    """A CONST_SHAPE graph output (the spec forbids shape_t graph outputs, Arm's 1.0 generator
    makes such tests and the reference model writes them as int64): written as the model does."""
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    x = ser.addPlaceholder([2], DType.INT32, None)
    y = ser.addOutput([2], DType.INT32)
    ser.addOperator(Op.ABS, [x.name], [y.name], make_attr(Op.ABS))
    for values in ([4, 1, 9], []):
        c = const_shape(ser, values)
        ser.addOutputTensor(c)
    buf = ser.serialize()
    graph = load_bytes(buf, "c.tosa")
    feeds = {x.name: np.array([-5, 6], np.int32)}
    same(run_npu(buf, feeds, "edge-256").outputs, reference(buf, feeds, graph.outputs))


def _npu_sim(*args):
    return subprocess.run([sys.executable, "-I", "-m", "npu_sim", *map(str, args)],
                          capture_output=True, text=True)


def test_draft_graph_without_ext_shape_is_one_line_exit_2(tmp_path):
    buf, _, _ = shape_graph(Op.ADD_SHAPE, [[1], [2]], 1)
    model = tmp_path / "draft.tosa"
    model.write_bytes(buf)
    r = _npu_sim("run", model, "--config", "edge-256", "--output-dir", tmp_path / "out")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "1.1.0-draft" in lines[0] and "EXT-SHAPE is not enabled" in lines[0]
    assert not (tmp_path / "out").exists()
    r = _npu_sim("run", model, "--output-dir", tmp_path / "ok")        # default enables it
    assert r.returncode == 0, r.stderr
