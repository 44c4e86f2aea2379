"""The host CPU: runs the operators the NPU engines do not (GATHER, SCATTER, COND_IF,
WHILE_LOOP and HOST_UNPACK) whole, on operands in external memory, through the same host
evaluations and exact kernels as everything else (npu_sim/ops)."""
from __future__ import annotations

import numpy as np

from .ops import HOST_OPS, HostCall
from .ops.control import Meter, decode_regions


def run_host_op(op: str, inputs: list[np.ndarray], attrs: dict, outputs: list[np.ndarray]) -> int:
    """Run one host command, writing its results into `outputs`; returns the elements its
    sub-graphs computed (0 without any), which its time depends on."""
    Meter.elements = 0
    call = HostCall(op, inputs, attrs, [o.dtype for o in outputs], [o.shape for o in outputs],
                    decode_regions(attrs))
    results = HOST_OPS.lookup(op, "the host CPU")(call)
    if "results" in attrs:              # a control-flow operator keeps only its used results
        results = [results[i] for i in attrs["results"]]
    if "packed_offsets" in attrs:       # ... packed into one byte tensor when several are used
        packed = np.zeros(int(attrs["packed_bytes"]), np.uint8)
        for r, offset in zip(results, attrs["packed_offsets"]):
            raw = np.ascontiguousarray(r).view(np.uint8).reshape(-1)
            packed[offset:offset + raw.size] = raw
        results = [packed.view(np.int8)]
    for out, r in zip(outputs, results):
        out[...] = r
    return Meter.elements
