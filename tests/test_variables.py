"""EXT-VARIABLE: state persists from one run of a compiled program to the next.

The oracle: two runs of a graph that reads a variable and then writes it equal one run, on the
reference model, of the same accesses written out twice (variables behave alike within a run
and across runs)."""
import subprocess
import sys

import numpy as np
import pytest
import tosa_serializer as ts

from npu_sim.compiler.loader import load_bytes
from npu_sim import api
from npu_sim.simulator import Machine
from ops_sim_support import clamp_attr
from oracle import DType, run_reference

SHAPE = [2, 3]


def _access(ser, op_attr: str, src: str, dst: str):
    attr = ts.TosaSerializerAttribute()
    getattr(attr, op_attr)()
    ser.addOperator(ts.Op.IDENTITY, [src], [dst], attr)     # the form tosa-opt serializes


def _graph(runs: int):
    """Each run: out_i = READ(state); WRITE(state, CLAMP(x_i))  (the clamp makes it an NPU op)."""
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    state = ser.addIntermediate(SHAPE, DType.INT8, False, True, "state")
    ins, outs = [], []
    for _ in range(runs):
        x = ser.addPlaceholder(SHAPE, DType.INT8, None)
        y = ser.addOutput(SHAPE, DType.INT8)
        c = ser.addIntermediate(SHAPE, DType.INT8)
        _access(ser, "VariableReadAttribute", state.name, y.name)
        ser.addOperator(ts.Op.CLAMP, [x.name], [c.name], clamp_attr(DType.INT8, -100, 100))
        _access(ser, "VariableWriteAttribute", c.name, state.name)
        ins.append(x.name)
        outs.append(y.name)
    return ser.serialize(), ins, outs


def _inputs(n):
    rng = np.random.default_rng(11)
    return [rng.integers(-128, 128, SHAPE, dtype=np.int8) for _ in range(n)]


def test_state_persists_across_runs_like_the_reference_model():
    xs = _inputs(3)
    unrolled, ins, outs = _graph(3)
    expected = run_reference(unrolled, dict(zip(ins, xs)), outs)
    once, (x_name,), (y_name,) = _graph(1)
    cfg = api.load_config("default")
    program = api.compile_model(load_bytes(once, "var.tosa"), cfg)
    assert [b.name for b in program.variables] == ["state"]
    machine = Machine(program, cfg)
    for x, name in zip(xs, outs):
        got = machine.run({x_name: x}).outputs[y_name]
        assert np.array_equal(got, expected[name])
    # the API carries the state explicitly, so a later process can continue
    first = api.simulate(program, cfg, {x_name: xs[0]})
    second = api.simulate(program, cfg, {x_name: xs[1]}, state=first.state)
    assert np.array_equal(second.outputs[y_name], expected[outs[1]])


def test_cli_state_file_continues_between_processes(tmp_path):
    once, (x_name,), (y_name,) = _graph(1)
    (tmp_path / "var.tosa").write_bytes(once)
    prog = tmp_path / "var.npub"
    xs = _inputs(2)
    for i, x in enumerate(xs):
        np.save(tmp_path / f"x{i}.npy", x)

    def run(i):
        return subprocess.run([sys.executable, "-I", "-m", "npu_sim", "run", str(prog), "--input",
                               f"{x_name}={tmp_path / f'x{i}.npy'}", "--state",
                               str(tmp_path / "state.npz"), "--output-dir", str(tmp_path / f"o{i}")],
                              capture_output=True, text=True)

    assert subprocess.run([sys.executable, "-I", "-m", "npu_sim", "compile", str(tmp_path / "var.tosa"),
                           "-o", str(prog)], capture_output=True).returncode == 0
    assert run(0).returncode == 0
    assert not np.load(tmp_path / "o0" / f"{y_name}.npy").any()       # no write yet: zeros
    assert run(1).returncode == 0
    assert np.array_equal(np.load(tmp_path / "o1" / f"{y_name}.npy"), np.clip(xs[0], -100, 100))


def test_an_access_without_its_two_operands_is_refused():
    """VARIABLE_WRITE/READ copy one tensor from or into the variable: with no operands there
    is nothing to copy (a traceback in the compiler before)."""
    import pytest
    from npu_sim.compiler.ir import Graph, Operator, Tensor
    from npu_sim.compiler.validate import validate
    from npu_sim.isa.errors import ValidationError
    tensors = {"x": Tensor("x", tuple(SHAPE), "int8"), "y": Tensor("y", tuple(SHAPE), "int8"),
               "state": Tensor("state", tuple(SHAPE), "int8", variable=True)}
    graph = Graph(tensors, [Operator("CLAMP", ["x"], ["y"], {"min_val": -1, "max_val": 1}),
                            Operator("VARIABLE_WRITE", [], [], index=1)], ["x"], ["y"])
    with pytest.raises(ValidationError, match="VARIABLE_WRITE.*0 input.*0 output"):
        validate(graph, extensions=("EXT-VARIABLE",))


@pytest.mark.parametrize("damage", ["encrypted", "compression"])
def test_a_state_file_zipfile_cannot_open_is_one_error(tmp_path, damage):
    """zipfile raises RuntimeError for an encrypted member and NotImplementedError for a
    compression method it lacks; both are a state file that cannot be read."""
    from npu_sim.cli_files import load_state
    from npu_sim.isa.commands import dense
    from npu_sim.isa.errors import InputError
    from npu_sim.isa.program import Binding

    path = tmp_path / "state.npz"
    np.savez(path, state=np.zeros(SHAPE, np.int8))
    data = bytearray(path.read_bytes())
    for signature, flags, method in ((b"PK\x03\x04", 6, 8), (b"PK\x01\x02", 8, 10)):
        at = data.find(signature)
        if damage == "encrypted":
            data[at + flags] |= 1
        else:
            data[at + method:at + method + 2] = (99).to_bytes(2, "little")
    path.write_bytes(bytes(data))
    variables = [Binding("state", dense(0, 0, tuple(SHAPE), "int8"))]
    with pytest.raises(InputError, match="cannot read as .npz"):
        load_state(str(path), variables)


def test_a_state_member_with_bytes_after_its_array_is_refused(tmp_path):
    """A state file's member holding more than its header's array (another file joined to
    it) is refused before its data is read, in one line."""
    import io
    import zipfile
    once, _, _ = _graph(1)
    (tmp_path / "var.tosa").write_bytes(once)
    program = api.compile_model(tmp_path / "var.tosa", api.load_config("default"))
    var = program.variables[0]
    buf = io.BytesIO()
    np.save(buf, np.zeros(var.view.shape, np.int8))
    with zipfile.ZipFile(tmp_path / "state.npz", "w") as z:
        z.writestr(f"{var.name}.npy", buf.getvalue() + b"JUNK")
    r = subprocess.run([sys.executable, "-I", "-m", "npu_sim", "run", str(tmp_path / "var.tosa"),
                        "--state", str(tmp_path / "state.npz"), "--output-dir",
                        str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 2 and "bytes of data, its header declares" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
