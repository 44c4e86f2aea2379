"""npu-sim as an NNAPI device: the HAL's types (hal.py), models (the NNAPI frontend's
structures), the Device and its prepared models (device.py), Capabilities (capabilities.py),
execution preferences (schedule.py) and the CTS runner (cts.py)."""
from npu_sim.compiler.frontends.nnapi.model import (Model, Operand, OperandLifeTime, OperandType,
                                                    Operation, OperationType, Subgraph,
                                                    model_from_dict)

from .builder import ModelBuilder
from .device import Device, PreparedModel
from .hal import (FLT_MAX, UINT64_MAX, Capabilities, ErrorStatus, ExecutionPreference,
                  MeasureTiming, OutputShape, PerformanceInfo, Priority, Request, Timing)

__all__ = ["Model", "Operand", "OperandLifeTime", "OperandType", "Operation", "OperationType",
           "Subgraph", "model_from_dict", "ModelBuilder", "Device", "PreparedModel", "FLT_MAX",
           "UINT64_MAX", "Capabilities", "ErrorStatus", "ExecutionPreference", "MeasureTiming",
           "OutputShape", "PerformanceInfo", "Priority", "Request", "Timing"]
