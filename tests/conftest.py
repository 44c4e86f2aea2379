import os
import sys

# Every simulation in the suite checks the compiler's dependencies (npu_sim/hazards.py), in
# subprocesses too; NPU_SIM_CHECK_HAZARDS=0 in the environment turns it off.
os.environ.setdefault("NPU_SIM_CHECK_HAZARDS", "1")

# The repo root (compiler/, npu_sim/, isa/) and tests/ (oracle.py) must be importable.
_HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.dirname(_HERE), _HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)
