#!/usr/bin/env python3
"""MobileNetV2-224 (the embedded model) behind an NCHW input and a TRANSPOSE to NHWC, as
ExecuTorch emits its graphs: total cycles and the TRANSPOSE's on every preset, beside the
attainable bound (timing-only; nothing is written).

    python bench/nchw_input.py [PRESET ...]
"""
from __future__ import annotations

import sys

from npu_sim import api
from npu_sim.compiler.driver import compile_graph
from npu_sim.compiler.ir import Operator, Tensor


def main(presets: list[str]) -> int:
    data = api.default_model().read_bytes()
    print("| preset | cycles | TRANSPOSE cycles | attainable bound |\n|---|---|---|---|")
    for name in presets or ["default", "edge-256", "large-8k"]:
        g = api.load_graph(data, "mobilenet_v2_224_nchw")
        x = g.inputs[0]
        n, h, w, c = g.tensors[x].shape
        g.tensors["input_nchw"] = Tensor("input_nchw", (n, c, h, w), g.tensors[x].dtype)
        g.operators.insert(0, Operator("TRANSPOSE", ["input_nchw"], [x], {"perms": (0, 2, 3, 1)}))
        g.inputs = ["input_nchw"]
        cfg = api.load_config(name)
        rep = api.simulate(compile_graph(g, cfg, g.source), cfg, timing_only=True).report
        print(f"| {name} | {rep.cycles:,} | {rep.layers[0].cycles:,} "
              f"| {rep.roofline['attainable']['cycles']:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
