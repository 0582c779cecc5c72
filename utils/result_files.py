"""Files a run writes for later: plots as PNG (`save_figure`) and results as JSON (`write_json`)."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from utils.paths import figures_dir

FIGURE_NAME_KEY = "specdec_figure"  # output metadata: the name a saved figure was shown under


def save_figure(figure: Any, name: str, dpi: int = 110) -> Path:
    """Write `figure` to `figures_dir()/<name>.png`; in a notebook, show that PNG (named by FIGURE_NAME_KEY).

    The stored output is then byte-identical to the file, so the README's images can be taken from the notebooks."""
    if not name or "/" in name or "\\" in name:
        raise ValueError(f"Give a plain file name without folders, got '{name}'.")
    folder = figures_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name if name.endswith(".png") else f"{name}.png")
    figure.savefig(path, dpi=dpi, bbox_inches="tight")
    if _in_a_kernel():
        import matplotlib.pyplot as plt
        from IPython.display import Image, display

        display(Image(data=path.read_bytes(), format="png"), metadata={FIGURE_NAME_KEY: path.stem})
        plt.close(figure)  # the inline backend would draw it a second time
    return path


def _in_a_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


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
