"""Enumerated attributes outside their TOSA 1.0 values: the loader names the values the schema
defines and passes any other number through as read; validation refuses it (ERROR_IF), as the
TOSA reference model does."""
import numpy as np
import pytest

from npu_sim import api
from npu_sim.compiler.loader import load_bytes
from npu_sim.isa.errors import ValidationError
from oracle import DType, GraphBuilder
from oracle import ReferenceError as RefusedByReference

ts = pytest.importorskip("tosa_serializer")


def _maximum(nan_mode: int) -> tuple[bytes, GraphBuilder, str]:
    g = GraphBuilder()
    a = g.tensor((4,), DType.FP32, np.array([np.nan, 1, 2, -2], np.float32))
    b = g.tensor((4,), DType.FP32, np.array([3, 2, 1, -1], np.float32))
    out = g.output((4,), DType.FP32)
    attr = ts.TosaSerializerAttribute()
    attr.MaximumAttribute(nan_mode)
    g.op("MAXIMUM", [a, b], [out], attr)
    return g.serialize(), g, out


@pytest.mark.parametrize("nan_mode", [0, 3])
def test_a_nan_mode_outside_propagate_and_ignore_is_refused(nan_mode):
    tosa, g, _ = _maximum(nan_mode)
    with pytest.raises(ValidationError, match=f"nan_mode {nan_mode} is not PROPAGATE or IGNORE"):
        api.compile_model(load_bytes(tosa, "max.tosa"), api.load_config("default"),
                          use_cache=False)
    with pytest.raises(RefusedByReference):
        g.run()


def test_both_nan_modes_run():
    for nan_mode, want in ((1, [np.nan, 2, 2, -1]), (2, [3, 2, 2, -1])):
        tosa, g, out = _maximum(nan_mode)
        cfg = api.load_config("default")
        got = api.simulate(api.compile_model(load_bytes(tosa, "max.tosa"), cfg, use_cache=False),
                           cfg, g.input_values).outputs[out]
        np.testing.assert_array_equal(got, np.array(want, np.float32))
