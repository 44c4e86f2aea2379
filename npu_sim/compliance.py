"""Floating-point outputs of conformance tests, judged by Arm's compliance checker.

The TOSA spec does not ask floating-point results to be bit-exact: an output conforms when it
lies within its operator's bounds of the fp64 reference, by the compliance mode the test's
desc.json names (meta.compliance.tensors.<output>: ULP, ABS_ERROR, DOT_PRODUCT, FP_SPECIAL,
REDUCE_PRODUCT, ...). The reference and, where the mode needs one, the bounds tensor are what
the reference model writes in precise mode (`--precise_mode=1`); they come from the test folder
or the expected-output folder, never from npu-sim. Arm's checker (the VerifierLibrary of
tosa-tools, libtosa_reference_verify_lib.so, the same code `tosa_verify` runs) then says
compliant or not, with its own message: it judges npu-sim's output, it never produces one.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

FLOAT_TYPES = frozenset({"FP16", "FP32", "BF16", "FP8E4M3", "FP8E5M2"})

_LIBRARY = None


def judged(info: dict) -> bool:
    """Whether an output's compliance entry is one the checker judges (a float output)."""
    return str(info.get("data_type", "")).upper() in FLOAT_TYPES


def _library():
    global _LIBRARY
    if _LIBRARY is None:
        from checker.verifier import VerifierLibrary
        from conformance import model_files as cmf
        _LIBRARY = VerifierLibrary(Path(cmf.find_tosa_file(cmf.TosaFileType.VERIFY_LIBRARY, None, False)))
    return _LIBRARY


def captured(fn):
    """fn()'s result and what the native library printed meanwhile (its only message)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            result = fn()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
        sink.seek(0)
        text = sink.read().decode(errors="replace")
    return result, text


def checker_message(text: str) -> str:
    """The checker's lines that say why, without its source locations."""
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.startswith(("WARNING AT", "ERROR AT", "INFO AT"))]
    return " ".join(lines)[:600]


def check(name: str, compliance: dict, imp: np.ndarray, ref: np.ndarray,
          bounds: np.ndarray | None) -> tuple[bool, str]:
    """(compliant, the checker's message) for one output; imp in npu-sim's storage dtype."""
    from npu_sim.isa.dtypes import as_npy
    imp = np.ascontiguousarray(as_npy(imp))
    ref = np.ascontiguousarray(ref)
    bnd = None if bounds is None else np.ascontiguousarray(bounds)
    config = {"version": compliance.get("version", "1.2"),
              "tensors": {name: compliance["tensors"][name]}}
    lib = _library()
    ok, text = captured(lambda: bool(lib.verify_data(name, config, imp, ref, bnd)))
    mode = compliance["tensors"][name].get("mode", "?")
    return ok, checker_message(text) or (f"within the {mode} bounds" if ok
                                         else f"outside the {mode} bounds")
