"""Every notebook is run by the test command and has the expected shape (its outputs: test_notebook_outputs.py).

Generic over whatever `notebooks/*.ipynb` exist: adding a notebook adds its checks.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from utils.paths import REPO_ROOT

NOTEBOOK_FOLDER = REPO_ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_FOLDER.glob("*.ipynb"))
KERNEL_NAMES = {"python3", "ipex-llm"}


def load_tutorial_module():
    """tutorial.py (standard library only) loaded from the repository root."""
    spec = importlib.util.spec_from_file_location("tutorial", REPO_ROOT / "tutorial.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def relative(notebook: Path) -> str:
    return notebook.relative_to(REPO_ROOT).as_posix()


def notebook_ids() -> list[str]:
    return [notebook.name for notebook in NOTEBOOKS]


@pytest.fixture(scope="module")
def collected_ids() -> list[str]:
    """Test ids pytest collects when given the test command's arguments (nothing is run)."""
    arguments = load_tutorial_module().TEST_ARGS
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *arguments],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"collection failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return [line.strip() for line in result.stdout.splitlines() if "::" in line]


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_FOLDER}"


@pytest.mark.notebooks  # collects the whole test command
def test_unit_tests_are_collected_too(collected_ids: list[str]) -> None:
    assert any(test_id.startswith(f"tests/{Path(__file__).name}::") for test_id in collected_ids)


@pytest.mark.notebooks  # collects the whole test command
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=notebook_ids())
def test_notebook_is_collected_by_the_test_command(notebook: Path, collected_ids: list[str]) -> None:
    cells = [test_id for test_id in collected_ids if test_id.startswith(relative(notebook) + "::")]
    assert cells, f"{relative(notebook)} is not executed by `python3 tutorial.py test`"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=notebook_ids())
def test_notebook_kernel_is_a_project_kernel(notebook: Path) -> None:
    kernel = nbformat.read(notebook, as_version=4).metadata.get("kernelspec", {}).get("name")
    assert kernel in KERNEL_NAMES, f"{notebook.name}: kernelspec name {kernel!r}, expected one of {KERNEL_NAMES}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=notebook_ids())
def test_notebook_has_a_heading_and_code(notebook: Path) -> None:
    cells = nbformat.read(notebook, as_version=4).cells
    headings = [line for cell in cells if cell.cell_type == "markdown"
                for line in cell.source.splitlines() if line.startswith("#")]
    assert headings, f"{notebook.name} has no markdown heading"
    assert any(cell.cell_type == "code" and cell.source.strip() for cell in cells), f"{notebook.name} has no code"
