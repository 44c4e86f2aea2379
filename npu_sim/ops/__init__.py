"""The machine's side of each operator, one module per operator family (the family of each
operator is in isa/operators.py): kernels per opcode, their vector-unit cost, chain micro-ops
and host evaluations. Importing the package registers every family."""
from . import control, conversion, data_layout, elementwise, tensor_ops  # noqa: F401  (register)
from .common import (HOST_OPS, MAC_KERNELS, MICRO_OPS, SHAPE_CHECKS, VECTOR_KERNELS, VECTOR_WORK,
                     HostCall)

__all__ = ["HOST_OPS", "MAC_KERNELS", "MICRO_OPS", "SHAPE_CHECKS", "VECTOR_KERNELS", "VECTOR_WORK",
           "HostCall"]
