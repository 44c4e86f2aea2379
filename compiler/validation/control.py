"""Data nodes (CONST, CONST_SHAPE, IDENTITY), control flow (COND_IF, WHILE_LOOP, EXT-CONTROLFLOW)
and variables (EXT-VARIABLE). Control flow and variables are checked lightly: operand lists
against the bodies in graph.regions, nesting depth, list sizes, and the bodies themselves."""
from __future__ import annotations

import math

import numpy as np

from .context import OpContext, fmt_shape
from .registry import check


@check("CONST", "CONST_SHAPE")
def const(ctx: OpContext) -> None:
    tensor = ctx.tensor("output")
    if tensor.data is None:
        ctx.fail(f"{ctx.op.op} output '{tensor.name}' carries no values", "values is not given",
                 tensor.name)
    expected = math.prod(int(d) for d in tensor.shape)
    if tensor.dtype != "shape" and np.asarray(tensor.data).size != expected:
        ctx.fail(f"values hold {np.asarray(tensor.data).size} elements; shape {fmt_shape(tensor.shape)} "
                 f"needs {expected}", "shape(values) != shape(output)", tensor.name)


def _variable_type(ctx: OpContext, t, what: str) -> None:
    """EXT-VARIABLE's types: int8, and fp16/fp32 with PRO-FP ([SPEC] tosa.xml VARIABLE rows)."""
    if t.dtype in ("fp16", "fp32"):
        ctx.need_extension("PRO-FP", f"a {t.dtype} variable")
    elif t.dtype != "int8":
        allowed = "int8, fp16, fp32" if ctx.cfg.has("PRO-FP") else "int8"
        ctx.fail(f"{what} '{t.name}' is {t.dtype}; EXT-VARIABLE supports {allowed}",
                 "data types not in the Supported Data Types of VARIABLE_READ/WRITE (WrongInputType)",
                 t.name)


def _variable_access(ctx: OpContext, names) -> None:
    tensors = [ctx.graph.tensors[n] for n in names if n in ctx.graph.tensors]
    if not any(t.variable for t in tensors):
        return
    ctx.need_extension("EXT-VARIABLE", "a variable tensor access")
    for t in tensors:
        _variable_type(ctx, t, "variable access on")


@check("IDENTITY")
def identity(ctx: OpContext) -> None:
    # tosa-opt serializes VARIABLE_READ / VARIABLE_WRITE as IDENTITY on a variable tensor
    _variable_access(ctx, list(ctx.op.inputs) + list(ctx.op.outputs))


# Which operands of each name the variable itself: a declaration names nothing else, a read
# reads it and a write writes it (the compiler gives a declaration no step to write others).
_VARIABLE_OPERANDS = {"VARIABLE": ("inputs", "outputs"), "VARIABLE_READ": ("inputs",),
                      "VARIABLE_WRITE": ("outputs",)}


@check("VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE")
def variable(ctx: OpContext) -> None:
    ctx.need_extension("EXT-VARIABLE", ctx.op.op)
    counts = len(ctx.op.inputs), len(ctx.op.outputs)
    if ctx.op.op != "VARIABLE" and counts != (1, 1):      # a copy from or into the variable
        ctx.fail(f"has {counts[0]} input(s) and {counts[1]} output(s); {ctx.op.op} copies one "
                 "tensor (npu-sim reads accesses in the form tosa-opt writes: the variable, "
                 "and the tensor read or written)", "operand count")
    for name in list(ctx.op.inputs) + list(ctx.op.outputs):
        if name not in ctx.graph.tensors:
            ctx.fail(f"names tensor '{name}', which the graph does not declare",
                     "operator operand is not a tensor of the graph", name)
        _variable_type(ctx, ctx.graph.tensors[name], ctx.op.op)
    for side in _VARIABLE_OPERANDS[ctx.op.op]:
        for name in getattr(ctx.op, side):
            if not ctx.graph.tensors[name].variable:
                ctx.fail(f"{side[:-1]} '{name}' is not a variable tensor; {ctx.op.op} "
                         f"{'declares' if ctx.op.op == 'VARIABLE' else 'accesses'} a variable",
                         "operand is not a variable tensor", name)


# ---- control flow ---------------------------------------------------------------------------------

def _region(ctx: OpContext, key: str):
    name = ctx.attr(key)
    regions = ctx.cfg.root.regions
    if not name or name not in regions:
        ctx.fail(f"{key} '{name}' is not a region of the model (regions: "
                 f"{', '.join(regions) or 'none'})", f"{key} is not a TOSA graph")
    return name, regions[name]


def _common(ctx: OpContext) -> None:
    ctx.need_extension("EXT-CONTROLFLOW", ctx.op.op)
    for name in list(ctx.op.inputs) + list(ctx.op.outputs):
        if name not in ctx.graph.tensors:
            ctx.fail(f"names tensor '{name}', which the graph does not declare",
                     "operator operand is not a tensor of the graph", name)
    for name in list(ctx.op.inputs) + list(ctx.op.outputs):
        ctx.level(len(ctx.graph.tensors[name].shape), "MAX_RANK", "rank", name)
    lv = ctx.cfg.level
    if ctx.depth >= lv.MAX_NESTING:
        ctx.fail(f"is nested {ctx.depth} control-flow levels deep; level {lv.name} allows "
                 f"{lv.MAX_NESTING}", "tosa_nesting_depth >= MAX_NESTING")


def _sig(graph, names) -> list:
    return [(tuple(int(d) for d in graph.tensors[n].shape), graph.tensors[n].dtype)
            if n in graph.tensors else None for n in names]


def _same(ctx: OpContext, names, region_graph, region_names, what: str, cond: str) -> None:
    mine, theirs = _sig(ctx.graph, names), _sig(region_graph, region_names)
    if len(mine) != len(theirs):
        ctx.fail(f"{what}: {len(mine)} tensor(s) against {len(theirs)}", cond)
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if a != b:
            fa = "undeclared" if a is None else f"{a[1]}{fmt_shape(a[0])}"
            fb = "undeclared" if b is None else f"{b[1]}{fmt_shape(b[0])}"
            ctx.fail(f"{what}: entry {i} is {fa} here but {fb} in the graph", cond)


@check("COND_IF")
def cond_if(ctx: OpContext) -> None:
    _common(ctx)
    op = ctx.op
    if not op.inputs:
        ctx.fail("has no condition input", "length(inputs) < 1 (WrongInputList)")
    ctx.level(len(op.inputs) - 1, "MAX_TENSOR_LIST_SIZE", "length(input_list)")
    ctx.level(len(op.outputs), "MAX_TENSOR_LIST_SIZE", "length(output_list)")
    cond = ctx.graph.tensors[op.inputs[0]]
    if cond.dtype != "bool":
        ctx.fail(f"condition '{cond.name}' is {cond.dtype}; it must be bool",
                 "type(condition) != bool_t (CondIfCondNotMatchingBool)", cond.name)
    inputs, outputs = op.inputs[1:], op.outputs
    for key in ("then_graph", "else_graph"):
        name, graph = _region(ctx, key)
        _same(ctx, inputs, graph, graph.inputs, f"input_list does not match {key} '{name}' inputs",
              f"tensor_list_shape(input_list) != tosa_input_shape({key})")
        _same(ctx, outputs, graph, graph.outputs, f"output_list does not match {key} '{name}' outputs",
              f"tensor_list_shape(output_list) != tosa_output_shape({key})")
    if int(np.prod(cond.shape, dtype=np.int64)) != 1:
        ctx.fail(f"condition '{cond.name}' has shape {fmt_shape(cond.shape)}; it must hold one value",
                 "tensor_size(shape) != 1", cond.name)
    for key in ("then_graph", "else_graph"):
        ctx.run_region(_region(ctx, key)[1], ctx.depth + 1)


@check("WHILE_LOOP")
def while_loop(ctx: OpContext) -> None:
    _common(ctx)
    op = ctx.op
    inputs, outputs = op.inputs, op.outputs
    ctx.level(len(inputs), "MAX_TENSOR_LIST_SIZE", "length(input_list)")
    ctx.level(len(outputs), "MAX_TENSOR_LIST_SIZE", "length(output_list)")
    if _sig(ctx.graph, inputs) != _sig(ctx.graph, outputs):
        ctx.fail("input_list and output_list differ in length, shapes or types",
                 "tensor_list_shape(input_list) != tensor_list_shape(output_list)")
    cname, cgraph = _region(ctx, "cond_graph")
    bname, bgraph = _region(ctx, "body_graph")
    _same(ctx, inputs, cgraph, cgraph.inputs, f"input_list does not match cond_graph '{cname}' inputs",
          "tensor_list_shape(input_list) != tosa_input_shape(cond_graph)")
    _same(ctx, inputs, bgraph, bgraph.inputs, f"input_list does not match body_graph '{bname}' inputs",
          "tensor_list_shape(input_list) != tosa_input_shape(body_graph)")
    _same(ctx, inputs, bgraph, bgraph.outputs, f"input_list does not match body_graph '{bname}' outputs",
          "tensor_list_shape(input_list) != tosa_output_shape(body_graph)")
    couts = _sig(cgraph, cgraph.outputs)
    if len(couts) != 1 or couts[0] is None or int(np.prod(couts[0][0], dtype=np.int64)) != 1:
        ctx.fail(f"cond_graph '{cname}' must output a single one-element tensor",
                 "tensor_size(tosa_output_shape(cond_graph)) != 1")
    if couts[0][1] != "bool":
        ctx.fail(f"cond_graph '{cname}' outputs {couts[0][1]}; it must output bool",
                 "tosa_output_type(cond_graph) != bool_t")
    ctx.run_region(cgraph, ctx.depth + 1)
    ctx.run_region(bgraph, ctx.depth + 1)
