"""Convolutional networks: MobileNetV2, ResNet (basic and bottleneck blocks), DS-CNN keyword
spotter."""

from __future__ import annotations

from .core import Spec
from .layers import add, classifier_conv, classifier_matmul, conv, global_avg_pool, max_pool

# (expand ratio t, channels c, repeats n, first stride s), torchvision order
MBV2_CFG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
            (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

RESNET_BLOCKS = {10: (1, 1, 1, 1), 18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}
RESNET_BOTTLENECKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}     # torchvision's depths


def auto_calib(resolution: int, total_stride: int = 32) -> int:
    """Enough calibration images that the last feature map gives >= 256 samples per
    channel: BN statistics and min/max ranges from fewer points overfit the
    calibration set and the int8 graph then saturates on unseen inputs."""
    hw = max(1, -(-resolution // total_stride)) ** 2
    return int(min(64, max(8, -(-256 // hw))))


def make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's _make_divisible (channel rounding for width multipliers)."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _mbv2_net(b, x, width, num_classes):
    cin = make_divisible(32 * width)
    x = conv(b, x, cin, 3, 2, act="relu6", name="stem")
    j = 0
    for t, c, n, s in MBV2_CFG:
        cout = make_divisible(c * width)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = int(round(cin * t))
            h = x
            if t != 1:
                h = conv(b, h, hidden, 1, act="relu6", name=f"block{j}_expand")
            h = conv(b, h, hidden, 3, stride, act="relu6", depthwise=True, name=f"block{j}_dw")
            h = conv(b, h, cout, 1, name=f"block{j}_project")  # linear bottleneck
            x = add(b, x, h, name=f"block{j}_add") if stride == 1 and cin == cout else h
            cin, j = cout, j + 1
    x = conv(b, x, make_divisible(1280 * max(1.0, width)), 1, act="relu6", name="last_conv")
    x = global_avg_pool(b, x)
    return classifier_conv(b, x, num_classes, name="classifier")


def mobilenet_v2_spec(width=1.0, resolution=224, num_classes=1000, seed=0, n_calib=None,
                      dtype="int8"):
    """Standard MobileNetV2 (torchvision layout), NHWC int8 [1,R,R,3] -> [1,num_classes].

    ReLU6 is folded into the conv RESCALE output range; residual adds are lowered
    TFLite-style; classifier is a 1x1 CONV2D + RESHAPE. All RESCALEs SINGLE_ROUND
    (ExecuTorch style). `dtype` fp16/bf16/fp32: the float graph of the same network
    (fgraph.py)."""
    n_calib = n_calib or auto_calib(resolution)
    return Spec("mobilenet_v2", _mbv2_net, [1, resolution, resolution, 3], seed, n_calib,
                dict(width=width, num_classes=num_classes), dtype=dtype)


def _resnet_net(b, x, blocks, width, num_classes, bottleneck=False):
    x = conv(b, x, width, 7, 2, act="relu", name="stem")
    x = max_pool(b, x, 3, 2)
    cin = width
    for si, nb in enumerate(blocks):
        mid = width * 2**si
        cout = mid * 4 if bottleneck else mid       # a bottleneck expands 4x (torchvision)
        for bi in range(nb):
            stride = 2 if si > 0 and bi == 0 else 1
            nm = f"layer{si + 1}_{bi}"
            if bottleneck:          # 1x1 reduce, 3x3 (stride here, as torchvision v1.5), 1x1
                h = conv(b, x, mid, 1, 1, act="relu", name=f"{nm}_conv1")
                h = conv(b, h, mid, 3, stride, act="relu", name=f"{nm}_conv2")
                h = conv(b, h, cout, 1, 1, name=f"{nm}_conv3")
            else:
                h = conv(b, x, cout, 3, stride, act="relu", name=f"{nm}_conv1")
                h = conv(b, h, cout, 3, 1, name=f"{nm}_conv2")
            sc = x
            if stride != 1 or cin != cout:
                sc = conv(b, x, cout, 1, stride, name=f"{nm}_downsample")
            # post-add ReLU folded into the add's output RESCALE; TFLite-like DOUBLE_ROUND
            x = add(b, h, sc, act="relu", name=f"{nm}_add", rounding="double")
            cin = cout
    x = global_avg_pool(b, x)
    return classifier_matmul(b, x, num_classes, rounding="double")


def resnet_spec(depth=18, resolution=112, width=64, num_classes=1000, seed=0, n_calib=None):
    """ResNet with basic blocks (depth 10/18/34) or bottleneck blocks (50/101): 7x7/2 stem,
    3x3/2 max pool, 4 stages, 1x1 projection shortcuts, global avgpool, FC as MATMUL against
    a constant."""
    blocks = {**RESNET_BLOCKS, **RESNET_BOTTLENECKS}
    if depth not in blocks:
        raise ValueError(f"depth must be one of {sorted(blocks)}")
    n_calib = n_calib or auto_calib(resolution)
    return Spec("resnet", _resnet_net, [1, resolution, resolution, 3], seed, n_calib,
                dict(blocks=blocks[depth], width=width, num_classes=num_classes,
                     bottleneck=depth in RESNET_BOTTLENECKS))


def _ds_cnn_net(b, x, channels, num_classes, rounding):
    x = conv(b, x, channels, (10, 4), 2, act="relu", pad_mode="same", name="conv1",
             rounding=rounding)
    for i in range(4):
        x = conv(b, x, channels, 3, 1, act="relu", depthwise=True, pad_mode="same",
                 name=f"ds{i}_dw", rounding=rounding)
        x = conv(b, x, channels, 1, 1, act="relu", pad_mode="same", name=f"ds{i}_pw",
                 rounding=rounding)
    x = global_avg_pool(b, x)
    return classifier_conv(b, x, num_classes, name="fc")


def ds_cnn_spec(seed=0, channels=64, num_classes=12, rounding="double", n_calib=8):
    """DS-CNN keyword spotter (ARM ML-Zoo "S" layout): MFCC [1,49,10,1] int8, conv 10x4/2
    (TF SAME padding), 4 x (3x3 depthwise + 1x1 pointwise), global avgpool, FC to 12.
    A TFLite-origin model, so conv RESCALEs use DOUBLE_ROUND as TF's legalizer does."""
    return Spec("ds_cnn", _ds_cnn_net, [1, 49, 10, 1], seed, n_calib,
                dict(channels=channels, num_classes=num_classes, rounding=rounding))
