"""Malformed NNAPI cases and CTS files: one line on stderr naming the field, exit status 2, no
traceback and no numpy warnings; a well-formed but invalid model stays a CTS `invalid` result."""
import copy
import gzip
import json
import re
from pathlib import Path

import pytest

from npu_sim.cli import main
from npu_sim.compiler.frontends.nnapi.model import CaseFormatError, model_from_dict
from npu_sim.isa.errors import ModelError
from npu_sim.nnapi import Device

Q8 = {"type": "TENSOR_QUANT8_ASYMM", "dimensions": [4], "scale": 0.5, "zeroPoint": 0}


def _case():
    """out = a + b on uint8 [4] tensors, with the CTS inputs and expected output."""
    ops = [{**Q8, "lifetime": "SUBGRAPH_INPUT", "data": [1, 2, 3, 4]},
           {**Q8, "lifetime": "SUBGRAPH_INPUT", "data": [5, 6, 7, 8]},
           {"type": "INT32", "dimensions": [], "scale": 0.0, "zeroPoint": 0,
            "lifetime": "CONSTANT_COPY", "data": [0]},
           {**Q8, "lifetime": "SUBGRAPH_OUTPUT", "data": [6, 8, 10, 12]}]
    return {"name": "add_q8", "main": {"operands": ops, "inputIndexes": [0, 1],
                                       "outputIndexes": [3],
                                       "operations": [{"type": "ADD", "inputs": [0, 1, 2],
                                                       "outputs": [3]}]},
            "referenced": [], "isRelaxed": False, "expectFailure": False}


def _edited(edit):
    case = copy.deepcopy(_case())
    edit(case)
    return case


def _opd(case, k=0):
    return case["main"]["operands"][k]


def _float_case(c):
    for o in c["main"]["operands"][:2] + c["main"]["operands"][3:]:
        o.update(type="TENSOR_FLOAT32", scale=0.0)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


MALFORMED = [   # (edit, the words the line must hold)
    (lambda c: _opd(c).update(zeroPoint="x"), "operand 0: field 'zeroPoint' is str, expected an int32"),
    (lambda c: _opd(c).update(zeroPoint=float("nan")), "field 'zeroPoint' is nan, expected an int32"),
    (lambda c: _opd(c).update(zeroPoint=2.0), "field 'zeroPoint' is 2, expected an int32"),
    (lambda c: _opd(c).update(zeroPoint=2 ** 40), "field 'zeroPoint' is 1099511627776"),
    (lambda c: _opd(c).update(scale=[0.5]), "field 'scale' is list, expected a finite float32"),
    (lambda c: _opd(c, 3).update(scale=1e308), "operand 3: field 'scale' is 1e+308"),
    (lambda c: _opd(c).update(scale=True), "field 'scale' is bool"),
    (lambda c: _opd(c).update(channelQuant={"scales": ["a"]}), "field 'scales[0]' is str"),
    (lambda c: _opd(c).update(channelQuant={"channelDim": "x"}), "field 'channelDim' is str"),
    (lambda c: _opd(c).update(channelQuant=[1]), "field 'channelQuant' is list"),
    (lambda c: _opd(c).update(dimensions=[-1]), "field 'dimensions[0]' is -1, expected a uint32"),
    (lambda c: _opd(c).update(isIgnored="no"), "field 'isIgnored' is str"),
    (lambda c: c.update(isRelaxed="yes"), "field 'isRelaxed' is str"),
    (lambda c: c.update(referenced={}), "field 'referenced' is dict, expected a list"),
    (lambda c: c["main"]["operations"][0].update(inputs=[0, 1, 2.0]), "field 'inputs[2]' is 2"),
    (lambda c: _opd(c, 2).update(data=["7"]), "'data' is not a list of INT32 values"),
    (lambda c: _float_case(c) or _opd(c).update(data=[1e308] * 4),
     "'data' holds values outside TENSOR_FLOAT32's range"),
]


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("edit, words", MALFORMED)
def test_malformed_fields_one_line_exit_2(tmp_path, capsys, edit, words):
    case = _edited(edit)
    with pytest.raises(CaseFormatError, match=re.escape(words)):
        model_from_dict(case, "c.json")
    p = tmp_path / "c.json"
    p.write_text(json.dumps(case))
    assert main(["supported-ops", str(p)]) == 2
    line = _one_line(capsys)
    assert words in line and line.startswith(f"npu-sim: model error: {p} case 'add_q8'")
    cts = tmp_path / "c.jsonl"                   # a malformed line stops the CTS run too
    cts.write_text(json.dumps(_case()) + "\n" + json.dumps(case) + "\n")
    assert main(["nnapi-cts", str(cts)]) == 2
    assert f"{cts}:2 case 'add_q8'" in _one_line(capsys)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("edit, words", [
    (lambda c: _opd(c).update(scale=-0.5), "operand 0: scale -0.5 must be a finite float32 >= 0"),
    (lambda c: _opd(c).update(scale=0), "operand 0: TENSOR_QUANT8_ASYMM needs a scale > 0"),
    (lambda c: _opd(c).update(scale=1e-50), "needs a scale > 0"),      # 0 as a float32
    (lambda c: _opd(c).update(zeroPoint=300), "zeroPoint 300 outside [0, 255]"),
    (lambda c: _opd(c, 3).update(lifetime="SUBGRAPH"),
     "operand 3: an operand of type TENSOR_QUANT8_ASYMM cannot have lifetime SUBGRAPH"),
    (lambda c: _opd(c, 2).update(type="SUBGRAPH"),
     "operand 2: an operand of type SUBGRAPH cannot have lifetime CONSTANT_COPY"),
])
def test_invalid_models_one_line_and_an_invalid_cts_result(tmp_path, capsys, edit, words):
    case = _edited(edit)
    with pytest.raises(ModelError, match=re.escape(words)) as info:
        model_from_dict(case, "c.json")
    assert not isinstance(info.value, CaseFormatError)
    p = tmp_path / "c.json"
    p.write_text(json.dumps(case))
    assert main(["supported-ops", str(p)]) == 2
    assert words in _one_line(capsys)
    cts = tmp_path / "c.jsonl"
    cts.write_text(json.dumps(case) + "\n")
    out = tmp_path / "r.json"
    assert main(["nnapi-cts", str(cts), "--json", str(out)]) == 1
    (row,) = json.loads(out.read_text())
    assert row["status"] == "invalid" and words in row["message"]


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("criteria, words", [
    ([], "field 'criteria' is list"), ({"quant8_atol": "1"}, "field 'quant8_atol' is str"),
    ({"quant8_atol": float("nan")}, "field 'quant8_atol' is nan"),
    ({"quant8_atol": -1}, "field 'quant8_atol' is -1, expected >= 0")])
def test_cts_criteria_and_expect_failure_are_checked(tmp_path, capsys, criteria, words):
    cts = tmp_path / "c.jsonl"
    cts.write_text(json.dumps(_edited(lambda c: c.update(criteria=criteria))) + "\n")
    assert main(["nnapi-cts", str(cts)]) == 2
    line = _one_line(capsys)
    assert f"{cts}:1 case 'add_q8'" in line and words in line
    cts.write_text(json.dumps(_edited(lambda c: c.update(expectFailure="no"))) + "\n")
    assert main(["nnapi-cts", str(cts)]) == 2
    assert "field 'expectFailure' is str" in _one_line(capsys)
    cts.write_text(json.dumps(_edited(lambda c: c.update(criteria={"quant8_atol": 0}))) + "\n")
    assert main(["nnapi-cts", str(cts)]) == 0            # the valid case passes exactly
    assert "1 cases: 1 pass (1 bit-exact)" in capsys.readouterr().out


@pytest.mark.parametrize("content, words", [
    (b"\x00\xff\xfe binary", "not a text file of JSON cases (not UTF-8"),
    (b"[" * 100000, ":1: not a JSON case (nested too deeply)"),
    (b"1" * 5000, ":1: not a JSON case (Exceeds the limit (4300 digits)"),
])
def test_cts_files_that_are_not_json_lines(tmp_path, capsys, content, words):
    for name, data in (("c.jsonl", content), ("c.jsonl.gz", gzip.compress(content))):
        p = tmp_path / name
        p.write_bytes(data)
        assert main(["nnapi-cts", str(p)]) == 2
        assert words in _one_line(capsys)
    p = tmp_path / "c.json"
    p.write_bytes(content)
    assert main(["supported-ops", str(p)]) == 2
    assert "not a JSON NNAPI case" in _one_line(capsys)


def test_corrupt_gzip_is_one_line(tmp_path, capsys):
    data = bytearray(gzip.compress(json.dumps(_case()).encode() * 50))
    data[30:60] = b"\xff" * 30
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(bytes(data))
    assert main(["nnapi-cts", str(p)]) == 2
    assert "cannot read" in _one_line(capsys)


@pytest.mark.filterwarnings("error")
def test_extreme_valid_scales_are_unsupported_without_warnings():
    dev = Device("default")
    for scale, words in ((1e-40, "operand 0 has a subnormal quantization scale"),
                         (3.4e38, "quantization parameters overflow float arithmetic")):
        model = model_from_dict(_edited(lambda c: _opd(c).update(scale=scale)))
        (ok, why), = dev.supported_operations(model)
        assert not ok and why.startswith("operation #0 ADD: ") and words in why, why
    model = model_from_dict(_edited(lambda c: _opd(c, 3).update(channelQuant={})))
    assert dev.supported_operations(model) == [(True, "")]


def test_cts_exit_status_is_1_when_a_case_fails(tmp_path, capsys):
    """A failing case is exit status 1, as in pytest; an expected failure is not one, and an
    operation types.spec makes invalid is `invalid`."""
    cts = tmp_path / "c.jsonl"
    wrong = _edited(lambda c: _opd(c, 3).update(data=[6, 8, 10, 20]))
    cts.write_text(json.dumps(_case()) + "\n" + json.dumps(wrong) + "\n")
    assert main(["nnapi-cts", str(cts)]) == 1
    out, err = capsys.readouterr()
    assert "2 cases: 1 pass (1 bit-exact), 1 fail" in out and not err
    refused = _edited(lambda c: c.update(expectFailure=True) or _opd(c).update(zeroPoint=300))
    cts.write_text(json.dumps(_case()) + "\n" + json.dumps(refused) + "\n")
    assert main(["nnapi-cts", str(cts)]) == 0
    assert "1 expected failures" in capsys.readouterr().out
    no_act = _edited(lambda c: c["main"]["operations"][0].update(inputs=[0, 1]))
    cts.write_text(json.dumps(no_act) + "\n")
    assert main(["nnapi-cts", str(cts)]) == 1
    assert "0 fail, 0 unsupported, 0 expected failures, 1 invalid" in capsys.readouterr().out


@pytest.mark.parametrize("k, data", [(0, []), (3, []), (3, None)])
def test_cts_case_without_its_values_is_invalid(tmp_path, capsys, k, data):
    """'data' [] (or none) on an input or expected output is a case of 0 values, as [1] is
    one of 1: `invalid`, not a device failure."""
    cts = tmp_path / "c.jsonl"
    cts.write_text(json.dumps(_edited(lambda c: _opd(c, k).update(data=data))) + "\n")
    out = tmp_path / "r.json"
    assert main(["nnapi-cts", str(cts), "--json", str(out)]) == 1
    (row,) = json.loads(out.read_text())
    assert row["status"] == "invalid", row
    assert f"main operand {k}: 'data' holds 0 values, dimensions [4] need 4" in row["message"]


def test_cts_omitted_parameter_input_still_runs():
    """AOSP's harness omits an optional input given 'data' []: a TRANSPOSE's perm."""
    from npu_sim.nnapi import cts
    q8 = {"type": "TENSOR_QUANT8_ASYMM", "scale": 0.5, "zeroPoint": 0}
    ops = [{**q8, "dimensions": [2, 3], "lifetime": "SUBGRAPH_INPUT", "data": list(range(6))},
           {"type": "TENSOR_INT32", "dimensions": [2], "lifetime": "SUBGRAPH_INPUT", "data": []},
           {**q8, "dimensions": [3, 2], "lifetime": "SUBGRAPH_OUTPUT", "data": [0, 3, 1, 4, 2, 5]}]
    case = {"name": "t", "main": {"operands": ops, "inputIndexes": [0, 1], "outputIndexes": [2],
                                  "operations": [{"type": "TRANSPOSE", "inputs": [0, 1],
                                                  "outputs": [2]}]}}
    assert cts.run_case(case, "t.jsonl", Device("default"))["status"] == "pass"


def test_cts_lines_are_read_one_at_a_time_and_bounded(tmp_path, capsys, monkeypatch):
    from npu_sim.nnapi import cts
    line = json.dumps(_case()) + "\n"
    monkeypatch.setattr(cts, "MAX_LINE", len(line))
    for name, opener in (("c.jsonl", open), ("c.jsonl.gz", gzip.open)):
        p = tmp_path / name
        with opener(p, "wt") as f:
            f.write(line + line + "x" * (len(line) + 1))     # two lines at the cap, one over
        assert main(["nnapi-cts", str(p)]) == 2
        assert _one_line(capsys) == (f"npu-sim: input error: {p}:3: a line over "
                                     f"{len(line):,} bytes, longer than any CTS case")


def test_cts_file_that_is_not_a_regular_file(tmp_path, capsys):
    for path, why in ((tmp_path, "is a directory"),
                      ("/dev/null", "a character device, not a regular file")):
        assert main(["nnapi-cts", str(path)]) == 2
        assert _one_line(capsys) == f"npu-sim: input error: {path}: {why}"


@pytest.mark.parametrize("jobs", ["0", "-2", "100000"])
def test_cts_worker_count_is_bounded(capsys, jobs):
    sample = Path(__file__).parent / "data" / "nnapi-cts" / "sample.jsonl"
    assert main(["nnapi-cts", str(sample), "-j", jobs]) == 2
    assert _one_line(capsys) == f"npu-sim: input error: -j {jobs}: expected 1 to 512 worker processes"
