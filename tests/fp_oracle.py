"""Judge floating-point results as Arm's tools do (tests only).

The reference model computes the fp64 reference in precise mode (and, for the operators whose
check needs one, the bounds tensor), exactly as `tosa_reference_model --test_desc desc.json
--precise_mode 1` does for a conformance test; Arm's compliance checker (the
libtosa_reference_verify_lib.so VerifierLibrary) then decides whether npu-sim's output lies
within the spec's bounds of it. Neither ever produces a result npu-sim reports.
"""
from __future__ import annotations

import ctypes
import json
import math
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import tosa_reference_model
from checker.verifier import VerifierLibrary
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from schemavalidation import schemavalidation as sch

from npu_sim.isa.dtypes import as_npy
from oracle import _BINARY, DType, ref_npy

_LIB = Path(tosa_reference_model.__file__).parent / "libtosa_reference_verify_lib.so"
_VERIFIER: VerifierLibrary | None = None
_VALIDATORS: dict = {}

_BOUNDS_MODES = ("ABS_ERROR", "DOT_PRODUCT", "FP_SPECIAL", "PRECOMPUTED")
_FRAC = {"fp32": 23, "fp16": 10, "bf16": 7, "fp8e4m3": 3, "fp8e5m2": 2}


class _Verifier(VerifierLibrary):
    """Arm's VerifierLibrary. Its verify_data validates the compliance config with
    jsonschema.validate, which first checks Arm's schema itself against the JSON meta-schema:
    nine tenths of a call's time. This validates the config against the same schema by a
    validator made once, then makes verify_data's native call."""

    def verify_data(self, name, config, imp, ref, bnd=None):
        version = sch.TestDescSchemaValidator._get_json_version(config)
        if version not in _VALIDATORS:
            td = sch.TestDescSchemaValidator()
            found = td._get_schema_version(version, sch.TD_SCHEMA_COMPLIANCE)  # (loads it)
            schema = td.registry.contents(found)
            cls = validator_for(schema)
            cls.check_schema(schema)
            _VALIDATORS[version] = cls(schema, registry=td.registry)
        error = best_match(_VALIDATORS[version].iter_errors(config))
        if error is not None:
            raise error
        dtype = config["tensors"][name]["data_type"]
        imp, ref, bnd = (None if a is None else self._get_tensor_data(name, a, dtype)
                         for a in (imp, ref, bnd))
        return self.tvf_verify_data(ref, bnd, imp, ctypes.c_char_p(json.dumps(config).encode()))


def verifier() -> VerifierLibrary:
    global _VERIFIER
    if _VERIFIER is None:
        _VERIFIER = _Verifier(_LIB)
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


def _rules(op: str) -> dict:
    """Arm's generator's compliance rules for `op` (its TOSA_OP_LIST entry)."""
    from generator.tosa_test_gen import TosaTestGen
    ops = TosaTestGen.TOSA_OP_LIST
    return (ops.get(op.lower()) or ops.get(f"{op.lower()}_TEMPLATE", {})).get("compliance") or {}


def _per_type(value, dtype: str):
    return value[getattr(DType, dtype.upper())] if isinstance(value, dict) else value


def compliance_entry(op: str, dtype: str, shape, in_dtype: str = "", terms: int = 0,
                     acc: str = "") -> dict:
    """The compliance entry Arm's generator gives `op`'s output of TOSA type `dtype` (the
    generator's own rules; data set s = -1 for the dot-product operators, whose `terms` is the
    number of products per output and `acc` the accumulator type)."""
    in_dtype = in_dtype or dtype
    entry = {"data_type": dtype.upper(), "shape": [int(s) for s in shape]}
    rules = _rules(op)
    if dtype == "bool" or dtype.startswith("int"):
        entry["mode"] = "EXACT"
    elif op in ("REDUCE_SUM", "AVG_POOL2D"):
        # the generator's kernel-size bound: terms shrunk by the accumulator's extra precision
        ksb = math.ceil(terms / 2 ** ((_FRAC[acc or dtype] - _FRAC[dtype]) / 2))
        entry.update(mode="DOT_PRODUCT", dot_product_info={
            "s": -1, "ksb": ksb, "abs_bound": 2 * (3 if in_dtype == "fp32" else 1) * ksb,
            "variance_error_bound": 4 * 0.4 * ksb})
    elif op == "REDUCE_PRODUCT":
        entry.update(mode="REDUCE_PRODUCT", reduce_product_info={"n": int(terms)})
    elif op == "RESIZE":
        top = float(np.finfo(np.float32).max) if dtype != "fp16" else 65504.0
        entry.update(mode="MAX_RELATIVE", max_relative_info={
            "max": top, "scale": rules["relative_scale"], "ulp_bound": rules["relative_ulp_bound"]})
    elif rules.get("precomputed_mode"):
        entry["mode"] = "PRECOMPUTED"
    elif "ulp" in rules:
        info = {"ulp": _per_type(rules["ulp"], dtype)}
        if "ulp_lower" in rules:
            info["ulp_lower"] = rules["ulp_lower"]
        entry.update(mode="ULP", ulp_info=info)
    elif rules.get("abs_error_mode"):
        info = {}
        for key, name in (("abs_error_lower_bound", "lower_bound"),
                          ("abs_error_base_bounds", "base_bound"),
                          ("abs_error_bound_as_magnitude", "bound_as_magnitude"),
                          ("abs_error_normal_divisor", "normal_divisor"),
                          ("abs_error_max_compare", "max_compare")):
            if key in rules:
                info[name] = _per_type(rules[key], in_dtype)
        entry.update(mode="ABS_ERROR", **({"abs_error_info": info} if info else {}))
    else:
        entry["mode"] = "EXACT"
    return entry


def needs_bounds(entry: dict) -> bool:
    return entry["mode"] in _BOUNDS_MODES


def verdict(name: str, entry: dict, imp: np.ndarray, ref: np.ndarray, bnd) -> bool:
    """Arm's compliance checker on one output (imp in npu-sim's storage dtype)."""
    integer = np.asarray(imp).dtype.kind in "biu"      # int and bool types: refs in their type
    imp = np.ascontiguousarray(as_npy(imp))
    ref = np.ascontiguousarray(ref)
    if integer and ref.dtype != imp.dtype:
        ref = ref.astype(imp.dtype)
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


