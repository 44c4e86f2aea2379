"""Bounds on the zoo builders' arguments, checked before anything is built.

A builder calibrates in float64 over a batch of inputs, so an argument orders of magnitude off
(tokens=1000000, resolution=100000) would take gigabytes and minutes before failing. Each
argument has a type and a range from its meaning, with sizes up to 8,192 (the TOSA 8K level's
largest kernel and stride). Then estimates of the calibration pass's largest activation and of
the weights, in float64 bytes, keep the network as a whole within MAX_BYTES each (a build then
peaks at about 2 GB).
"""

from __future__ import annotations

import inspect
from numbers import Integral, Real

from .cnn import RESNET_BLOCKS, RESNET_BOTTLENECKS, auto_calib, make_divisible

MAX_BYTES = 512 << 20
MAX_SIZE = 8192
MAX_CALIB = 1024

# argument -> (integer?, least, most); `width` is a multiplier for MobileNetV2, channels for ResNet
_RANGES = {
    "resolution": (True, 1, MAX_SIZE), "tokens": (True, 1, MAX_SIZE), "d_model": (True, 1, MAX_SIZE),
    "d_ff": (True, 1, MAX_SIZE * 4), "heads": (True, 1, MAX_SIZE), "layers": (True, 1, 128),
    "channels": (True, 1, MAX_SIZE), "num_classes": (True, 1, 100_000), "seed": (True, 0, 2**32 - 1),
    "n_calib": (True, 1, MAX_CALIB),
}
_WIDTH = {"mobilenet_v2": (False, 0.01, 4.0), "resnet": (True, 1, MAX_SIZE)}
_CHOICES = {"rounding": ("single", "double"), "depth": (*RESNET_BLOCKS, *RESNET_BOTTLENECKS)}
# what to lower when (activations, weights) are too large
_HINTS = {"mobilenet_v2": ("resolution, width or n_calib", "width or num_classes"),
          "resnet": ("resolution, width or n_calib", "width, depth or num_classes"),
          "transformer": ("tokens, heads, d_ff or n_calib", "d_model, d_ff or layers"),
          "ds_cnn": ("channels or n_calib", "channels or num_classes")}
_HINTS["transformer_encoder"] = _HINTS["transformer"]


def _number(name: str, value, integer: bool, lo, hi):
    if (isinstance(value, bool) or not isinstance(value, Integral if integer else Real)
            or not lo <= value <= hi):          # false for NaN; exact for any int
        raise ValueError(f"{name}: expected {'an integer' if integer else 'a number'} from {lo:,} to {hi:,}, "
                         f"got {value!r}")


def _estimate(name: str, a: dict) -> tuple[int, int]:
    """(float64 elements of the largest calibration activation per input, weight elements):
    the dominant layers of each builder, im2col of the convolutions included."""
    if name == "mobilenet_v2":
        w, half = a["width"], -(-a["resolution"] // 2)      # block 1 expands 6x at half size
        last = make_divisible(1280 * max(1.0, w))
        return half * half * max(27, 6 * make_divisible(16 * w)), int(3.5e6 * w * w) + last * a["num_classes"]
    if name == "resnet":
        w, quarter = a["width"], -(-a["resolution"] // 4)
        bottleneck = a["depth"] in RESNET_BOTTLENECKS
        blocks = {**RESNET_BLOCKS, **RESNET_BOTTLENECKS}[a["depth"]]
        weights = sum(n * (17 if bottleneck else 18) * (w << s) ** 2 for s, n in enumerate(blocks))
        last = w * (32 if bottleneck else 8)
        return quarter * quarter * max(4 * 147, 9 * w), weights + last * a["num_classes"]
    if name in ("transformer", "transformer_encoder"):
        t, d, d_ff = a["tokens"], a["d_model"], a["d_ff"]
        return t * max(a["heads"] * t, d_ff, 3 * d), a["layers"] * (4 * d * d + 2 * d * d_ff)
    c = a["channels"]                                       # ds_cnn: MFCC 49x10, conv 10x4/2
    return 125 * max(40, c), 4 * c * c + c * (50 + a["num_classes"])


def check(name: str, builder, kwargs: dict) -> None:
    """Raise ValueError naming the argument when `builder(**kwargs)` would be out of bounds."""
    params = inspect.signature(builder).parameters
    for key in kwargs:
        if key not in params:
            raise ValueError(f"{name} takes no argument {key!r}; it takes {', '.join(params)}")
    args = {k: p.default for k, p in params.items()} | kwargs
    for key, value in args.items():
        if key in _CHOICES and (isinstance(value, bool) or value not in _CHOICES[key]):
            raise ValueError(f"{key}: expected one of {', '.join(map(str, _CHOICES[key]))}, got {value!r}")
        rng = _WIDTH.get(name) if key == "width" else _RANGES.get(key)
        if rng and (value is not None or params[key].default is not None):   # n_calib=None: automatic
            _number(key, value, *rng)
    per_input, weights = _estimate(name, args)
    calib = args["n_calib"] or auto_calib(args["resolution"])
    for what, count, hint in zip(("calibration activations", "weights"), (per_input * calib, weights), _HINTS[name]):
        if count * 8 > MAX_BYTES:
            raise ValueError(f"too large to build: about {count * 8 / 2**30:.1f} GiB of float64 {what} "
                             f"(at most {MAX_BYTES >> 20} MiB); lower {hint}")
