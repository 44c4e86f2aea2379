"""npu-sim as an NNAPI device: the HAL's types (hal.py), models (the NNAPI frontend's
structures), the Device and its prepared models (device.py), Capabilities (capabilities.py),
execution preferences (schedule.py) and the CTS runner (cts.py)."""
from npu_sim.lazy import lazy_exports

# Attribute -> the module defining it, imported on first use: the CLI's parser imports
# npu_sim.nnapi.cli without numpy, the frontends or the device.
_MODEL = "npu_sim.compiler.frontends.nnapi.model"
_WHERE = {**dict.fromkeys(("Model", "Operand", "OperandLifeTime", "OperandType", "Operation",
                           "OperationType", "Subgraph", "model_from_dict"), _MODEL),
          "ModelBuilder": ".builder", "Device": ".device", "PreparedModel": ".device",
          **dict.fromkeys(("FLT_MAX", "UINT64_MAX", "Capabilities", "ErrorStatus",
                           "ExecutionPreference", "MeasureTiming", "OutputShape",
                           "PerformanceInfo", "Priority", "Request", "Timing"), ".hal")}

__all__ = ["Model", "Operand", "OperandLifeTime", "OperandType", "Operation", "OperationType",
           "Subgraph", "model_from_dict", "ModelBuilder", "Device", "PreparedModel", "FLT_MAX",
           "UINT64_MAX", "Capabilities", "ErrorStatus", "ExecutionPreference", "MeasureTiming",
           "OutputShape", "PerformanceInfo", "Priority", "Request", "Timing"]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
