"""Nothing in `utils/` is kept for its tests alone: every public top-level name is used by a notebook, by the
course's own code (utils, maintainers, tutorial.py) or inside its module. Delete what nothing uses."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from utils.paths import REPO_ROOT

MODULES = sorted((REPO_ROOT / "utils").rglob("*.py"))
USERS = [*MODULES, *sorted((REPO_ROOT / "maintainers").glob("*.py")), REPO_ROOT / "tutorial.py",
         *sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))]


def public_names(source: str) -> list[str]:
    """Top-level functions, classes and assigned names of a module that do not start with an underscore."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [target.id for target in targets if isinstance(target, ast.Name)]
    return [name for name in names if not name.startswith("_")]


def unused_names(modules: list[Path], users: list[Path]) -> list[str]:
    texts = {path: path.read_text(encoding="utf-8") for path in {*modules, *users}}
    unused = []
    for module in modules:
        for name in public_names(texts[module]):
            word = re.compile(rf"\b{re.escape(name)}\b")
            used_inside = len(word.findall(texts[module])) > 1
            if not used_inside and not any(word.search(texts[user]) for user in users if user != module):
                unused.append(f"{module.parent.name}/{module.name}: {name}")
    return unused


def test_every_public_name_in_utils_is_used_outside_the_tests() -> None:
    assert not unused_names(MODULES, USERS), "used by nothing but tests (delete them, with their tests)"


def test_the_check_finds_a_name_only_a_test_would_use(tmp_path: Path) -> None:
    module, user = tmp_path / "kit.py", tmp_path / "notebook.py"
    module.write_text("def used():\n    pass\n\n\ndef forgotten():\n    pass\n\n\nLIMIT = 3\n_private = 1\n")
    user.write_text("from kit import used\nused()\n")
    assert [line.rsplit(": ", 1)[1] for line in unused_names([module], [module, user])] == ["forgotten", "LIMIT"]
