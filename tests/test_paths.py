"""Tests for utils.paths: a relative SPECDEC_* folder means the same folder from any current directory."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from utils.paths import BUILD_DIR_ENV, FIGURES_DIR_ENV, MODELS_DIR_ENV, REPO_ROOT, build_dir, figures_dir, models_dir

PRINT_MODELS_DIR = "from utils.paths import models_dir; print(models_dir())"


def test_relative_models_dir_is_relative_to_the_repository_not_the_current_directory(monkeypatch,
                                                                                       tmp_path: Path) -> None:
    """Issue 15, item 8: `SPECDEC_MODELS_DIR=my-models` meant ./my-models to the command line (run from the
    repository) and notebooks/my-models to the notebooks (whose kernels run in notebooks/)."""
    monkeypatch.setenv(MODELS_DIR_ENV, "my-models")
    seen = set()
    for current in (REPO_ROOT, REPO_ROOT / "notebooks", tmp_path):
        monkeypatch.chdir(current)
        seen.add(models_dir())
    assert seen == {REPO_ROOT / "my-models"}


def test_command_line_and_notebook_directory_agree_in_separate_processes() -> None:
    environment = {**os.environ, MODELS_DIR_ENV: "models-elsewhere", "PYTHONPATH": str(REPO_ROOT)}
    printed = {subprocess.run([sys.executable, "-c", PRINT_MODELS_DIR], cwd=current, env=environment, text=True,
                              capture_output=True, check=True).stdout.strip()
               for current in (REPO_ROOT, REPO_ROOT / "notebooks")}
    assert printed == {str(REPO_ROOT / "models-elsewhere")}


@pytest.mark.parametrize("variable, function", [(MODELS_DIR_ENV, models_dir), (BUILD_DIR_ENV, build_dir),
                                                (FIGURES_DIR_ENV, figures_dir)])
def test_every_folder_variable_follows_the_same_rule(monkeypatch, tmp_path: Path, variable: str, function) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, "a/../b")
    assert function() == REPO_ROOT / "b"
    monkeypatch.setenv(variable, str(tmp_path / "absolute"))
    assert function() == tmp_path / "absolute"
    monkeypatch.setenv(variable, "~/in-home")
    assert function() == Path.home().resolve() / "in-home"


def test_unset_or_empty_gives_the_defaults(monkeypatch) -> None:
    for variable in (MODELS_DIR_ENV, BUILD_DIR_ENV, FIGURES_DIR_ENV):
        monkeypatch.setenv(variable, "")
    assert models_dir() == REPO_ROOT / "models" and build_dir() == REPO_ROOT / "build"
    assert figures_dir() == REPO_ROOT / "build" / "figures"
