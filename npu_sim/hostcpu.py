"""The host CPU's fallback operators: whole-tensor TOSA ops the NPU engines do not run.

They use the same exact kernels as the NPU datapath, on operands in external memory.
"""
from __future__ import annotations

import numpy as np

from isa.errors import UnsupportedError

from . import datapath as dp


def _scalar(x) -> int:
    return int(np.asarray(x).reshape(-1)[0])


def run_host_op(op: str, inputs: list[np.ndarray], attrs: dict, out_dtypes: list) -> list:
    if op == "GATHER":
        return [dp.gather(inputs[0], inputs[1])]
    if op == "SCATTER":
        return [dp.scatter(inputs[0], inputs[1], inputs[2])]
    if op == "CONV3D":
        acc = dp.conv3d_acc(inputs[0], inputs[1], tuple(attrs["pad"]), tuple(attrs["stride"]),
                            tuple(attrs["dilation"]), _scalar(inputs[3]), _scalar(inputs[4]))
        acc_dtype = "int48" if np.dtype(out_dtypes[0]) == np.int64 else "int32"
        return [dp.output_stage(acc, bias=inputs[2].reshape(-1), out_dtype=out_dtypes[0],
                                acc_dtype=acc_dtype)]
    raise UnsupportedError(f"the host CPU has no implementation of {op}")


HOST_OPS = frozenset({"GATHER", "SCATTER", "CONV3D"})
