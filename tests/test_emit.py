"""The emitter's dependencies (compiler/emit.py) equal those of a byte-by-byte model of the
memories: each command waits for the latest command of every engine that wrote a byte it
reads, or wrote or read since the last write a byte it writes."""
import random

from npu_sim.compiler.emit import Emitter, HoistingEmitter
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


def _byte_model_deps(accesses):
    """Each command's dependencies by the byte model, in the given order."""
    state, engine_of, out = {}, [], []
    for engine, reads, writes in accesses:
        out.append(_expected(state, engine_of, reads, writes))
        engine_of.append(engine)
        _record(state, len(engine_of) - 1, engine, reads, writes)
    return out


def test_loads_placed_ahead_as_emitted_equal_the_program_reordered_and_resynchronised():
    """HoistingEmitter places each load as it is emitted; the program equals the one emitted
    in order, its loads then moved by the rule (after the latest dependency, behind the
    queue's earlier loads and its own step's commands; staged copies stay) and every
    dependency derived again by the byte model in the new order."""
    rng = random.Random(11)
    em, accesses, keys = HoistingEmitter(), [], []
    for n in range(800):
        if n % 40 == 0:
            em.layer += 1
        em.prefetching = rng.random() < 0.1
        kind, channel = rng.randrange(4), rng.randrange(3)
        if kind < 2:                            # loads (memory 1 -> on chip) and other copies
            src = _view(rng)
            src = src._replace(mem=1) if kind == 0 else src
            dst = _view(rng)._replace(mem=0) if kind == 0 else _view(rng)
            em.copy(src, dst, channel)
            accesses.append((f"dma{channel}", [src], [dst], channel,
                             src.mem != 0 and dst.mem == 0 and not em.prefetching))
        elif kind == 2:
            dst = _view(rng)
            em.fill(dst, 0, channel)
            accesses.append((f"dma{channel}", [], [dst], channel, False))
        else:
            reads = [_view(rng) for _ in range(rng.randrange(1, 4))]
            writes = [_view(rng) for _ in range(rng.randrange(1, 3))]
            em.compute("mac", "op", {f"i{k}": v for k, v in enumerate(reads)},
                       {f"o{k}": v for k, v in enumerate(writes)}, {})
            accesses.append(("mac", reads, writes, None, False))
        keys.append(em.layer)
    in_order = _byte_model_deps([a[:3] for a in accesses])
    place, last_load, own = [], {}, {}
    for i, ((_, _, _, queue, load), deps, layer) in enumerate(zip(accesses, in_order, keys)):
        key = float(i)
        if load:
            key = max(max(deps, default=-1) + 0.5, last_load.get(queue, -1.0),
                      own.get((queue, layer), -1.0))
            last_load[queue] = key
        if queue is not None:
            own[queue, layer] = key
        place.append(key)
    order = sorted(range(len(place)), key=lambda i: (place[i], i))
    assert order != list(range(len(order)))                  # some loads moved
    emitted = list(em.commands)
    commands = em.in_program_order()
    assert [id(c) for c in commands] == [id(emitted[i]) for i in order]
    assert [c.id for c in commands] == list(range(len(order)))
    assert [c.deps for c in commands] == _byte_model_deps([accesses[i][:3] for i in order])
    ids, deps = [c.id for c in commands], [c.deps for c in commands]
    again = em.in_program_order()        # renumbered once: a second call changes nothing
    assert again == commands
    assert [c.id for c in again] == ids and [c.deps for c in again] == deps


def test_a_load_placed_ahead_leaves_a_later_reader_of_its_bytes_their_latest():
    """A load passing a copy that reads the same bytes on its queue: in program order that copy
    reads them last, so a write of them waits for it, not for the load."""
    em = HoistingEmitter()
    em.layer = 0
    em.copy(dense(1, 0, (8,), "int8"), dense(1, 32, (8,), "int8"), 0)
    em.layer = 1
    em.copy(dense(1, 0, (8,), "int8"), dense(0, 0, (8,), "int8"), 0)   # a load: placed first
    em.fill(dense(1, 0, (8,), "int8"), 0, 1)
    commands = em.in_program_order()
    assert [c.dst.mem for c in commands[:2]] == [0, 1]
    assert commands[2].deps == (1,)
