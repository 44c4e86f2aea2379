"""Builds the graph IR directly: tensors, CONST operators for constant data, and the handful of
TOSA idioms every lowering needs (an exact RESCALE, CLAMP, TABLE, RESHAPE, shift constants)."""
from __future__ import annotations

import numpy as np

from npu_sim.compiler.ir import Graph, Operator, Tensor
from npu_sim.isa.dtypes import DTYPES, STORAGE


class IRBuilder:
    def __init__(self, source: str, reserved: set[str] = frozenset()):
        self.tensors: dict[str, Tensor] = {}
        self.reserved = reserved      # the model's own tensor names, declared when first used
        self.operators: list[Operator] = []
        self.source = source
        self.where = ""           # the frontend operator being lowered, as tensor names begin
        self.origin = ""          # the same as messages name it ("TFLite operator #3 ADD")
        self._count = 0

    def fresh(self, hint: str) -> str:
        self._count += 1
        name = f"{self.where}/{hint}{self._count}" if self.where else f"{hint}{self._count}"
        while name in self.tensors or name in self.reserved:
            name += "_"
        return name

    def tensor(self, name: str, shape, dtype: str, data=None) -> str:
        self.tensors[name] = Tensor(name, tuple(int(d) for d in shape), dtype,
                                    None if data is None else np.asarray(data))
        return name

    def const(self, data, dtype: str, hint: str = "const") -> str:
        return self.const_named(self.fresh(hint), data, dtype)

    def const_named(self, name: str, data, dtype: str) -> str:
        """A CONST operator writing `data` into the tensor `name` (a model tensor)."""
        arr = np.ascontiguousarray(np.asarray(data).astype(STORAGE[dtype]))
        self.tensor(name, arr.shape, dtype, arr)
        self.operators.append(Operator("CONST", [], [name], location=self.origin))
        return name

    def scalar(self, value: int, dtype: str) -> str:
        return self.const(np.array([value]), dtype, "zp")

    def bcast(self, value: int, dtype: str, rank: int) -> str:
        """A one-element constant of `rank` dimensions, broadcast by elementwise operators."""
        return self.const(np.full((1,) * rank, value), dtype, "k")

    def shape(self, values) -> str:
        arr = np.asarray(list(values), np.int64)
        name = self.tensor(self.fresh("shape"), (arr.size,), "shape", arr)
        self.operators.append(Operator("CONST_SHAPE", [], [name], location=self.origin))
        return name

    def op(self, op: str, inputs: list[str], shape, dtype: str, attrs: dict | None = None,
           out: str | None = None) -> str:
        out = out or self.tensor(self.fresh(op.lower()), shape, dtype)
        if out not in self.tensors:
            self.tensor(out, shape, dtype)
        self.operators.append(Operator(op, list(inputs), [out], dict(attrs or {}), self.origin,
                                       len(self.operators)))
        return out

    def shape_of(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def dtype_of(self, name: str) -> str:
        return self.tensors[name].dtype

    # TOSA idioms -------------------------------------------------------------------------

    def rescale(self, x: str, multiplier, shift, out_dtype: str, input_zp: int = 0,
                output_zp: int = 0, double_round: bool = True, out: str | None = None) -> str:
        """RESCALE with TOSA's (multiplier, shift); a vector of multipliers is per channel."""
        mult = np.atleast_1d(np.asarray(multiplier, np.int64))
        shifts = np.broadcast_to(np.atleast_1d(np.asarray(shift, np.int64)), mult.shape)
        in_dtype = self.dtype_of(x)
        inputs = [x, self.const(mult, "int32", "multiplier"), self.const(shifts, "int8", "shift"),
                  self.scalar(input_zp, in_dtype), self.scalar(output_zp, out_dtype)]
        rounding = "DOUBLE_ROUND" if double_round and int(shifts.max()) > 31 else "SINGLE_ROUND"
        return self.op("RESCALE", inputs, self.shape_of(x), out_dtype,
                       {"scale32": True, "rounding_mode": rounding, "per_channel": mult.size > 1,
                        "input_unsigned": False, "output_unsigned": False}, out)

    def widen(self, x: str, zp: int = 0, factor_log2: int = 0) -> str:
        """(x - zp) * 2^factor_log2 as int32, exactly."""
        return self.rescale(x, 1 << 30, 30 - factor_log2, "int32", input_zp=zp)

    def saturate(self, x: str, out_dtype: str, output_zp: int = 0, out: str | None = None) -> str:
        """x + output_zp in out_dtype, saturated: an identity RESCALE."""
        return self.rescale(x, 1 << 30, 30, out_dtype, output_zp=output_zp, out=out)

    def clamp(self, x: str, lo, hi, out: str | None = None) -> str:
        value = float if DTYPES[self.dtype_of(x)].kind == "float" else int
        return self.op("CLAMP", [x], self.shape_of(x), self.dtype_of(x),
                       {"min_val": value(lo), "max_val": value(hi), "nan_mode": "PROPAGATE"}, out)

    def reshape(self, x: str, shape, out: str | None = None) -> str:
        return self.op("RESHAPE", [x, self.shape(shape)], shape, self.dtype_of(x), {}, out)

    def table(self, x: str, table, out: str | None = None) -> str:
        table = np.asarray(table)
        out_dtype = "int8" if self.dtype_of(x) == "int8" else "int32"
        t = self.const(table, "int8" if table.size == 256 else "int16", "table")
        return self.op("TABLE", [x, t], self.shape_of(x), out_dtype, {}, out)

    def binary(self, op: str, a: str, b: str, dtype: str | None = None, attrs=None,
               out: str | None = None) -> str:
        shape = np.broadcast_shapes(self.shape_of(a), self.shape_of(b))
        dtype = dtype or self.dtype_of(a)
        if op in ("MAXIMUM", "MINIMUM"):
            attrs = {"nan_mode": "PROPAGATE", **(attrs or {})}
        return self.op(op, [a, b], shape, dtype, attrs, out)

    def mul(self, a: str, b: str, shift: int = 0, out: str | None = None) -> str:
        shape = np.broadcast_shapes(self.shape_of(a), self.shape_of(b))
        return self.op("MUL", [a, b, self.scalar(shift, "int8")], shape, "int32", {}, out)

    def graph(self, inputs: list[str], outputs: list[str]) -> Graph:
        return Graph(self.tensors, self.operators, inputs, outputs, source=self.source)
