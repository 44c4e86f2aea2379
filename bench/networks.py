"""The bench networks: build (or copy) each one into the cache as a .tosa file, with a seeded
int8 input .npy, and read its graph input/output names from the flatbuffer.

Besides the zoo's graphs, the models real frontends emitted (tests/data/): seven ExecuTorch
.tosa files and the int8 TFLite models, each with its stored input. A .tflite has no TOSA
reference run: its outputs are checked against the TFLite interpreter's stored output.

A cached file is rebuilt when its fingerprint changes: the builder arguments, the hash of the
zoo's source files and the installed tosa-tools version (for a copied file, its hash).
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

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"

# key -> (description, zoo network name, None for the embedded default or FILE for a model of
# tests/data (kwargs: its directory), builder kwargs)
FILE = "file"
NETWORKS: dict[str, tuple[str, str | None, dict]] = {
    "mobilenet_v2_224": ("MobileNetV2 1.0, 224x224 (embedded default model)", None, {}),
    "resnet18_112": ("ResNet-18 (basic blocks), 112x112", "resnet",
                     dict(depth=18, resolution=112)),
    "transformer": ("transformer encoder (16 tokens, d_model 64, 2 heads)", "transformer", {}),
    "ds_cnn": ("DS-CNN keyword spotter, MFCC 49x10", "ds_cnn", {}),
    "resnet50_224": ("ResNet-50 (bottleneck blocks), 224x224, 4.1 G MACs", "resnet",
                     dict(depth=50, resolution=224)),
    "bert_base_layer": ("BERT-base encoder layer (128 tokens, hidden 768, 12 heads, FFN 3072)",
                        "transformer", dict(tokens=128, d_model=768, heads=12, d_ff=3072,
                                            layers=1)),
    "et_mbv2_050_128": ("ExecuTorch MobileNetV2 0.5, 128x128, NCHW input", FILE,
                        dict(dir="mbv2_050_128", file="model.tosa")),
    "et_small_cnn": ("ExecuTorch small CNN, 48x48, NCHW input", FILE,
                     dict(dir="small_cnn", file="model.tosa")),
    "et_attn_block": ("ExecuTorch attention block, 16 tokens x 32", FILE,
                      dict(dir="attn_block", file="model.tosa")),
    "et_mbv3_small_96": ("ExecuTorch MobileNetV3-Small, 96x96, NCHW input", FILE,
                         dict(dir="mbv3_small_96", file="model.tosa")),
    "et_mha_block": ("ExecuTorch nn.MultiheadAttention encoder block, 16 tokens x 32", FILE,
                     dict(dir="mha_block", file="model.tosa")),
    "et_upsample_concat": ("ExecuTorch U-Net, nearest and bilinear upsampling, 32x32", FILE,
                           dict(dir="upsample_concat", file="model.tosa")),
    "et_misc_ops": ("ExecuTorch grouped, dilated and transposed convs, bilinear RESIZE", FILE,
                    dict(dir="misc_ops", file="model.tosa")),
    "tfl_audio_example1": ("TFLite audio classifier (conv, depthwise, FC, softmax)", FILE,
                           dict(dir="tflite/audio_example1", file="model.tflite")),
    "tfl_micro_speech": ("TFLite Micro speech (micro_speech)", FILE,
                         dict(dir="tflite/tflite_micro_speech", file="model.tflite")),
    # int8 networks with float32 edges (QUANTIZE in, DEQUANTIZE out): PRO-FP presets only
    "tfl_image_example1": ("TFLite image classifier, 96x96, float32 edges", FILE,
                           dict(dir="tflite/image_example1", file="model.tflite")),
    "tfl_autoencoder": ("TFLite autoencoder (fully connected), float32 edges", FILE,
                        dict(dir="tflite/autoencoder_example", file="model.tflite")),
}

# Not a bench network: the smallest run there is (a few KB of weights), whose peak memory is
# the fixed cost of a run (interpreter, numpy, simpy, the simulator), for the memory goal.
PROBE = ("8-channel DS-CNN (the fixed cost of a run)", "ds_cnn", dict(channels=8, num_classes=2))

ALIASES = {"mobilenet": "mobilenet_v2_224", "mobilenet_v2": "mobilenet_v2_224",
           "mnv2": "mobilenet_v2_224", "resnet": "resnet18_112", "resnet18": "resnet18_112",
           "transformer_encoder": "transformer", "dscnn": "ds_cnn", "ds-cnn": "ds_cnn",
           "resnet50": "resnet50_224", "bert": "bert_base_layer"}

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
    reference: dict[str, Path] | None = None    # stored oracle outputs (a .tflite's)

    @property
    def tflite(self) -> bool:
        return self.tosa.suffix == ".tflite"

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


def _tflite_io(info: dict) -> tuple[list[Tensor], list[Tensor]]:
    def tensors(rows):
        return [Tensor(r["name"], list(r["shape"]), r["dtype"].upper()) for r in rows]
    return tensors(info["inputs"]), tensors(info["outputs"])


def _zoo_fingerprint(net: str | None, kwargs: dict) -> str:
    h = hashlib.sha256()
    if net == FILE:
        h.update((DATA / kwargs["dir"] / kwargs["file"]).read_bytes())
    elif net is None:
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
    if net == FILE:
        return _prepare_file(key, desc, kwargs, cache, log)
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


def _prepare_file(key: str, desc: str, kwargs: dict, cache: Path, log) -> BenchNetwork:
    """A model of tests/data, copied with its stored input (and, for a .tflite, the TFLite
    interpreter's stored output as the reference)."""
    src = DATA / kwargs["dir"]
    model = cache / f"{key}{Path(kwargs['file']).suffix}"
    if not model.exists() or model.read_bytes() != (src / kwargs["file"]).read_bytes():
        log(f"  copying {key} ({desc}) from {src.relative_to(DATA.parent.parent)}")
        shutil.copyfile(src / kwargs["file"], model)
    info = json.loads((src / "info.json").read_text())
    meta = {"source": str((src / kwargs["file"]).relative_to(DATA.parent.parent)),
            "fingerprint": _zoo_fingerprint(FILE, kwargs)}
    if model.suffix == ".tflite":
        ins, outs = _tflite_io(info)
        files = [src / r["file"] for r in info["inputs"]]
        reference = {r["name"]: src / r["file"] for r in info["outputs"]}
    else:
        ins, outs = graph_io(model)
        files, reference = [src / "input-0.npy"], None
    return BenchNetwork(key, desc, model, ins, outs, files, 0.0, meta, reference)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
