"""The compiler pipeline: load -> validate -> rewrite -> schedule -> allocate -> emit."""
from __future__ import annotations

import dataclasses
import gc
import math

import numpy as np

from npu_sim.isa.commands import ONCHIP, DmaCopy
from npu_sim.isa.errors import DoesNotFitError, ModelError, UnsupportedError
from npu_sim.isa.opcodes import mac_problem
from npu_sim.isa.dtypes import STORAGE, itemsize
from npu_sim.isa.operators import OPERATORS
from npu_sim.isa.program import Binding, Layer, Program, Segment

from .batch_split import split_batches
from .buffering import Buffered, plan_buffering, preload_bytes
from .cascade import (cascade_by_estimate, estimate_total, fuse_producers, step_estimate,
                      step_plan)
from .emit import CommandLimit, HoistingEmitter
from .fold import fold_constants, remove_noop_reshapes
from .ir import Graph, Tensor
from .lower import Lowering
from .lowering import REWRITES
from .placement import Placement
from .prefetch import plan_prefetch
from .rank_align import align_to_conv_views
from .steps import Step, plan_steps, stage_table_name
from .validate import validate

# A config whose tiles are so small that the program passes this many commands is refused
# as soon as it does: compiling and simulating it would take minutes and gigabytes
# (bench/bounded_compile.py measures the worst case the README states). A graph of more
# multiply-accumulates may take one command for each MACS_PER_COMMAND of them: a network's
# honest tiling grows with its work (ResNet-50 on edge-256 takes some 78k commands, one per
# 52k MACs), tiles too small for the buffer grow with the buffer's smallness.
MAX_COMMANDS = 80_000
MACS_PER_COMMAND = 32_768
# A batch split (compiler/batch_split.py) is kept where its pipeline's estimate saves at least
# this share of what the region costs apart: the estimates leave out what the copies add
# beside their compute steps (each loads its small constants again, queued behind other
# transfers; their inputs' slices and outputs' concatenation, where those are not views).
SPLIT_GAIN = 0.3

def resident_share(config) -> int:
    """Bytes of the on-chip buffer that tensors living across steps may take: the config's
    schedule.resident_fraction of it, leaving tiles schedule.tile_floor unless that is under
    half the buffer."""
    size, schedule = config.sram.size, config.schedule
    return max(min(int(size * schedule.resident_fraction), size - schedule.tile_floor),
               size // 2) // 16 * 16


def _out_channels(graph: Graph, step: Step) -> int:
    return graph.tensors[step.main.outputs[0]].shape[-1]


def _add_stage_table(graph: Graph, step: Step, tables: dict):
    """Pack bias, rescale multiplier and shift per output channel into one constant table;
    steps whose tables are identical (the heads of a split attention) share one (`tables`:
    contents -> name), so it is loaded or staged once."""
    oc = _out_channels(graph, step)
    out_dtype = graph.tensors[step.main.outputs[0]].dtype
    if "array_acc" in step.main.attrs:      # a float layer: its bias in out_t, no rescale
        table = np.zeros((oc, 3), dtype=STORAGE[out_dtype])
        if step.main.op != "MATMUL":
            table[:, 0] = np.broadcast_to(graph.const(step.main.inputs[2]).reshape(-1), (oc,))
        _share_table(graph, step, table, out_dtype, tables)
        return
    wide = out_dtype == "int48"
    table = np.zeros((oc, 3), dtype=np.int64 if wide else np.int32)
    if step.main.op != "MATMUL":
        table[:, 0] = np.broadcast_to(graph.const(step.main.inputs[2]).reshape(-1), (oc,))
    if step.rescale is not None:
        for col, name in ((1, step.rescale.inputs[1]), (2, step.rescale.inputs[2])):
            table[:, col] = np.broadcast_to(graph.const(name).reshape(-1), (oc,))
    _share_table(graph, step, table, "int48" if wide else "int32", tables)


def _share_table(graph: Graph, step: Step, table: np.ndarray, dtype: str, tables: dict):
    key = (dtype, table.shape, table.tobytes())
    if key in tables:
        step.stage_table = tables[key]
        return
    name = tables[key] = stage_table_name(step)
    graph.tensors[name] = Tensor(name, table.shape, dtype, table)


def macs_of(graph: Graph, step: Step) -> int:
    return _main_macs(graph, step) + (macs_of(graph, step.producer) if step.producer else 0)


def _main_macs(graph: Graph, step: Step) -> int:
    """The layer's multiply-accumulates: its array problem's m x n x k, except that a
    transposed convolution's input pixel meets each weight once (its array problem counts the
    taps every output could see)."""
    op, t = step.main, graph.tensors
    if step.kind != "mac":
        return 0
    if op.op == "TRANSPOSE_CONV2D":
        return int(np.prod(t[op.inputs[0]].shape, dtype=np.int64)
                   * np.prod(t[op.inputs[1]].shape[:3], dtype=np.int64))
    _, m, n, k, *_ = array_problems(graph, dataclasses.replace(step, producer=None))[0]
    return m * n * k


def array_problems(graph: Graph, step: Step) -> list[list]:
    """What a MAC step asks of the array, whole-layer: [kind, outputs m, channels n,
    reduction terms k, activation, weight and output dtypes] per operator, as
    npu_sim.cost.array_cycles maps it.
    The report bounds the layer's compute with it, free of the tiling's quantisation."""
    first = array_problems(graph, step.producer) if step.producer else []
    if step.kind != "mac":
        return first
    op, t = step.main, graph.tensors
    problem = mac_problem(OPERATORS[op.op].opcode, t[op.outputs[0]].shape,
                          t[op.inputs[1]].shape, tuple(op.attrs.get("stride", (1, 1)))[-2:])
    return first + [
        [*problem, t[op.inputs[0]].dtype, t[op.inputs[1]].dtype, t[step.output].dtype]]


def _check_precision(graph: Graph, steps, array) -> None:
    """Refuse a MAC layer whose operand types the array has no pass for (mac_array.precision),
    or whose float accumulator is narrower than the one the graph asks for; record the
    accumulator a float layer runs in (`array_acc`: its PEs' own, at least as wide)."""
    for step in steps:
        for s in (step, step.producer) if step.producer else (step,):
            if s.kind == "mac":
                act, weight = (graph.tensors[n].dtype for n in s.main.inputs[:2])
                pair = f"{act}x{weight}"
                if pair not in array.precision:
                    raise UnsupportedError(
                        f"layer '{s.output}' ({s.main.op}): the MAC array has no {act} x {weight} "
                        f"(mac_array.precision lists {', '.join(array.precision)})")
                if pair in array.float_acc:
                    want = s.main.attrs.get("acc_type") if s.main.op != "MATMUL" else \
                        graph.tensors[s.main.outputs[0]].dtype
                    have = array.float_acc[pair]
                    if want == "fp32" and have != "fp32":
                        raise UnsupportedError(
                            f"layer '{s.output}' ({s.main.op}): the graph accumulates {pair} in fp32, "
                            f"the MAC array in {have} (mac_array.precision.{pair}.acc)")
                    s.main.attrs["array_acc"] = have


def rewrite_operators(graph: Graph) -> None:
    """Replace each operator the hardware has no unit for by the operators that compute it
    (compiler/lowering REWRITES: FFT2D and RFFT2D become DFT GEMMs)."""
    ops = []
    for op in graph.operators:
        ops += REWRITES[op.op](graph, op) if op.op in REWRITES else [op]
    graph.operators = ops


def compile_graph(graph: Graph, config, model_name: str = "", validated: bool = False) -> Program:
    """Compile a loaded graph for `config` (npu_sim.config.HardwareConfig). `validated`: the
    caller has run validate() on this graph, as loaded, for config's TOSA target (a sweep
    compiling copies of one network for many designs), so it is not run again.

    Python's cycle collector is paused meanwhile: a compile makes no cyclic garbage (the
    bench networks leave none), but it makes many objects that live until it returns, and
    the collector would walk all of them over and over (ResNet-50 on edge-256, 63k commands:
    about a quarter of the compile's CPU time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _compile_graph(graph, config, model_name, validated)
    finally:
        if enabled:
            gc.enable()


def _compile_graph(graph: Graph, config, model_name: str, validated: bool) -> Program:
    # e.g. a TFLite file whose subgraph lost its tensors (a graph writing variables has effects)
    if not graph.outputs and not any(t.variable for t in graph.tensors.values()):
        raise ModelError(f"{graph.source or 'model'}: the graph has no outputs and writes no "
                         "variables, so there is nothing to compute")
    if not validated:
        validate(graph, config.tosa.profiles, config.tosa.extensions, config.tosa.level)
    rewrite_operators(graph)
    fold_constants(graph)
    remove_noop_reshapes(graph)
    align_to_conv_views(graph)
    resident = resident_share(config)
    # both before `graph` gains stage tables
    trial, pipelined = split_batches(graph, resident)
    computing = split_batches(graph, resident, from_convs=True) if pipelined else (trial, pipelined)
    steps, placed = _steps_placed(graph, config, resident)
    if pipelined:
        try:
            split_steps, split_placed = _steps_placed(trial, config, resident, pipelined)
        except DoesNotFitError:
            pipelined = frozenset()
        else:
            apart = estimate_total(steps, placed)[0]
            pipelined_total, rest = estimate_total(split_steps, split_placed)
            if pipelined_total < apart - SPLIT_GAIN * (apart - rest):
                graph, steps, placed = trial, split_steps, split_placed
                graph, steps, placed, pipelined = _heads_computing(
                    computing, config, resident, (graph, steps, placed, pipelined))
            else:
                pipelined = frozenset()
    fused, fused_placed = cascade_by_estimate(
        graph, steps, resident, placed,
        lambda candidate: _place(graph, candidate, config, placed[1], pipelined))
    try:
        return _program(graph, config, model_name, fused, fused_placed)
    except (CommandLimit, DoesNotFitError) as failure:
        if fused is steps:
            if isinstance(failure, CommandLimit):
                raise _too_many(failure, config) from None
            raise
    # A cascaded conv's tiles are smaller: where they pass the limit of commands (or its
    # staged constants find no room), the convs stay apart, as placed before.
    try:
        return _program(graph, config, model_name, steps, placed)
    except CommandLimit as limit:
        raise _too_many(limit, config) from None


def _heads_computing(computing: tuple, config, resident: int, split: tuple) -> tuple:
    """(graph, steps, placement, pipelined tensors) of the split whose heads compute their
    inputs from convs (compiler/head_source.py) where its pipeline's estimate beats that of
    the split slicing them (`split`), else `split`: each head's convs give the array work
    beside the vector unit's softmaxes, but each pays its own fill and setups."""
    graph, pipelined = computing
    if pipelined == split[3]:
        return split                # no input of the regions comes from a conv
    try:
        steps, placed = _steps_placed(graph, config, resident, pipelined)
    except DoesNotFitError:
        return split
    if _pipeline_estimate(steps, placed) < _pipeline_estimate(split[1], split[2]):
        return graph, steps, placed, pipelined
    return split


def _steps_placed(graph: Graph, config, resident: int, pipelined=frozenset()):
    """The graph's steps, with their stage tables, and where they are placed (_place())."""
    steps = fuse_producers(graph, plan_steps(graph), resident, config.sram.size - resident)
    _check_precision(graph, steps, config.mac_array)
    tables: dict = {}
    for step in steps:
        if step.kind == "mac":
            _add_stage_table(graph, step, tables)
        if step.producer and step.producer.kind == "mac":
            _add_stage_table(graph, step.producer, tables)
    return steps, _place(graph, steps, config, None, pipelined)


def _pipeline_estimate(steps: list[Step], placed) -> float:
    """The compute steps' time by the tiler's estimates: a pipeline's steps in the time of its
    busiest resource's share, the array's compute, the vector unit's or the memory ports'
    transfers (each step's loads run ahead during the others' compute: compiler/prefetch.py
    stages the heads' weights), the other steps one after another."""
    placement, lowering, _ = placed
    rest, shares = 0.0, {"mac": 0.0, "vector": 0.0, "ports": 0.0}
    for i, step in enumerate(steps):
        if step.kind not in ("mac", "vector"):
            continue
        if step.output not in placement.pipelined:
            rest += step_estimate(placement, lowering, step, i)
            continue
        plan = step_plan(placement, lowering, step, i)
        if plan is None:
            return math.inf
        shares[step.kind] += plan.compute
        shares["ports"] += plan.transfer
    return rest + max(shares.values())


def _together(staged: list[tuple], streamed: dict) -> list[list[tuple]]:
    """The preloads after a step, (constant, reader, part) in queue order, grouped: the
    streamed constants of one reader (whole copies in its boxes) go together, taking turns
    box by box; every other preload alone."""
    groups: list[list[tuple]] = []
    joins = None                    # the reader whose streamed constants the last group holds
    for item in staged:
        name, reader, part = item
        if part is None and name in streamed:
            if joins == reader:
                groups[-1].append(item)
                continue
            joins = reader
        else:
            joins = None
        groups.append([item])
    return groups


def command_limit(graph: Graph, steps: list[Step]) -> int:
    """The most commands a program of these steps may take."""
    return max(MAX_COMMANDS, sum(macs_of(graph, step) for step in steps) // MACS_PER_COMMAND)


def _too_many(failure: CommandLimit, config) -> DoesNotFitError:
    layer, limit = failure.args
    return DoesNotFitError(
        f"layer '{layer}': the program passes {limit:,} commands by this layer, at most "
        f"that many are compiled (the tiles are too small in {config.sram.size:,} B); use a "
        f"config with a larger sram.size")


def _program(graph: Graph, config, model_name: str, steps: list[Step], placed) -> Program:
    """The program of `steps`, placed as `placed` (_place()) has them."""
    placement, lowering, emitter = placed
    preloads = plan_prefetch(graph, steps, placement, lowering)
    riders = plan_buffering(graph, steps, placement, lowering, preloads, lowering.memory_cost)
    placement.widen_workspaces()
    layer_of, count = [], 0             # step index -> index of its layer (aliases have none)
    filled = {target for target, _, _ in placement.written.values()}
    emits = [step.kind != "alias" and step.output not in placement.virtual
             and step.output not in filled for step in steps]
    for step, emitted in zip(steps, emits):
        layer_of.append(count)
        count += emitted
    layers, read_before = [], {}
    plans = [_tile_plan(step, lowering, placement.workspaces[i][1])
             for i, step in enumerate(steps)]
    compute = [0.0 if plan is None else plan.compute for plan in plans]
    for name, reader, part in preloads.get(-1, []):     # what the first step reads
        emitter.layer = layer_of[reader]
        try:
            lowering.preload([(name, part)])
        except CommandLimit:
            raise CommandLimit(steps[reader].output, emitter.limit) from None
    for index, step in enumerate(steps):
        try:
            if step.kind == "dma" and emits[index]:
                # A data-movement step's copies hold the DMA queues for the whole step, and a
                # queue runs in order: the next step's constants go ahead of them (their room
                # is staged from this step on), so that step can start on the first bands moved.
                staged = preloads.get(index, [])
                preloads[index] = [item for item in staged
                                   if layer_of[item[1]] != layer_of[index] + 1]
                for group in _together([item for item in staged
                                        if layer_of[item[1]] == layer_of[index] + 1],
                                       placement.streamed):
                    emitter.layer = layer_of[group[0][1]]
                    lowering.preload([(name, part) for name, _, part in group])
            first_command = len(emitter.commands)
            if emits[index]:
                emitter.layer = layer_of[index]
                tiles, reads = lowering.lower(step, placement.workspaces[index], [
                    (layer_of[reader], name, part) for name, reader, part in riders.get(index, ())])
                layers.append(Layer(name=step.output, ops=step.ops, unit=step.kind,
                                    macs=macs_of(graph, step),
                                    array_problems=array_problems(graph, step),
                                    min_bytes=_min_bytes(graph, step, placement, read_before,
                                                         reads),
                                    tiles=tiles))
            behind = _last_loads_if_bound(emitter.commands[first_command:], plans[index],
                                          config)
            queued = 0.0                # cycles of the loads waiting behind them
            for group in _together(preloads.get(index, []), placement.streamed):
                name, reader, part = group[0]
                emitter.layer = layer_of[reader]     # its bytes and energy are the reader's
                mem = placement.home(name).mem
                emitter.behind = None
                if mem in behind and not isinstance(part, Buffered):
                    # only loads the steps between then still hide
                    cycles = sum(preload_bytes(graph, placement, n, p) for n, _, p in group) \
                        * lowering.memory_cost(mem)
                    if queued + cycles <= sum(compute[index + 1:reader]):
                        emitter.behind, queued = behind[mem], queued + cycles
                lowering.preload([(n, p) for n, _, p in group])
            emitter.behind = None
        except CommandLimit:
            raise CommandLimit(step.output, emitter.limit) from None
    memories = list(config.memories)
    sizes = [config.sram.size] + [0] * len(memories)
    sizes[placement.weights_id] = max(sizes[placement.weights_id], placement.weights_bytes)
    sizes[placement.fm_id] = max(sizes[placement.fm_id], placement.fm_bytes)
    return Program(
        memories=memories, memory_sizes=sizes, commands=emitter.in_program_order(),
        segments=[Segment(m, a, d) for m, a, d in placement.const_segments()],
        # where the caller writes it (a staged input's readers read its copy on chip)
        inputs=[Binding(n, placement.home(n)) for n in graph.inputs],
        outputs=[Binding(n, placement.view(n)) for n in graph.outputs],
        variables=[Binding(graph.tensors[n].variable_name or n, placement.view(n))
                   for n in placement.variables],
        layers=layers,
        meta={"model": model_name, "config": config.name, "config_fingerprint": config.fingerprint(),
              "clock_mhz": config.clock_mhz, "resident_bytes": resident_share(config),
              "input_dtypes": {n: graph.tensors[n].dtype for n in graph.inputs},
              "output_dtypes": {n: graph.tensors[n].dtype for n in graph.outputs}})


def _place(graph: Graph, steps: list[Step], config, searches: Lowering | None = None,
           pipelined: frozenset[str] = frozenset()):
    """(placement, lowering, emitter) of `steps`: where each tensor lives and how steps are
    tiled there (reusing the tile searches of `searches`, a lowering of the same graph)."""
    memories = list(config.memories)
    placement = Placement(graph, steps, memories, config.placement.weights,
                          config.placement.feature_maps, config.sram.size,
                          resident_share(config),
                          {n: m.size for n, m in config.memories.items()}, pipelined)

    def memory_cost(mem: int) -> float:
        """DMA cycles per byte from memory `mem` (0: on chip, free for the search)."""
        if mem == 0:
            return 0.0
        return 1.0 / min(config.memory_bytes_per_cycle(memories[mem - 1]),
                         config.dma.bytes_per_cycle)

    def port_cost(mem: int) -> float:
        """Cycles per byte of memory `mem`'s port alone (0: on chip)."""
        return 1.0 / config.memory_bytes_per_cycle(memories[mem - 1]) if mem else 0.0

    def cost_per_byte(name: str) -> float:
        loc = placement.find(name)
        return 0.0 if loc is None else memory_cost(loc.mem)

    emitter = HoistingEmitter(limit=command_limit(graph, steps))
    lowering = Lowering(graph, placement, emitter, config, cost_per_byte,
                        tile_overhead=config.dma.setup_cycles + 16, memory_cost=memory_cost,
                        handoffs=_handoffs(steps), room_slack=config.schedule.room_slack,
                        port_cost=port_cost, searches=searches)
    return placement, lowering, emitter


def _handoffs(steps: list[Step]) -> set[str]:
    """Outputs of the MAC and vector steps that read from or feed a step on the other engine
    (through reshapes), and of the vector steps chained to those through other vector steps
    (a softmax or layer norm between two MAC layers): tiling those by rows lets the two
    engines overlap, row tile by row tile along the whole chain. A step reading a
    data-movement step's output (an input TRANSPOSE, moved block by block of rows) is tiled
    by rows too, so it starts on the first blocks moved instead of after the whole copy."""
    made_by = {step.output: step for step in steps}
    out, links = set(), {}
    for step in steps:
        if step.kind not in ("mac", "vector"):
            continue
        for name in step.inputs:
            src = made_by.get(name)
            while src is not None and src.kind == "alias":
                src = made_by.get(src.main.inputs[0])
            if src is not None and src.kind == "dma":     # a layout op's blocks, in rows too
                out.add(step.output)
                continue
            if src is None or src.kind not in ("mac", "vector"):
                continue
            if src.kind != step.kind:
                out |= {src.output, step.output}
            elif step.kind == "vector":
                links.setdefault(src.output, set()).add(step.output)
                links.setdefault(step.output, set()).add(src.output)
    todo = [n for n in out if n in links]
    while todo:
        for n in links.pop(todo.pop(), ()):
            if n not in out:
                out.add(n)
                todo.append(n)
    return out


def _tile_plan(step: Step, lowering, workspace: int):
    """A tiled step's tile plan in `workspace` bytes (the lowering's, searched once); None for
    other steps."""
    return lowering.plan(step, workspace)[3] if step.kind in ("mac", "vector") else None


def _last_loads_if_bound(commands: list, plan, config) -> dict[int, int]:
    """Per external memory, the last load from it among a step's `commands` when its time is
    its transfers (by its tile `plan`): the weights staged after it from that memory wait for
    it, as sharing the memory with its loads would only delay it (a float input's QUANTIZE,
    each byte loaded once, vector work to spare), while the layers after it leave the memory
    idle. Empty for other steps. No memory whose loads take the step less than a load's setup
    and latency, which waiting would add to the staged loads and sharing would not, nor one
    faster than a DMA channel (large-8k's HBM), which the step's loads leave room in."""
    if plan is None or plan.transfer < plan.compute:
        return {}
    memories, last = list(config.memories), {}
    for command in commands:
        if (isinstance(command, DmaCopy) and command.src.mem != ONCHIP
                and command.dst.mem == ONCHIP):
            last[command.src.mem] = command.id
    return {mem: cmd for mem, cmd in last.items()
            if plan.transfer >= config.dma.setup_cycles
            + config.memory_latency_cycles(memories[mem - 1])
            and config.memory_bytes_per_cycle(memories[mem - 1]) <= config.dma.bytes_per_cycle}


def _min_bytes(graph: Graph, step: Step, placement: Placement, read_before: dict[str, int],
               reads: frozenset | None) -> dict[str, int]:
    """Bytes this step must move across each external memory even with unlimited buffering:
    the graph outputs it writes, and of the constants and graph inputs it reads through
    memory (`reads`; None: all it reads) the bytes it must read (a slice or a strided window
    reads only part) that earlier steps may not have brought on chip already (`read_before`:
    per tensor, what earlier steps had to read). A per-tensor multiplier, shift or zero point
    travels in the command: counting its bytes had put the bound above flash-bound runs."""
    sources = {placement.root(n) for n in graph.inputs}
    sinks = {placement.root(n) for n in graph.outputs}
    need: dict[str, int] = {}

    def charge(name: str, nbytes: int) -> None:
        mem = placement.memories[placement.home(name).mem - 1]
        need[mem] = need.get(mem, 0) + nbytes

    for name in dict.fromkeys([*step.inputs, step.output]):   # in order: the report's key order
        root = placement.root(name)
        whole = graph.tensors[root].nbytes
        if name != step.output and (graph.tensors[root].is_const or root in sources) and (
                reads is None or name in reads):
            must = min(whole, _must_read(graph, step, name))
            before = read_before.get(root, 0)
            charge(name, max(0, must - min(whole, before)))
            read_before[root] = before + must
        elif name == step.output and root in sinks and root not in sources:
            charge(name, whole)
    return need


def _must_read(graph: Graph, step: Step, name: str) -> int:
    """Bytes of `name` a step cannot compute without: all of them, but the parts a SLICE or
    GATHER selects, the rows and columns a strided window touches, and none for an alias."""
    if step.kind == "alias":
        return 0
    tensors = graph.tensors
    for op in ([step.producer.main] if step.producer else []) + [step.main]:
        if not op.inputs or op.inputs[0] != name:
            continue
        if op.op in ("SLICE", "GATHER", "RESIZE"):
            out = tensors[op.outputs[0]]
            return out.size * itemsize(tensors[name].dtype)
        if op.op in _WINDOWED and "stride" in op.attrs:
            return _window_bytes(tensors, op)
    return tensors[name].nbytes


_WINDOWED = {"CONV2D": (1, 3), "DEPTHWISE_CONV2D": (0, 2), "MAX_POOL2D": None, "AVG_POOL2D": None}


def _window_bytes(tensors, op) -> int:
    """Bytes of an NHWC window op's input under at least one of its windows' taps."""
    x = tensors[op.inputs[0]]
    n, h, w, c = x.shape
    taps = _WINDOWED[op.op]
    kh, kw = op.attrs["kernel"] if taps is None else tensors[op.inputs[1]].shape[taps[0]:taps[1]]
    dy, dx = op.attrs.get("dilation", (1, 1))
    top, _, left, _ = op.attrs.get("pad", (0, 0, 0, 0))
    _, oh, ow, _ = tensors[op.outputs[0]].shape
    sy, sx = op.attrs["stride"]

    def touched(size, out, stride, pad, k, dil):
        return len({o * stride - pad + i * dil for o in range(out) for i in range(k)}
                   & set(range(size)))
    rows, cols = touched(h, oh, sy, top, kh, dy), touched(w, ow, sx, left, kw, dx)
    return n * rows * cols * c * itemsize(x.dtype)
