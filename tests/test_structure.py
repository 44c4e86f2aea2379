"""The code's structure: no import cycles among the product's modules (imports inside
functions included), the rooms import only what DESIGN allows, and every operator of the
table has its entry in each room that needs one, in its family's module."""
import ast
from pathlib import Path

import pytest

import npu_sim

from npu_sim.compiler.lowering import DMA_MOVES, MICRO_ATTRS, REWRITES, TILE_SPACES
from npu_sim.compiler.validation import CHECKS, SPECS
from npu_sim.isa.opcodes import OPCODES
from npu_sim.isa.operators import ENGINES, FAMILIES, OPERATORS
from npu_sim.ops import (HOST_OPS, MAC_KERNELS, MICRO_OPS, SHAPE_CHECKS, VECTOR_KERNELS,
                         VECTOR_WORK)

REPO = Path(__file__).resolve().parent.parent
ROOMS = {"npu_sim": "npu_sim", "isa": "npu_sim.isa", "compiler": "npu_sim.compiler"}


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, package in ROOMS.items():
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            mods[".".join([package] + parts)] = path
    return mods


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Product modules `name` imports anywhere in its body (packages count as their __init__)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = name.split(".") if is_package else name.split(".")[:-1]
            if node.level:
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            targets = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != name}
    return found


def test_no_import_cycles():
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == "open":
                cycles.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n)
    # a package importing its own submodules (to register them) is not a cycle through them
    real = [c for c in cycles if not any(a.startswith(b + ".") or b.startswith(a + ".")
                                         for a, b in zip(c, c[1:]))]
    assert real == []


def test_rooms_import_only_what_the_design_allows():
    for name, path in MODULES.items():
        deps = _imports(name, path)
        if name.startswith("npu_sim.isa"):
            assert all(d.startswith("npu_sim.isa") or d == "npu_sim" for d in deps), name
        elif name.startswith("npu_sim.compiler"):
            assert all(d.startswith(("npu_sim.isa", "npu_sim.compiler")) or d == "npu_sim"
                       for d in deps), (name, deps)


def _family(fn) -> str:
    return fn.__module__.rsplit(".", 1)[-1]


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_every_operator_has_its_entries_in_its_family_modules(name):
    row = OPERATORS[name]
    assert row.family in FAMILIES and row.engine in ENGINES
    if not row.internal:
        assert _family(CHECKS[name]) in (row.family, "registry"), "validation"
        assert name in SPECS or row.engine in ("host", "dma", "none"), "argument table"
    if row.opcode:
        assert row.opcode in OPCODES and OPCODES[row.opcode].unit == (
            "mac" if row.engine == "mac" else "vector" if row.engine == "vector" else "host")
    if row.engine in ("mac", "vector"):
        assert _family(TILE_SPACES[name]) in (row.family, "elementwise"), "lowering"
    if row.engine == "dma":
        assert _family(DMA_MOVES[name]) in (row.family, "control"), "DMA lowering"
    if row.engine == "rewrite":
        assert _family(REWRITES[name]) == row.family, "graph rewrite"
    if row.opcode == "elementwise":
        assert _family(MICRO_ATTRS[name]) in (row.family, "elementwise")
        assert _family(MICRO_OPS[name]) in (row.family, "elementwise")
    if row.engine != "none" and not name.startswith("VARIABLE_"):   # runs in control-flow bodies
        assert _family(HOST_OPS[name]) == row.family, "host evaluation"


def test_every_opcode_has_a_kernel_a_cost_and_a_program_check():
    for opcode, spec in OPCODES.items():
        assert opcode in SHAPE_CHECKS
        if spec.unit == "mac":
            assert opcode in MAC_KERNELS
        elif spec.unit == "vector":
            assert opcode in VECTOR_KERNELS and opcode in VECTOR_WORK


@pytest.mark.parametrize("name", ["AVG_POOL2D", "RESCALE", "CONV2D", "PAD", "COND_IF"])
def test_op_command_points_at_each_entry(name):
    from npu_sim.operator_info import describe, entries
    text = describe(name)
    assert text.startswith(f"{name}  family {OPERATORS[name].family}")
    whats = [what for what, _ in entries(name)]
    assert "rules" in whats and ("host evaluation" in whats or OPERATORS[name].engine == "dma")
    installed = Path(npu_sim.__file__).resolve().parent.parent     # a checkout or site-packages
    for what, where in entries(name):
        path, line = where.split()[0].rsplit(":", 1)
        file = next(p for p in (REPO / path, installed / path) if p.exists())
        source = file.read_text().splitlines()[int(line) - 1].lstrip()
        assert source.startswith(("def ", "@", "class ", "HOST_OPS", "MICRO_OPS", "FOLDS",
                                  "SHAPE_CHECKS", "VECTOR_WORK", "\"")) \
            or f'"{name}"' in source, (what, source)
