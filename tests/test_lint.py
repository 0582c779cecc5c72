"""ruff finds nothing in utils/, tests/ and tutorial.py, and mypy finds no type error in utils/ (pyproject.toml)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from utils.paths import REPO_ROOT

LINTED = ("utils", "tests", "tutorial.py")


def ruff(*arguments: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *arguments], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_the_code_passes_ruff() -> None:
    result = ruff("check", "--no-cache", *LINTED)
    assert result.returncode == 0, f"ruff found problems (fix them, or `ruff check --fix`):\n{result.stdout}" \
                                   f"{result.stderr}"


def test_the_rules_catch_an_unused_import_and_an_undefined_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f():\n    return undefined_name\n", encoding="utf-8")
    result = ruff("check", "--no-cache", "--config", str(REPO_ROOT / "pyproject.toml"), "--output-format",
                  "concise", str(bad), cwd=tmp_path)
    assert result.returncode == 1
    assert "F401" in result.stdout and "F821" in result.stdout


def test_the_rules_catch_unsorted_imports_and_a_zip_without_strict(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport json\n\nprint(list(zip(json.loads('[1]'), sys.argv)))\n", encoding="utf-8")
    result = ruff("check", "--no-cache", "--config", str(REPO_ROOT / "pyproject.toml"), "--output-format",
                  "concise", str(bad), cwd=tmp_path)
    assert result.returncode == 1
    assert "I001" in result.stdout and "B905" in result.stdout


def mypy(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", *arguments], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=900)


def test_utils_passes_the_type_checker() -> None:
    result = mypy()  # files and settings from pyproject.toml
    assert result.returncode == 0, f"mypy found type errors in utils/:\n{result.stdout}{result.stderr}"


def test_the_type_checker_catches_a_wrong_return_type(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def half(n: int) -> int:\n    return n / 2\n", encoding="utf-8")
    result = mypy("--config-file", str(REPO_ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), str(bad))
    assert result.returncode == 1 and "[return-value]" in result.stdout
