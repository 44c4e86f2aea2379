"""Bad .tflite models end in one line naming the problem and exit status 2: an unsupported
builtin or custom operator (with its index), a dynamic shape, quantization no kernel can use, a
float model on an integer-only config, a missing extra."""
import builtins
from pathlib import Path

import numpy as np
import pytest
import ai_edge_litert.schema_py_generated as S

from npu_sim import api
from npu_sim.cli import main
from npu_sim.isa.errors import NpuSimError
from tflite_support import Model, options

DATA = Path(__file__).parent / "data" / "tflite"


def _write(tmp_path, m: Model, name="bad.tflite"):
    path = tmp_path / name
    path.write_bytes(m.serialize())
    return str(path)


def _fails(capsys, path, *words, config="default"):
    assert main(["run", path, "--timing-only", "--config", config]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


def _relu_then(op_name, m=None):
    m = m or Model()
    x = m.input((1, 8), 0.05, 0)
    mid = m.tensor((1, 8), np.int8, 0.05, 0)
    y = m.output((1, 8), 0.05, 0)
    m.op("RELU", [x], [mid])
    m.op(op_name, [mid], [y])
    return m


def test_unsupported_builtin_is_named_with_its_index(tmp_path, capsys):
    _fails(capsys, _write(tmp_path, _relu_then("CUMSUM")), "operator #1 CUMSUM", "not supported")


def test_a_float_only_builtin_on_int8_says_so(tmp_path, capsys):
    _fails(capsys, _write(tmp_path, _relu_then("EXP")), "operator #1 EXP",
           "float32 and float16 tensors only; this one is INT8")


def test_a_space_to_batch_stored_with_the_wrong_shape_is_refused(tmp_path, capsys):
    """TFLite works the output shape out from the inputs; the lowering takes the stored one, so
    the two must agree."""
    m = Model()
    x = m.input((1, 4, 4, 2))
    y = m.output((2, 4, 2, 2))                          # the inputs make [4, 2, 2, 2]
    m.op("SPACE_TO_BATCH_ND", [x, m.const([2, 2]), m.const([[0, 0], [0, 0]])], [y])
    _fails(capsys, _write(tmp_path, m), "operator #0 SPACE_TO_BATCH_ND",
           "stored as [2, 4, 2, 2]; its inputs make [4, 2, 2, 2]")


def test_custom_op_is_named_with_its_index(tmp_path, capsys):
    m = _relu_then("RELU")
    m.codes.append((S.BuiltinOperator.CUSTOM, "CUSTOM"))
    m.ops[1].opcodeIndex = len(m.codes) - 1
    blob = m.serialize()
    m2 = S.ModelT.InitFromPackedBuf(blob, 0)
    m2.operatorCodes[-1].customCode = "MyFancyOp"
    import flatbuffers
    b = flatbuffers.Builder(1024)
    b.Finish(m2.Pack(b), file_identifier=b"TFL3")
    path = tmp_path / "custom.tflite"
    path.write_bytes(bytes(b.Output()))
    _fails(capsys, str(path), "operator #1 custom op 'MyFancyOp'")


def test_dynamic_shape(tmp_path, capsys):
    m = _relu_then("RELU")
    m.tensors[0].shapeSignature = [1, -1]
    _fails(capsys, _write(tmp_path, m), "dynamic shape", "in0")


def test_float32_model_on_an_integer_config(tmp_path, capsys):
    m = Model()
    x = m.input((1, 4), None, None, dtype=np.float32)
    w = m.const(np.ones((3, 4)), np.float32)
    y = m.output((1, 3), None, None, dtype=np.float32)
    m.op("FULLY_CONNECTED", [x, w, -1], [y], options("FullyConnectedOptions"),
         "FullyConnectedOptions")
    _fails(capsys, _write(tmp_path, m), "(from TFLite operator #0 FULLY_CONNECTED)", "fp32",
           "PRO-FP", config="edge-256")


def test_not_a_tflite_file(tmp_path, capsys):
    path = tmp_path / "empty.tflite"
    path.write_bytes(b"\0" * 64)
    _fails(capsys, str(path), "not a TFLite flatbuffer")


def test_missing_extra_names_it(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_tflite(name, *args, **kwargs):
        if name == "tflite" or name.startswith("tflite."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tflite)
    with pytest.raises(NpuSimError, match=r"npu-sim\[tflite\]"):
        api.compile_model(_write(tmp_path, _relu_then("RELU"), "ok.tflite"),
                          api.load_config("default"), use_cache=False)


def test_tflite_names_that_look_internal_stay_distinct():
    """A model tensor named like one the frontend makes up is still its own tensor."""
    rng = np.random.default_rng(0)
    m = Model()
    x = m.input((1, 6), 0.05, 0)
    mid = m.tensor((1, 6), np.int8, 0.05, 0, name="tfl0_relu/rescale5")
    y = m.output((1, 6), 0.05, 0, name="tfl0_relu/zp3")
    m.op("RELU", [x], [mid])
    m.op("RELU6", [mid], [y])
    from tflite_support import check
    check(m, rng)


def test_a_model_with_nothing_to_compute_is_refused(capsys, tmp_path):
    """A subgraph without outputs (a corrupt file's, as the fuzz suite found) ran to an empty
    report and wrote nothing: it is refused."""
    m = Model()
    m.input((1, 8), 0.05, 0)
    _fails(capsys, _write(tmp_path, m), "no outputs", "nothing to compute")


@pytest.mark.parametrize("scale,zp,words", [
    (0.05, 300, ["tensor 0 'in0'", "zero point 300 is outside INT8's range"]),
    (float("nan"), 0, ["tensor 0 'in0'", "scale nan is not a normal positive fp32 number"]),
    (-0.5, 0, ["scale -0.5"]),
    (0.0, 0, ["scale 0.0 is not a normal positive fp32 number"]),   # kernels divide by it
    (1e-45, 0, ["scale 1e-45"]),                                    # 1 / it overflows
])
def test_quantization_a_kernel_cannot_use_is_refused(tmp_path, capsys, scale, zp, words):
    m = Model()
    x = m.input((1, 8), scale, zp)
    m.op("RELU", [x], [m.output((1, 8), 0.05, 0)])
    _fails(capsys, _write(tmp_path, m), *words)


def test_an_operator_output_of_minus_one_is_refused(tmp_path, capsys):
    """-1 marks an omitted optional input; as an output it would wrap to the last tensor."""
    m = _relu_then("RELU")
    m.ops[1].outputs = [-1]
    _fails(capsys, _write(tmp_path, m), "operator #1 RELU names tensor -1")


def test_scales_whose_ratio_overflows_fp32_are_unsupported_not_warnings(tmp_path, capsys):
    """Each scale is a normal fp32 number, but a kernel's input/output ratio overflows."""
    m = Model()
    x = m.input((1, 8), 3e38, 0)
    m.op("RELU", [x], [m.output((1, 8), 1e-3, 0)])
    _fails(capsys, _write(tmp_path, m), "operator #0 RELU", "overflow float arithmetic")


def _damaged_tflite(kind: str) -> bytes:
    """audio_example1 with one structure damaged so that TFLite refuses it: its flatbuffer
    verifier, or (an options type its schema lacks, which the verifier lets pass) the
    operator's prepare, missing its options."""
    import tflite as fb

    from npu_sim.compiler.flatbuf import U32 as _U32
    buf = bytearray((DATA / "audio_example1" / "model.tflite").read_bytes())
    model = fb.Model.GetRootAsModel(bytes(buf), 0)
    tensor = model.Subgraphs(0).Tensors(0)
    pos = tensor._tab.Pos
    if kind == "a misaligned table":
        slot = model.Subgraphs(0)._tab.Pos               # the subgraph's tensor vector's 1st entry
        at = slot + model.Subgraphs(0)._tab.Offset(4)
        at += _U32(buf, at)[0] + 4
        buf[at:at + 4] = (_U32(buf, at)[0] + 2).to_bytes(4, "little")
    elif kind == "an odd vtable size":
        vt = pos - int.from_bytes(buf[pos:pos + 4], "little", signed=True)
        buf[vt] |= 1
    elif kind == "an unterminated string":
        at = pos + tensor._tab.Offset(10)                 # the tensor's name
        at += _U32(buf, at)[0]
        buf[at + 4 + _U32(buf, at)[0]] = ord("x")
    elif kind == "an unknown options type":
        op = model.Subgraphs(0).Operators(0)
        buf[op._tab.Pos + op._tab.Offset(10)] = 250
    elif kind == "a buffer index beyond the buffers":
        at = pos + tensor._tab.Offset(8)
        buf[at:at + 4] = (model.BuffersLength() + 5).to_bytes(4, "little")
    return bytes(buf)


@pytest.mark.parametrize("kind", ["a misaligned table", "an odd vtable size",
                                  "an unterminated string", "an unknown options type",
                                  "a buffer index beyond the buffers"])
def test_files_tflite_cannot_load_are_refused(tmp_path, capsys, kind):
    from ai_edge_litert.interpreter import Interpreter
    bad = _damaged_tflite(kind)
    with pytest.raises(Exception):
        Interpreter(model_content=bad).allocate_tensors()
    path = tmp_path / "bad.tflite"
    path.write_bytes(bad)
    _fails(capsys, str(path), "model error", "bad.tflite")


def test_the_verifier_passes_every_stored_model():
    from npu_sim.compiler.flatbuf import verify
    for path in sorted(DATA.glob("*/model.tflite")):
        verify(path.read_bytes(), "tflite", "Model")


def test_the_verifier_follows_every_field_of_the_schemas():
    """Every vtable slot a generated class reads is classified (a field the layout missed
    would go unverified), for every table class reachable from either root."""
    import importlib.util
    import re

    from npu_sim.compiler import flatbuf
    for package, root in (("tosa", "TosaGraph"), ("tflite", "Model")):
        seen, todo = set(), [root]
        while todo:
            cls = todo.pop()
            if cls in seen:
                continue
            seen.add(cls)
            source = open(importlib.util.find_spec(f"{package}.{cls}").origin).read()
            slots = {int(n) for n in re.findall(r"self\._tab\.Offset\((\d+)\)", source)}
            layout = flatbuf._layout(package, cls)
            assert {slot for slot, _, _ in layout} == slots, (package, cls)
            for _, kind, detail in layout:
                if kind in ("table", "tables"):
                    todo.append(detail)
                elif kind == "union":
                    todo += flatbuf._union_members(package, detail).values()
        assert len(seen) > 20, package


def test_a_union_type_the_schema_lacks_passes_the_verifier_as_in_tflite():
    """flatbuffers' verifier leaves a union value of an unknown type unread; the reader then
    refuses the operator whose options it cannot read."""
    from npu_sim.compiler.flatbuf import verify
    bad = _damaged_tflite("an unknown options type")
    verify(bad, "tflite", "Model")
    from npu_sim.compiler.frontends.tflite.reader import read_model
    with pytest.raises(NpuSimError, match="builtin options type 250 is not in the TFLite schema"):
        read_model(bad)
