"""The DMA queues' order: independent moves spread over the spare queues, long preloads keep
to the constants' queue, and a tile's store queued behind the loads (and halo moves) that can start before it, never
behind those that cannot (compiler/emit.py HoistingEmitter, compiler/lower.py)."""
from pathlib import Path

import numpy as np

from npu_sim.compiler import driver as compiler_driver
from npu_sim.compiler import lower as compiler_lower
from npu_sim.compiler import view_moves as compiler_view_moves
from npu_sim.compiler.emit import Emitter
from npu_sim.compiler.loader import load_bytes
from npu_sim.isa.commands import ONCHIP, DmaCopy
from npu_sim import api, zoo
from oracle import DType, GraphBuilder, run_reference, ts

DATA = Path(__file__).parent / "data"


def _compile(tosa: bytes, cfg):
    return api.compile_model(load_bytes(tosa, "net.tosa"), cfg)


def _timing(program, cfg):
    return api.simulate(program, cfg, timing_only=True).report


def test_independent_moves_run_on_the_spare_dma_queues(monkeypatch):
    """With a DMA channel no role takes (large-8k's fourth), data-movement steps alternate
    between it and the activations' queue: the moves of q, k and v to heads run side by side."""
    cfg = api.load_config("large-8k")
    tosa = zoo.build("transformer")[0]
    # q and v would be read in place by the matmuls (test_view_moves_...): all three moved
    monkeypatch.setattr(compiler_view_moves, "MIN_COMPUTE_RUN", 1 << 30)
    # and by the DMA, not the vector unit's permute (test_an_on_chip_transpose_...)
    monkeypatch.setattr(compiler_lower, "permute_cycles", lambda *a: float("inf"))
    program = _compile(tosa, cfg)
    index = {layer.name: i for i, layer in enumerate(program.layers)}
    moves = [index[f"layer0_attn_{n}_t"] for n in "qkv"]
    queues = {cmd.channel for cmd in program.commands
              if isinstance(cmd, DmaCopy) and cmd.layer in moves}
    assert len(queues) == 2
    spread = _timing(program, cfg)
    spans = [(row.start, row.end) for row in spread.layers
             if row.name in {f"layer0_attn_{n}_t" for n in "qkv"}]
    assert len(spans) == 3
    assert any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1:])
    monkeypatch.setattr(compiler_lower.Lowering, "_move_channel", lambda self: 0)
    assert spread.cycles < _timing(_compile(tosa, cfg), cfg).cycles


def _stores_and_what_is_queued_ahead(program):
    """Each store of a tile's output, with the commands of its step in its DMA queue placed
    between the compute it stores and it (a later step's loads go ahead where HoistingEmitter
    puts them), and whether each of those can start only after that compute
    ends: it depends on it, on a later command of its engine or on one that cannot start
    before, or is queued behind one. Moves within the buffer (a tile's halo rows) are left
    out: they go ahead of the store even when they wait for that compute."""
    cmds = program.commands
    engine = lambda c: c.unit if hasattr(c, "unit") else f"dma{c.channel}"  # noqa: E731
    for store in cmds:
        if not (isinstance(store, DmaCopy) and store.src.mem == ONCHIP and store.dst.mem != ONCHIP):
            continue
        computes = [d for d in store.deps if not isinstance(cmds[d], DmaCopy)]
        if not computes:          # no compute wrote it: not a tile's output
            continue
        root = max(computes)
        late, queues, ahead = {root}, set(), []
        for c in cmds[root + 1:store.id]:
            waits = engine(c) in queues or any(
                d in late or (d > root and engine(cmds[d]) == engine(cmds[root])) for d in c.deps)
            if waits:
                late.add(c.id)
                if isinstance(c, DmaCopy):
                    queues.add(engine(c))
            if isinstance(c, DmaCopy) and c.channel == store.channel and c.layer == store.layer \
                    and ONCHIP in (c.src.mem, c.dst.mem) and c.src.mem != c.dst.mem:
                ahead.append(waits)
        yield store, ahead


def _store_right_after_its_compute(self, src, dst, channel, compute):
    self.copy(src, dst, channel)


def test_a_tiles_store_waits_in_its_queue_behind_loads_that_can_start_before_it(monkeypatch):
    """Edge-256's feature-map loads and stores share one DMA queue, which runs in order. In
    MobileNetV2's cascaded blocks the next tile's input loads (its 1x1 expansion is computed on
    chip) need not wait for the last tile's compute; a store emitted right after that compute
    held them until it had ended and the store had moved. Queued behind them, it does not, and
    the output stays bit-exact."""
    tosa, meta = zoo.build("mobilenet_v2", width=0.5, resolution=96, num_classes=16)
    cfg = api.load_config("edge-256")
    program = _compile(tosa, cfg)
    held = 0
    for store, ahead in _stores_and_what_is_queued_ahead(program):
        assert not any(ahead), store
        held += bool(ahead)
    assert held >= 8, held
    cycles = _timing(program, cfg).cycles
    monkeypatch.setattr(Emitter, "hold_store", _store_right_after_its_compute)
    assert cycles < 0.99 * _timing(_compile(tosa, cfg), cfg).cycles
    name, shape = meta["input"]["name"], meta["input"]["shape"]
    x = np.random.default_rng(7).integers(-128, 128, shape, dtype=np.int8)
    expected = run_reference(tosa, {name: x}, meta["output_names"])
    outputs = api.simulate(program, cfg, {name: x}).outputs
    assert all(np.array_equal(outputs[o], expected[o]) for o in meta["output_names"])


def test_a_halo_move_goes_ahead_of_the_last_tiles_store(monkeypatch):
    """ExecuTorch's MobileNetV2 on edge-256 runs a cascaded depthwise conv in tiles of a few
    columns, each copying its halo column from the last tile's buffer on chip, in the feature
    maps' DMA queue: it can start only when the last tile's compute ends, as that tile's store
    can. Queued behind the store it waited for the whole store, and the array for it; queued
    ahead it does not (test_models checks the outputs)."""
    cfg = api.load_config("edge-256")
    model = DATA / "mbv2_050_128" / "model.tosa"
    program = api.compile_model(model, cfg, use_cache=False)
    stores = {c.id for c in program.commands if isinstance(c, DmaCopy)
              and c.src.mem == ONCHIP and c.dst.mem != ONCHIP}
    queues: dict[int, list] = {}              # each DMA queue's commands, in its order
    for c in program.commands:
        if isinstance(c, DmaCopy):
            queues.setdefault(c.channel, []).append(c)
    # a halo copy queued just ahead of the store of the tile it copies from (both wait for
    # that tile's compute)
    ahead = [c for queue in queues.values() for c, nxt in zip(queue, queue[1:])
             if nxt.id in stores and c.src.mem == ONCHIP == c.dst.mem
             and set(c.deps) & set(nxt.deps)]
    assert len(ahead) >= 8
    monkeypatch.setattr(Emitter, "_overtakes", staticmethod(lambda src, dst: False))
    behind = api.compile_model(model, cfg, use_cache=False)
    assert _timing(program, cfg).cycles < _timing(behind, cfg).cycles - 2000


def test_a_store_is_held_only_behind_loads_that_can_start_before_its_compute_ends(monkeypatch):
    """A GEMM on tpu-v4-core whose weight columns double-buffer: the next tile's weight load
    overwrites the buffer the last compute reads, so it can start only when that compute ends,
    as the store of the compute's output can. Queued ahead of the store it gains nothing and
    delays it, and the compute that reuses the store's output buffer waits (384x768x128: 10%
    more cycles); so nothing is queued ahead of a store that cannot start before it."""
    cfg = api.load_config("tpu-v4-core")
    m, n, k = 384, 768, 128
    g = GraphBuilder()
    a = g.tensor((1, m, k), DType.FP16, np.zeros((1, m, k), np.float16))
    b = g.tensor((1, k, n), DType.FP16, np.zeros((1, k, n), np.float16))
    zeros = [g.tensor([1], DType.FP16, np.zeros(1, np.float16), is_const=True) for _ in range(2)]
    c = g.output((1, m, n), DType.FP16)
    attr = ts.TosaSerializerAttribute()
    attr.MatMulAttribute()
    g.op("MATMUL", [a, b, *zeros], [c], attr)
    tosa = g.serialize()
    program = _compile(tosa, cfg)
    queued = list(_stores_and_what_is_queued_ahead(program))
    assert len(queued) >= 3 and not any(any(ahead) for _, ahead in queued)
    # a store held behind all the next tile's loads, as before, is slower
    held = _timing(program, cfg).cycles
    monkeypatch.setattr(Emitter, "_waits", lambda self, ids, queue: False)
    assert held < 0.95 * _timing(_compile(tosa, cfg), cfg).cycles


def test_preloads_keep_to_the_constants_queue(monkeypatch):
    """large-8k's DMA channel moves 128 B/cycle, HBM 200, and a fourth channel no role takes.
    Staged constants still come in on the constants' queue alone, in the order they are read:
    chunks taking the spare queue in turn load faster in all but bring the boxes a streamed
    reader waits for out of order (this transformer's QKV weights beside its FFN's)."""
    cfg = api.load_config("large-8k")
    tosa = zoo.build("transformer", d_model=256, heads=4, d_ff=1024)[0]

    def preload_queues(program):
        return {c.channel for c in program.commands if isinstance(c, DmaCopy)
                and c.src.mem != ONCHIP and c.dst.mem == ONCHIP and c.src.nbytes >= 16 * 1024}

    ordered = _compile(tosa, cfg)
    assert preload_queues(ordered) == {1}
    copy = Emitter.copy

    def in_turn(self, src, dst, channel):        # every other preload chunk on the spare queue
        if self.prefetching and src.nbytes >= 16 * 1024:
            self.turn = getattr(self, "turn", 0) + 1
            channel = 3 if self.turn % 2 else channel
        return copy(self, src, dst, channel)

    monkeypatch.setattr(Emitter, "copy", in_turn)
    spread = _compile(tosa, cfg)
    assert preload_queues(spread) == {1, 3}
    assert _timing(ordered, cfg).cycles < _timing(spread, cfg).cycles


def test_weights_staged_after_a_transfer_bound_step_wait_for_its_loads(monkeypatch):
    """image_example1's float input QUANTIZE is DRAM-bound (36 KB loaded, vector work to
    spare). The weights staged after it for later layers wait for its last input load:
    sharing DRAM with it had only delayed the first conv, which reads its rows. Those of the
    next layer do not wait."""
    model = Path(__file__).parent / "data" / "tflite" / "image_example1" / "model.tflite"
    cfg = api.load_config("default")
    program = api.compile_model(model, cfg, use_cache=False)
    quantize_loads = [c.id for c in program.commands if isinstance(c, DmaCopy)
                      and c.layer == 0 and c.src.mem != ONCHIP]
    waiting = [c for c in program.commands if isinstance(c, DmaCopy) and c.layer >= 2
               and quantize_loads[-1] in c.deps]
    assert waiting and all(quantize_loads[-1] not in c.deps for c in program.commands
                           if isinstance(c, DmaCopy) and c.layer == 1)
    monkeypatch.setattr(compiler_driver, "_last_loads_if_bound", lambda *args: {})
    sharing = api.compile_model(model, cfg, use_cache=False)
    assert _timing(program, cfg).cycles < _timing(sharing, cfg).cycles
