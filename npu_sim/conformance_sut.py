"""npu-sim as a system under test for Arm's TOSA conformance runner (tosa_verif_run_tests).

    tosa_verif_run_tests --sut-module npu_sim.conformance_sut -r -t DIR \\
        --ref-model-path <path of Arm's reference model binary> \\
        [--sut-module-args npu_sim.conformance_sut:config=edge-256] [-j N]

The runner first runs the reference model in compliance mode on each valid test, then this
module, then compares the two with Arm's verifier. For every test this module loads, validates,
compiles and simulates the graph with npu-sim (config `default` unless `config=` is given; the
level follows the runner's --tosa-level) and writes an .npy for every ofm_file into the test
folder, in exactly the reference model's dtype. A graph npu-sim refuses (an NpuSimError: model,
validation, unsupported feature) is reported as TOSA_ERROR, which is the expected result
of ERROR_IF tests; a test folder that cannot be read as a test (conformance_folder.py) and any
other exception are OTHER_ERROR.

Module arguments (`--sut-module-args npu_sim.conformance_sut:KEY=VALUE`): config=NAME|PATH.
"""
from __future__ import annotations

import traceback
from pathlib import Path

from runner.tosa_test_runner import TosaTestRunner

from npu_sim.isa.errors import NpuSimError

from .conformance import conformance_config, write_outputs, run_graph
from .conformance_folder import MalformedTestError, check_desc


_LEVELS = {"EIGHTK": "8K", "8K": "8K", "NONE": "none"}


class TosaSUTRunner(TosaTestRunner):
    """Runs one conformance test on npu-sim."""

    def __init__(self, args, runnerArgs, testDirPath):
        super().__init__(args, runnerArgs, testDirPath)
        opts = {}
        for item in runnerArgs or []:
            key, sep, value = str(item).partition("=")
            opts[key.strip()] = value.strip() if sep else "1"
        self.config_spec = opts.get("config") or None
        level = str(getattr(args, "tosa_level", "") or "").upper()
        self.level = opts.get("level") or _LEVELS.get(level)

    def runTestGraph(self):
        try:
            config = conformance_config(self.config_spec, self.level)
            result = run_graph(Path(self.testDir), check_desc(self.testDesc), config)
        except MalformedTestError as exc:       # no verdict on the graph: the folder is at fault
            return TosaTestRunner.TosaGraphResult.OTHER_ERROR, f"{self.testDir}: {exc.one_line()}"
        except NpuSimError as exc:
            return TosaTestRunner.TosaGraphResult.TOSA_ERROR, exc.one_line()
        except Exception as exc:
            return (TosaTestRunner.TosaGraphResult.OTHER_ERROR,
                    f"npu-sim internal error: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        write_outputs(result.outputs, self.testDesc, Path(self.testDir))
        return TosaTestRunner.TosaGraphResult.TOSA_VALID, None
