"""The maintainers' tools stand apart: no notebook and no module of utils/ imports `maintainers`, so the tools can
change without touching what a notebook runs (whose bytes its committed outputs fingerprint)."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from utils.paths import REPO_ROOT

PACKAGE = "maintainers"
# An import line of a notebook cell; cells may hold IPython magics, so they are read line by line, not parsed.
IMPORT_LINE = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w.,\s]+?)\s*(?:#.*)?$)", re.M)


def is_maintainers(name: str) -> bool:
    return name == PACKAGE or name.startswith(f"{PACKAGE}.")


def cell_imports(source: str) -> set[str]:
    """The modules a notebook cell's import lines name (`from a import b` gives a; `import a as x, b` gives a, b)."""
    names = set()
    for match in IMPORT_LINE.finditer(source):
        if match.group(1):
            names.add(match.group(1))
        else:
            names.update(part.split()[0] for part in match.group(2).split(",") if part.split())
    return names


def module_imports(source: str) -> set[str]:
    """The absolute modules a Python source imports, lazy imports inside functions included."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def code_cells(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for cell in cells if cell["cell_type"] == "code"]


def test_no_notebook_imports_the_maintainers_tools() -> None:
    notebooks = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    found = [f"{notebook.name}, code cell {number}: {name}" for notebook in notebooks
             for number, source in enumerate(code_cells(notebook), start=1)
             for name in sorted(cell_imports(source)) if is_maintainers(name)]
    assert not found, f"notebooks import only utils, never the maintainers' tools: {found}"


def test_no_utils_module_imports_the_maintainers_tools() -> None:
    modules = sorted((REPO_ROOT / "utils").rglob("*.py"))
    assert modules
    found = [f"{path.relative_to(REPO_ROOT).as_posix()}: {name}" for path in modules
             for name in sorted(module_imports(path.read_text(encoding="utf-8"))) if is_maintainers(name)]
    assert not found, f"utils is what notebooks run and may not import the maintainers' tools: {found}"


def test_the_checks_see_an_import_of_the_tools() -> None:
    cell = "%matplotlib inline\nimport os, maintainers.run_times as times  # why\n!ls\nfrom maintainers import run_notebooks\n"
    assert {"os", "maintainers.run_times", "maintainers"} <= cell_imports(cell)
    assert is_maintainers("maintainers.run_notebooks") and not is_maintainers("utils.maintainers_notes")
    assert "maintainers.notebook_outputs" in module_imports("def f():\n    from maintainers.notebook_outputs import main\n")
    assert module_imports("from .paths import REPO_ROOT\n") == set()  # relative: inside utils
