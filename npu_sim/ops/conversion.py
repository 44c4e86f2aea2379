"""The type conversions on the machine: CAST and RESCALE as vector-unit micro-ops, and their
whole-tensor host evaluations."""
from __future__ import annotations

import numpy as np

from .. import datapath as dp
from .common import HOST_OPS, MICRO_OPS, HostCall

MICRO_OPS.register("CAST")(lambda args, tables, u, dtype: dp.elementwise("CAST", args, dtype))
HOST_OPS.register("CAST")(lambda call: [dp.elementwise("CAST", call.inputs, call.out_dtypes[0])])


@MICRO_OPS.register("RESCALE")
def rescale(args, tables, u, dtype) -> np.ndarray:
    if not tables:                  # per-tensor parameters are immediates
        tables = [np.array([u["multiplier"]], np.int32), np.array([u["shift"]], np.int8)]
    return dp.rescale(args[0], tables[0], tables[1], u["input_zp"], u["output_zp"],
                      scale32=u["scale32"], rounding_mode=u["rounding_mode"],
                      per_channel=u["per_channel"], input_unsigned=u["input_unsigned"],
                      output_unsigned=u["output_unsigned"], out_dtype=dtype)


@HOST_OPS.register("RESCALE")
def rescale_host(call: HostCall) -> list:
    a, x = call.attrs, call.inputs
    return [dp.rescale(x[0], x[1], x[2], x[3], x[4], scale32=bool(a["scale32"]),
                       rounding_mode=a["rounding_mode"], per_channel=bool(a["per_channel"]),
                       input_unsigned=bool(a["input_unsigned"]),
                       output_unsigned=bool(a["output_unsigned"]),
                       out_dtype=np.dtype(call.out_dtypes[0]))]
