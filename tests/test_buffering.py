"""Weight buffering (compiler/buffering.py): on edge-256, boxes of a weight-heavy layer's
weights are copied from flash into free system SRAM, through on-chip bounce buffers, while the
layer norms and the softmax before it leave flash idle; its loads of them then come from
system SRAM. Compared with the same compiler without it, bit-exact and faster."""
import numpy as np

from npu_sim import api, zoo
from npu_sim.compiler import driver as compiler_driver
from npu_sim.compiler.loader import load_bytes
from npu_sim.isa.commands import DmaCopy
from oracle import run_reference


def test_weights_buffered_in_system_sram_during_flash_idle_steps(monkeypatch):
    cfg = api.load_config("edge-256")
    tosa = zoo.build("transformer", tokens=32, d_model=256, heads=4, d_ff=1024, layers=1)[0]
    program = api.compile_model(load_bytes(tosa, "net.tosa"), cfg)
    flash, sram = (program.memories.index(m) + 1 for m in ("flash", "system_sram"))
    copies = [c for c in program.commands if isinstance(c, DmaCopy)]
    staged = {c.dst.addr for c in copies if c.src.mem == 0 and c.dst.mem == sram
              and c.channel == 1}        # bounce buffer -> system SRAM, on the weights' queue
    assert staged and any(c.src.mem == flash and c.dst.mem == 0 for c in copies)
    # the reader (a MAC layer) loads those copies from system SRAM
    mac_layers = {i for i, layer in enumerate(program.layers) if layer.unit == "mac"}
    assert any(c.src.mem == sram and c.src.addr in staged and c.layer in mac_layers
               for c in copies)
    inputs = api.random_inputs(program, seed=1)
    buffered = api.simulate(program, cfg, inputs, check_hazards=True)
    names = [b.name for b in program.outputs]
    expected = run_reference(tosa, inputs, names)
    for name in names:
        np.testing.assert_array_equal(buffered.outputs[name], expected[name])
    monkeypatch.setattr(compiler_driver, "plan_buffering", lambda *args: None)
    plain = api.simulate(api.compile_model(load_bytes(tosa, "net.tosa"), cfg), cfg, inputs)
    assert buffered.report.cycles < plain.report.cycles
    for name in names:
        np.testing.assert_array_equal(buffered.outputs[name], plain.outputs[name])
