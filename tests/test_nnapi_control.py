"""NNAPI IF and WHILE (types.spec) through the device: their subgraphs run as TOSA COND_IF /
WHILE_LOOP regions; results against types.spec's semantics computed here in numpy."""
import json
from dataclasses import replace

import numpy as np
import pytest

from npu_sim.compiler.frontends.nnapi import model_from_dict
from npu_sim.isa.errors import ModelError
from npu_sim.nnapi import Device, ErrorStatus, Request

Q8 = dict(type="TENSOR_QUANT8_ASYMM", scale=0.5, zeroPoint=10)
C8 = dict(type="TENSOR_QUANT8_ASYMM", scale=1.0, zeroPoint=0)      # counts as they are


def _opd(life, type="TENSOR_INT32", dims=(1,), data=(), **q):
    return {"type": type, "dimensions": list(dims), "lifetime": life, "data": list(data),
            "scale": q.get("scale", 0.0), "zeroPoint": q.get("zeroPoint", 0)}


def _sg(operands, operations, ins, outs):
    return {"operands": operands, "operations": [{"type": t, "inputs": i, "outputs": o}
                                                 for t, i, o in operations],
            "inputIndexes": ins, "outputIndexes": outs}


def _act():
    return _opd("CONSTANT_COPY", "INT32", (), [0])


def _binary(op, q=Q8):
    """out = a op b on [4] tensors of q's type."""
    ops = [_opd("SUBGRAPH_INPUT", dims=(4,), **q), _opd("SUBGRAPH_INPUT", dims=(4,), **q),
           _act(), _opd("SUBGRAPH_OUTPUT", dims=(4,), **q)]
    return _sg(ops, [(op, [0, 1, 2], [3])], [0, 1], [3])


def _if_case(then="ADD", other="SUB"):
    main = [_opd("SUBGRAPH_INPUT", "TENSOR_BOOL8"),
            _opd("SUBGRAPH_INPUT", dims=(4,), **Q8), _opd("SUBGRAPH_INPUT", dims=(4,), **Q8),
            _opd("SUBGRAPH", "SUBGRAPH", (), [0]), _opd("SUBGRAPH", "SUBGRAPH", (), [1]),
            _opd("SUBGRAPH_OUTPUT", dims=(4,), **Q8)]
    return {"name": "if_add_sub", "main": _sg(main, [("IF", [0, 3, 4, 1, 2], [5])], [0, 1, 2], [5]),
            "referenced": [_binary(then), _binary(other)]}


def _while_case():
    """uint8 counters, (i, acc) carried, limit input-only: while i < limit: acc += i; i += 1."""
    cond = _sg([_opd("SUBGRAPH_INPUT", **C8), _opd("SUBGRAPH_INPUT", **C8), _opd("SUBGRAPH_INPUT", **C8),
                _opd("SUBGRAPH_OUTPUT", "TENSOR_BOOL8")], [("LESS", [0, 2], [3])], [0, 1, 2], [3])
    body = _sg([_opd("SUBGRAPH_INPUT", **C8), _opd("SUBGRAPH_INPUT", **C8), _opd("SUBGRAPH_INPUT", **C8),
                _opd("CONSTANT_COPY", data=[1], **C8), _act(),
                _opd("SUBGRAPH_OUTPUT", **C8), _opd("SUBGRAPH_OUTPUT", **C8)],
               [("ADD", [0, 3, 4], [5]), ("ADD", [1, 0, 4], [6])], [0, 1, 2], [5, 6])
    main = [_opd("SUBGRAPH_INPUT", **C8), _opd("SUBGRAPH_INPUT", **C8), _opd("SUBGRAPH_INPUT", **C8),
            _opd("SUBGRAPH", "SUBGRAPH", (), [0]), _opd("SUBGRAPH", "SUBGRAPH", (), [1]),
            _opd("SUBGRAPH_OUTPUT", **C8), _opd("SUBGRAPH_OUTPUT", **C8)]
    return {"name": "while_sum", "main": _sg(main, [("WHILE", [3, 4, 0, 1, 2], [5, 6])],
                                             [0, 1, 2], [5, 6]),
            "referenced": [cond, body]}


@pytest.fixture(scope="module")
def device():
    return Device("default")


def _run(device, case, inputs):
    status, prepared = device.prepareModel(model_from_dict(json.loads(json.dumps(case))))
    assert status == ErrorStatus.NONE
    status, _, _, outs = prepared.execute(Request(inputs))
    assert status == ErrorStatus.NONE
    return outs


def test_if_chooses_the_subgraph_by_the_condition(device):
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 256, 4).astype(np.uint8), rng.integers(0, 256, 4).astype(np.uint8)
    for cond, want in ((True, a.astype(int) + b - 10), (False, a.astype(int) - b + 10)):
        got = _run(device, _if_case(), [np.array([cond]), a, b])[0]
        # equal scales and zero points: the real sum/difference is exact, then saturated
        assert np.array_equal(got, np.clip(want, 0, 255)), (cond, got, want)


def test_while_carries_the_body_outputs_into_the_next_iteration(device):
    for i0, acc0, limit in ((0, 0, 5), (3, 100, 9), (7, 1, 2)):
        i, acc = i0, acc0
        while i < limit:
            i, acc = i + 1, acc + i
        got = _run(device, _while_case(), [np.array([v], np.uint8) for v in (i0, acc0, limit)])
        assert [int(g[0]) for g in got] == [i, acc], (i0, acc0, limit)


def test_supported_only_with_supported_subgraphs_and_ext_controlflow(device):
    for case in (_if_case(), _while_case()):
        assert device.supported_operations(model_from_dict(case)) == [(True, "")]
    bad = _if_case(other="L2_NORMALIZATION")
    bad["referenced"][1]["operations"][0]["inputs"] = [0]
    (ok, why), = device.supported_operations(model_from_dict(bad))
    assert not ok and "operation #0 IF: else subgraph (subgraph 1) operation #0 " \
        "L2_NORMALIZATION" in why
    cfg = device.config
    no_cf = replace(cfg, tosa=replace(cfg.tosa, extensions=tuple(
        e for e in cfg.tosa.extensions if e != "EXT-CONTROLFLOW")))
    for case in (_if_case(), _while_case()):
        (ok, why), = Device(no_cf).supported_operations(model_from_dict(case))
        assert not ok and "EXT-CONTROLFLOW" in why


@pytest.mark.parametrize("edit,rule", [
    (lambda c: c["main"]["operands"][4]["data"].__setitem__(0, 5), "operand 4 \\(input 2 of operation 0 IF\\): references subgraph 5; there are 2"),
    (lambda c: c["main"]["operations"][0].update(inputs=[0, 3, 4, 1]),
     "operation #0 IF: then subgraph has 2 inputs; the operation gives 1"),
    (lambda c: c["main"]["operations"][0].update(inputs=[1, 3, 4, 1, 2]),
     "operation #0 IF: input 0 \\(condition\\) must be a TENSOR_BOOL8"),
    (lambda c: c["referenced"][1]["operands"][0].update(zeroPoint=11),
     "operation #0 IF: else subgraph input 0 is TENSOR_QUANT8_ASYMM\\[4\\] scale 0.5 zp 11"),
    (lambda c: c["referenced"][0]["operands"][3].update(dimensions=[2]) or
     c["referenced"][0]["operands"][0].update(dimensions=[2]) or
     c["referenced"][0]["operands"][1].update(dimensions=[2]),
     "operation #0 IF: then subgraph input 0 is"),
])
def test_invalid_subgraph_references_are_invalid_argument(device, edit, rule):
    case = _if_case()
    edit(case)
    with pytest.raises(ModelError, match=rule):
        device.supported_operations(model_from_dict(case))
    try:
        model = model_from_dict(case)
    except ModelError:
        return
    assert device.getSupportedOperations(model)[0] == ErrorStatus.INVALID_ARGUMENT
    assert device.prepareModel(model)[0] == ErrorStatus.INVALID_ARGUMENT


@pytest.mark.parametrize("edit,rule", [
    (lambda c: c["referenced"][0]["operands"][3].update(C8),
     "operation #0 WHILE: condition subgraph must have one output, a TENSOR_BOOL8 of shape"),
    (lambda c: c["referenced"][1].update(outputIndexes=[5]) or
     c["referenced"][1]["operands"][6].update(lifetime="TEMPORARY_VARIABLE"),
     "operation #0 WHILE: body subgraph has 1 outputs; the operation has 2"),
    (lambda c: c["main"]["operations"][0].update(inputs=[3, 4, 0, 1]),
     "operation #0 WHILE: condition subgraph has 3 inputs; the operation gives 2"),
    (lambda c: c["main"]["operations"][0].update(inputs=[0, 4, 0, 1, 2]),
     "operation #0 WHILE: input 0 \\(condition subgraph\\) must be a SUBGRAPH operand"),
])
def test_invalid_while_references(device, edit, rule):
    case = _while_case()
    edit(case)
    model = model_from_dict(case)
    with pytest.raises(ModelError, match=rule):
        device.supported_operations(model)
    assert device.getSupportedOperations(model)[0] == ErrorStatus.INVALID_ARGUMENT


def _nested_if(inner_ref):
    """main: IF(c, s0, s1; c, a, b); s0 holds IF(c, s<inner_ref>, s1; c, a, b); s1: a + b."""
    def io(life_out):
        return [_opd("SUBGRAPH_INPUT", "TENSOR_BOOL8"), _opd("SUBGRAPH_INPUT", dims=(4,), **Q8),
                _opd("SUBGRAPH_INPUT", dims=(4,), **Q8)], _opd(life_out, dims=(4,), **Q8)
    (ins, out), refs = io("SUBGRAPH_OUTPUT"), []
    main = _sg(ins + [_opd("SUBGRAPH", "SUBGRAPH", (), [0]), _opd("SUBGRAPH", "SUBGRAPH", (), [1]),
                      out], [("IF", [0, 3, 4, 0, 1, 2], [5])], [0, 1, 2], [5])
    refs.append(_sg(ins + [_opd("SUBGRAPH", "SUBGRAPH", (), [inner_ref]),
                           _opd("SUBGRAPH", "SUBGRAPH", (), [1]), out],
                    [("IF", [0, 3, 4, 0, 1, 2], [5])], [0, 1, 2], [5]))
    refs.append(_sg(ins + [_act(), out], [("ADD", [1, 2, 3], [4])], [0, 1, 2], [4]))
    return {"name": "nested_if", "main": main, "referenced": refs}


def test_nested_if_runs_and_a_cycle_is_invalid(device):
    a, b = np.array([1, 2, 3, 200], np.uint8), np.array([4, 5, 6, 100], np.uint8)
    for cond in (True, False):
        got = _run(device, _nested_if(1), [np.array([cond]), a, b])[0]
        assert np.array_equal(got, np.clip(a.astype(int) + b - 10, 0, 255))
    with pytest.raises(ModelError, match="then subgraph \\(subgraph 0\\) .*contains the "
                                         "operation itself"):
        device.supported_operations(model_from_dict(_nested_if(0)))
