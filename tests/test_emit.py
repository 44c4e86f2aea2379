"""The emitter's dependencies (compiler/emit.py) equal those of a byte-by-byte model of the
memories: each command waits for the latest command of every engine that wrote a byte it
reads, or wrote or read since the last write a byte it writes."""
import random

from npu_sim.compiler.emit import Emitter
from npu_sim.isa.commands import TensorView, dense

SIZE = 96


def _view(rng):
    mem = rng.randrange(2)
    if rng.random() < 0.1:
        return dense(mem, rng.randrange(SIZE), (0, 3), "int8")        # empty: no access
    if rng.random() < 0.3:                                             # strided rows
        rows, cols, stride = rng.randrange(1, 4), rng.randrange(1, 5), rng.randrange(5, 12)
        return TensorView(mem, rng.randrange(SIZE - rows * stride), (rows, cols), (stride, 1),
                          "int8")
    return dense(mem, rng.randrange(SIZE - 12), (rng.randrange(1, 12),), "int8")


def _expected(state, engine_of, reads, writes):
    deps = {}
    for views, is_write in ((reads, False), (writes, True)):
        for v in views:
            lo, hi = v.footprint()
            for b in range(lo, hi):
                writer, readers = state.get((v.mem, b), (None, {}))
                for cmd in [writer] + (list(readers.values()) if is_write else []):
                    if cmd is not None:
                        deps[engine_of[cmd]] = max(deps.get(engine_of[cmd], -1), cmd)
    return tuple(sorted(deps.values()))


def _record(state, cmd_id, engine, reads, writes):
    for v in reads:
        lo, hi = v.footprint()
        for b in range(lo, hi):
            writer, readers = state.get((v.mem, b), (None, {}))
            state[v.mem, b] = (writer, {**readers, engine: cmd_id})
    for v in writes:
        lo, hi = v.footprint()
        for b in range(lo, hi):
            state[v.mem, b] = (cmd_id, {})


def test_dependencies_match_a_byte_model():
    rng = random.Random(7)
    em, state, engine_of = Emitter(), {}, []
    for _ in range(600):
        kind = rng.randrange(3)
        if kind == 0:
            channel = rng.randrange(3)
            src, dst = _view(rng), _view(rng)
            reads, writes, engine = [src], [dst], f"dma{channel}"
            cmd_id = em.copy(src, dst, channel)
        elif kind == 1:
            dst = _view(rng)
            reads, writes, engine = [], [dst], "dma0"
            cmd_id = em.fill(dst, 0, 0)
        else:
            unit = rng.choice(["mac", "vector"])
            reads = [_view(rng) for _ in range(rng.randrange(1, 4))]
            writes = [_view(rng) for _ in range(rng.randrange(1, 3))]
            engine = unit
            cmd_id = em.compute(unit, "op", {f"i{k}": v for k, v in enumerate(reads)},
                                {f"o{k}": v for k, v in enumerate(writes)}, {})
        assert em.commands[cmd_id].deps == _expected(state, engine_of, reads, writes), cmd_id
        engine_of.append(engine)
        _record(state, cmd_id, engine, reads, writes)
