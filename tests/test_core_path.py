"""A notebook's core path runs alone: no cell outside an optional section needs a name only an optional one defines.

A workshop runs the core path only, skipping every section whose heading says "(optional)"; a core cell that
reads a variable which only an optional section sets would fail there with a NameError. This reads the cells'
code (no kernel) and names each such dependency.
"""
from __future__ import annotations

import ast
import builtins
import json
import re
from pathlib import Path

import pytest

from utils.paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
SECTION = re.compile(r"^##\s", re.MULTILINE)


def python_source(cell_source: str) -> str:
    """The cell's code without IPython's magics and shell escapes (lines starting with % or !)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell_source.splitlines())


def defined_and_read(source: str) -> tuple[set[str], set[str]]:
    """Names a cell binds anywhere (assignments, imports, definitions, arguments) and names it reads."""
    tree = ast.parse(python_source(source))
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def core_dependencies_on_optional_cells(notebook: Path) -> list[str]:
    optional = False
    bound_by_core: set[str] = set(dir(builtins)) | {"display", "get_ipython"}
    bound_by_optional: set[str] = set()
    problems = []
    for index, cell in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            heading = next((line for line in source.splitlines() if SECTION.match(line)), None)
            if heading is not None:
                optional = "(optional" in heading.lower()
            continue
        if cell["cell_type"] != "code":
            continue
        bound, read = defined_and_read(source)
        if optional:
            bound_by_optional |= bound
            continue
        needed = sorted((read - bound - bound_by_core) & bound_by_optional)
        if needed:
            problems.append(f"cell {index} reads {needed}, set only in an optional section")
        bound_by_core |= bound
    return problems


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem[:2] for path in NOTEBOOKS])
def test_the_core_path_needs_no_optional_section(notebook: Path) -> None:
    assert not core_dependencies_on_optional_cells(notebook)


def test_the_check_sees_a_core_cell_that_needs_an_optional_one(tmp_path: Path) -> None:
    cells = [
        {"cell_type": "markdown", "source": ["## 1. Core\n"], "metadata": {}},
        {"cell_type": "code", "source": ["a = 1\n"], "metadata": {}},
        {"cell_type": "markdown", "source": ["## 2. Extra (optional)\n"], "metadata": {}},
        {"cell_type": "code", "source": ["b = a + 1\n"], "metadata": {}},
        {"cell_type": "markdown", "source": ["## 3. Core again\n"], "metadata": {}},
        {"cell_type": "code", "source": ["print(a, b)\n%time a\n"], "metadata": {}},
    ]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert core_dependencies_on_optional_cells(path) == ["cell 5 reads ['b'], set only in an optional section"]
