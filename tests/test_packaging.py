"""Packaging: one top-level import package (npu_sim), whose subpackages cover every package
folder of the repository, and product code that never imports the folders by their own names."""
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PRODUCT_FOLDERS = ("npu_sim", "isa", "compiler", "configs")


def _installed_name(folder: Path) -> str:
    """The import name pyproject's package-dir gives a repository folder."""
    mapping = {v: k for k, v in PYPROJECT["tool"]["setuptools"]["package-dir"].items()}
    top, *rest = folder.relative_to(REPO).parts
    return ".".join([mapping[top]] + rest)


def test_every_package_folder_is_installed_under_npu_sim():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = {_installed_name(init.parent) for top in PRODUCT_FOLDERS
             for init in (REPO / top).rglob("__init__.py")}
    assert found == listed
    assert {name.split(".")[0] for name in listed} == {"npu_sim"}


def test_product_code_imports_isa_and_compiler_through_npu_sim():
    bare = re.compile(r"^\s*(from|import)\s+(isa|compiler)\b", re.M)
    offenders = [str(p.relative_to(REPO)) for top in PRODUCT_FOLDERS + ("tests", "bench")
                 for p in (REPO / top).rglob("*.py") if bare.search(p.read_text())]
    assert offenders == []


def test_tosa_tools_takes_a_compatible_range():
    spec = next(d for d in PYPROJECT["project"]["dependencies"] if d.startswith("tosa-tools"))
    assert "==" not in spec and ">=" in spec and "<" in spec
