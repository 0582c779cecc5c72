"""How often the notebooks' code calls the libraries the course teaches, against how often it calls `utils`.

    python -m maintainers.library_calls            # one line per notebook, then the totals

Issue 38's measure of "a learner sees the library at least as often as our helpers". A call counts for a library
when the name it starts from was imported from one (`openvino_genai`, `openvino`, `torch`, `transformers`,
`huggingface_hub`, `modelscope`, `ipex_llm`, `optimum`, `nncf`) or assigned from a call into one
(`pipe = ov_genai.LLMPipeline(...)`, then `pipe.generate(...)`); the same for `utils`. Each `optimum-cli` in a cell
counts as a library call. Shell (`!`) and magic (`%`) lines are left out.
"""
from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from utils.paths import REPO_ROOT

TAUGHT = frozenset({"openvino_genai", "openvino", "torch", "transformers", "huggingface_hub", "modelscope",
                    "ipex_llm", "optimum", "nncf"})
COURSE = "utils"


@dataclass(frozen=True)
class CallCount:
    notebook: str
    library: int
    course: int


def notebook_code(path: Path) -> str:
    """The code cells of a notebook, without shell and magic lines."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    lines = [line for cell in cells if cell["cell_type"] == "code"
             for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _origins(tree: ast.AST) -> dict[str, str]:
    """Name -> the top-level package it came from (imported from, or assigned from a call into)."""
    origin: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                origin[(alias.asname or alias.name).split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                origin[alias.asname or alias.name] = node.module.split(".")[0]
    changed = True
    while changed:  # names assigned from calls into a package inherit it, through chains of assignments
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                package = origin.get(_root_name(node.value.func) or "")
                if package in TAUGHT or package == COURSE:
                    for target in node.targets:
                        for name in ast.walk(target):
                            if isinstance(name, ast.Name) and name.id not in origin:
                                origin[name.id] = package
                                changed = True
    return origin


def count_calls(code: str, notebook: str = "") -> CallCount:
    """Calls into the taught libraries and into `utils` in `code` (see the module's docstring)."""
    tree = ast.parse(code)
    origin = _origins(tree)
    packages = [origin.get(_root_name(node.func) or "") for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return CallCount(notebook, sum(package in TAUGHT for package in packages) + code.count("optimum-cli"),
                     sum(package == COURSE for package in packages))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook")
    arguments = parser.parse_args(argv)
    paths = arguments.notebooks or sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
    counts = [count_calls(notebook_code(path), path.name) for path in paths]
    for count in counts:
        print(f"{count.notebook[:2]}  library {count.library:4d}  utils {count.course:4d}")
    print(f"all library {sum(c.library for c in counts):4d}  utils {sum(c.course for c in counts):4d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
