"""npu-sim: a cycle-level simulator of a fixed-function NPU running TOSA 1.0 integer graphs."""

__version__ = "0.1.0"
