import os
import sys

# The repo root (compiler/, npu_sim/, isa/) and tests/ (oracle.py) must be importable.
_HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.dirname(_HERE), _HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)
