"""Files a run writes for later: a plot as PNG where the README-figures command collects it, results as JSON.

Used in notebook sections: 02 §3; 03 §3; 04 §1; 05 Parameters.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
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


def jsonable(value: Any) -> Any:
    """`json.dumps`'s `default` for dataclasses (as dicts) and numpy values (as lists); raises TypeError otherwise."""
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"Cannot write {type(value).__name__} as JSON.")


def write_json(path: Path | str, data: Any, default: Callable[[Any], Any] = jsonable) -> Path:
    """Write `data` as JSON (indent 1, UTF-8), creating the folder; `default` converts what JSON cannot hold."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=default), encoding="utf-8")
    return path
