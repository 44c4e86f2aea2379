"""The systolic array's timing (isa/systolic.py) against folds worked by hand, and what the
machine and the compiler make of it: preloads, operand delivery, precision, tile shapes."""
import dataclasses
import json
import math
from pathlib import Path

import pytest

from npu_sim import api
from npu_sim.cost import CostModel
from npu_sim.isa.commands import Compute, dense, make_view
from npu_sim.isa.errors import UnsupportedError
from npu_sim.isa.systolic import array_time


def _array(rows, cols, dataflow, overlap=False, **kw):
    base = api.load_config("default").mac_array
    return dataclasses.replace(base, rows=rows, cols=cols, dataflow=dataflow, fold_overlap=overlap,
                               ports={}, **kw)


# (m, n, k) on a 4x4 array, worked fold by fold:
#  WS: ceil(10/4)=3 row folds x ceil(6/4)=2 column folds, each 4 (load weights) + 5 (inputs)
#      + 3 (skew down the rows) + 3 (across the columns) = 15 -> 90
#  OS: ceil(5/4)=2 x 2 folds, each 10 (terms) + 3 + 3 = 16 -> 64
#  IS: ceil(10/4)=3 x ceil(5/4)=2 folds, each 4 (load inputs) + 6 (weights) + 6 = 16 -> 96
@pytest.mark.parametrize("dataflow,cycles,fill", [
    ("weight_stationary", 90, 90 - 6 * 5), ("output_stationary", 64, 64 - 4 * 10),
    ("input_stationary", 96, 96 - 6 * 6)])
def test_folds_worked_by_hand(dataflow, cycles, fill):
    t = array_time(_array(4, 4, dataflow), "gemm", 5, 6, 10)
    assert (t.cycles, t.ideal, t.fill, t.stall) == (cycles, cycles, fill, 0)


def test_fold_overlap_hides_later_preloads():
    # WS, 6 folds streaming 5 inputs: one 4-cycle preload, 5 + 5 x max(5, 4) streamed, one skew
    t = array_time(_array(4, 4, "weight_stationary", overlap=True), "gemm", 5, 6, 10)
    assert t.cycles == 4 + 5 * 5 + 5 + 6
    # a stream shorter than the preload waits for the next fold's weights
    t = array_time(_array(4, 4, "weight_stationary", overlap=True), "gemm", 2, 6, 10)
    assert t.cycles == 4 + 5 * 4 + 2 + 6


def test_scale_sim_closed_forms_on_the_issue_table():
    # SCALE-Sim v3's compute cycles (issue #12) are the closed forms less one cycle
    arr = _array(32, 32, "weight_stationary")
    for (m, n, k), ws in {(1, 1000, 1024): 97279, (4, 768, 768): 56447,
                          (128, 128, 128): 3551, (49, 1280, 320): 57199}.items():
        assert array_time(arr, "gemm", m, n, k).cycles == ws + 1
    arr = _array(32, 32, "output_stationary")
    assert array_time(arr, "gemm", 12544, 96, 16).cycles == 91727 + 1


def _fc(m=1, k=256, n=128, dtype="int8"):
    """A fully-connected layer as one conv2d command: [1, 1, m, k] x [n, 1, 1, k]."""
    return Compute(id=0, unit="mac", op="conv2d",
                   inputs={"ifm": dense(0, 0, (1, 1, m, k), dtype),
                           "weights": dense(0, 4096, (n, 1, 1, k), "int8")},
                   outputs={"ofm": dense(0, 1 << 17, (1, 1, m, n), dtype)},
                   attrs={"stride": (1, 1)})


def test_m1_fully_connected_pays_the_weight_preload():
    cfg = api.load_config("default")
    arr = cfg.mac_array
    assert (arr.dataflow, arr.rows, arr.cols) == ("weight_stationary", 32, 32)
    cost = CostModel(cfg, list(cfg.memories)).of(_fc())
    folds = math.ceil(256 / 32) * math.ceil(128 / 32)
    # every fold loads a 32x32 weight block: 32 rows, and 1 KiB over the weight port
    preload = max(32, 32 * 32 / arr.ports["weights"])
    assert cost.busy >= folds * preload
    assert cost.fill >= cost.busy - folds * 1          # one input streams per fold
    # int16 activations: half rate, so each fold streams twice as long, but with fold_overlap
    # only the last fold's stream shows: the others hide behind the next preload
    wide = CostModel(cfg, list(cfg.memories)).of(_fc(dtype="int16"))
    assert wide.busy - cost.busy == 1


def test_depthwise_is_bounded_by_operand_delivery():
    cfg = api.load_config("default")
    arr = cfg.mac_array
    m, channels, taps = 56 * 56, 144, 9
    t = array_time(arr, "depthwise", m, channels, taps, bank_bpc=1 << 20)
    # every PE needs its own activation each cycle: m x channels x taps bytes over the port
    assert t.cycles >= m * channels * taps / arr.ports["activations"]
    assert t.stall > t.ideal
    unlimited = array_time(dataclasses.replace(arr, ports={}), "depthwise", m, channels, taps)
    assert unlimited.stall == 0 and unlimited.cycles < t.cycles


def test_a_pair_missing_from_the_precision_table_is_refused(tmp_path):
    cfg = api.load_config("default")
    narrow = cfg.with_overrides({"mac_array.precision": {"int8xint8": 1}})
    model = tmp_path / "m.tosa"
    from npu_sim.zoo import build
    data, _ = build("ds_cnn", channels=8, num_classes=2)
    model.write_bytes(data)
    api.compile_model(model, narrow, use_cache=False)            # int8 x int8 only: fine
    graph_cfg = narrow.with_overrides({"mac_array.precision": {"int16xint8": 0.5},
                                       "mac_array.dtypes": ["int8", "int16"]})
    with pytest.raises(UnsupportedError, match=r"layer '.+' \(CONV2D\): the MAC array has no int8 x int8"):
        api.compile_model(model, graph_cfg, use_cache=False)


def test_int16_activations_take_the_passes_the_table_gives():
    arr = _array(32, 32, "weight_stationary")
    full = array_time(arr, "gemm", 64, 32, 32, npass=1)
    half = array_time(arr, "gemm", 64, 32, 32, npass=2)
    assert half.compute == 2 * full.compute and half.fill == full.fill


def test_accumulator_overflow_costs_partial_sum_traffic():
    arr = dataclasses.replace(_array(8, 8, "weight_stationary"), ports={"outputs": 32})
    roomy = array_time(dataclasses.replace(arr, accumulators=4096), "gemm", 1024, 8, 64)
    tight = array_time(dataclasses.replace(arr, accumulators=256), "gemm", 1024, 8, 64)
    assert roomy.stall == 0 < tight.stall


def test_the_tilers_tiles_change_with_the_array_shape():
    model = Path(__file__).parent / "data" / "mbv2_050_128" / "model.tosa"
    base = api.load_config("edge-256")
    shapes = {}
    for rows, cols in ((16, 16), (8, 64)):
        cfg = base.with_overrides({"mac_array.rows": rows, "mac_array.cols": cols})
        program = api.compile_model(model, cfg)
        shapes[rows, cols] = [tuple(c.outputs[next(iter(c.outputs))].shape) for c in program.commands
                              if getattr(c, "unit", "") == "mac"]
    assert shapes[16, 16] != shapes[8, 64]


def _two_engines(dma_addr: int, cfg) -> int:
    """A DMA from DRAM into the buffer beside a vector add, both 64 KiB: cycles of the run."""
    from npu_sim.isa.commands import DmaCopy
    from npu_sim.isa.program import Program
    from npu_sim.simulator import Machine
    size = 64 * 1024
    add = json.dumps([{"fn": "ADD", "args": ["in0", "in1"], "dtype": "int8"}])
    commands = [
        DmaCopy(id=0, channel=0, src=dense(1, 0, (size,), "int8"),
                dst=dense(0, dma_addr, (size,), "int8")),
        Compute(id=1, unit="vector", op="elementwise",
                inputs={"in0": dense(0, 0, (size,), "int8"), "in1": dense(0, size, (size,), "int8")},
                outputs={"out": dense(0, 2 * size, (size,), "int8")}, attrs={"program": add})]
    program = Program(["dram"], [1 << 20, 1 << 20], commands, [], [], [], [])
    return Machine(program, cfg, check_hazards=False).run(compute_values=False).cycles


def test_engines_sharing_banks_take_longer_than_on_separate_banks():
    # four 256 KiB banks, not interleaved: each 64 KiB tensor lies in one bank
    cfg = api.load_config("default").with_overrides({
        "sram.banks": 4, "sram.interleave": "256 KiB", "sram.bytes_per_cycle": 16,
        "memories.dram.bandwidth_gbps": 64, "dma.bytes_per_cycle": 64})
    shared = _two_engines(3 * 64 * 1024, cfg)        # the vector unit's bank 0
    separate = _two_engines(512 * 1024, cfg)         # bank 2, which the vector unit leaves alone
    assert shared > separate * 1.3


def test_vector_micro_ops_cost_by_their_operators_class():
    cfg = api.load_config("default")
    n = 64 * 100
    program = json.dumps([{"fn": "RESCALE", "args": ["in0"], "dtype": "int32"},
                          {"fn": "ADD", "args": ["%0", "in1"], "dtype": "int32"},
                          {"fn": "INTDIV", "args": ["%1", "in1"], "dtype": "int32"}])
    cmd = Compute(id=0, unit="vector", op="elementwise",
                  inputs={"in0": dense(0, 0, (n,), "int32"), "in1": dense(0, 1 << 16, (n,), "int32")},
                  outputs={"out": dense(0, 1 << 17, (n,), "int32")}, attrs={"program": program})
    cost = CostModel(cfg, list(cfg.memories)).of(cmd)
    assert cost.vector == {"rescale": n, "add": n, "divide": n}
    cpl = cfg.vector_unit.cycles_per_lane
    assert cost.busy == math.ceil(n * (cpl["rescale"] + cpl["add"] + cpl["divide"]) / 64)


def test_compute_reading_short_strided_runs_pays_whole_bank_words():
    # 16-B runs 64 B apart (a channel slice read in place): the banks serve whole 64-B words,
    # so each run costs a word, as it does a DMA; the contiguous output pays its bytes
    cfg = api.load_config("default")
    word, rows = cfg.sram.bytes_per_cycle, 400
    add = json.dumps([{"fn": "ADD", "args": ["in0", "in1"], "dtype": "int8"}])

    def cost(strides):
        views = {f"in{i}": make_view((0, i * rows * word, (rows, 16), strides, "int8"))
                 for i in range(2)}
        cmd = Compute(id=0, unit="vector", op="elementwise", inputs=views,
                      outputs={"out": dense(0, 1 << 17, (rows, 16), "int8")},
                      attrs={"program": add})
        return CostModel(cfg, list(cfg.memories)).of(cmd)

    strided, packed = cost((word, 1)), cost((16, 1))
    assert strided.bank_cycles == math.ceil((2 * rows * word + rows * 16)
                                            / (len(strided.banks) * word))
    assert strided.bank_cycles > 2 * packed.bank_cycles
    # the MAC array's operand reads too: an FC whose input rows are 16-B runs of 64-B words
    fc = _fc(m=64, k=16)
    fc.inputs["ifm"] = make_view((0, 0, (1, 1, 64, 16), (64 * word, 64 * word, word, 1), "int8"))
    packed_fc = CostModel(cfg, list(cfg.memories)).of(_fc(m=64, k=16))
    assert CostModel(cfg, list(cfg.memories)).of(fc).bank_cycles > packed_fc.bank_cycles
