"""The loader reads TOSA flatbuffers with its own table reader (compiler/loader.py); it must
give what tosa-tools' generated classes give, field for field, on every stored model and on
damaged copies of one (where both refuse)."""
from pathlib import Path

import numpy as np
import pytest

from npu_sim import zoo
from npu_sim.compiler import loader
from npu_sim.isa.errors import ModelError, NpuSimError

DATA = Path(__file__).parent / "data"


def _generated(buf: bytes):
    """The graph's fields as the generated classes read them (the loader's former reader)."""
    from tosa.TosaGraph import TosaGraph
    fb = TosaGraph.GetRootAs(buf, 0)
    v = fb.Version()
    out = {"version": (v._Major(), v._Minor(), v._Patch(), bool(v._Draft())), "regions": {}}
    for r in range(fb.RegionsLength()):
        region = fb.Regions(r)
        block = region.Blocks(0)
        tensors = []
        for i in range(block.TensorsLength()):
            t = block.Tensors(i)
            tensors.append((t.Name().decode(),
                            tuple(t.ShapeAsNumpy().tolist()) if t.ShapeLength() else (),
                            t.Type(), bytes(t.DataAsNumpy()) if t.DataLength() else None,
                            bool(t.Variable()),
                            t.VariableName().decode() if t.VariableName() else ""))
        ops = []
        for i in range(block.OperatorsLength()):
            o = block.Operators(i)
            loc = o.Location()
            ops.append((o.Op(), [o.Inputs(j).decode() for j in range(o.InputsLength())],
                        [o.Outputs(j).decode() for j in range(o.OutputsLength())],
                        o.AttributeType(),
                        loc.Text().decode() if loc is not None and loc.Text() else ""))
        out["regions"][region.Name().decode()] = (
            tensors, ops, [block.Inputs(j).decode() for j in range(block.InputsLength())],
            [block.Outputs(j).decode() for j in range(block.OutputsLength())])
    return out


def _attributes(o, tensors: dict) -> dict:
    """An operator's attributes through the generated classes (the loader's former path)."""
    kind = loader.ATTRIBUTE_NAMES.get(o.AttributeType(), "NONE")
    if kind in loader._VARIABLE_ACCESS:
        return {loader._VARIABLE_ACCESS[kind]: True}
    table = o.Attribute()
    if kind == "NONE" or table is None:
        return {}
    module = __import__(f"tosa.{kind}", fromlist=[kind])
    cls = getattr(module, kind)
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    attrs = {}
    for method, name, is_vector in loader._attribute_fields(cls):
        if is_vector:
            value = () if getattr(obj, f"{method}IsNone")() else \
                tuple(int(x) for x in getattr(obj, f"{method}AsNumpy")())
        else:
            value = getattr(obj, method)()
            if isinstance(value, bytes):
                value = value.decode()
            elif name in loader._ENUM_FIELDS and isinstance(value, int):
                value = loader._ENUM_FIELDS[name].get(value, value)
        attrs[name] = value
    first = o.Inputs(0).decode() if o.InputsLength() else None
    for key in loader._VALUE_FIELDS.intersection(attrs):
        attrs[key] = loader._decode_value(attrs[key], tensors[first].dtype if first else "")
    return attrs


def _models():
    for path in sorted(DATA.rglob("*.tosa")):
        yield str(path.relative_to(DATA)), path.read_bytes()
    yield "zoo ds_cnn", zoo.build("ds_cnn", channels=16)[0]
    yield "zoo transformer", zoo.build("transformer")[0]


@pytest.mark.parametrize("name,buf", list(_models()), ids=lambda v: v if isinstance(v, str) else "")
def test_reader_gives_what_the_generated_classes_give(name, buf):
    from tosa.TosaGraph import TosaGraph
    try:
        graph = loader.load_bytes(buf, name)
    except NpuSimError:             # refused after reading (a version or dtype check)
        return
    fb = TosaGraph.GetRootAs(buf, 0)
    v = fb.Version()
    assert (graph.version, graph.draft or v._Draft()) == ((v._Major(), v._Minor(), v._Patch()),
                                                         v._Draft())
    regions = {"main": graph, **graph.regions}
    assert set(regions) == {fb.Regions(r).Name().decode() for r in range(fb.RegionsLength())}
    for r in range(fb.RegionsLength()):
        region = fb.Regions(r)
        block, g = region.Blocks(0), regions[region.Name().decode()]
        assert g.inputs == [block.Inputs(j).decode() for j in range(block.InputsLength())]
        assert g.outputs == [block.Outputs(j).decode() for j in range(block.OutputsLength())]
        for i in range(block.TensorsLength()):
            t = block.Tensors(i)
            got = g.tensors[t.Name().decode()]
            shape = tuple(t.ShapeAsNumpy().tolist()) if t.ShapeLength() else ()
            assert (got.shape, got.dtype, got.variable, got.variable_name) == (
                shape, loader.DTYPE_NAMES[t.Type()].lower(), bool(t.Variable()),
                t.VariableName().decode() if t.VariableName() else "")
            if t.DataLength():
                want = loader.decode_data(t.DataAsNumpy(), got.dtype, shape)
                assert got.data.dtype == want.dtype and got.data.tobytes() == want.tobytes()
            elif got.data is not None:          # only an empty CONST_SHAPE gets data unread
                assert got.dtype == "shape" and got.data.size == 0
        assert len(g.operators) == block.OperatorsLength()
        for i, op in enumerate(g.operators):
            o = block.Operators(i)
            loc = o.Location()
            assert (op.op, op.inputs, op.outputs, op.location, op.index) == (
                loader.OP_NAMES[o.Op()], [o.Inputs(j).decode() for j in range(o.InputsLength())],
                [o.Outputs(j).decode() for j in range(o.OutputsLength())],
                loc.Text().decode() if loc is not None and loc.Text() else "", i)
            assert op.attrs == _attributes(o, g.tensors), (name, i, op.op)


def test_damaged_files_are_refused_in_one_line():
    """Random byte changes load or are refused as the project's errors (no other exception),
    and a truncated file is corrupt."""
    buf = (DATA / "small_cnn" / "model.tosa").read_bytes()
    rng = np.random.default_rng(7)
    refused = 0
    for _ in range(300):
        bad = bytearray(buf)
        for at in rng.integers(0, min(len(bad), 4096), 3):
            bad[at] = int(rng.integers(0, 256))
        try:
            loader.load_bytes(bytes(bad), "bad.tosa")
        except NpuSimError as exc:
            refused += 1
            assert "\n" not in str(exc)
    assert refused > 10
    with pytest.raises(ModelError, match="corrupt"):
        loader.load_bytes(buf[: len(buf) // 3], "cut.tosa")


def _operators(buf: bytes):
    """The loader's tables of the main block's operators."""
    root = loader.Table(buf, loader.U32(buf, 0)[0])
    return root.tables(6)[0].tables(6)[0].tables(6)


def _damaged(kind: str) -> bytes:
    """small_cnn's model with one structure damaged as the TOSA reference model's loader
    (flatbuffers' verifier, then its attribute tables) refuses it."""
    buf = bytearray((DATA / "small_cnn" / "model.tosa").read_bytes())
    ops = _operators(bytes(buf))
    conv = next(o for o in ops if loader.OP_NAMES[o.scalar(4, loader.U32)] == "CONV2D")
    if kind == "attribute type beyond the schema":
        buf[conv.field(6)] = 139
    elif kind == "another operator's attribute":
        buf[conv.field(6)] = next(c for c, n in loader.ATTRIBUTE_NAMES.items()
                                  if n == "MaxPool2dAttribute")
    elif kind == "a field outside its table":
        buf[conv.vt + 4:conv.vt + 6] = (0xFFF0).to_bytes(2, "little")
    elif kind == "an unterminated string":
        at = conv.field(10)                             # its input names: the first one
        at += loader.U32(buf, at)[0] + 4
        at += loader.U32(buf, at)[0]
        buf[at + 4 + loader.U32(buf, at)[0]] = ord("x")
    return bytes(buf)


@pytest.mark.parametrize("kind", ["attribute type beyond the schema",
                                  "another operator's attribute", "a field outside its table",
                                  "an unterminated string"])
def test_files_the_reference_model_cannot_load_are_refused(kind):
    from oracle import ReferenceError as RefusedByReference
    from oracle import run_reference
    bad = _damaged(kind)
    with pytest.raises(ModelError) as refused:
        loader.load_bytes(bad, "bad.tosa")
    assert "\n" not in str(refused.value) and "bad.tosa" in str(refused.value)
    good = loader.load_bytes((DATA / "small_cnn" / "model.tosa").read_bytes(), "ok.tosa")
    inputs = {good.inputs[0]: np.zeros(good.tensors[good.inputs[0]].shape, np.int8)}
    with pytest.raises(RefusedByReference):
        run_reference(bad, inputs, list(good.outputs))
