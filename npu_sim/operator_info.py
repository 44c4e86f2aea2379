"""`npu-sim op [NAME]`: everything about one operator, from its row of the operator table.

With a name it prints the row (family, engine, opcode, operands and their roles, the dtypes of
its type-support rows) and the file and line of each entry the rooms register for it: its
rules, its lowering, its kernels, their cost, its host evaluation. Without one it lists the
table.
"""
from __future__ import annotations

import inspect
from pathlib import Path

from npu_sim.isa.errors import UnsupportedError
from npu_sim.isa.operators import OPERATORS

_ROOT = Path(__file__).resolve().parent


def _where(fn) -> str:
    fn = inspect.unwrap(fn)
    try:
        path = Path(inspect.getsourcefile(fn)).resolve()
        line = inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return "?"
    for base in (_ROOT.parent, _ROOT):
        if path.is_relative_to(base):
            path = path.relative_to(base)
            break
    name = getattr(fn, "__name__", "")
    return f"{path}:{line}" + (f" {name}" if name and name != "<lambda>" else "")


def _dtypes(spec) -> str:
    if spec is None:
        return "any (checked by its rules)"
    seen: dict[str, None] = {}
    for arg in spec.inputs + spec.outputs:          # literal element types (shape_t, ...)
        if arg.type is not None and not arg.type.endswith("_t"):
            seen[arg.type] = None
    for row in spec.rows:
        ext = row.get("ext")
        for var, dtype in row.items():
            if var != "ext" and isinstance(dtype, str):
                seen[dtype + (f" ({ext})" if ext else "")] = None
    return ", ".join(seen)


def entries(name: str) -> list[tuple[str, str]]:
    """(what, where) of every registered entry of operator `name`."""
    from npu_sim.compiler.lowering import DMA_MOVES, FOLDS, MICRO_ATTRS, REWRITES, TILE_SPACES
    from npu_sim.compiler.validation import CHECKS
    from npu_sim.compiler.validation import spec as spec_module

    from .ops import HOST_OPS, MAC_KERNELS, MICRO_OPS, SHAPE_CHECKS, VECTOR_KERNELS, VECTOR_WORK
    row = OPERATORS[name]
    found = []
    if name in spec_module.SPECS:
        lines = inspect.getsourcelines(spec_module)[0]
        line = next((i + 1 for i, text in enumerate(lines) if f'"{name}"' in text), 0)
        found.append(("argument table", f"compiler/validation/spec.py:{line}"))
    by_name = [("rules", CHECKS), ("tile space", TILE_SPACES), ("DMA lowering", DMA_MOVES),
               ("chain micro-op attributes", MICRO_ATTRS), ("constant folding", FOLDS),
               ("graph rewrite", REWRITES)]
    by_opcode = [("MAC kernel", MAC_KERNELS), ("vector kernel", VECTOR_KERNELS),
                 ("vector-unit cost", VECTOR_WORK), ("program check", SHAPE_CHECKS)]
    found += [(what, _where(reg[name])) for what, reg in by_name if name in reg]
    found += [(f"{what} ({row.opcode})", _where(reg[row.opcode])) for what, reg in by_opcode
              if row.opcode in reg]
    found += [(what, _where(reg[name])) for what, reg in
              (("chain micro-op", MICRO_OPS), ("host evaluation", HOST_OPS)) if name in reg]
    machine = [reg[k] for reg, k in ((MAC_KERNELS, row.opcode), (VECTOR_KERNELS, row.opcode),
                                     (MICRO_OPS, name), (HOST_OPS, name)) if k in reg]
    found += [("datapath kernel", _where(k)) for k in _datapath_kernels(machine)]
    return found


def _datapath_kernels(functions) -> list:
    """The npu_sim.datapath functions these entries call: named in their code, or bound into
    them (an entry made by a factory holds its kernel in a closure cell)."""
    from . import datapath
    kernels = {getattr(datapath, n): None for n in datapath.__all__}
    found: dict = {}
    for fn in functions:
        fn = inspect.unwrap(fn)
        code = fn.__code__
        for const in (code,) + tuple(c for c in code.co_consts if inspect.iscode(c)):
            found.update(dict.fromkeys(getattr(datapath, n) for n in const.co_names
                                       if n in datapath.__all__))
        found.update(dict.fromkeys(c.cell_contents for c in fn.__closure__ or ()
                                   if callable(c.cell_contents) and c.cell_contents in kernels))
    return list(found)


def describe(name: str) -> str:
    from npu_sim.compiler.validation import SPECS
    key = name.upper()
    if key not in OPERATORS or OPERATORS[key].internal:
        raise UnsupportedError(f"op '{name}': not a TOSA operator npu-sim implements "
                               "(npu-sim op lists them)")
    row = OPERATORS[key]
    operands = ", ".join(f"{n} ({r})" for n, r in row.operands) or (
        "a list of tensors" if row.variadic else "none")
    lines = [f"{key}  family {row.family}, runs on {row.engine}"
             + (f" as opcode {row.opcode}" if row.opcode else "")
             + (f", vector op class {row.op_class}" if row.op_class else "")
             + (f", float passes {'+'.join(row.fp_class)}" if row.fp_class else ""),
             f"  operands   {operands}",
             f"  dtypes     {_dtypes(SPECS.get(key))}"]
    if row.draft:
        lines.append("  status     experimental: TOSA 1.1 draft, for graphs declaring the draft on a "
                     "config with EXT-SHAPE; computed when the graph is compiled")
    lines += [f"  {what:<34} {where}" for what, where in entries(key)]
    return "\n".join(lines) + "\n"


def table() -> str:
    rows = [f"{'operator':<24}{'family':<13}{'engine':<8}opcode"]
    rows += [f"{o.name:<24}{o.family:<13}{o.engine:<8}{o.opcode}" for o in OPERATORS.values()
             if not o.internal]
    return "\n".join(rows) + "\n\nnpu-sim op NAME shows where each part of one operator lives.\n"


def cmd_op(args) -> int:
    print(table() if args.name is None else describe(args.name), end="")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("op", help="where an operator's rules, lowering, kernels and cost live")
    p.add_argument("name", nargs="?", help="a TOSA operator, e.g. AVG_POOL2D")
    p.set_defaults(func=cmd_op)
