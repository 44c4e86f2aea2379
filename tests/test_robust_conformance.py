"""`npu-sim conformance` on test folders that are not tests: a desc.json of the wrong shape or
types, files that are devices, FIFOs, truncated or lying .npy headers, data-generator recipes
of absurd size. Each ends as status `malformed` naming the field or file (exit status 2 when it
is the only test), never an internal error, a hang or a memory blow-up. And a test the
config's MAC array cannot run by its own declaration is `skipped`, not `fail`."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from npu_sim import conformance as conf
from npu_sim.cli import main as cli_main

DATA = Path(__file__).parent / "data"
FFT = DATA / "conformance_fft" / "fft2d_1x16x8_f32_inverseTrue_lclbnd0_fs"   # data_gen inputs
INPUT = "quantized_decomposed_quantize_per_tensor_default"       # small_cnn's graph input


def _copy(tmp_path, name="t", src=DATA / "small_cnn", **changes) -> Path:
    """A copy of a test folder, desc.json fields replaced (None: deleted)."""
    d = tmp_path / name
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("info.json"))
    desc = json.loads((d / "desc.json").read_text())
    for key, value in changes.items():
        if value is None:
            desc.pop(key)
        else:
            desc[key] = value
    (d / "desc.json").write_text(json.dumps(desc))
    return d


def _malformed(d, config, *why):
    r = conf.run_test(d, config)
    assert r.status == "malformed" and all(w in r.message for w in why), r


@pytest.mark.parametrize("changes, why", [
    ({"tosa_file": None}, "desc.json: 'tosa_file' (the graph's file) is missing"),
    ({"tosa_file": ["model.tosa"]}, "desc.json: 'tosa_file' is a list, expected a string"),
    ({"meta": "x"}, "desc.json: 'meta' is 'x', expected an object"),
    ({"meta": {"compliance": {"tensors": {"t": None}}}},
     "desc.json: 'meta.compliance.tensors.t' is null, expected an object"),
    ({"ifm_file": None}, "desc.json: 'ifm_name' has 1 entries, 'ifm_file' 0"),
    ({"ifm_file": [3]}, "desc.json: 'ifm_file' is a list, expected a list of strings"),
    ({"expected_failure": "false"},
     "desc.json: 'expected_failure' is 'false', expected true or false"),
    ({"ofm_file": ["../../x.npy"]},
     "desc.json: 'ofm_file' entry '../../x.npy' is not a plain file name"),
    ({"ifm_name": ["a"]}, f"'ifm_name' lacks the graph's input '{INPUT}'"),
    ({"ofm_name": ["nope"]}, "'ofm_name' names 'nope', which is no output of the graph"),
    ({"ifm_file": ["nope.npy"]}, f"ifm_file 'nope.npy' (input '{INPUT}'): "),
    ({"tosa_file": "input-0.npy"}, "tosa_file 'input-0.npy': "),
    ({"tosa_file": "a\0b"}, "'tosa_file' entry 'a\\x00b' holds a NUL character"),
    ({"ofm_file": ["a\0b"]}, "'ofm_file' entry 'a\\x00b' holds a NUL character"),
])
def test_malformed_desc_fields_are_named(tmp_path, changes, why):
    assert conf.run_test(_copy(tmp_path)).status == "pass"
    _malformed(_copy(tmp_path, "m", **changes), None, why)


@pytest.mark.parametrize("text, why", [("[]", "holds a list, expected a JSON object"),
                                       ("", "not JSON (Expecting value"),
                                       ("[" * 100000, "not JSON (nested too deeply)")])
def test_desc_json_that_is_no_object(tmp_path, text, why):
    d = _copy(tmp_path)
    (d / "desc.json").write_text(text)
    _malformed(d, None, "desc.json: " + why)


def test_desc_json_too_large_is_not_read(tmp_path):
    from npu_sim.conformance_folder import MAX_DESC_BYTES
    d = _copy(tmp_path)
    os.truncate(d / "desc.json", MAX_DESC_BYTES + 1)           # sparse: nothing is written
    _malformed(d, None, "desc.json: larger than 16 MiB")


def _npy(path, shape, dtype, data: bytes):
    """An .npy file whose header says shape/dtype, holding `data`."""
    from numpy.lib import format as npy_format
    with open(path, "wb") as f:
        npy_format.write_array_header_1_0(f, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                              "shape": shape})
        f.write(data)


@pytest.mark.parametrize("shape, dtype, size, why", [
    ((10 ** 12,), "i1", 10, "holds 10 bytes of data, its header declares int8[1000000000000]"),
    ((1, 3, 48, 48), "i1", 100, "holds 100 bytes of data"),
    ((1, 3, 48, 48), "i1", 6920, "holds 6,920 bytes of data, its header declares int8"),
    ((6912,), "i1", 6912, "holds int8[6912], the graph's input is int8[1, 3, 48, 48]"),
    ((1, 3, 48, 48), "<f4", 4 * 6912, "holds float32[1, 3, 48, 48], the graph's input is int8"),
    (None, None, 0, "cannot read as .npy (EOF"),
])
def test_input_npy_header_checked_before_its_data(tmp_path, shape, dtype, size, why):
    d = _copy(tmp_path)
    if shape is None:
        (d / "input-0.npy").write_bytes(b"")
    else:
        _npy(d / "input-0.npy", shape, dtype, bytes(size))
    _malformed(d, None, f"ifm_file 'input-0.npy' (input '{INPUT}')", why)


def test_expected_output_header_checked_before_its_data(tmp_path):
    d = _copy(tmp_path)
    want = np.load(d / "ref-result-0.npy")
    _npy(d / "ref-result-0.npy", want.shape, want.dtype, b"")
    _malformed(d, None, "expected output", "holds 0 bytes of data")
    _npy(d / "ref-result-0.npy", (10 ** 12,), want.dtype, bytes(10))
    _malformed(d, None, "holds 10 bytes of data, its header declares int8[1000000000000]")
    _npy(d / "ref-result-0.npy", (10,), want.dtype, bytes(10))
    r = conf.run_test(d)
    assert r.status == "fail" and "shape [1, 10], expected [10]" in r.message, r


def test_generated_input_bounded_by_the_graph(tmp_path):
    """A data_gen recipe must have the graph input's shape before anything is generated."""
    d = _copy(tmp_path, src=FFT)
    (d / "input-0.npy").unlink()
    assert conf.run_test(d, "large-8k").status == "pass"           # generated
    desc = json.loads((d / "desc.json").read_text())
    desc["meta"]["data_gen"]["tensors"]["input-0"]["shape"] = [100000, 100000, 8]
    (d / "desc.json").write_text(json.dumps(desc))
    _malformed(d, "large-8k", "'meta.data_gen.tensors.input-0.shape' is [100000, 100000, 8], "
                              "the graph's input is [1, 16, 8]")
    desc["meta"]["data_gen"]["tensors"]["input-0"]["shape"] = [1, 16, 8]
    desc["meta"]["data_gen"]["tensors"]["input-0"]["generator"] = "BOGUS"
    (d / "desc.json").write_text(json.dumps(desc))
    _malformed(d, "large-8k", "meta.data_gen cannot generate 'input-0'")


def test_devices_and_fifos_are_not_read(tmp_path):
    """/dev/zero and FIFOs as desc.json, tosa_file or ifm_file: named, in a child process
    under a memory limit and a timeout (a regression would read forever or block)."""
    suite = tmp_path / "suite"
    _copy(suite, "tosa_zero", tosa_file="/dev/zero")
    _copy(suite, "ifm_zero", ifm_file=["/dev/zero"])
    fifo = _copy(suite, "ifm_fifo", ifm_file=["fifo.npy"])
    os.mkfifo(fifo / "fifo.npy")
    desc = _copy(suite, "desc_fifo")
    (desc / "desc.json").unlink()
    os.mkfifo(desc / "desc.json")
    report = tmp_path / "r.json"
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # noqa: E731
    proc = subprocess.run([sys.executable, "-m", "npu_sim", "conformance", str(suite), "--json",
                           str(report)], capture_output=True, text=True, timeout=60,
                          preexec_fn=limit)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    rows = {Path(r["test"]).name: r for r in json.loads(report.read_text())}
    assert {n: r["status"] for n, r in rows.items()} == dict.fromkeys(rows, "malformed")
    assert "tosa_file '/dev/zero': cannot read /dev/zero (a character device" \
        in rows["tosa_zero"]["message"]
    assert "cannot read /dev/zero (a character device" in rows["ifm_zero"]["message"]
    assert "a FIFO, not a regular file" in rows["ifm_fifo"]["message"]
    assert rows["desc_fifo"]["message"] == "desc.json: a FIFO, not a regular file"


def test_cli_single_malformed_test_is_bad_input(tmp_path, capsys):
    """The one test named: one stderr line, exit 2, no report. Among others: listed, counted
    in its column, exit 1."""
    bad = _copy(tmp_path / "suite", "bad", tosa_file=None)
    report = tmp_path / "r.json"
    assert cli_main(["conformance", str(bad), "--json", str(report)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"npu-sim: malformed test: {bad}: desc.json: 'tosa_file' (the " \
                                 "graph's file) is missing\n"
    assert not report.exists()
    _copy(tmp_path / "suite", "good")
    assert cli_main(["conformance", str(tmp_path / "suite"), "--json", str(report)]) == 1
    out, err = capsys.readouterr()
    assert err.startswith(f"  MALFORMED {bad}: desc.json: 'tosa_file'") and "malformed" in out
    assert [r["status"] for r in json.loads(report.read_text())] == ["malformed", "pass"]


def _matmul_test(tmp_path, in_dtype, out_dtype):
    """A MATMUL test folder ([1,2,3] x [1,3,2]), inputs fed from .npy files."""
    import tosa_serializer as ts
    from oracle import GraphBuilder
    g = GraphBuilder()
    dt = {"fp32": ts.DType.FP32, "fp16": ts.DType.FP16}
    npt = {"fp32": np.float32, "fp16": np.float16}[in_dtype]
    a, b = (g.tensor(s, dt[in_dtype]) for s in ((1, 2, 3), (1, 3, 2)))
    zero = [g.tensor([1], dt[in_dtype], np.zeros(1, npt), is_const=True) for _ in range(2)]
    o = g.output((1, 2, 2), dt[out_dtype])
    g.op("MATMUL", [a, b, *zero], [o])
    d = tmp_path / f"matmul_{in_dtype}"
    d.mkdir()
    (d / "test.tosa").write_bytes(g.serialize())
    for i, (name, shape) in enumerate(((a, (1, 2, 3)), (b, (1, 3, 2)))):
        np.save(d / f"input-{i}.npy", np.ones(shape, npt))
    (d / "desc.json").write_text(json.dumps({
        "tosa_file": "test.tosa", "ifm_name": [a, b], "ifm_file": ["input-0.npy", "input-1.npy"],
        "ofm_name": [o], "ofm_file": ["result-0.npy"], "expected_failure": False}))
    return d


def test_a_mac_pair_the_config_does_not_declare_skips(tmp_path):
    """fp32 MATMUL on `default` (no fp32 x fp32 in mac_array.precision): skipped with the
    reason; on large-8k it runs. An fp32 accumulator the array lacks skips the same way."""
    d = _matmul_test(tmp_path, "fp32", "fp32")
    r = conf.run_test(d, "default")
    assert r.status == "skipped" and r.message.startswith(
        "needs fp32 x fp32 multiply-accumulates (MATMUL), which config 'default' does not "
        "declare (mac_array.precision: int8xint8"), r
    assert conf.run_test(d, "large-8k").status == "pass"
    import yaml
    from npu_sim.api import load_config
    cfg = load_config("default").to_dict()
    cfg["name"] = "fp16-acc"
    cfg["mac_array"]["precision"]["fp16xfp16"] = {"rate": 0.5, "acc": "fp16"}
    (tmp_path / "fp16acc.yaml").write_text(yaml.safe_dump(cfg))
    d = _matmul_test(tmp_path, "fp16", "fp32")
    assert conf.run_test(d, "default").status == "pass"
    r = conf.run_test(d, str(tmp_path / "fp16acc.yaml"))
    assert r.status == "skipped" and "fp16xfp16 accumulated in fp32 (MATMUL), config 'fp16-acc' " \
        "accumulates it in fp16 (mac_array.precision.fp16xfp16.acc)" in r.message, r


def test_sut_reports_a_malformed_folder_as_other_error(tmp_path):
    """Arm's runner gets OTHER_ERROR with the one-line reason, not a TOSA_ERROR verdict."""
    from argparse import Namespace
    from runner.tosa_test_runner import TosaTestRunner
    from npu_sim.conformance_sut import TosaSUTRunner
    d = _copy(tmp_path, ifm_file=["fifo.npy"])
    os.mkfifo(d / "fifo.npy")
    args = Namespace(verify_path=None, generate_lib_path=None, no_color=True, binary=False,
                     tosa_level="EIGHTK")
    result, message = TosaSUTRunner(args, [], d).runTestGraph()
    assert result == TosaTestRunner.TosaGraphResult.OTHER_ERROR
    assert message == f"{d}: npu-sim: malformed test: ifm_file 'fifo.npy' (input '{INPUT}'): " \
                      f"cannot read {d / 'fifo.npy'} (a FIFO, not a regular file)"


@pytest.mark.parametrize("jobs", ["0", "100000"])
def test_the_worker_count_is_bounded(capsys, jobs):
    from npu_sim.cli import main
    folder = Path(__file__).parent / "data" / "small_cnn"
    assert main(["conformance", str(folder), "-j", jobs]) == 2
    assert capsys.readouterr().err == \
        f"npu-sim: input error: -j {jobs}: expected 1 to 512 worker processes\n"
