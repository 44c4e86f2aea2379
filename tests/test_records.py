"""isa.records.record behaves as dataclasses.dataclass does for the classes it is used on."""
import dataclasses
from dataclasses import dataclass, field

import pytest

from npu_sim.config import HardwareConfig
from npu_sim.isa.records import record


def _pair(frozen: bool):
    def body(deco):
        @deco
        class Point:
            """A point."""

            x: int
            y: int = 2
            tags: list = field(default_factory=list)
            note: str = field(default="", compare=False)
        return Point
    return body(dataclass(frozen=frozen)), body(record(frozen=frozen))


@pytest.mark.parametrize("frozen", [False, True])
def test_a_record_constructs_compares_and_prints_as_the_dataclass(frozen):
    ref, rec = _pair(frozen)
    for args, kwargs in [((1,), {}), ((1, 5), {}), ((), {"x": 3, "tags": [1]}),
                         ((1, 2, [3], "n"), {}), ((1,), {"note": "a", "y": 7})]:
        a, b = ref(*args, **kwargs), rec(*args, **kwargs)
        assert repr(a).replace("Point", "P") == repr(b).replace("Point", "P")
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        assert b == rec(*args, **kwargs) and b != rec(99) and b.__eq__(a) is NotImplemented
        assert rec(1, note="a") == rec(1, note="b")           # compare=False is not compared
        assert dataclasses.replace(b, y=9).y == 9 and dataclasses.replace(b, y=9).x == b.x
    assert [f.name for f in dataclasses.fields(rec)] == ["x", "y", "tags", "note"]
    assert rec(1).tags is not rec(1).tags                     # a fresh default each time
    for bad_args, bad_kwargs in [((), {}), ((1, 2, [], "", 5), {}), ((1,), {"x": 2}),
                                 ((1,), {"z": 2})]:
        with pytest.raises(TypeError):
            ref(*bad_args, **bad_kwargs)
        with pytest.raises(TypeError):
            rec(*bad_args, **bad_kwargs)


def test_a_frozen_record_is_immutable_and_hashed_by_its_compared_fields():
    ref, rec = _pair(True)
    b = rec(1, 2, (), "n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.x = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        del b.y
    assert hash(b) == hash(rec(1, 2, (), "other")) == hash(ref(1, 2, ()))


def test_a_mutable_record_is_unhashable_and_assignable_unless_it_defines_a_hash():
    _, rec = _pair(False)
    b = rec(1)
    b.x = 4
    assert b.x == 4
    with pytest.raises(TypeError):
        hash(b)
    # a class's own __hash__ stays (HardwareConfig hashes its fingerprint)
    assert HardwareConfig.__hash__ is not None and "fingerprint" in HardwareConfig.__hash__.__code__.co_names


def test_a_class_with_post_init_is_refused():
    # a record's __init__ is shared and runs no __post_init__: better refused than skipped
    with pytest.raises(TypeError, match="__post_init__"):
        @record
        class Checked:
            """Checked."""

            x: int

            def __post_init__(self):
                raise ValueError
