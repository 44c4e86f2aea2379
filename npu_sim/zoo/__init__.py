"""Model zoo: deterministic builders of realistic int8 TOSA 1.0 (PRO-INT) networks, and of
MobileNetV2 and the transformer encoder as fp16, bf16 or fp32 (PRO-FP) graphs (`dtype=`).

Each builder returns `(tosa_bytes, meta)`: the flatbuffer (TOSA 1.0.0, non-draft)
and a small dict with the input (name/shape/dtype/scale/zero_point), the output
names (`output_names`) and details, the MAC count, and the op histogram.

How a network is made: seeded float weights (He init, folded BatchNorm with
seeded statistics), a float64 numpy forward pass over seeded calibration inputs
(uniform in [-1, 1], the float range of the int8 graph input) records min/max at
every quantization point, then the graph is emitted with per-channel symmetric
int8 weights, int32 biases, asymmetric int8 activations and TFLite-style
31-bit multipliers. Same arguments give byte-identical output.

This package depends only on numpy and tosa_serializer (not on the rest of npu_sim).
"""

from __future__ import annotations

from pathlib import Path

from . import cnn, limits, transformer
from .core import FLOAT_DTYPES, Spec

NETWORKS = ("mobilenet_v2", "resnet", "transformer", "ds_cnn")
FLOAT_NETWORKS = ("mobilenet_v2", "transformer", "transformer_encoder")   # dtype fp16/bf16/fp32

DEFAULT_MODEL_FILE = "mobilenet_v2_224.tosa"
DEFAULT_MODEL_ARGS = dict(width=1.0, resolution=224, num_classes=1000, seed=0)


def mobilenet_v2(width=1.0, resolution=224, num_classes=1000, seed=0, n_calib=None,
                 dtype="int8"):
    """MobileNetV2: int8 (or dtype) NHWC [1,res,res,3] -> [1,num_classes]."""
    return build("mobilenet_v2", **locals())       # through spec(), which checks the arguments


def resnet(depth=18, resolution=112, width=64, num_classes=1000, seed=0, n_calib=None):
    """ResNet-10/18/34 (basic blocks) or 50/101 (bottlenecks): int8 NHWC [1,res,res,3] ->
    [1,num_classes]."""
    return build("resnet", **locals())


def transformer_encoder(tokens=16, d_model=64, heads=2, d_ff=128, layers=1, seed=0,
                        n_calib=16, dtype="int8"):
    """Pre-LN transformer encoder: int8 (or dtype) [1,tokens,d_model] -> [1,tokens,d_model]."""
    return build("transformer", **locals())


def ds_cnn(seed=0, channels=64, num_classes=12, rounding="double", n_calib=8):
    """DS-CNN keyword spotter: int8 MFCC [1,49,10,1] -> [1,num_classes]."""
    return build("ds_cnn", **locals())


_SPECS = {
    "mobilenet_v2": cnn.mobilenet_v2_spec,
    "resnet": cnn.resnet_spec,
    "transformer": transformer.transformer_encoder_spec,
    "transformer_encoder": transformer.transformer_encoder_spec,
    "ds_cnn": cnn.ds_cnn_spec,
}


def spec(name: str, **kwargs) -> Spec:
    """The network definition behind `build` (for float-reference comparisons:
    `s = spec(...); f = s.calibrate(); s.emit(f); s.float_forward(f, x_int8)`). Arguments out
    of their bounds (limits.py) raise ValueError naming the argument."""
    if name not in _SPECS:
        raise ValueError(f"unknown network {name!r}; choose from {', '.join(NETWORKS)}")
    dtype = kwargs.get("dtype", "int8")
    if dtype != "int8" and name not in FLOAT_NETWORKS:
        raise ValueError(f"{name} has no float graph (dtype {dtype}); float networks: "
                         f"{', '.join(FLOAT_NETWORKS[:2])}")
    if dtype not in ("int8", *FLOAT_DTYPES):
        raise ValueError(f"dtype {dtype!r}: choose int8 or one of {', '.join(FLOAT_DTYPES)}")
    limits.check(name, _SPECS[name], kwargs)
    return _SPECS[name](**kwargs)


def build(name: str, **kwargs) -> tuple[bytes, dict]:
    """Build network `name` (one of NETWORKS) -> (tosa_bytes, meta)."""
    return spec(name, **kwargs).build()


def default_model_path() -> Path:
    """Path of the embedded default model (MobileNetV2 1.0, 224x224, seed 0).

    Regenerate with `python -m npu_sim.zoo.build_default`."""
    return Path(__file__).resolve().parent.parent / "data" / DEFAULT_MODEL_FILE


def default_model_info() -> dict:
    """Input/output names and shapes of the embedded default model, read from the file."""
    from tosa.TosaGraph import TosaGraph

    buf = default_model_path().read_bytes()
    blk = TosaGraph.GetRootAsTosaGraph(buf, 0).Regions(0).Blocks(0)
    shapes = {}
    for i in range(blk.TensorsLength()):
        t = blk.Tensors(i)
        shapes[t.Name().decode()] = [int(s) for s in t.ShapeAsNumpy()]
    ins = [blk.Inputs(i).decode() for i in range(blk.InputsLength())]
    outs = [blk.Outputs(i).decode() for i in range(blk.OutputsLength())]
    return {"input_name": ins[0], "input_shape": shapes[ins[0]],
            "output_name": outs[0], "output_shape": shapes[outs[0]]}


__all__ = ["NETWORKS", "FLOAT_NETWORKS", "build", "spec", "mobilenet_v2", "resnet", "transformer_encoder",
           "ds_cnn", "default_model_path", "default_model_info", "Spec"]
