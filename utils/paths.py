"""Where the project keeps things: repository root, models folder, build outputs."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR_ENV = "SPECDEC_MODELS_DIR"


def models_dir() -> Path:
    """Folder that holds every prepared model; `$SPECDEC_MODELS_DIR` moves it.

    Read on each call (no module-level state), so a notebook or a test can
    change the environment variable and see the effect at once.
    """
    configured = os.environ.get(MODELS_DIR_ENV)
    return Path(configured).expanduser().resolve() if configured else REPO_ROOT / "models"


def build_dir() -> Path:
    """Git-ignored folder for run artefacts (benchmark JSON, sweep caches, executed notebooks)."""
    configured = os.environ.get("SPECDEC_BUILD_DIR")
    return Path(configured).expanduser().resolve() if configured else REPO_ROOT / "build"


FIGURES_DIR_ENV = "SPECDEC_FIGURES_DIR"


def figures_dir() -> Path:
    """Where notebooks save their plots as PNG: `build/figures` unless `$SPECDEC_FIGURES_DIR` says otherwise.

    `python -m utils.readme_figures` points it at `docs/images/` to refresh the README's images.
    """
    configured = os.environ.get(FIGURES_DIR_ENV)
    return Path(configured).expanduser().resolve() if configured else build_dir() / "figures"
