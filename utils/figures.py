"""Save a notebook's plot as a PNG where the README-figures command can collect it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from utils.paths import figures_dir


def save_figure(figure: Any, name: str, dpi: int = 110) -> Path:
    """Write `figure` to `figures_dir()/<name>.png` and return the path."""
    if not name or "/" in name or "\\" in name:
        raise ValueError(f"Give a plain file name without folders, got '{name}'.")
    folder = figures_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name if name.endswith(".png") else f"{name}.png")
    figure.savefig(path, dpi=dpi, bbox_inches="tight")
    return path
