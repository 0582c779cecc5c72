"""ruff finds nothing in utils/, maintainers/, tests/ and tutorial.py, and mypy finds no type error in utils/ and
maintainers/ (`files` in pyproject.toml)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from utils.paths import REPO_ROOT

LINTED = ("utils", "maintainers", "tests", "tutorial.py")


def ruff(*arguments: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *arguments], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_the_code_passes_ruff() -> None:
    result = ruff("check", "--no-cache", *LINTED)
    assert result.returncode == 0, f"ruff found problems (fix them, or `ruff check --fix`):\n{result.stdout}" \
                                   f"{result.stderr}"


def ruff_on(source: str, folder: Path) -> subprocess.CompletedProcess:
    """ruff with the project's rules on one file of `source`, outside the repository."""
    bad = folder / "bad.py"
    bad.write_text(source, encoding="utf-8")
    return ruff("check", "--no-cache", "--config", str(REPO_ROOT / "pyproject.toml"), "--output-format", "concise",
                str(bad), cwd=folder)


@pytest.mark.parametrize("source, codes", [
    ("import os\n\n\ndef f():\n    return undefined_name\n", ("F401", "F821")),  # unused import, undefined name
    ("import sys\nimport json\n\nprint(list(zip(json.loads('[1]'), sys.argv)))\n", ("I001", "B905")),
])
def test_the_rules_catch_what_they_are_for(tmp_path: Path, source: str, codes: tuple[str, ...]) -> None:
    result = ruff_on(source, tmp_path)
    assert result.returncode == 1
    assert all(code in result.stdout for code in codes), result.stdout


def mypy(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", *arguments], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=900)


def test_utils_passes_the_type_checker() -> None:
    result = mypy()  # files and settings from pyproject.toml
    assert result.returncode == 0, f"mypy found type errors:\n{result.stdout}{result.stderr}"


def test_the_type_checker_catches_a_wrong_return_type(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def half(n: int) -> int:\n    return n / 2\n", encoding="utf-8")
    result = mypy("--config-file", str(REPO_ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), str(bad))
    assert result.returncode == 1 and "[return-value]" in result.stdout
