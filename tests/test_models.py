"""Real frontend output: the ExecuTorch-emitted int8 networks (data/MODELS.md) run bit-exactly on
every preset, with the reference model's stored outputs as the oracle."""
import json
from pathlib import Path

import numpy as np
import pytest

from npu_sim import api

DATA = Path(__file__).parent / "data"
MODELS = ["small_cnn", "mbv2_050_128", "attn_block", "mbv3_small_96", "mha_block",
          "upsample_concat", "misc_ops"]


def _run(model, config):
    desc = json.loads((DATA / model / "desc.json").read_text())
    cfg = api.load_config(config)
    program = api.compile_model(DATA / model / "model.tosa", cfg)
    x = np.load(DATA / model / desc["ifm_file"][0])
    result = api.simulate(program, cfg, {desc["ifm_name"][0]: x})
    return result, np.load(DATA / model / desc["ofm_file"][0]), desc["ofm_name"][0]


@pytest.mark.parametrize("config", ["default", "edge-256", "large-8k"])
@pytest.mark.parametrize("model", MODELS)
def test_frontend_model_bit_exact(model, config):
    result, expected, name = _run(model, config)
    out = result.outputs[name]
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert np.array_equal(out, expected)
    report = result.report      # no schedule beats its bounds, on real frontend graphs too
    assert report.cycles >= report.roofline["attainable"]["cycles"] >= report.roofline["cycles"] > 0


def test_tiny_buffer_still_exact():
    cfg = api.load_config("edge-256").with_overrides({"sram.size": "16 KiB"})
    desc = json.loads((DATA / "small_cnn" / "desc.json").read_text())
    program = api.compile_model(DATA / "small_cnn" / "model.tosa", cfg)
    assert max(layer.tiles for layer in program.layers) > 4      # the buffer forces tiling
    x = np.load(DATA / "small_cnn" / "input-0.npy")
    out = api.simulate(program, cfg, {desc["ifm_name"][0]: x}).outputs[desc["ofm_name"][0]]
    assert np.array_equal(out, np.load(DATA / "small_cnn" / "ref-result-0.npy"))


def test_fusion_and_placement_of_mobilenet():
    cfg = api.load_config("default")
    program = api.compile_model(DATA / "mbv2_050_128" / "model.tosa", cfg)
    pairs = [layer.ops[i:i + 2] for layer in program.layers for i in range(len(layer.ops))]
    # every conv carries its output stage
    assert sum(p in (["CONV2D", "RESCALE"], ["DEPTHWISE_CONV2D", "RESCALE"]) for p in pairs) == 53
    # each expanding block's 1x1 conv is cascaded into its depthwise conv
    cascaded = [layer for layer in program.layers
                if layer.ops == ["CONV2D", "RESCALE", "DEPTHWISE_CONV2D", "RESCALE"]]
    assert len(cascaded) == 16
    assert all(layer.unit != "host" for layer in program.layers)
    assert sum(layer.macs for layer in program.layers) == 32578560   # info.json's MAC count


_NO_CYCLES = """
import gc, sys
from npu_sim import api
from npu_sim.isa.errors import DoesNotFitError
model = sys.argv[1]
gc.collect()
api.compile_model(model, api.load_config("edge-256"), use_cache=False)
assert gc.isenabled()
assert gc.collect() == 0, "cyclic garbage"
tiny = api.load_config("edge-256").with_overrides({"sram.size": "1 KiB"})
try:
    api.compile_model(model, tiny, use_cache=False)
    raise SystemExit("compiled in 1 KiB")
except DoesNotFitError:
    pass
assert gc.isenabled()
"""


def test_compiling_leaves_no_cyclic_garbage_and_the_collector_as_it_was():
    """The compiler pauses the cycle collector (compiler/driver.py): that is only sound while
    a compile makes no cyclic garbage, and the collector must come back on, refused or not.
    In a process of its own: another test's threads may leave garbage for any collection."""
    import subprocess
    import sys
    model = DATA / "mbv2_050_128" / "model.tosa"
    r = subprocess.run([sys.executable, "-c", _NO_CYCLES, str(model)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-2000:]
