#!/usr/bin/env python3
"""Data movement at hardware rate (issue 13, item 2): each layout operator alone, from a graph
input to a graph output in external memory, in several layouts, on every preset, beside its
attainable bound (the bytes it must read and write at the memory's bandwidth, after one DMA
setup and the memory's latency). Timing-only; nothing is written but the table.

    python bench/data_movement.py [--configs default,edge-256,large-8k] [--out F.md]

A move whose source or destination runs are shorter than a 32-byte burst (a 3-channel slice
of a 64-channel map reads a burst for 3 bytes) wastes external bandwidth however it is done,
so its bound, which counts bytes, is out of reach by design.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from npu_sim import api
from npu_sim.zoo.emit import Emitter, attribute

MAP = (1, 56, 56, 64)            # a MobileNet-class feature map, NHWC
# (operator, input shape, dtype, argument); CONCAT joins two inputs of the shape
CASES = [
    ("TRANSPOSE", (1, 3, 224, 224), "INT8", (0, 2, 3, 1)),     # an NCHW image to NHWC
    ("TRANSPOSE", MAP, "INT8", (0, 3, 1, 2)),                   # NHWC to NCHW
    ("TRANSPOSE", MAP, "INT8", (0, 2, 1, 3)),                   # rows <-> columns: whole pixels
    ("TRANSPOSE", (1, 128, 768), "INT8", (0, 2, 1)),            # a transformer's K^T
    ("TRANSPOSE", (1, 128, 12, 64), "INT8", (0, 2, 1, 3)),      # tokens to heads
    ("TRANSPOSE", (1, 128, 768), "INT16", (0, 2, 1)),
    ("TRANSPOSE", (512, 512), "INT32", (1, 0)),
    ("SLICE", MAP, "INT8", ((0, 0, 0, 0), (1, 56, 56, 32))),    # half the channels
    ("SLICE", MAP, "INT8", ((0, 0, 0, 16), (1, 56, 56, 3))),    # three channels
    ("SLICE", MAP, "INT8", ((0, 10, 0, 0), (1, 20, 56, 64))),   # a band of rows
    ("CONCAT", MAP, "INT8", 3),
    ("CONCAT", MAP, "INT8", 1),
    ("CONCAT", (1, 56, 56, 16), "INT8", 3),                     # 16-byte runs
    ("CONCAT", (1, 56, 56, 3), "INT8", 3),
    ("PAD", MAP, "INT8", ((0, 0), (1, 1), (1, 1), (0, 0))),
    ("PAD", MAP, "INT8", ((0, 0), (0, 0), (0, 0), (0, 4))),
    ("PAD", (1, 56, 56, 3), "INT8", ((0, 0), (0, 0), (0, 0), (0, 1))),
    ("TILE", MAP, "INT8", (1, 1, 1, 2)),
    ("TILE", MAP, "INT8", (1, 2, 1, 1)),
    ("TILE", (1, 56, 56, 1), "INT8", (1, 1, 1, 16)),
    ("REVERSE", MAP, "INT8", 3),
    ("REVERSE", MAP, "INT8", 1),
    ("RESHAPE", MAP, "INT8", (1, 3136, 64)),
]


def build(kind: str, shape: tuple, dtype: str, arg) -> bytes:
    """The one-operator TOSA graph of a case."""
    e = Emitter()
    x = e.input("x", shape, dtype)
    if kind == "TRANSPOSE":
        y = e.transpose(x, arg, "y")
    elif kind == "SLICE":
        y = e.slice(x, *arg, "y")
    elif kind == "CONCAT":
        y = e.concat([x, e.input("x2", shape, dtype)], arg, "y")
    elif kind == "PAD":
        out = [s + lo + hi for s, (lo, hi) in zip(shape, arg)]
        pad = e.shape_const([p for pair in arg for p in pair])
        y = e.op("PAD", [x, pad, e.zero("pad_const", dtype)], out, dtype, attribute("PadAttribute"),
                 "y")
    elif kind == "TILE":
        out = [s * m for s, m in zip(shape, arg)]
        y = e.op("TILE", [x, e.shape_const(arg)], out, dtype, attribute("TileAttribute"), "y")
    elif kind == "REVERSE":
        y = e.op("REVERSE", [x], shape, dtype, attribute("ReverseAttribute", arg), "y")
    else:
        y = e.reshape(x, arg, "y")
    e.output(y)
    return e.serialize()


def measure(config: str) -> list[dict]:
    cfg = api.load_config(config)
    rows = []
    for kind, shape, dtype, arg in CASES:
        program = api.compile_model(api.load_graph(build(kind, shape, dtype, arg), kind.lower()),
                                    cfg, use_cache=False)
        report = api.simulate(program, cfg, timing_only=True).report
        bound = report.roofline["attainable"]["cycles"]
        rows.append({"config": config, "op": kind, "shape": shape, "dtype": dtype, "arg": arg,
                     "cycles": report.cycles, "bound": bound,
                     "ratio": report.cycles / bound if bound else None,
                     "commands": len(program.commands)})
    return rows


def markdown(rows: list[dict]) -> str:
    configs = list(dict.fromkeys(r["config"] for r in rows))
    head = "| operator | input | dtype | argument | " + " | ".join(
        f"{c} cycles / bound" for c in configs) + " |"
    lines = [head, "|" + "---|" * (4 + len(configs))]
    for kind, shape, dtype, arg in CASES:
        cells = []
        for c in configs:
            r = next(r for r in rows if r["config"] == c and r["op"] == kind and
                     r["shape"] == shape and r["dtype"] == dtype and r["arg"] == arg)
            cells.append("no command (a view)" if not r["commands"] else
                         f"{r['cycles']:,} / {r['bound']:,.0f} = {r['ratio']:.2f}")
        lines.append(f"| {kind} | {'x'.join(map(str, shape))} | {dtype.lower()} | {arg} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="default,edge-256,large-8k")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rows = [r for c in args.configs.split(",") for r in measure(c)]
    text = markdown(rows)
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    below = [r for r in rows if r["ratio"] is not None and r["ratio"] < 1.0]
    for r in below:
        print(f"BELOW THE BOUND: {r['op']} {r['shape']} {r['arg']} on {r['config']}",
              file=sys.stderr)
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
