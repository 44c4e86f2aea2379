"""Checks every operator gets from its `Spec`: operand lists, ranks, types, CTCs and shapes.

Run in this order, so the first violation reported is the most basic one:
  1. operand lists (WrongInputList / WrongOutputList) and that every operand tensor exists;
  2. ranks (fixed ranks as ERROR_IF, MAX_RANK as a level check);
  3. element types against the Supported Data Types rows (and the extension a row needs);
  4. compile-time-constant operands;
  5. shapes: dimension symbols of the argument table unified across operands;
then the operator's own checks (registry.CHECKS) run, and last `check_sizes`: tensor
dimensions >= 1 and tensor byte size (MAX_LOG2_SIZE), so that a bad attribute is reported
rather than the degenerate output shape it leads to.
"""
from __future__ import annotations

import math

from npu_sim.isa.operators import OPERATORS

from .context import ELEMENT_BYTES, OpContext, fmt_shape
from .spec import MAX, MAX_1, TYPE_VARS


def _operands(ctx: OpContext, with_outputs: bool = True):
    """(arg, tensor name, is_output) for every bound operand, list elements included."""
    for arg in ctx.spec.inputs:
        if arg.is_list:
            for name in ctx.lists[arg.name]:
                yield arg, name, False
        else:
            yield arg, ctx.args[arg.name], False
    if with_outputs:
        for arg in ctx.spec.outputs:
            yield arg, ctx.args[arg.name], True


def bind(ctx: OpContext) -> None:
    spec, op = ctx.spec, ctx.op
    fixed = [a for a in spec.inputs if not a.is_list]
    has_list = any(a.is_list for a in spec.inputs)
    n_in = len(op.inputs)
    if (not has_list and n_in != len(fixed)) or (has_list and n_in < len(fixed)):
        names = ", ".join(a.name + ("[]" if a.is_list else "") for a in spec.inputs) or "none"
        ctx.fail(f"has {n_in} input(s); {op.op} takes {len(fixed)}{' or more' if has_list else ''} "
                 f"({names})", f"length(inputs) != {len(fixed)} (WrongInputList)")
    n_out = len(op.outputs)
    if n_out != len(spec.outputs):
        outs = ", ".join(a.name for a in spec.outputs)
        ctx.fail(f"has {n_out} output(s); {op.op} produces {len(spec.outputs)} ({outs})",
                 f"length(outputs) != {len(spec.outputs)} (WrongOutputList)")
    pos = 0
    for arg in spec.inputs:
        if arg.is_list:
            count = n_in - len(fixed)
            ctx.lists[arg.name] = list(op.inputs[pos:pos + count])
            pos += count
        else:
            ctx.args[arg.name] = op.inputs[pos]
            pos += 1
    for arg, name in zip(spec.outputs, op.outputs):
        ctx.args[arg.name] = name
    for name in list(op.inputs) + list(op.outputs):
        if name not in ctx.graph.tensors:
            ctx.fail(f"names tensor '{name}', which the graph does not declare",
                     "operator operand is not a tensor of the graph", name)


def check_ranks(ctx: OpContext) -> None:
    for arg, name, _ in _operands(ctx):
        rank = len(ctx.graph.tensors[name].shape)
        dims = arg.dims
        if dims is not None:
            if rank != len(dims):
                ctx.fail(f"{arg.name} has rank {rank}; {ctx.op.op} expects rank {len(dims)} "
                         f"[{arg.shape}]", f"rank({arg.name}) != {len(dims)} (WrongRank)", name)
            continue
        lo, hi = arg.rank
        if rank < lo:
            ctx.fail(f"{arg.name} has rank {rank}; {ctx.op.op} needs rank >= {lo}",
                     f"rank({arg.name}) < {lo} (WrongRank)", name)
        if hi is MAX:
            ctx.level(rank, "MAX_RANK", f"rank({arg.name})", name)
        elif hi == MAX_1:
            ctx.level(rank + 1, "MAX_RANK", f"rank({arg.name}) + 1", name)
        elif rank > hi:
            ctx.fail(f"{arg.name} has rank {rank}; {ctx.op.op} needs rank <= {hi}",
                     f"rank({arg.name}) > {hi} (WrongRank)", name)
    for arg in ctx.spec.inputs:
        if arg.is_list:
            ctx.level(len(ctx.lists[arg.name]), "MAX_TENSOR_LIST_SIZE", f"length({arg.name})")


_KIND = {"input": "WrongInputType", "bias": "WrongBiasType", "attr": "WrongAccumulatorType",
         "output": "WrongOutputType"}


def _what(label: str, name: str) -> str:
    """How a type error names the operand (built only when one is reported)."""
    return f"{label} '{name}'" if name else f"attribute {label}"


def check_types(ctx: OpContext) -> None:
    spec, graph = ctx.spec, ctx.graph
    slots = []          # (kind, label, tensor name, type var or literal, actual)
    for arg, name, _ in _operands(ctx, with_outputs=False):
        if arg.type is not None:
            slots.append((arg.role or "input", arg.name, name, arg.type, graph.tensors[name].dtype))
    for var, key in spec.attr_types:
        value = ctx.op.attrs.get(key)
        slots.append(("attr" if var == "acc_t" else "input", key, "", var,
                      value if isinstance(value, str) else f"unknown ({value})"))
    for arg in spec.outputs:
        if arg.type is not None:
            name = ctx.args[arg.name]
            slots.append(("output", arg.name, name, arg.type, graph.tensors[name].dtype))

    cands = list(spec.rows)
    matched: dict[str, str] = {}
    for kind, label, name, var, actual in slots:
        if var not in TYPE_VARS:                  # a literal element type
            if actual != var:
                what = _what(label, name)
                ctx.fail(f"{what} has element type {actual}; {ctx.op.op} requires {var}",
                         f"type({label}) != {var} ({_KIND[kind]})", name)
            continue
        if var in matched:
            if actual != matched[var]:
                what = _what(label, name)
                ctx.fail(f"{what} has element type {actual} but {var} is {matched[var]} from the "
                         f"other operands", f"type({label}) != {var} ({_KIND[kind]})", name)
            continue
        new = [r for r in cands if r.get(var) == actual]
        if not new:
            what = _what(label, name)
            allowed = sorted({str(r[var]) for r in cands if var in r})
            given = ", ".join(f"{k}={v}" for k, v in matched.items())
            ctx.fail(f"{what} is {actual}; {ctx.op.op} supports {var} in {{{', '.join(allowed)}}}"
                     + (f" with {given}" if given else ""),
                     f"data types not in the Supported Data Types of {ctx.op.op} ({_KIND[kind]})",
                     name)
        cands = new
        matched[var] = actual
    if not cands:
        return
    usable = [r for r in cands if r["ext"] is None or ctx.cfg.has(r["ext"])]
    if not usable:
        combo = ", ".join(f"{k}={v}" for k, v in matched.items())
        exts = " or ".join(sorted({r["ext"] for r in cands}))
        ctx.need_extension(exts, f"the type combination {combo}")
    ctx.row = dict(usable[0])


def check_ctc(ctx: OpContext) -> None:
    if ctx.cfg.has("EXT-DYNAMIC"):
        return
    for arg, name, _ in _operands(ctx, with_outputs=False):
        if not arg.ctc:
            continue
        prod = ctx.producers.get(name)
        if prod is not None and (prod.op in ("CONST", "CONST_SHAPE")
                                 or getattr(OPERATORS.get(prod.op), "family", "") == "shape"):
            continue                    # (a shape operator's inputs are CTCs in turn)
        if name in ctx.graph.inputs:
            source = "a graph input"
        elif prod is None:
            source = "not produced by any operator"
        else:
            source = f"produced by operator {prod.describe()}"
        ctx.fail(f"{arg.name} must be a compile-time constant (output of CONST, CONST_SHAPE or a "
                 f"shape operator) but '{name}' is {source}", f"{arg.name} is not a compile-time constant (CTC)", name)


def check_shapes(ctx: OpContext) -> None:
    dims: dict = {}
    origin: dict = {}
    for arg, name, _ in _operands(ctx):
        if arg.is_list or arg.shape == "*":
            continue
        shape = tuple(map(int, ctx.graph.tensors[name].shape))
        if arg.shape.startswith("@"):
            sym = arg.shape[1:]
            if sym in dims and dims[sym] != shape:
                ctx.fail(f"{arg.name} has shape {fmt_shape(shape)} but {origin[sym]} has shape "
                         f"{fmt_shape(dims[sym])}; they must be equal",
                         f"shape({arg.name}) != shape({origin[sym]})", name)
            dims.setdefault(sym, shape)
            origin.setdefault(sym, arg.name)
            continue
        for i, (tok, d) in enumerate(zip(arg.dims, shape)):
            if isinstance(tok, int):
                if d != tok:
                    ctx.fail(f"{arg.name} has shape {fmt_shape(shape)}; {ctx.op.op} expects "
                             f"[{arg.shape}]", f"shape({arg.name}) != [{arg.shape}]", name)
            elif tok.isidentifier():
                if tok in dims and dims[tok] != d:
                    ctx.fail(f"{arg.name} dimension {i} ({tok}) is {d} but {origin[tok]} gives "
                             f"{tok} = {dims[tok]}", f"shape({arg.name}) != [{arg.shape}]", name)
                dims.setdefault(tok, d)
                origin.setdefault(tok, arg.name)
    ctx.dims = dims


def check_sizes(ctx: OpContext) -> None:
    for arg, name, _ in _operands(ctx):
        tensor = ctx.graph.tensors[name]
        if tensor.dtype == "shape":
            continue
        for i, d in enumerate(tensor.shape):
            if int(d) < 1:
                ctx.fail_require(f"{arg.name} '{name}' has shape {fmt_shape(tensor.shape)}: "
                                 f"dimension {i} is {d}; tensor dimensions must be >= 1",
                                 "1 <= shape[i]", name)
        elements = math.prod(map(int, tensor.shape))
        ctx.level_size(elements * ELEMENT_BYTES.get(tensor.dtype, 1), f"{arg.name} '{name}'", name)


# Enumerated attributes any operator may carry, and the values TOSA 1.0 defines for them (the
# loader names those; a number outside them reaches here as it was read).
_ENUMS = {"nan_mode": ("PROPAGATE", "IGNORE")}


def check_enums(ctx: OpContext) -> None:
    for attr, allowed in _ENUMS.items():
        value = ctx.op.attrs.get(attr)
        if value is not None and value not in allowed:
            ctx.fail(f"{attr} {value} is not {' or '.join(allowed)}",
                     f"{attr} is not a {attr}_t value")


def run(ctx: OpContext) -> None:
    bind(ctx)
    check_ranks(ctx)
    check_types(ctx)
    check_ctc(ctx)
    check_shapes(ctx)
    check_enums(ctx)
