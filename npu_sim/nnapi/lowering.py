"""How the device lowers a model for its config: the one choice that depends on the machine,
whether a relaxed model's float32 is computed in fp16."""
from __future__ import annotations

from npu_sim.compiler.frontends import nnapi as fe

from ..config import HardwareConfig


def relaxes_to_fp16(cfg: HardwareConfig) -> bool:
    """Whether the device computes a relaxed model's float32 in fp16: when its MAC array has
    an fp16 mode (fp16 halves the bytes; large-8k runs it at 4x its fp32 rate)."""
    return "fp16xfp16" in cfg.mac_array.precision


def lower(model, cfg: HardwareConfig):
    return fe.lower_model(model, model.name, relaxes_to_fp16(cfg))


def lower_operation(model, i: int, cfg: HardwareConfig):
    return fe.single_operation(model, i, model.name, relaxes_to_fp16(cfg))
