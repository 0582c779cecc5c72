"""Cells that nbval compares (`# NBVAL_CHECK_OUTPUT`) print nothing that depends on the run size.

The reference run is full size and the test command runs quick (SPECDEC_RUN_SIZE=quick), so a checked cell that
prints, say, MAX_NEW_TOKENS passes on the maintainer's machine and fails in CI. This test follows, cell by cell in
order, every name whose value comes from `run_size()` (directly or through other names), and fails when a checked
cell reads one outside an `assert`.
"""
from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from utils.paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
CHECK_MARK = "# NBVAL_CHECK_OUTPUT"
RUN_SIZE_FUNCTION = "run_size"


def python_source(cell_source: str) -> str:
    """The cell without IPython magics and shell lines (which ast cannot parse)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell_source.splitlines())


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
          ast.GeneratorExp)


def loaded_names(node: ast.AST) -> set[str]:
    """Global names an expression or statement reads (a function's arguments and locals and a comprehension's
    variables are not global)."""
    if isinstance(node, SCOPES):
        inner = set().union(*(loaded_names(child) for child in ast.iter_child_nodes(node)))
        local = {child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store)}
        if not isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            local |= {argument.arg for argument in ast.walk(node.args) if isinstance(argument, ast.arg)}
        return inner - local
    own = {node.id} if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) else set()
    return own.union(*(loaded_names(child) for child in ast.iter_child_nodes(node)))


def bound_names(statement: ast.stmt) -> set[str]:
    """Global names a statement binds or changes: `x = ...`, `x.y = ...`, `x[i] = ...`, `for x in`, def, import, and
    the object of a method call made for its effect (`x.append(...)` as a statement)."""
    names: set[str] = set()
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
    for child in ast.walk(statement):
        if isinstance(child, SCOPES):
            continue
        if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
            names.add(child.id)
        elif isinstance(child, (ast.Attribute, ast.Subscript)) and isinstance(child.ctx, ast.Store):
            base = child.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                names.add(base.id)
        elif (isinstance(child, ast.Expr) and isinstance(child.value, ast.Call)
              and isinstance(child.value.func, ast.Attribute) and isinstance(child.value.func.value, ast.Name)):
            names.add(child.value.func.value.id)
    return names


def reads_run_size(node: ast.AST, tainted: set[str]) -> bool:
    calls_run_size = any(isinstance(child, ast.Call) and isinstance(child.func, ast.Name)
                         and child.func.id == RUN_SIZE_FUNCTION for child in ast.walk(node))
    return calls_run_size or bool(loaded_names(node) & tainted)


def run_size_reads_in_checked_cells(cells: list[nbformat.NotebookNode]) -> list[tuple[int, list[str]]]:
    """(cell index, names) for each checked cell that reads a run-size-dependent name outside an assert."""
    tainted: set[str] = set()
    modules: set[str] = set()
    findings = []
    for index, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        statements = ast.parse(python_source(cell.source)).body
        checked = cell.source.lstrip().startswith(CHECK_MARK)
        read: set[str] = set()
        for statement in statements:
            if checked and not isinstance(statement, ast.Assert):
                read |= loaded_names(statement) & tainted
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                modules |= bound_names(statement)
                tainted -= bound_names(statement)
            elif reads_run_size(statement, tainted):
                tainted |= bound_names(statement) - modules  # torch.set_num_threads(N) leaves torch's results alone
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                tainted -= {name.id for target in targets if isinstance(target, (ast.Name, ast.Tuple, ast.List))
                            for name in ast.walk(target) if isinstance(name, ast.Name)}  # a size-free new value
        if read:
            findings.append((index, sorted(read)))
    return findings


def cells_of(*sources: str) -> list[nbformat.NotebookNode]:
    return [nbformat.v4.new_code_cell(source) for source in sources]


def test_finds_a_size_read_through_other_names_and_ignores_asserts_and_new_values() -> None:
    cells = cells_of("from utils.input_checks import run_size\nQUICK = run_size() == 'quick'",
                     "TOKENS = 24 if QUICK else 40\nsettings = make(TOKENS)\nresults = []\nresults.append(TOKENS)",
                     f"{CHECK_MARK}\nprint(settings.name)",
                     f"{CHECK_MARK}\nprint(len(results))",
                     f"{CHECK_MARK}\nprint('fixed')\nassert TOKENS > 0",
                     "settings = make(8)",
                     f"{CHECK_MARK}\nprint(settings.name)")
    assert run_size_reads_in_checked_cells(cells) == [(2, ["settings"]), (3, ["results"])]


def test_a_function_that_reads_the_size_is_followed() -> None:
    cells = cells_of("QUICK = run_size() == 'quick'", "def tokens():\n    return 24 if QUICK else 40",
                     f"{CHECK_MARK}\n%time x = 1\nprint(tokens())")
    assert run_size_reads_in_checked_cells(cells) == [(2, ["tokens"])]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_checked_cells_print_nothing_that_depends_on_the_run_size(notebook: Path) -> None:
    findings = run_size_reads_in_checked_cells(nbformat.read(notebook, as_version=4).cells)
    assert not findings, (f"{notebook.name}: checked cells read names that depend on the run size (the reference run "
                          f"is full, the test command quick, so nbval would fail in CI): {findings}. Print those in "
                          f"an unchecked cell, or keep them in an assert.")
