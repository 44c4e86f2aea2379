"""Schedule optimisations pay where they should: weight prefetch (compiler/prefetch.py) and
cascading (compiler/cascade.py), each compared with the same compiler without it, and staged
weight prefixes stay bit-exact."""
import numpy as np
import pytest

import compiler.driver
from compiler.placement import Placement
from compiler.loader import load_bytes
from isa.commands import ONCHIP, DmaCopy
from npu_sim import api, zoo
from oracle import run_reference


def _compile(tosa: bytes, cfg):
    return api.compile_model(load_bytes(tosa, "net.tosa"), cfg)


def _timing(program, cfg):
    return api.simulate(program, cfg, timing_only=True).report


@pytest.fixture(scope="module")
def ds_cnn():
    return zoo.build("ds_cnn", channels=32)[0]


def test_prefetch_loads_weights_during_earlier_layers(ds_cnn, monkeypatch):
    cfg = api.load_config("default")
    program = _compile(ds_cnn, cfg)
    first_compute = {}
    for cmd in program.commands:
        if not isinstance(cmd, DmaCopy):
            first_compute.setdefault(cmd.layer, cmd.id)
    early = {cmd.layer for cmd in program.commands if isinstance(cmd, DmaCopy)
             and cmd.dst.mem == ONCHIP and cmd.src.mem != ONCHIP
             and cmd.layer > 0 and cmd.id < first_compute[cmd.layer - 1]}
    assert early, "no layer's weights are queued before the previous layer computes"
    monkeypatch.setattr(compiler.driver, "plan_prefetch", lambda *args: {})
    assert _timing(program, cfg).cycles < _timing(_compile(ds_cnn, cfg), cfg).cycles


def test_cascade_keeps_the_expanded_tensor_off_chip_memory(monkeypatch):
    tosa, _ = zoo.build("mobilenet_v2", width=0.35, resolution=64, num_classes=16)
    cfg = api.load_config("default").with_overrides({"sram.size": "64 KiB"})
    cascaded = _timing(_compile(tosa, cfg), cfg)
    monkeypatch.setattr(compiler.driver, "fuse_pointwise_producers", lambda graph, steps: steps)
    separate = _timing(_compile(tosa, cfg), cfg)
    assert cascaded.bytes_moved["dram"]["read"] < separate.bytes_moved["dram"]["read"]
    assert cascaded.cycles < separate.cycles
    assert cascaded.total_macs == separate.total_macs


def test_staged_weight_prefixes_are_bit_exact(monkeypatch):
    """On a 16 KiB buffer most weights are too large to stage whole: their leading output
    channels are staged instead, and the layers read those boxes from the copy."""
    staged = []
    real = Placement.stage

    def recording(placement, name, *args, rows=None):
        done = real(placement, name, *args, rows=rows)
        if done and rows is not None:
            staged.append(name)
        return done

    monkeypatch.setattr(Placement, "stage", recording)
    tosa, meta = zoo.build("mobilenet_v2", width=0.35, resolution=64, num_classes=16)
    cfg = api.load_config("default").with_overrides({"sram.size": "16 KiB"})
    program = _compile(tosa, cfg)
    assert len(staged) >= 5
    name, shape = meta["input"]["name"], meta["input"]["shape"]
    x = np.random.default_rng(3).integers(-128, 128, shape, dtype=np.int8)
    expected = run_reference(tosa, {name: x}, meta["output_names"])
    outputs = api.simulate(program, cfg, {name: x}).outputs
    for out in meta["output_names"]:
        assert np.array_equal(outputs[out], expected[out])
