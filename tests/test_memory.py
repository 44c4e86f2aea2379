"""The modelled memories: constant segments are read in place and stay read-only."""
import numpy as np
import pytest

from npu_sim.isa.commands import dense
from npu_sim.isa.errors import ProgramError
from npu_sim.memory import Memories


@pytest.fixture
def mem():
    m = Memories(["dram"], [64, 256])
    m.load(1, 32, bytes(range(1, 17)))           # a 16-byte constant at 0x20
    return m


def test_constants_are_read_in_place_and_read_only(mem):
    weights = mem.array(dense(1, 36, (2, 4), "int8"))
    assert weights.tolist() == [[5, 6, 7, 8], [9, 10, 11, 12]]
    with pytest.raises(ValueError):
        weights[...] = 0
    fm = mem.array(dense(1, 64, (8,), "int8"))     # beside the constant: writable memory
    fm[...] = 7
    assert mem.array(dense(1, 64, (8,), "int8")).tolist() == [7] * 8
    assert mem.array(dense(1, 16, (16,), "int8")).tolist() == [0] * 16


@pytest.mark.parametrize("addr,size", [(24, 16), (40, 16), (16, 64)])
def test_views_across_a_constant_are_refused(mem, addr, size):
    with pytest.raises(ProgramError, match="straddles the constant segment"):
        mem.array(dense(1, addr, (size,), "int8"))


@pytest.mark.parametrize("addr,size", [(40, 16), (24, 16), (250, 16)])
def test_overlapping_or_outside_segments_are_refused(mem, addr, size):
    with pytest.raises(ProgramError):
        mem.load(1, addr, np.ones(size, np.uint8).tobytes())


def test_the_array_cache_is_bounded_and_its_arrays_stay_memory(mem, monkeypatch):
    """Past KEPT_ARRAYS views the cache starts again: it never holds more, and an array made
    again for a view it forgot still reads and writes the same bytes."""
    from npu_sim import memory
    monkeypatch.setattr(memory, "KEPT_ARRAYS", 4)
    first = mem.array(dense(1, 64, (8,), "int8"))
    first[...] = 3
    for addr in range(80, 200, 8):                  # 15 other views: the cache starts again
        mem.array(dense(1, addr, (8,), "int8"))[...] = addr // 8
        assert len(mem._arrays) <= 4
    again = mem.array(dense(1, 64, (8,), "int8"))
    assert again is not first and again.tolist() == [3] * 8
    again[...] = 9
    assert first.tolist() == [9] * 8                # the same memory, through either array
    assert mem.array(dense(1, 192, (8,), "int8")).tolist() == [24] * 8
