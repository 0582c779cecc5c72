"""utils/README.md lists every module of utils/ (and nothing that is gone), so a newcomer can find their way."""
from __future__ import annotations

import re

from utils.paths import REPO_ROOT

UTILS = REPO_ROOT / "utils"


def test_every_module_is_on_the_map_and_the_map_has_no_ghosts() -> None:
    listed = set(re.findall(r"^\| `(\w+\.py)` \|", (UTILS / "README.md").read_text(encoding="utf-8"), re.M))
    modules = {path.name for path in UTILS.glob("*.py") if path.name != "__init__.py"}
    assert not modules - listed, f"add these modules to utils/README.md: {sorted(modules - listed)}"
    assert not listed - modules, f"utils/README.md lists modules that do not exist: {sorted(listed - modules)}"


def test_modules_over_500_lines_say_why_at_their_top() -> None:
    long = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in UTILS.glob("*.py")}
    unexplained = [name for name, lines in long.items() if lines > 520
                   and "Why one module" not in (UTILS / name).read_text(encoding="utf-8")[:4000]]
    assert not unexplained, f"split these modules or say at their top why not ('Why one module'): {unexplained}"


USED_IN = re.compile(r"^Used in notebooks?: ([\d, ]+)\.$", re.M)


def notebooks_importing_each_module() -> dict[str, set[str]]:
    """For each utils module, the numbers of the notebooks whose own code cells import it."""
    import nbformat

    from utils.notebook_outputs import _imported_names

    found: dict[str, set[str]] = {}
    for notebook in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            for name in _imported_names(cell.source):
                parts = name.split(".")
                if parts[0] == "utils" and len(parts) > 1 and (UTILS / f"{parts[1]}.py").is_file():
                    found.setdefault(parts[1], set()).add(notebook.name[:2])
    return found


def test_each_module_says_which_notebooks_use_it() -> None:
    """A module's docstring ends with 'Used in notebooks: 02, 05.' naming exactly the notebooks that import it."""
    import ast

    wrong = {}
    for module, notebooks in notebooks_importing_each_module().items():
        docstring = ast.get_docstring(ast.parse((UTILS / f"{module}.py").read_text(encoding="utf-8"))) or ""
        stated = USED_IN.search(docstring)
        named = {number.strip() for number in stated.group(1).split(",")} if stated else set()
        if named != notebooks:
            wrong[module] = f"Used in notebook{'s' if len(notebooks) > 1 else ''}: {', '.join(sorted(notebooks))}."
    assert not wrong, f"end these modules' docstrings with the line shown: {wrong}"
