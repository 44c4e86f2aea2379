"""The NNAPI HAL's enumerations and structures, with their names and values: ErrorStatus,
ExecutionPreference, Priority, MeasureTiming (HAL 1.3) and types.spec's PerformanceInfo,
Capabilities, Timing and OutputShape."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from npu_sim.compiler.frontends.nnapi.model import OperandType

UINT64_MAX = (1 << 64) - 1          # Timing's "not available"
FLT_MAX = float(np.finfo(np.float32).max)


class ErrorStatus(IntEnum):
    NONE = 0
    DEVICE_UNAVAILABLE = 1
    GENERAL_FAILURE = 2
    OUTPUT_INSUFFICIENT_SIZE = 3
    INVALID_ARGUMENT = 4
    MISSED_DEADLINE_TRANSIENT = 5
    MISSED_DEADLINE_PERSISTENT = 6
    RESOURCE_EXHAUSTED_TRANSIENT = 7
    RESOURCE_EXHAUSTED_PERSISTENT = 8


class ExecutionPreference(IntEnum):
    LOW_POWER = 0
    FAST_SINGLE_ANSWER = 1
    SUSTAINED_SPEED = 2


class Priority(IntEnum):
    LOW = 0
    MEDIUM = 1
    HIGH = 2


class MeasureTiming(IntEnum):
    NO = 0
    YES = 1


@dataclass(frozen=True)
class PerformanceInfo:
    execTime: float                  # the device's time / the CPU baseline's (lower is better)
    powerUsage: float                # the device's energy / the CPU baseline's

    def to_dict(self) -> dict:
        return {"execTime": self.execTime, "powerUsage": self.powerUsage}


@dataclass(frozen=True)
class OperandPerformance:
    type: OperandType
    info: PerformanceInfo


@dataclass
class Capabilities:
    relaxedFloat32toFloat16PerformanceScalar: PerformanceInfo
    relaxedFloat32toFloat16PerformanceTensor: PerformanceInfo
    operandPerformance: list[OperandPerformance]           # sorted by type; absent = FLT_MAX
    ifPerformance: PerformanceInfo
    whilePerformance: PerformanceInfo

    def to_dict(self) -> dict:
        return {
            "relaxedFloat32toFloat16PerformanceScalar":
                self.relaxedFloat32toFloat16PerformanceScalar.to_dict(),
            "relaxedFloat32toFloat16PerformanceTensor":
                self.relaxedFloat32toFloat16PerformanceTensor.to_dict(),
            "operandPerformance": [{"type": p.type.name, "info": p.info.to_dict()}
                                   for p in self.operandPerformance],
            "ifPerformance": self.ifPerformance.to_dict(),
            "whilePerformance": self.whilePerformance.to_dict(),
        }


UNSUPPORTED = PerformanceInfo(FLT_MAX, FLT_MAX)


@dataclass(frozen=True)
class Timing:
    timeOnDevice: int = UINT64_MAX    # microseconds
    timeInDriver: int = UINT64_MAX


@dataclass(frozen=True)
class OutputShape:
    dimensions: tuple[int, ...]
    isSufficient: bool


@dataclass
class Request:
    """One execution's arguments: an array per main-graph input (None: omitted) and, per
    output, the size in bytes of the caller's buffer (None: large enough)."""
    inputs: list
    output_sizes: list = field(default_factory=list)
