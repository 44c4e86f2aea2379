"""npu-sim: a cycle-level simulator of a fixed-function NPU running TOSA 1.0 integer graphs."""

import os

# The datapath's products are many mid-sized GEMMs: one BLAS thread per process is fastest on
# small machines and under parallel sweeps (threaded OpenBLAS busy-waits when cores are shared).
# Set before numpy loads; an explicit setting in the environment wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

__version__ = "0.1.0"
