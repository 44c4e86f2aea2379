"""Run small TOSA graphs on Arm's reference model (the bit-exact oracle for tests).

Only tests use this module; product code (npu_sim/) must never call the reference model.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

import ml_dtypes
import numpy as np
import tosa_serializer as ts

DType = ts.DType
Op = ts.Op


def reference_binary() -> str:
    """The native tosa_reference_model behind tosa-tools' Python shim: the shim on PATH starts
    an interpreter to exec it (0.25 s a run here, the binary alone 0.03 s)."""
    try:
        f = Path(metadata.distribution("tosa-tools").locate_file("bin/tosa_reference_model"))
        if f.is_file():
            return str(f)
    except metadata.PackageNotFoundError:
        pass
    return shutil.which("tosa_reference_model") or "tosa_reference_model"


_BINARY = reference_binary()

# Storage dtype of each TOSA type in .npy files (int48 travels as int64, bool as numpy bool).
NP_DTYPE = {
    DType.BOOL: np.bool_,
    DType.INT4: np.int8,
    DType.INT8: np.int8,
    DType.INT16: np.int16,
    DType.INT32: np.int32,
    DType.INT48: np.int64,
    DType.SHAPE: np.int64,
    DType.FP32: np.float32,
    DType.FP16: np.float16,
    DType.BF16: ml_dtypes.bfloat16,
    DType.FP8E4M3: ml_dtypes.float8_e4m3fn,
    DType.FP8E5M2: ml_dtypes.float8_e5m2,
}


def ref_npy(arr: np.ndarray) -> np.ndarray:
    """An array as the reference model reads it: fp8e5m2 as uint8 (bf16 and fp8e4m3 already
    save as the raw |V2 and |V1 it expects)."""
    arr = np.ascontiguousarray(arr)
    return arr.view(np.uint8) if arr.dtype == np.dtype(ml_dtypes.float8_e5m2) else arr


class ReferenceError(RuntimeError):
    """The reference model exited non-zero: 1 = UNPREDICTABLE, 2 = ERROR (see .returncode)."""

    def __init__(self, returncode: int, stderr: str, stdout: str = ""):
        self.returncode = returncode
        self.stderr = stderr
        self.stdout = stdout
        super().__init__(f"tosa_reference_model exit {returncode}: {stderr.strip()[-2000:]} {stdout.strip()[-2000:]}")


def run_reference(tosa_bytes_or_path, inputs: dict, output_names: list, level: str = "EIGHTK",
                  precise: bool = False) -> dict:
    """Run a graph; `inputs` maps placeholder name -> array. Returns {output name: array}
    (precise: the fp64 reference of the float outputs, as the compliance checker takes it)."""
    with tempfile.TemporaryDirectory(prefix="tosa_ref_") as tmp:
        if isinstance(tosa_bytes_or_path, (bytes, bytearray)):
            tosa_file = os.path.join(tmp, "graph.tosa")
            with open(tosa_file, "wb") as f:
                f.write(tosa_bytes_or_path)
        else:
            tosa_file = os.fspath(tosa_bytes_or_path)
        cmd = [_BINARY, "--tosa_file", tosa_file, "--tosa_level", level]
        if inputs:
            names, files = [], []
            for i, (name, arr) in enumerate(inputs.items()):
                path = os.path.join(tmp, f"ifm{i}.npy")
                np.save(path, ref_npy(arr))
                names.append(name)
                files.append(path)
            cmd += ["--ifm_name", ",".join(names), "--ifm_file", ",".join(files)]
        out_files = [os.path.join(tmp, f"ofm{i}.npy") for i in range(len(output_names))]
        cmd += ["--ofm_name", ",".join(output_names), "--ofm_file", ",".join(out_files)]
        if precise:
            cmd += ["--precise_mode", "1"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ReferenceError(proc.returncode, proc.stderr, proc.stdout)
        return {name: np.load(path) for name, path in zip(output_names, out_files)}


def assert_matches_reference(tosa_bytes_or_path, inputs: dict, outputs: dict) -> None:
    """Each of `outputs` (name -> array, as the simulator gave them) equals the reference
    model's, bit for bit."""
    expected = run_reference(tosa_bytes_or_path, inputs, list(outputs))
    for name, value in outputs.items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def make_attr(op, attr=None):
    """Return `attr`, or the default attribute of `op` (every operator needs one).

    Defaults exist for attributes without arguments or with only a nan_mode (integer ops
    ignore it)."""
    if attr is not None:
        return attr
    want = str(op).split(".")[-1].replace("_", "").lower() + "attribute"
    a = ts.TosaSerializerAttribute()
    for meth in dir(a):
        if meth.lower() == want:
            for args in ((), (ts.NanPropagationMode.PROPAGATE,)):
                try:
                    getattr(a, meth)(*args)
                    return a
                except TypeError:
                    pass
            raise ValueError(f"{op} needs an explicit attr (see TosaSerializerAttribute.{meth})")
    raise ValueError(f"no attribute builder for {op}")


def _as_op(op):
    return getattr(Op, op) if isinstance(op, str) else op


class GraphBuilder:
    """Multi-operator graph builder (one basic block 'main'). Tensors are referred to by name."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="tosa_ser_")
        self.ser = ts.TosaSerializer(self._tmp.name, targetMajor=1, targetMinor=0, targetPatch=0,
                                     targetDraft=False)
        self.input_names: list[str] = []
        self.input_values: dict[str, np.ndarray] = {}
        self.output_names: list[str] = []

    def tensor(self, shape, dtype, value=None, is_const=False) -> str:
        """A graph input (placeholder; value fed at run time) or a constant. Returns its name."""
        shape = list(shape)
        if is_const:
            vals = np.asarray(value, dtype=NP_DTYPE.get(dtype, None))
            return self.ser.addConst(shape, dtype, vals).name
        name = self.ser.addPlaceholder(shape, dtype, None).name
        self.input_names.append(name)
        if value is not None:
            self.input_values[name] = np.asarray(value, dtype=NP_DTYPE[dtype]).reshape(shape)
        return name

    def intermediate(self, shape, dtype) -> str:
        return self.ser.addIntermediate(list(shape), dtype).name

    def output(self, shape, dtype) -> str:
        name = self.ser.addOutput(list(shape), dtype).name
        self.output_names.append(name)
        return name

    def op(self, op, inputs: list, outputs: list, attr=None):
        op = _as_op(op)
        self.ser.addOperator(op, list(inputs), list(outputs), make_attr(op, attr))

    def serialize(self) -> bytes:
        return self.ser.serialize()

    def run(self, inputs: dict | None = None, level: str = "EIGHTK", precise: bool = False) -> dict:
        feed = dict(self.input_values)
        feed.update(inputs or {})
        return run_reference(self.serialize(), feed, self.output_names, level, precise)


def single_op_graph(op, inputs, outputs, attr=None):
    """Build a one-operator graph.

    inputs: list of (shape, DType, ndarray or None, is_const); outputs: list of (shape, DType).
    Returns (tosa_bytes, input_names, output_names); input_names lists the placeholders only,
    in order, so run_reference(b, dict(zip(input_names, arrays)), output_names) runs it.
    """
    g = GraphBuilder()
    names = [g.tensor(shape, dt, val, const) for shape, dt, val, const in inputs]
    outs = [g.output(shape, dt) for shape, dt in outputs]
    g.op(op, names, outs, attr)
    return g.serialize(), list(g.input_names), outs


def run_single_op(op, inputs, outputs, attr=None, level="EIGHTK"):
    """single_op_graph + run_reference with the placeholder values given in `inputs`.

    Returns the list of output arrays (in `outputs` order)."""
    g = GraphBuilder()
    names = [g.tensor(shape, dt, val, const) for shape, dt, val, const in inputs]
    outs = [g.output(shape, dt) for shape, dt in outputs]
    g.op(op, names, outs, attr)
    res = g.run(level=level)
    return [res[n] for n in outs]


def fit_pad(rng, size, k_eff, stride, max_pad):
    """Random (lo, hi) pads with (size + lo + hi - k_eff) divisible by stride (TOSA needs exact)."""
    lo = int(rng.integers(0, max_pad + 1))
    hi = int(rng.integers(0, max_pad + 1))
    span = size + lo + hi - k_eff
    if span < 0:
        hi -= span
        span = 0
    return lo, hi + (-span) % stride
