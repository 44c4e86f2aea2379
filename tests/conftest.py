import atexit
import os
import shutil
import sys
import tempfile

# Every simulation in the suite checks the compiler's dependencies (npu_sim/hazards.py), in
# subprocesses too; NPU_SIM_CHECK_HAZARDS=0 in the environment turns it off.
os.environ.setdefault("NPU_SIM_CHECK_HAZARDS", "1")

# Programs compiled by the suite go to a cache of its own (one per worker process, removed at
# exit), in subprocesses too: a run never reads what another checkout or an earlier run of the
# user's left in ~/.cache/npu-sim, nor leaves anything there. NPU_SIM_CACHE set in the
# environment is kept.
if "NPU_SIM_CACHE" not in os.environ:
    os.environ["NPU_SIM_CACHE"] = tempfile.mkdtemp(prefix="npu-sim-test-cache-")
    atexit.register(shutil.rmtree, os.environ["NPU_SIM_CACHE"], ignore_errors=True)

# tests/ (oracle.py, ops_sim_support.py) must be importable; npu_sim is the installed package
# (an editable install maps it to this checkout).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
