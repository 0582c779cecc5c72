"""One of each thing in `utils/`: no public name defined in two modules, and nothing that only tests use."""
from __future__ import annotations

import ast
import json
import re
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


def test_every_public_name_in_utils_is_used_outside_the_tests() -> None:
    """A name only tests use is dead weight: delete it (or use it)."""
    sources = {module_name(path): path.read_text(encoding="utf-8") for path in utils_modules()}
    users = {f"notebook {path.name}": notebook_code(path) for path in (REPO_ROOT / "notebooks").glob("*.ipynb")}
    users.update({str(path.relative_to(REPO_ROOT)): path.read_text(encoding="utf-8")
                  for path in [REPO_ROOT / "tutorial.py", *(REPO_ROOT / "maintainers").rglob("*.py")]})
    unused = []
    for path in utils_modules():
        own = module_name(path)
        for name in sorted(public_definitions(path)):
            pattern = re.compile(rf"\b{re.escape(name)}\b")
            in_own_module = len(pattern.findall(sources[own])) > 1
            elsewhere = any(pattern.search(text) for key, text in {**sources, **users}.items() if key != own)
            if not (in_own_module or elsewhere):
                unused.append(f"{own}.{name}")
    assert not unused, f"Used by nothing but tests (delete or use): {unused}"
