"""Write a model folder so that nothing half-written ever looks complete.

Work happens in a hidden temporary sibling folder; only when everything is in
place is a `.complete` marker (JSON describing what was built) written and the
folder renamed to its final name in one step. A crash or Ctrl-C leaves only the
temporary folder, which the next attempt removes.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

COMPLETE_MARKER = ".complete"


def read_marker(folder: Path) -> dict | None:
    """The build description stored in `folder`, or None if the folder is not complete."""
    marker = Path(folder) / COMPLETE_MARKER
    try:
        return json.loads(marker.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def is_up_to_date(folder: Path, recipe: dict) -> bool:
    """True if `folder` is complete and was built from exactly `recipe`."""
    marker = read_marker(folder)
    return marker is not None and marker.get("recipe") == recipe


def _temporary_sibling(final: Path) -> Path:
    return final.parent / f".tmp-{final.name}-{os.getpid()}"


def stale_temporaries(final: Path) -> list[Path]:
    """Temporary folders left behind by interrupted builds of `final` (not of similarly named folders)."""
    own = re.compile(rf"\.tmp-{re.escape(final.name)}-(old-)?\d+")
    return [path for path in final.parent.glob(f".tmp-{final.name}-*") if own.fullmatch(path.name)]


def remove_stale_temporaries(final: Path) -> None:
    """Delete temporary folders left behind by interrupted builds of `final`."""
    for leftover in stale_temporaries(final):
        shutil.rmtree(leftover, ignore_errors=True)


@contextmanager
def atomic_folder(final: Path, recipe: dict) -> Iterator[Path]:
    """Yield a temporary folder to fill; on success it becomes `final`, marked complete.

    An existing `final` is replaced only after the new one is fully written.
    On any exception (KeyboardInterrupt included) the temporary folder is deleted
    and `final` is left as it was.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(final)
    temporary = _temporary_sibling(final)
    temporary.mkdir()
    try:
        yield temporary
        marker = {"recipe": recipe, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (temporary / COMPLETE_MARKER).write_text(json.dumps(marker, indent=2), encoding="utf-8")
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


def folder_size_bytes(folder: Path) -> int:
    """Total size of the files under `folder`."""
    return sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())
