"""The driver: graph-level rules, then every operator's checks in file order.

Graph-level rules ([SPEC] chapters/operators.adoc "Operator Graphs"): graph inputs and outputs
exist and inputs are not shape_t (outputs may be: Arm's generator makes CONST_SHAPE outputs
and the reference model writes them, as int64); every tensor is produced once; operators use only tensors that are
graph inputs or produced by an operator; every graph output is produced; no cycles.
"""
from __future__ import annotations

from npu_sim.isa.errors import NotEnabledError, UnsupportedError, ValidationError
from npu_sim.isa.operators import OPERATORS

from ..ir import Graph, Operator
from . import generic
from .context import Config, OpContext
from .registry import CHECKS
from .spec import PRO_FP_ONLY, SPECS, TOSA_1_1_ONLY


def validate(graph: Graph, profiles=("PRO-INT",), extensions=(), level: str = "8K") -> None:
    """Raise on the first TOSA 1.0 rule `graph` breaks; return None when it is valid.

    profiles: "PRO-INT", "PRO-FP" or a sequence of them.
    UnsupportedError: an operator, profile or type combination outside `profiles` plus `extensions`.
    ValidationError: an ERROR_IF (rule "ERROR_IF: ..."), a REQUIRE decidable at compile time
    ("REQUIRE: ...") or a level limit ("LEVEL 8K: ...").
    """
    cfg = Config.make(graph, profiles, extensions, level)
    version = tuple(getattr(graph, "version", (1, 0, 0)))
    text = ".".join(map(str, version))
    if cfg.draft and version[:2] == (1, 1):
        if not cfg.has("EXT-SHAPE"):
            raise NotEnabledError(f"TOSA version {text}-draft: npu-sim runs TOSA 1.1-draft graphs only "
                                   "for the experimental EXT-SHAPE operators, and EXT-SHAPE is not "
                                   f"enabled (enabled: {cfg.enabled_text()})")
    elif version[:2] != (1, 0):
        raise UnsupportedError(f"TOSA version {text}: npu-sim implements TOSA 1.0 (and, "
                               "experimentally, the 1.1 draft's EXT-SHAPE)")
    _validate_graph(cfg, graph, depth=0)


def _graph_fail(message: str, condition: str, tensor: str = "", op: Operator | None = None):
    raise ValidationError(message, op=op.describe() if op else "", tensor=tensor,
                          rule=f"ERROR_IF: {condition}")


def _validate_graph(cfg: Config, graph: Graph, depth: int) -> None:
    tensors = graph.tensors
    for kind, names in (("input", graph.inputs), ("output", graph.outputs)):
        seen = set()
        for name in names:
            if name not in tensors:
                _graph_fail(f"graph {kind} '{name}' is not a tensor of the graph",
                            f"graph {kind} is not a declared tensor", name)
            if tensors[name].dtype == "shape" and kind == "input":
                _graph_fail(f"graph input '{name}' is a shape_t tensor; graph inputs may not be "
                            "shape_t", "graph input has type shape_t", name)
            if kind == "input" and name in seen:
                _graph_fail(f"graph input '{name}' is listed twice", "graph input listed twice", name)
            seen.add(name)

    producers: dict[str, Operator] = {}
    graph_inputs = set(graph.inputs)
    for op in graph.operators:
        for name in op.outputs:
            if name in tensors and tensors[name].variable:
                continue                 # variables are written by VARIABLE_WRITE, maybe often
            if name in producers:
                _graph_fail(f"tensor '{name}' is produced by operator {producers[name].describe()} "
                            "and again here", "tensor produced more than once", name, op)
            if name in graph_inputs:
                _graph_fail(f"tensor '{name}' is a graph input and also an operator output",
                            "graph input produced by an operator", name, op)
            producers[name] = op

    for op in graph.operators:
        ctx = OpContext(cfg, graph, op, producers, depth,
                        run_region=lambda g, d: _validate_graph(cfg, g, d))
        check_operator(ctx)

    _check_dataflow(graph, producers)


def check_operator(ctx: OpContext) -> None:
    name = ctx.op.op
    spec = SPECS.get(name)
    if name in PRO_FP_ONLY:
        ctx.need_extension("PRO-FP", name)
    if spec is None and name not in CHECKS:
        _unsupported_operator(ctx.op)
    if OPERATORS[name].draft and not ctx.cfg.draft:
        raise UnsupportedError(f"operator {ctx.op.describe()}: {name} is a TOSA 1.1-draft operator "
                               "(EXT-SHAPE); the graph declares TOSA 1.0")
    if spec is not None:
        ctx.spec = spec
        if spec.extension:
            ctx.need_extension(spec.extension, name)
        generic.run(ctx)
    CHECKS[name](ctx)
    if spec is not None:
        generic.check_sizes(ctx)


def _unsupported_operator(op: Operator):
    name = op.op
    if name in PRO_FP_ONLY:
        why = "npu-sim does not implement this PRO-FP operator"
    elif name in TOSA_1_1_ONLY:
        why = "it is a TOSA 1.1 (draft) operator; npu-sim implements TOSA 1.0"
    elif name == "CUSTOM":
        why = "CUSTOM operators are implementation-defined and npu-sim defines none"
    else:
        why = "it is not a TOSA 1.0 operator"
    raise UnsupportedError(f"operator {op.describe()}: {name} is not supported: {why}")


def _check_dataflow(graph: Graph, producers: dict) -> None:
    tensors, graph_inputs = graph.tensors, set(graph.inputs)
    for op in graph.operators:
        for name in op.inputs:
            if name not in producers and name not in graph_inputs and not tensors[name].variable:
                _graph_fail(f"uses tensor '{name}', which is neither a graph input nor produced by an "
                            "operator", "operator input is not defined", name, op)
    for name in graph.outputs:
        if name not in producers and name not in graph_inputs and not tensors[name].variable:
            _graph_fail(f"graph output '{name}' is not produced by any operator",
                        "graph output is not defined", name)
    # Kahn's algorithm over operators; whatever is left sits on a cycle.
    index = {id(op): i for i, op in enumerate(graph.operators)}
    pending = {}
    users: dict[int, list[int]] = {}
    for i, op in enumerate(graph.operators):
        deps = {index[id(producers[n])] for n in op.inputs if n in producers}
        pending[i] = len(deps)
        for j in deps:
            users.setdefault(j, []).append(i)
    ready = [i for i, n in pending.items() if n == 0]
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for j in users.get(i, ()):
            pending[j] -= 1
            if pending[j] == 0:
                ready.append(j)
    if done != len(graph.operators):
        stuck = next(graph.operators[i] for i, n in pending.items() if n > 0)
        _graph_fail("is part of a cycle: its inputs depend on its own outputs",
                    "graph is not acyclic", stuck.outputs[0] if stuck.outputs else "", stuck)
    # A block lists its operators in an order they can run in (the reference model runs them
    # so, and fails on a tensor read before it is written); the compiler relies on it too.
    for i, op in enumerate(graph.operators):
        for name in op.inputs:
            if name in producers and index[id(producers[name])] > i:
                _graph_fail(f"reads tensor '{name}', which a later operator of the block "
                            f"({producers[name].describe()}) writes; operators must be listed "
                            "in an order they can run in", "tensor read before it is written",
                            name, op)
