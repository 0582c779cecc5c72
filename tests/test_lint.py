"""ruff (rules in pyproject.toml) finds nothing in utils/, tests/ and tutorial.py."""
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
