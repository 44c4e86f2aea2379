"""Design-space exploration: sweep NPU configurations over networks and find the Pareto front.

    from npu_sim.dse import evaluate_point, pareto_front, load_sweep, run_sweep
    row = evaluate_point("edge-256", {"sram.size": "96 KiB"}, "zoo:ds_cnn")
    front = pareto_front(rows, {"latency_ms": "min", "area_mm2": "min"})

The command line is `npu-sim dse SWEEP.yaml` (npu_sim.dse.cli).
"""
from npu_sim.lazy import lazy_exports

# Attribute -> the module defining it, imported on first use: `npu-sim --help` and the other
# subcommands import npu_sim.dse.cli without the simulator, numpy or the sweep machinery.
_WHERE = {"compile_model": "..api", "load_config": "..api", "run": "..api", "simulate": "..api",
          "area_mm2": "..area", "evaluate_point": ".evaluate", "aggregate": ".pareto",
          "best": ".pareto", "pareto_front": ".pareto", "SweepResult": ".runner",
          "make_executor": ".runner", "run_sweep": ".runner", "Sweep": ".sweep",
          "load_sweep": ".sweep", "sweep_from_dict": ".sweep"}

__all__ = ["evaluate_point", "pareto_front", "aggregate", "best", "load_sweep", "sweep_from_dict", "run_sweep",
           "make_executor", "Sweep", "SweepResult", "area_mm2", "load_config", "compile_model", "simulate", "run"]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
