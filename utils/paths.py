"""Where the project keeps things: repository root, models folder, build outputs.

Each location can be moved with an environment variable (`SPECDEC_MODELS_DIR`,
`SPECDEC_BUILD_DIR`, `SPECDEC_FIGURES_DIR`). A relative value is taken relative
to the repository root, never to the current directory, so the command line
(run from anywhere) and the notebooks (whose kernels run in `notebooks/`) mean
the same folder: `SPECDEC_MODELS_DIR=models-big` is `<repository>/models-big`
everywhere. `~` is expanded.
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
    """Folder that holds every prepared model; `$SPECDEC_MODELS_DIR` moves it.

    Read on each call (no module-level state), so a notebook or a test can
    change the environment variable and see the effect at once.
    """
    return configured_dir(MODELS_DIR_ENV, REPO_ROOT / "models")


def build_dir() -> Path:
    """Git-ignored folder for run artefacts (benchmark JSON, sweep caches, executed notebooks)."""
    return configured_dir(BUILD_DIR_ENV, REPO_ROOT / "build")


def figures_dir() -> Path:
    """Where notebooks save their plots as PNG: `build/figures` unless `$SPECDEC_FIGURES_DIR` says otherwise.

    The README's images are not taken from here but from the notebooks' stored outputs
    (`maintainers.readme_images`), which show the very bytes written here.
    """
    return configured_dir(FIGURES_DIR_ENV, build_dir() / "figures")
