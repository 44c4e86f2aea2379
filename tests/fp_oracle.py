"""Judge floating-point results as Arm's tools do (tests only).

The reference model computes the fp64 reference in precise mode (and, for the operators whose
check needs one, the bounds tensor), exactly as `tosa_reference_model --test_desc desc.json
--precise_mode 1` does for a conformance test; Arm's compliance checker (the
libtosa_reference_verify_lib.so VerifierLibrary) then decides whether npu-sim's output lies
within the spec's bounds of it. Neither ever produces a result npu-sim reports.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import tosa_reference_model
from checker.verifier import VerifierLibrary

from npu_sim.isa.dtypes import as_npy
from oracle import _BINARY, ref_npy

_LIB = Path(tosa_reference_model.__file__).parent / "libtosa_reference_verify_lib.so"
_VERIFIER: VerifierLibrary | None = None

# Compliance modes of Arm's generator, by operator (its desc.json meta.compliance): ULP with
# the spec's bound, ABS_ERROR (bounds tensor from the reference model), DOT_PRODUCT, ...
ULP = {"ADD": 0.5, "SUB": 0.5, "MUL": 0.5, "CEIL": 0.5, "FLOOR": 0.5, "RECIPROCAL": 1,
       "RSQRT": 2, "ERF": 5}
BF16_ULP = {"ADD": 1, "SUB": 1, "MUL": 1}


def verifier() -> VerifierLibrary:
    global _VERIFIER
    if _VERIFIER is None:
        _VERIFIER = VerifierLibrary(_LIB)
    return _VERIFIER


def tosa_type(dtype: str) -> str:
    return dtype.upper()


def reference(tosa: bytes, inputs: dict, outputs: dict, compliance: dict, bounds: bool) -> dict:
    """{output: (fp64 reference, bounds or None)} from the reference model in precise mode.

    outputs: name -> TOSA dtype; compliance: name -> its compliance entry."""
    with tempfile.TemporaryDirectory(prefix="tosa_fp_") as tmp:
        d = Path(tmp)
        (d / "test.tosa").write_bytes(tosa)
        names = list(inputs)
        for i, name in enumerate(names):
            np.save(d / f"input-{i}.npy", ref_npy(inputs[name]))
        desc = {
            "tosa_file": "test.tosa", "ifm_name": names,
            "ifm_file": [f"input-{i}.npy" for i in range(len(names))],
            "ofm_name": list(outputs), "ofm_file": [f"result-{i}.npy" for i in range(len(outputs))],
            "expected_failure": False,
            "meta": {"compliance": {"version": "1.2", "tensors": compliance}},
            "test_requirements": {"profiles_supported": ["tosa-pro-fp"],
                                  "bounds_file_required": bounds},
        }
        (d / "desc.json").write_text(json.dumps(desc))
        proc = subprocess.run([_BINARY, "--test_desc", str(d / "desc.json"), "--precise_mode", "1"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"tosa_reference_model exit {proc.returncode}: {proc.stderr[-1500:]}")
        out = {}
        for i, name in enumerate(outputs):
            ref = np.load(d / f"result-{i}.npy")
            bnd = d / f"bounds_result-{i}.npy"
            out[name] = (ref, np.load(bnd) if bounds and bnd.exists() else None)
        return out


def compliance_entry(op: str, dtype: str, shape, **info) -> dict:
    """The compliance entry Arm's generator gives `op`'s output of TOSA type `dtype`."""
    entry = {"data_type": tosa_type(dtype), "shape": [int(s) for s in shape]}
    if info:
        entry.update(info)
    elif dtype in ("bool",) or dtype.startswith("int"):
        entry["mode"] = "EXACT"
    elif op in ULP:
        bound = BF16_ULP.get(op, ULP[op]) if dtype == "bf16" else ULP[op]
        entry.update(mode="ULP", ulp_info={"ulp": bound})
    else:
        entry["mode"] = "EXACT"
    return entry


def needs_bounds(entry: dict) -> bool:
    return entry["mode"] in ("ABS_ERROR", "DOT_PRODUCT", "FP_SPECIAL")


def verdict(name: str, entry: dict, imp: np.ndarray, ref: np.ndarray, bnd) -> bool:
    """Arm's compliance checker on one output (imp in npu-sim's storage dtype)."""
    imp = np.ascontiguousarray(as_npy(imp))
    ref = np.ascontiguousarray(ref)
    if entry["mode"] == "EXACT" and ref.dtype != imp.dtype:
        ref = ref.astype(imp.dtype) if imp.dtype.kind in "biu" else ref
    bnd = None if bnd is None else np.ascontiguousarray(bnd)
    cfg = {"version": "1.2", "tensors": {name: entry}}
    return bool(verifier().verify_data(name, cfg, imp, ref, bnd))


def check_graph(tosa: bytes, inputs: dict, outputs: dict, results: dict, compliance: dict) -> None:
    """Assert every output of npu-sim (results) is compliant with the precise reference."""
    bounds = any(needs_bounds(e) for e in compliance.values())
    refs = reference(tosa, inputs, outputs, compliance, bounds)
    for name, entry in compliance.items():
        ref, bnd = refs[name]
        assert verdict(name, entry, results[name], ref, bnd), (
            f"{name}: non-compliant ({entry['mode']}); max |imp - ref| = "
            f"{np.nanmax(np.abs(results[name].astype(np.float64) - ref)) if ref.size else 0}")


