"""Row handoffs: a command reading another compute engine's output as its rows are finished.

The array's output stage and the vector unit each write their results row by row, in order,
and read their streamed operand row by row, in order. With a row scoreboard between them
(the hardware counts the rows a command has finished; a consumer's address generator stalls
on rows not yet written, as Ethos-U's block dependencies let a command start on the blocks
its producer has written), a command that has to wait for one on the other engine need not
wait for all of it: it may start early enough that it reads each row only once that row is
finished.

With the producer finishing its rows evenly over its last `window` cycles (the array: one
fold's stream, in which each output row leaves the array finished; the vector unit: its busy
cycles) and the consumer reading them evenly over its `window` after `lead_in` cycles (the
array's first preload, which needs only the weights), it suffices that the consumer reads
the first row it shares with the producer no earlier than the producer finishes it, and the
last no earlier than the producer's end (the machine applies a command's results at its end,
so the consumer must end after it): a command reading all of an array command's rows starts
up to lead_in + min(both windows) before that one ends. A pool or a windowed convolution
reads a window of rows ahead of that pace (its kernel's rows and a stride), as Ethos-U
counts a kernel's rows in its block dependencies. Everything else still waits for whole
commands: a MAC command's weights, a depthwise convolution's taps, views not walked row
after row, and any other overlap of the two commands' operands, but writes that the timing
keeps after the producer's reads.
"""
from __future__ import annotations

from npu_sim.isa.commands import Compute, TensorView

UNITS = ("mac", "vector")


def handoff(cmd, cost, prod, prod_cost) -> int:
    """Cycles before command `prod`'s end that `cmd`, which waits for it, may start (their
    costs beside them): 0 unless they run on the two compute engines and `cmd` reads
    `prod`'s output row by row."""
    if type(cmd) is not Compute or type(prod) is not Compute or cmd.unit == prod.unit or \
            cmd.unit not in UNITS or prod.unit not in UNITS or not cost.window or \
            not prod_cost.window:
        return 0
    reads = _streamed(cmd)
    written = _finished_rows(prod)
    if not reads or written is None:
        return 0
    return max(0, _ahead(cmd, reads, cost, prod, written, prod_cost))


def _ahead(cmd: Compute, reads: list[TensorView], c, prod: Compute, written: TensorView,
           p) -> int:
    """Cycles before the producer's end the consumer may start, 0 if it must wait for it.

    The consumer reads the producer's output through one streamed operand, in the order it is
    written; byte x of its operand's range [lo, hi) at start + lead_in + window (x - lo) /
    (hi - lo), which must not come before the producer finishes the row holding x, by
    end - window (1 - (x - wlo) / (whi - wlo)) plus one row: checked at both ends of the
    bytes they share (both are linear in x), the last of them taken as finished only at the
    producer's end. Its writes must not reach the producer's operands before the producer is
    done with them: its inputs at its end, the weights it holds in the array before its last
    fold streams."""
    if written.contiguous_run() != written.nbytes:
        return 0
    wmem, (wlo, whi) = written.mem, written.footprint()
    hits = []
    for v in reads:
        if v.mem == wmem:
            lo, hi = v.footprint()
            if lo < whi and wlo < hi:
                hits.append((v, lo, hi))
    if len(hits) != 1 or not _ascending(hits[0][0]):
        return 0
    view, lo, hi = hits[0]
    rows = max(1, written.count // written.shape[-1]) if written.shape else 1
    first, last = max(lo, wlo), min(hi, whi)
    # the first row it reads, once finished; its last only at the producer's end, as the
    # machine applies a command's results at its end (so the consumer ends after it)
    ahead = int(min(c.lead_in + c.window * (first - lo) / (hi - lo)
                    + p.window * (whi - first) / (whi - wlo) - p.window / rows,
                    c.lead_in + c.window * (last - lo) / (hi - lo)) - _window_rows(cmd, c))
    first_write = c.setup + c.lead_in        # the consumer writes nothing before this
    held = (prod.inputs.get("weights") if prod.op != "matmul" else prod.inputs.get("b")) \
        if prod.unit == "mac" else None
    theirs = _spans(prod)
    for a, a_writes, amem, alo, ahi in _spans(cmd):
        for b, b_writes, bmem, blo, bhi in theirs:
            if (a_writes or b_writes) and amem == bmem and alo < bhi and blo < ahi \
                    and (a is not view or b is not written):
                if not a_writes or b_writes:    # it reads or writes what the producer writes
                    return 0
                ahead = min(ahead, first_write + (p.window if b is held else 0))
    return ahead


def _spans(cmd: Compute) -> list[tuple[TensorView, bool, int, int, int]]:
    """(view, whether the command writes it, its memory, and the bytes [lo, hi) it spans) of
    each operand."""
    return [(v, False, v.mem, *v.footprint()) for v in cmd.inputs.values()] + \
        [(v, True, v.mem, *v.footprint()) for v in cmd.outputs.values()]


def _streamed(cmd: Compute) -> list[TensorView]:
    """The operands a command reads row by row, in order, as it starts: the array's
    activations of a matmul or a 2-D convolution (not its weights, preloaded whole; a
    windowed one a window of rows ahead), any data input of an elementwise chain, a reduction
    or a pool (a window of rows ahead)."""
    if cmd.unit == "mac":
        if cmd.op == "matmul":
            return [cmd.inputs["a"]]
        if cmd.op == "conv2d":
            return [cmd.inputs["ifm"]]
        return []
    if cmd.op in ("elementwise", "reduce", "max_pool2d", "avg_pool2d"):
        return [v for name, v in cmd.inputs.items() if name.startswith("in")]
    return []


def _window_rows(cmd: Compute, cost) -> int:
    """Cycles a pool or a convolution reads ahead of an even pace through its input's rows:
    each output row needs its window's rows (kernel, and a stride more, taken whole) as it
    starts (a convolution's first fold streams its output rows in order). A pool of one
    output row (a global pool) folds its input's rows into its sums in order, as an
    elementwise chain reads them: nothing ahead; so does a 1x1 convolution of stride 1."""
    if cmd.op in ("max_pool2d", "avg_pool2d"):
        if cmd.outputs["out"].shape[1] == 1:
            return 0
        window, stride, rows = cmd.attrs["kernel"][0], cmd.attrs["stride"][0], \
            cmd.inputs["in0"].shape[1]
    elif cmd.unit == "mac" and cmd.op == "conv2d":
        kernel = cmd.inputs["weights"].shape[1]             # OHWI
        stride = tuple(cmd.attrs.get("stride", (1, 1)))[0]
        window = (kernel - 1) * tuple(cmd.attrs.get("dilation", (1, 1)))[0] + 1
        if window == 1 and stride == 1:
            return 0
        rows = cmd.inputs["ifm"].shape[1]
    else:
        return 0
    return -(-cost.window * (window + stride) // rows)


def _finished_rows(cmd: Compute) -> TensorView | None:
    """The output a command finishes row by row, in order, or None: the array's output stage
    (not partial sums), an elementwise chain or a pool, a reduction along its innermost axis."""
    if cmd.unit == "mac":
        return cmd.outputs.get("ofm")
    if cmd.op in ("elementwise", "max_pool2d", "avg_pool2d"):
        return cmd.outputs["out"]
    if cmd.op == "reduce":
        shape = cmd.inputs["in0"].shape
        axis = cmd.attrs["axis"]
        if all(d == 1 for d in shape[axis + 1:]):
            return cmd.outputs["out"]
    return None


def _ascending(v: TensorView) -> bool:
    """Whether a view walks its bytes upwards, row after row (strides positive and falling)."""
    last = None
    for d, s in zip(v.shape, v.strides):
        if d == 1:
            continue
        if s <= 0 or (last is not None and s > last):
            return False
        last = s
    return True

