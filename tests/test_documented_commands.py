"""Every `python -m <module>` the README, docs/, the conda files and the requirements files name exists and runs."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from utils.paths import REPO_ROOT

DOCUMENTS = sorted({*REPO_ROOT.glob("*.md"), *REPO_ROOT.glob("docs/*.md"), *REPO_ROOT.glob("*/README.md"),
                    *REPO_ROOT.glob("environment*.yml"), *REPO_ROOT.glob("requirements*.txt")})
MODULE_COMMAND = re.compile(r"python(?:3(?:\.\d+)?)? -m ([A-Za-z_][\w.]*\w)(?![\w.])")  # not `pkg.<module>`


def documented_modules() -> dict[str, list[str]]:
    """Each module a document runs with `python -m`, and the documents that name it."""
    found: dict[str, list[str]] = {}
    for document in DOCUMENTS:
        for module in MODULE_COMMAND.findall(document.read_text(encoding="utf-8")):
            found.setdefault(module, []).append(document.relative_to(REPO_ROOT).as_posix())
    return found


def test_the_documents_name_the_project_commands() -> None:
    modules = documented_modules()
    assert "maintainers.offline_pair" in modules and "maintainers.coder_pair" in modules


@pytest.mark.parametrize("module, documents", sorted(documented_modules().items()))
def test_a_documented_module_command_runs(module: str, documents: list[str]) -> None:
    shown = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=300)
    assert shown.returncode == 0, f"`python -m {module}` named in {', '.join(documents)} does not run: {shown.stderr}"


def test_nothing_names_a_module_path_that_moved(tmp_path: Path) -> None:
    """The check itself: an old path (utils.offline_pair, which moved to maintainers) would not run."""
    shown = subprocess.run([sys.executable, "-m", "utils.offline_pair", "--help"], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode != 0
