import os
import sys

# Make tests/oracle.py and this directory's helpers importable as top-level modules.
_HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.dirname(_HERE), _HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)
