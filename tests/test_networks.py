"""Whole networks built with tosa-tools' serializer run bit-exactly through the simulator."""
import numpy as np
import pytest

from npu_sim.compiler.loader import load_bytes
from npu_sim import api, zoo
from oracle import run_reference

SMALL = {
    "mobilenet_v2": dict(width=0.35, resolution=64, num_classes=16),
    "resnet": dict(depth=10, resolution=32, width=8, num_classes=10),
    "transformer": dict(tokens=16, d_model=32, heads=2, d_ff=64),
    "ds_cnn": dict(channels=32),
}


def _check(tosa: bytes, meta: dict, configs):
    rng = np.random.default_rng(7)
    name, shape = meta["input"]["name"], meta["input"]["shape"]
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    expected = run_reference(tosa, {name: x}, meta["output_names"])
    for config in configs:
        cfg = api.load_config(config) if isinstance(config, str) else config
        program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
        outputs = api.simulate(program, cfg, {name: x}).outputs
        for out in meta["output_names"]:
            assert outputs[out].dtype == expected[out].dtype
            assert np.array_equal(outputs[out], expected[out]), (cfg.name, out)


@pytest.mark.parametrize("network", sorted(SMALL))
def test_network_bit_exact(network):
    tosa, meta = zoo.build(network, **SMALL[network])
    tiny = api.load_config("edge-256").with_overrides({"sram.size": "24 KiB"})
    _check(tosa, meta, ["default", "edge-256", tiny])


def test_embedded_default_bit_exact():
    path = zoo.default_model_path()
    info = zoo.default_model_info()
    meta = {"input": {"name": info["input_name"], "shape": info["input_shape"]},
            "output_names": [info["output_name"]]}
    _check(path.read_bytes(), meta, ["default"])


def test_a_program_run_again_in_one_process_gives_the_same_outputs():
    """A second run of one program (an NNAPI execution, a sweep's repeat) starts afresh: a
    cache of the output stage's tables once kept views of the first run's buffers, and this
    encoder's second run on edge-256 differed in 31,247 bytes."""
    tosa = zoo.build("transformer", tokens=128, d_model=256, heads=4, d_ff=512, layers=1)[0]
    cfg = api.load_config("edge-256")
    program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg, use_cache=False)
    inputs = api.random_inputs(program, seed=1)
    first, second = (api.simulate(program, cfg, inputs).outputs for _ in range(2))
    for name in first:
        np.testing.assert_array_equal(second[name], first[name], err_msg=name)
