"""Regenerate the embedded default model: `python -m npu_sim.zoo.build_default [-o PATH]`.

Writes MobileNetV2 (width 1.0, 224x224, 1000 classes, seed 0) as int8 TOSA 1.0 to
npu_sim/data/mobilenet_v2_224.tosa. The build is deterministic, so rerunning it
reproduces the file byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

from . import DEFAULT_MODEL_ARGS, default_model_path, mobilenet_v2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=default_model_path())
    ap.add_argument("--meta", action="store_true", help="print the metadata as JSON")
    args = ap.parse_args(argv)
    t0 = time.time()
    data, meta = mobilenet_v2(**DEFAULT_MODEL_ARGS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]},"
          f" {meta['macs']} MACs) in {time.time() - t0:.1f}s")
    if args.meta:
        print(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
