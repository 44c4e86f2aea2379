"""Per-operator compliance of a float network run on the simulator (tests and bench only).

The TOSA specification bounds each floating-point operator's result against its fp64
reference, computed from that operator's own inputs; it does not bound a chain. So every
operator of a network is judged alone: the simulator's values of its inputs go through the
operator on Arm's reference model in precise mode (fp64, with the bounds tensor for the
statistical and absolute-error modes), and Arm's compliance checker (VerifierLibrary) judges
the simulator's value of its output. The compliance mode and its parameters are the ones Arm's
test generator gives the operator (generator.tosa_test_gen), with the data set s = -1 (data
of a network rather than of a generated test).
"""
from __future__ import annotations

import json
import math
import subprocess
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
from generator.tosa_test_gen import TosaTestGen
import tosa_serializer as ts
from tosa_serializer import DType

from fp_oracle import verifier
from oracle import reference_binary

BINARY = reference_binary()
FRAC = {"FP32": 23, "FP16": 10, "BF16": 7}
TOSA_DT = {"FP32": DType.FP32, "FP16": DType.FP16, "BF16": DType.BF16}
NEEDS_BOUNDS = ("DOT_PRODUCT", "ABS_ERROR", "FP_SPECIAL")


def _op_compliance(op: str) -> dict:
    entry = TosaTestGen.TOSA_OP_LIST.get(op.lower()) or TosaTestGen.TOSA_OP_LIST.get(
        f"{op.lower()}_TEMPLATE", {})
    return entry.get("compliance", {})


def compliance(e, index: int) -> dict:
    """The compliance entry of operator `index` of an Emitter's records (generator's rules)."""
    op, inputs, out, _ = e.records[index]
    dt, in_dt = e.dtype[out], e.dtype[inputs[0]]
    cfg = {"data_type": dt, "shape": list(e.shape[out])}
    rules = _op_compliance(op)
    if out in e.terms:
        acc = "FP32" if op != "REDUCE_SUM" else dt
        ksb = math.ceil(e.terms[out] / 2.0 ** ((FRAC[acc] - FRAC[dt]) / 2))
        fp32 = all(e.dtype[i] == "FP32" for i in inputs[:2])
        cfg.update(mode="DOT_PRODUCT", dot_product_info={
            "s": -1, "ksb": ksb, "abs_bound": 2 * (3 if fp32 else 1) * ksb,
            "variance_error_bound": 4 * 0.4 * ksb})
    elif "ulp" in rules:
        ulp = rules["ulp"]
        ulp = ulp[TOSA_DT[dt]] if isinstance(ulp, dict) else ulp
        cfg.update(mode="ULP", ulp_info={"ulp": ulp, **({"ulp_lower": rules["ulp_lower"]}
                                                        if "ulp_lower" in rules else {})})
    elif rules.get("abs_error_mode"):
        info = {}
        if "abs_error_lower_bound" in rules:
            info["lower_bound"] = rules["abs_error_lower_bound"]
        if "abs_error_base_bounds" in rules:
            info["base_bound"] = rules["abs_error_base_bounds"][TOSA_DT[in_dt]]
        if "abs_error_bound_as_magnitude" in rules:
            info["bound_as_magnitude"] = rules["abs_error_bound_as_magnitude"]
        if "abs_error_normal_divisor" in rules:
            info["normal_divisor"] = rules["abs_error_normal_divisor"]
        if "abs_error_max_compare" in rules:
            info["max_compare"] = rules["abs_error_max_compare"][TOSA_DT[in_dt]]
        cfg.update(mode="ABS_ERROR", **({"abs_error_info": info} if info else {}))
    else:
        cfg["mode"] = "EXACT"
    return cfg


def _npy(a: np.ndarray) -> np.ndarray:
    """The verifier's view of an array: bf16 as raw 2-byte values (np.save keeps bfloat16)."""
    return a.view(np.dtype("V2")) if a.dtype == ml_dtypes.bfloat16 else a


def isolated_graph(e) -> tuple[bytes, list[str], list[str]]:
    """Every float operator of Emitter `e` on its own: constants stay constants, every other
    operand becomes a graph input `in:<name>`. Returns (flatbuffer, feeds, outputs)."""
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    blk = ser.currRegion.currBasicBlock
    feeds, outs, declared = [], [], set()
    for op, inputs, out, attr in e.records:
        if e.dtype[out] not in FRAC:
            continue
        names = []
        for name in inputs:
            if name in e.const_data:
                if name not in declared:
                    arr, dt = e.const_data[name]
                    ser.addConst(list(arr.shape), getattr(DType, dt), arr, name=name)
                names.append(name)
            else:
                feed = f"in:{name}"
                if feed not in declared:
                    blk.addTensor(feed, e.shape[name], getattr(DType, e.dtype[name]), None)
                    blk.addInput(feed)
                    feeds.append(name)
                names.append(feed)
            declared.update((name, names[-1]))
        blk.addTensor(out, e.shape[out], getattr(DType, e.dtype[out]), None)
        blk.addOperator(getattr(ts.Op, op), names, [out], attr)
        blk.addOutput(out)
        outs.append(out)
    return bytes(ser.serialize()), feeds, outs


def reference(graph: bytes, feeds: dict, outs: list[str], bounds: bool = True,
              precise: bool = True):
    """({output: fp64 result}, {output: fp64 bounds} or None) on the precise reference model
    (`precise=False`: its ordinary mode, results in the graph's types)."""
    with tempfile.TemporaryDirectory(prefix="fpchk_") as tmp:
        d = Path(tmp)
        (d / "g.tosa").write_bytes(graph)
        names = list(feeds)
        for i, n in enumerate(names):
            np.save(d / f"i{i}.npy", feeds[n])
        desc = {"tosa_file": "g.tosa", "ifm_name": names,
                "ifm_file": [f"i{i}.npy" for i in range(len(names))], "ofm_name": outs,
                "ofm_file": [f"o{i}.npy" for i in range(len(outs))], "expected_failure": False,
                "test_requirements": {"bounds_file_required": bounds}}
        (d / "desc.json").write_text(json.dumps(desc))
        proc = subprocess.run([BINARY, "--test_desc", str(d / "desc.json"),
                               f"--precise_mode={int(precise)}"], capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"reference model: {proc.stdout[:500]} {proc.stderr[:500]}")
        return ({n: np.load(d / f"o{i}.npy") for i, n in enumerate(outs)},
                {n: np.load(d / f"bounds_o{i}.npy") for i, n in enumerate(outs)} if bounds else None)


def check_operators(e, values: dict) -> list[dict]:
    """Every float operator of Emitter `e`, judged on the implementation's `values` (tensor
    name -> array, as the simulator wrote them). One row per operator: op, output, mode, ok,
    and the largest error relative to the fp64 reference's range."""
    graph, feeds, outs = isolated_graph(e)
    ref, bnd = reference(graph, {f"in:{n}": values[n] for n in feeds}, outs)
    index = {out: i for i, (_, _, out, _) in enumerate(e.records)}
    rows = []
    for out in outs:
        i = index[out]
        cfg = compliance(e, i)
        imp = np.ascontiguousarray(values[out])
        ok = verifier().verify_data(out, {"version": "0.1", "tensors": {out: cfg}}, _npy(imp),
                                    ref[out], bnd[out] if cfg["mode"] in NEEDS_BOUNDS else None)
        err = np.abs(imp.astype(np.float64) - ref[out]).max() / max(np.ptp(ref[out]), 1e-30)
        rows.append({"op": e.records[i][0], "output": out, "mode": cfg["mode"], "ok": bool(ok),
                     "rel_error": float(err)})
    return rows
def run_reference(graph: bytes, feeds: dict, outs: list[str]) -> dict:
    """The reference model's ordinary results, in the graph's types (bf16 as bfloat16)."""
    res, _ = reference(graph, feeds, outs, bounds=False, precise=False)
    return {n: v.view(ml_dtypes.bfloat16) if v.dtype == np.dtype("V2") else v
            for n, v in res.items()}


def graph_with_every_output(e) -> bytes:
    """The emitter's graph with every operator's result a graph output (the values checked)."""
    for _, _, out, _ in e.records:
        if out not in e.outputs:
            e.output(out)
    return e.serialize()
