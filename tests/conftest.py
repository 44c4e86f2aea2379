import os
import sys

# Every simulation in the suite checks the compiler's dependencies (npu_sim/hazards.py), in
# subprocesses too; NPU_SIM_CHECK_HAZARDS=0 in the environment turns it off.
os.environ.setdefault("NPU_SIM_CHECK_HAZARDS", "1")

# tests/ (oracle.py, ops_sim_support.py) must be importable; npu_sim is the installed package
# (an editable install maps it to this checkout).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
