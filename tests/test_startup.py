"""What a cached integer run imports: neither simpy's package __init__ (importlib.metadata)
nor ml_dtypes, nor numpy.random for the inputs it makes up, while `import simpy` and the
float types still work once asked for."""
import os
import subprocess
import sys
from pathlib import Path

SMALL_CNN = Path(__file__).parent / "data" / "small_cnn" / "model.tosa"

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


NO_INPUTS = """
import sys
from npu_sim import api
result = api.run(sys.argv[1], "default")
assert result.outputs and "numpy.random" not in sys.modules and "hashlib" not in sys.modules
print("ok")
"""


def test_a_run_without_inputs_does_not_import_numpy_random():
    out = subprocess.run([sys.executable, "-c", NO_INPUTS, str(SMALL_CNN)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "NPU_SIM_CACHE": "off"})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


MISSING_SIMPY = """
import sys
class Hide:     # every finder finds nothing named simpy, as on a machine without it
    def __init__(self, finder):
        self.finder = finder
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] != "simpy":
            return self.finder.find_spec(name, path, target)
sys.meta_path[:] = [Hide(finder) for finder in sys.meta_path]
try:
    import npu_sim.simulator
except ModuleNotFoundError as e:
    print(e.name)
"""


def test_a_missing_simpy_is_named_as_import_simpy_would():
    out = subprocess.run([sys.executable, "-c", MISSING_SIMPY], capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "simpy", out.stderr
