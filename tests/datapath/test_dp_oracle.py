"""The reference-model helper itself: single_op_graph + run_reference, and error reporting."""

from __future__ import annotations

import numpy as np
import pytest

from oracle import DType, ReferenceError, run_reference, single_op_graph


def test_single_op_graph_roundtrip():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.full((1, 3), 10, np.int32)
    tosa, ins, outs = single_op_graph("ADD", [((2, 3), DType.INT32, None, False),
                                             ((1, 3), DType.INT32, b, True)],
                                      [((2, 3), DType.INT32)])
    assert isinstance(tosa, bytes) and len(ins) == 1 and len(outs) == 1
    res = run_reference(tosa, {ins[0]: a}, outs)
    np.testing.assert_array_equal(res[outs[0]], a + 10)
    assert res[outs[0]].dtype == np.int32


def test_unpredictable_raises_with_exit_code(tmp_path):
    tosa, ins, outs = single_op_graph("ADD", [((2,), DType.INT32, None, False),
                                                ((2,), DType.INT32, None, False)],
                                      [((2,), DType.INT32)])
    path = tmp_path / "g.tosa"
    path.write_bytes(tosa)  # a path works as well as bytes
    with pytest.raises(ReferenceError) as e:
        run_reference(path, {ins[0]: np.array([1, 2**31 - 1], np.int32), ins[1]: np.array([0, 1], np.int32)}, outs)
    assert e.value.returncode == 1  # UNPREDICTABLE (int32 overflow)
