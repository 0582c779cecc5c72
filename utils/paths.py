"""Where the project keeps things: repository root, models folder, build outputs.

`SPECDEC_MODELS_DIR`, `SPECDEC_BUILD_DIR` and `SPECDEC_FIGURES_DIR` move them. A relative value is relative to the
repository root, never the current directory, so the command line and the notebooks (run in `notebooks/`) agree.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR_ENV = "SPECDEC_MODELS_DIR"
BUILD_DIR_ENV = "SPECDEC_BUILD_DIR"
FIGURES_DIR_ENV = "SPECDEC_FIGURES_DIR"


def configured_dir(variable: str, default: Path) -> Path:
    """The absolute folder `$variable` names (relative values are relative to the repository root), or `default`."""
    configured = os.environ.get(variable)
    if not configured:
        return default
    return (REPO_ROOT / Path(configured).expanduser()).resolve()


def models_dir() -> Path:
    """Folder that holds every prepared model; `$SPECDEC_MODELS_DIR`, read on each call, moves it."""
    return configured_dir(MODELS_DIR_ENV, REPO_ROOT / "models")


def build_dir() -> Path:
    """Git-ignored folder for run artefacts (benchmark JSON, sweep caches, executed notebooks)."""
    return configured_dir(BUILD_DIR_ENV, REPO_ROOT / "build")


def figures_dir() -> Path:
    """Where notebooks save their plots as PNG: `build/figures` unless `$SPECDEC_FIGURES_DIR` says otherwise."""
    return configured_dir(FIGURES_DIR_ENV, build_dir() / "figures")
