"""npu-sim as an NNAPI device: the HAL's types (hal.py), models (the NNAPI frontend's
structures), the Device and its prepared models (device.py), Capabilities (capabilities.py),
execution preferences (schedule.py) and the CTS runner (cts.py)."""
import importlib

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


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
