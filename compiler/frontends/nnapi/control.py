"""IF and WHILE (types.spec): their referenced subgraphs become TOSA regions of the graph, run
by COND_IF / WHILE_LOOP (EXT-CONTROLFLOW, on the host CPU). Each region is the subgraph lowered
like the main one, but its inputs and outputs keep the internal storage (a uint8 operand stays
int8 less 128, as the caller's operands already are). A WHILE's input-only operands are loop
values that the body region passes through unchanged, since TOSA's WHILE_LOOP carries one list.
A subgraph's operations are translated when the IF/WHILE is, so an invalid or unsupported one
makes the IF/WHILE so, with its place named."""
from __future__ import annotations

from npu_sim.isa.errors import NpuSimError

from .model import OperandLifeTime, OperandType, Subgraph

BOOL8 = OperandType.TENSOR_BOOL8


def region_name(index: int, passes: int = 0) -> str:
    return f"subgraph{index}" + (f"_pass{passes}" if passes else "")


def _subgraph(t, pos: int, role: str) -> tuple[int, Subgraph]:
    o = t.operand(pos)
    t.need(o.type == OperandType.SUBGRAPH and o.lifetime == OperandLifeTime.SUBGRAPH and
           o.data is not None, f"input {pos} ({role}) must be a SUBGRAPH operand, not "
           f"{o.type.name} {o.lifetime.name}")
    idx = int(o.data.reshape(-1)[0])
    t.need(0 <= idx < len(t.referenced), f"input {pos} ({role}) references subgraph {idx}; "
           f"there are {len(t.referenced)}")
    return idx, t.referenced[idx]


def _match(t, role: str, what: str, outer: list[int], inner: list[int], sg: Subgraph):
    """types.spec: the same count, and each the same type, dimensions, scale and zeroPoint."""
    t.need(len(outer) == len(inner), f"{role} has {len(inner)} {what}; the operation gives "
           f"{len(outer)}")
    for j, (a, b) in enumerate(zip(outer, inner)):
        x, y = t.sg.operands[a], sg.operands[b]
        t.need((x.type, tuple(x.dimensions), x.scale, x.zero_point) ==
               (y.type, tuple(y.dimensions), y.scale, y.zero_point),
               f"{role} {what[:-1]} {j} is {y.describe()}; the operation's is {x.describe()}")


def _region(t, idx: int, sg: Subgraph, role: str, passes: int = 0) -> str:
    """Translates subgraph idx (once) into t.regions; its operations' rules are checked here."""
    from . import translate          # the package's translate, which dispatches IF/WHILE too
    name = region_name(idx, passes)
    if name in t.regions:
        return name
    t.need(idx not in t.stack, f"{role} (subgraph {idx}) contains the operation itself")
    for k in sg.input_indexes + sg.output_indexes:
        if not sg.operands[k].is_tensor:
            t.unsupported(f"{role} (subgraph {idx}) has a {sg.operands[k].type.name} "
                          "input or output; the device takes only tensors there")
    if passes:                       # the input-only operands as extra outputs
        sg = Subgraph(sg.operands, sg.operations, sg.input_indexes,
                      sg.output_indexes + sg.input_indexes[-passes:], sg.name)
    try:
        sub = translate(sg, referenced=t.referenced, stack=t.stack | {idx}, relaxed=t.relaxed)
    except NpuSimError as exc:
        raise type(exc)(f"{t.where()}: {role} (subgraph {idx}) {exc}") from None
    t.regions.update(sub.regions)
    t.regions[name] = (sg, sub)
    return name


def if_(t):
    t.need(t.n_inputs() >= 3, f"takes at least 3 inputs, got {t.n_inputs()}")
    cond = t.operand(0)
    t.need(cond.type == BOOL8 and cond.count == 1 and len(cond.dimensions) == 1,
           f"input 0 (condition) must be a TENSOR_BOOL8 of shape [1], not {cond.describe()}")
    ins, outs = t.op.inputs[3:], t.op.outputs
    names = []
    for pos, role in ((1, "then subgraph"), (2, "else subgraph")):
        idx, sg = _subgraph(t, pos, role)
        _match(t, role, "inputs", ins, sg.input_indexes, sg)
        _match(t, role, "outputs", outs, sg.output_indexes, sg)
        names.append(_region(t, idx, sg, role))
    t.emit("NNAPI_IF", [t.op.inputs[0]] + ins, outs, then_graph=names[0], else_graph=names[1])


def while_(t):
    t.need(t.n_inputs() >= 3, f"takes at least 3 inputs, got {t.n_inputs()}")
    t.need(len(t.op.outputs) >= 1, "takes at least 1 output")
    (ci, cond), (bi, body) = _subgraph(t, 0, "condition subgraph"), _subgraph(t, 1, "body subgraph")
    ins, outs = t.op.inputs[2:], t.op.outputs
    m, carried = len(outs), len(body.output_indexes)
    t.need(carried >= m, f"body subgraph has {carried} outputs; the operation has {m}")
    t.need(len(ins) >= carried, f"body subgraph has {carried} outputs; the operation gives "
           f"{len(ins)} inputs")
    _match(t, "condition subgraph", "inputs", ins, cond.input_indexes, cond)
    _match(t, "body subgraph", "inputs", ins, body.input_indexes, body)
    _match(t, "body subgraph", "outputs", ins[:carried], body.output_indexes, body)
    _match(t, "body subgraph", "outputs", outs, body.output_indexes[:m], body)
    c = cond.output_indexes
    t.need(len(c) == 1 and cond.operands[c[0]].type == BOOL8 and
           tuple(cond.operands[c[0]].dimensions) == (1,), "condition subgraph must have one "
           "output, a TENSOR_BOOL8 of shape [1]")
    names = (_region(t, ci, cond, "condition subgraph"),
             _region(t, bi, body, "body subgraph", len(ins) - carried))
    extra = [t.synth(t.tensors[k].shape, t.tensors[k].dtype, like=k) for k in ins[m:]]
    t.emit("NNAPI_WHILE", ins, outs + extra, cond_graph=names[0], body_graph=names[1])


def lower(op: str):
    """The COND_IF / WHILE_LOOP of an NNAPI_IF / NNAPI_WHILE record, on its regions' names."""
    keys = ("then_graph", "else_graph") if op == "COND_IF" else ("cond_graph", "body_graph")

    def run(L):
        from npu_sim.compiler.ir import Operator
        ins = [L.value(i) for i in range(len(L.op.inputs))]
        outs = [L.out(i) for i in range(len(L.op.outputs))]
        b = L.b
        b.operators.append(Operator(op, ins, outs, {k: L.op.options[k] for k in keys},
                                    b.origin, len(b.operators)))
    return run


BUILTINS = {"NNAPI_IF": lower("COND_IF"), "NNAPI_WHILE": lower("WHILE_LOOP")}
