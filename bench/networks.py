"""The bench networks: build (or copy) each one into the cache as a .tosa file, with a seeded
int8 input .npy, and read its graph input/output names from the flatbuffer.

A cached file is rebuilt when its fingerprint changes: the builder arguments, the hash of the
zoo's source files and the installed tosa-tools version (for the embedded default model, the
hash of the embedded file).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
import zlib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

# key -> (description, zoo network name or None for the embedded default, builder kwargs)
NETWORKS: dict[str, tuple[str, str | None, dict]] = {
    "mobilenet_v2_224": ("MobileNetV2 1.0, 224x224 (embedded default model)", None, {}),
    "resnet18_112": ("ResNet-18 (basic blocks), 112x112", "resnet",
                     dict(depth=18, resolution=112)),
    "transformer": ("transformer encoder (16 tokens, d_model 64, 2 heads)", "transformer", {}),
    "ds_cnn": ("DS-CNN keyword spotter, MFCC 49x10", "ds_cnn", {}),
}

# Not a bench network: the smallest run there is (a few KB of weights), whose peak memory is
# the fixed cost of a run (interpreter, numpy, simpy, the simulator), for the memory goal.
PROBE = ("8-channel DS-CNN (the fixed cost of a run)", "ds_cnn", dict(channels=8, num_classes=2))

ALIASES = {"mobilenet": "mobilenet_v2_224", "mobilenet_v2": "mobilenet_v2_224",
           "mnv2": "mobilenet_v2_224", "resnet": "resnet18_112", "resnet18": "resnet18_112",
           "transformer_encoder": "transformer", "dscnn": "ds_cnn", "ds-cnn": "ds_cnn"}

_NP_DTYPES = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "UINT8": np.uint8,
              "BOOL": np.bool_}


def resolve(names: list[str]) -> list[str]:
    out = []
    for n in names:
        key = ALIASES.get(n.strip().lower(), n.strip().lower())
        if key not in NETWORKS:
            raise SystemExit(f"bench: unknown network {n!r}; choose from {', '.join(NETWORKS)}")
        if key not in out:
            out.append(key)
    return out


@dataclass
class Tensor:
    name: str
    shape: list[int]
    dtype: str


@dataclass
class BenchNetwork:
    key: str
    description: str
    tosa: Path
    inputs: list[Tensor]
    outputs: list[Tensor]
    input_files: list[Path]
    build_seconds: float          # 0 when taken from the cache
    meta: dict

    @property
    def size_bytes(self) -> int:
        return self.tosa.stat().st_size


def graph_io(path: Path) -> tuple[list[Tensor], list[Tensor]]:
    """Graph inputs and outputs (name, shape, dtype) of a TOSA flatbuffer's main block."""
    from tosa.DType import DType
    from tosa.TosaGraph import TosaGraph

    names = {v: k for k, v in vars(DType).items() if not k.startswith("_")}
    buf = path.read_bytes()
    blk = TosaGraph.GetRootAsTosaGraph(buf, 0).Regions(0).Blocks(0)
    tensors = {}
    for i in range(blk.TensorsLength()):
        t = blk.Tensors(i)
        tensors[t.Name().decode()] = Tensor(t.Name().decode(), [int(s) for s in t.ShapeAsNumpy()],
                                            names.get(t.Type(), str(t.Type())))
    ins = [tensors[blk.Inputs(i).decode()] for i in range(blk.InputsLength())]
    outs = [tensors[blk.Outputs(i).decode()] for i in range(blk.OutputsLength())]
    return ins, outs


def _zoo_fingerprint(net: str | None, kwargs: dict) -> str:
    h = hashlib.sha256()
    if net is None:
        from npu_sim import api
        h.update(api.default_model().read_bytes())
    else:
        import npu_sim.zoo as zoo
        for f in sorted(Path(zoo.__file__).parent.glob("*.py")):
            h.update(f.name.encode())
            h.update(f.read_bytes())
        h.update(json.dumps([net, kwargs], sort_keys=True).encode())
        try:
            h.update(metadata.version("tosa-tools").encode())
        except metadata.PackageNotFoundError:
            pass
    return h.hexdigest()[:16]


def prepare(key: str, cache: Path, seed: int = 0, log=print) -> BenchNetwork:
    """Build or reuse `cache/<key>.tosa` and its seeded input file(s)."""
    desc, net, kwargs = PROBE if key == "probe" else NETWORKS[key]
    cache.mkdir(parents=True, exist_ok=True)
    tosa = cache / f"{key}.tosa"
    meta_file = cache / f"{key}.meta.json"
    fp = _zoo_fingerprint(net, kwargs)
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    build_s = 0.0
    if not tosa.exists() or meta.get("fingerprint") != fp:
        log(f"  building {key} ({desc}) ...")
        t0 = time.perf_counter()
        if net is None:
            from npu_sim import api
            shutil.copyfile(api.default_model(), tosa)
            meta = {"source": "npu_sim.api.default_model()"}
        else:
            from npu_sim import zoo
            data, zmeta = zoo.build(net, **kwargs)
            tosa.write_bytes(data)
            meta = {"source": f"npu_sim.zoo.build({net!r}, **{kwargs!r})",
                    "zoo_meta": {k: v for k, v in zmeta.items() if k != "op_histogram"},
                    "op_histogram": zmeta.get("op_histogram")}
        build_s = time.perf_counter() - t0
        meta["fingerprint"] = fp
        meta_file.write_text(json.dumps(meta, indent=1, default=str))
        log(f"  built {key} in {build_s:.1f} s ({tosa.stat().st_size:,} bytes)")
    ins, outs = graph_io(tosa)
    files = []
    for t in ins:
        dt = _NP_DTYPES.get(t.dtype)
        if dt is None:
            raise SystemExit(f"bench: {key}: input {t.name} has dtype {t.dtype}, not supported")
        rng = np.random.default_rng([seed, zlib.crc32(f"{key}/{t.name}".encode())])
        if dt is np.bool_:
            x = rng.integers(0, 2, size=t.shape).astype(np.bool_)
        else:
            info = np.iinfo(dt)
            x = rng.integers(info.min, info.max, size=t.shape, endpoint=True, dtype=dt)
        f = cache / f"{key}.in.{_safe(t.name)}.seed{seed}.npy"
        if not f.exists() or not np.array_equal(np.load(f), x):
            np.save(f, x)
        files.append(f)
    return BenchNetwork(key, desc, tosa, ins, outs, files, build_s, meta)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
