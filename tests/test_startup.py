"""What a cached integer run imports: neither simpy's package __init__ (importlib.metadata)
nor ml_dtypes, while `import simpy` and the float types still work once asked for."""
import subprocess
import sys

CHECK = """
import sys
import npu_sim.api, npu_sim.execute, npu_sim.cli
assert "importlib.metadata" not in sys.modules and "ml_dtypes" not in sys.modules
import numpy as np
from npu_sim.isa.dtypes import STORAGE, DTYPES, as_npy
from npu_sim.datapath import is_float
assert not is_float(np.int8) and is_float(np.float16) and "bf16" in STORAGE
assert "ml_dtypes" not in sys.modules and DTYPES["bf16"].itemsize == 2
assert STORAGE.get("bf16") is not None and "ml_dtypes" in sys.modules
assert is_float(STORAGE["fp8e5m2"]) and as_npy(np.zeros(2, STORAGE["bf16"])).dtype == "V2"
import simpy
from npu_sim.simulator import Environment
assert simpy.Environment is Environment and simpy.Resource.__module__ == "simpy.resources.resource"
assert simpy.__version__
print("ok")
"""


def test_a_run_imports_neither_importlib_metadata_nor_ml_dtypes():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
