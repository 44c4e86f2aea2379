"""Design-space exploration: sweep NPU configurations over networks and find the Pareto front.

    from npu_sim.dse import evaluate_point, pareto_front, load_sweep, run_sweep
    row = evaluate_point("edge-256", {"sram.size": "96 KiB"}, "zoo:ds_cnn")
    front = pareto_front(rows, {"latency_ms": "min", "area_mm2": "min"})

The command line is `npu-sim dse SWEEP.yaml` (npu_sim.dse.cli).
"""
from ..api import compile_model, load_config, run, simulate
from ..area import area_mm2
from .evaluate import evaluate_point
from .pareto import aggregate, best, pareto_front
from .runner import SweepResult, make_executor, run_sweep
from .sweep import Sweep, load_sweep, sweep_from_dict

__all__ = ["evaluate_point", "pareto_front", "aggregate", "best", "load_sweep", "sweep_from_dict", "run_sweep",
           "make_executor", "Sweep", "SweepResult", "area_mm2", "load_config", "compile_model", "simulate", "run"]
