"""utils/ is a house you can see: every module on the map of utils/README.md, imports that only go downwards
through the layers, and no cycle."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from maintainers.notebook_outputs import _imported_names
from utils.paths import REPO_ROOT

UTILS = REPO_ROOT / "utils"

# Bottom to top. A module may import modules of its own package or of a lower layer; packages that share a layer
# (tuning, selfspec, training) do not import each other. `top` is the handful of modules directly under utils/.
LAYERS: list[set[str]] = [{"top"}, {"system"}, {"models"}, {"decoding"}, {"tuning", "selfspec", "training"},
                          {"display"}]
MAX_TOP_LEVEL_MODULES = 6


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def utils_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(UTILS.rglob("*.py"))}


def package_of(module: str) -> str:
    """'top' for utils and the modules directly under it, else the subpackage's name."""
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and (UTILS / f"{parts[1]}.py").is_file()):
        return "top"
    return parts[1]


def layer_of(package: str) -> int:
    return next(index for index, layer in enumerate(LAYERS) if package in layer)


def imports_of(module: str, path: Path) -> set[str]:
    """The utils modules `module` imports (lazy imports inside functions included)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    known = utils_modules()
    return {name for name in _imported_names(path.read_text(encoding="utf-8"), package) if name in known} - {module}


def test_every_package_has_a_layer_and_utils_keeps_a_handful_of_top_level_modules() -> None:
    packages = {package_of(module) for module in utils_modules()}
    assert packages <= set().union(*LAYERS), f"give these packages a layer in LAYERS: {packages - set().union(*LAYERS)}"
    top_level = sorted(path.name for path in UTILS.glob("*.py") if path.name != "__init__.py")
    assert len(top_level) <= MAX_TOP_LEVEL_MODULES, f"move some of these into a subpackage: {top_level}"


def test_imports_only_go_downwards() -> None:
    upwards = []
    for module, path in utils_modules().items():
        own = package_of(module)
        for imported in imports_of(module, path):
            other = package_of(imported)
            if other == own or imported == "utils":
                continue
            if layer_of(other) >= layer_of(own):
                upwards.append(f"{module} imports {imported}")
    assert not upwards, f"these imports go upwards or sideways between packages: {upwards}"


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The check above can fail: an import from models into tuning is upwards."""
    assert layer_of(package_of("utils.tuning.sweeps")) > layer_of(package_of("utils.models.model_check"))
    assert package_of("utils.paths") == "top" and package_of("utils") == "top"


def test_no_import_cycle() -> None:
    graph = {module: imports_of(module, path) for module, path in utils_modules().items()}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for imported in graph.get(module, ()):
            if state.get(imported) == 1:
                pytest.fail(f"import cycle: {' -> '.join([*trail, module, imported])}")
            if imported not in state:
                visit(imported, [*trail, module])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [])


def test_every_module_is_on_the_map_and_the_map_has_no_ghosts() -> None:
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", (UTILS / "README.md").read_text(encoding="utf-8"), re.M))
    modules = {path.relative_to(UTILS).as_posix() for path in UTILS.rglob("*.py") if path.name != "__init__.py"}
    assert not modules - listed, f"add these modules to utils/README.md: {sorted(modules - listed)}"
    assert not listed - modules, f"utils/README.md lists modules that do not exist: {sorted(listed - modules)}"


def test_every_subpackage_says_what_it_is_for() -> None:
    silent = [path.parent.name for path in UTILS.glob("*/__init__.py")
              if len(ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "") < 40]
    assert not silent, f"give these packages a docstring that says what they are for: {silent}"


def test_modules_over_500_lines_say_why_at_their_top() -> None:
    unexplained = [path.relative_to(UTILS).as_posix() for path in UTILS.rglob("*.py")
                   if len(path.read_text(encoding="utf-8").splitlines()) > 520
                   and "Why one module" not in path.read_text(encoding="utf-8")[:4000]]
    assert not unexplained, f"split these modules or say at their top why not ('Why one module'): {unexplained}"
