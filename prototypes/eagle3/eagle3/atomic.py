"""Folders built so that nothing half-written looks complete: a temporary sibling, a marker, one rename.

The same idea as the course's `atomic_folder` module (kept separate here so the
prototype does not depend on a `utils/` layout that is being reorganised).
A finished folder holds `.complete`: JSON with the recipe that built it.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MARKER = ".complete"


def read_recipe(folder: Path) -> dict | None:
    """The recipe of a finished folder, or None if it is missing or unfinished."""
    marker = Path(folder) / MARKER
    if not marker.is_file():
        return None
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("recipe")
    except (OSError, ValueError):
        return None


def is_up_to_date(folder: Path, recipe: dict) -> bool:
    """True if `folder` is finished and was built by exactly `recipe`."""
    return read_recipe(folder) == json.loads(json.dumps(recipe))


@contextmanager
def atomic_folder(final: Path, recipe: dict) -> Iterator[Path]:
    """Yield a temporary folder to fill; on success it is marked with `recipe` and renamed to `final`."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir()
    try:
        yield temporary
        marker = {"recipe": recipe, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "files": sorted(p.name for p in temporary.iterdir())}
        (temporary / MARKER).write_text(json.dumps(marker, indent=2), encoding="utf-8")
        if final.exists():
            retired = final.parent / f".tmp-{final.name}-old-{os.getpid()}"
            final.rename(retired)
            temporary.rename(final)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            temporary.rename(final)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
