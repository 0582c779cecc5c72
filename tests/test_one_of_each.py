"""One of each thing in `utils/`: no public name defined in two modules, and nothing that only tests use."""
from __future__ import annotations

import ast
import json
from collections import defaultdict
from pathlib import Path

from utils.paths import REPO_ROOT

UTILS = REPO_ROOT / "utils"


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)


def public_definitions(path: Path) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments), without _private ones."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
    return {name for name in names if not name.startswith("_")}


def utils_modules() -> list[Path]:
    return sorted(path for path in UTILS.rglob("*.py") if path.name != "__init__.py")


def notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def test_no_public_name_is_defined_in_two_utils_modules() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in utils_modules():
        for name in public_definitions(path):
            where[name].append(module_name(path))
    twice = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert not twice, f"Defined in more than one module (keep one, import it elsewhere): {twice}"


def used_names(source: str) -> set[str]:
    """Names a piece of code uses (reads, imports or reaches as an attribute); docstrings and comments do not count."""
    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.name.split(".")[-1])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value:
            names.add(node.value.rpartition(":")[2])  # "package.module:function", run in a fresh process by name
    return names


def test_every_public_name_in_utils_is_used_by_a_notebook_the_setup_or_utils_itself() -> None:
    """A name only tests or maintainers' tools use is not the learners' kit: delete it, or move it to maintainers/."""
    users = {module_name(path): used_names(path.read_text(encoding="utf-8")) for path in utils_modules()}
    users.update({f"notebook {path.name}": used_names(notebook_code(path))
                  for path in (REPO_ROOT / "notebooks").glob("*.ipynb")})
    users["tutorial.py"] = used_names((REPO_ROOT / "tutorial.py").read_text(encoding="utf-8"))
    unused = [f"{module_name(path)}.{name}" for path in utils_modules() for name in sorted(public_definitions(path))
              if not any(name in names for names in users.values())]
    assert not unused, f"Used by nothing but tests or maintainers (delete it, or move it to maintainers/): {unused}"
