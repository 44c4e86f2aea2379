"""What a builtin's lowering sees: the TFLite tensors, their IR names and quantization, and the
TFLite arithmetic that turns scales into TOSA RESCALE parameters."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from npu_sim.compiler.ir import Operator
from npu_sim.isa.errors import UnsupportedError

from .builder import IRBuilder
from .fixedpoint import quantize_multiplier, round_away
from .reader import TflModel, TflOperator, TflTensor

TYPES = {"INT8": "int8", "INT16": "int16", "INT32": "int32", "BOOL": "bool", "FLOAT32": "fp32",
         "FLOAT16": "fp16"}
FLOATS = {"FLOAT32": "fp32", "FLOAT16": "fp16"}
_ACT_RANGE = {1: (0.0, None), 2: (-1.0, 1.0), 3: (0.0, 6.0)}     # RELU, RELU_N1_TO_1, RELU6
FLT_MAX = float(np.finfo(np.float32).max)


@contextmanager
def float_checked(label: str = ""):
    """Run a lowering with numpy's float errors raised: extreme (valid) quantization scales
    give UnsupportedError (its message after `label: `), and no numpy warning leaks."""
    try:
        with np.errstate(over="raise", divide="raise", invalid="raise"):
            yield
    except FloatingPointError as exc:
        why = f"its quantization parameters overflow float arithmetic ({exc})"
        raise UnsupportedError(f"{label}: {why}" if label else why) from None


class Lowering:
    def __init__(self, model: TflModel, source: str):
        self.model = model
        self.names: dict[int, str] = {}           # TFLite tensor index -> IR tensor name
        self.op: TflOperator | None = None
        taken: set[str] = set()
        for t in model.tensors:                   # TFLite names are kept, made unique
            name = t.name
            while name in taken:
                name += "_"
            taken.add(name)
            self.names[t.index] = name
        self.b = IRBuilder(source, taken)
        # FULLY_CONNECTED as TFLite's reference kernel rounds (once, in double); NNAPI's
        # reference rounds twice (MultiplyByQuantizedMultiplier), and its frontend says so
        self.fc_single_round = True

    # tensors --------------------------------------------------------------------------------

    def t(self, k: int) -> TflTensor:
        """The operator's k-th input tensor."""
        return self.model.tensors[self.op.inputs[k]]

    def o(self, k: int = 0) -> TflTensor:
        return self.model.tensors[self.op.outputs[k]]

    def has_input(self, k: int) -> bool:
        return k < len(self.op.inputs) and self.op.inputs[k] >= 0

    def dtype(self, t: TflTensor) -> str:
        if t.dtype not in TYPES:
            raise UnsupportedError(f"operator #{self.op.index} {self.op.op}: tensor '{t.name}' is "
                                   f"{t.dtype}, which the TFLite frontend does not support "
                                   f"(types: {', '.join(TYPES)})")
        return TYPES[t.dtype]

    def value(self, k: int) -> str:
        """The IR name of input k; constant data becomes a CONST operator on first use."""
        t = self.t(k)
        name = self.names[t.index]
        if name not in self.b.tensors:
            dtype = self.dtype(t)
            if t.data is None:
                raise UnsupportedError(f"operator #{self.op.index} {self.op.op} reads tensor "
                                       f"'{t.name}', which no operator before it writes")
            self.b.tensor(name, t.shape, dtype, np.asarray(t.data))
            self.b.operators.append(Operator("CONST", [], [name], location=self.b.origin))
        return name

    def out(self, k: int = 0) -> str:
        t = self.o(k)
        name = self.names[t.index]
        if name not in self.b.tensors:
            self.b.tensor(name, t.shape, self.dtype(t))
        return name

    def const_input(self, k: int) -> np.ndarray:
        t = self.t(k)
        if t.data is None:
            raise UnsupportedError(f"operator #{self.op.index} {self.op.op}: input {k} "
                                   f"('{t.name}') must be a constant")
        return t.data

    @property
    def ftype(self) -> str:
        """The IR float type the builtin computes in: its output's, else its first input's."""
        for t in (self.o(), self.t(0)):
            if t.dtype in FLOATS:
                return FLOATS[t.dtype]
        return "fp32"

    def fail(self, why: str):
        raise UnsupportedError(f"operator #{self.op.index} {self.op.op}: {why}")

    def need_int8(self, *tensors: TflTensor):
        for t in tensors:
            if self.dtype(t) != "int8":
                self.fail(f"tensor '{t.name}' is {t.dtype}; this builtin is lowered for int8")

    # quantization ---------------------------------------------------------------------------

    def act_range(self, fused: int, t: TflTensor) -> tuple[int, int]:
        """CalculateActivationRangeQuantized: the fused activation's bounds in t's integers;
        for float tensors CalculateActivationRange's float bounds (RELU: up to FLT_MAX, which
        an fp16 result reaches as +inf, as a kernel computing in fp32 and rounding would)."""
        if fused not in _ACT_RANGE and fused != 0:
            self.fail(f"fused activation {fused} is not supported")
        if t.dtype in FLOATS:
            top = FLT_MAX if t.dtype == "FLOAT32" else float("inf")
            lo_f, hi_f = _ACT_RANGE.get(fused, (-top, top))
            return lo_f, top if hi_f is None else hi_f
        info = np.iinfo(np.dtype(self.dtype(t)))
        if fused == 0:
            return int(info.min), int(info.max)
        lo_f, hi_f = _ACT_RANGE[fused]
        scale = np.float32(t.scale)
        q = lambda f: t.zero_point + round_away(float(np.float32(f) / scale))   # noqa: E731
        lo = max(int(info.min), q(lo_f))
        hi = int(info.max) if hi_f is None else min(int(info.max), q(hi_f))
        return lo, hi


def tosa_scale(real: float) -> tuple[int, int]:
    """TOSA (multiplier, shift) computing MultiplyByQuantizedMultiplier(x, QuantizeMultiplier(real))
    bit for bit: DOUBLE_ROUND reproduces the two roundings where the shift exceeds 31."""
    q, shift = quantize_multiplier(real)
    if q == 0:
        return 0, 31
    if not -31 <= shift <= 29:
        raise UnsupportedError(f"a rescale factor {real:.3g} is outside what RESCALE can express")
    return q, 31 - shift


def tosa_scales(reals) -> tuple[np.ndarray, np.ndarray]:
    pairs = [tosa_scale(r) for r in reals]
    return np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64)
