"""Write a model folder so that nothing half-written ever looks complete.

Work happens in a hidden sibling `.tmp-<name>-<pid>`; then a `.complete` marker (recipe, file sizes, SHA-256 of small
files) is written and the folder renamed into place in one step. Builds of a folder exclude each other via the lock
file `.<name>.lock` (the OS releases it however the process ends); a temporary folder of a dead process is removed by
the next build, one of a live process is never touched.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

COMPLETE_MARKER = ".complete"
# Files up to this size get a SHA-256 in the marker; larger ones (weights) only their size, enough to catch truncation.
DIGEST_MAX_BYTES = 32 * 1024 * 1024
# A live process that started this long after a temporary folder was last modified cannot own it (pid reused).
PID_REUSE_SLACK_S = 2.0


class FolderNotWritableError(PermissionError):
    """The folder a build must write into cannot be written."""


def lock_path(final: Path) -> Path:
    """The lock file that builds of `final` hold (`.<name>.lock` beside it)."""
    final = Path(final)
    return final.parent / f".{final.name}.lock"


@contextmanager
def build_lock(final: Path) -> Iterator[None]:
    """Hold `final`'s lock for the block, waiting (saying so) while another process holds it. Re-entrant."""
    from filelock import FileLock, Timeout

    final = Path(final)
    require_writable(final.parent)
    lock = FileLock(lock_path(final), is_singleton=True)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"Another process is building {final}; waiting for it to finish (Ctrl-C to stop waiting).", flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def require_writable(folder: Path) -> Path:
    """Create `folder` if needed and check that a file can be written in it, else raise `FolderNotWritableError`."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as error:
        raise FolderNotWritableError(
            f"Cannot write in the models folder {folder} ({error.strerror or error}). Make it writable, or set "
            "SPECDEC_MODELS_DIR to a writable folder with enough free space, and run again.") from None
    return folder


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe_files(folder: Path) -> dict[str, dict]:
    """Each file under `folder` (relative path -> {"bytes", and "sha256" if small}), the marker excluded."""
    folder = Path(folder)
    files = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.relative_to(folder).as_posix() == COMPLETE_MARKER:
            continue
        size = path.stat().st_size
        record: dict = {"bytes": size}
        if size <= DIGEST_MAX_BYTES:
            record["sha256"] = _sha256(path)
        files[path.relative_to(folder).as_posix()] = record
    return files


def read_marker(folder: Path) -> dict | None:
    """The build description stored in `folder`, or None if the folder is not complete."""
    marker = Path(folder) / COMPLETE_MARKER
    try:
        content = json.loads(marker.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return content if isinstance(content, dict) else None


def damaged_files(folder: Path) -> list[str]:
    """What differs in `folder` from its marker's record, one phrase per file (empty if intact or nothing recorded)."""
    folder = Path(folder)
    recorded = (read_marker(folder) or {}).get("files")
    if not isinstance(recorded, dict):
        return []
    problems = []
    for name, record in recorded.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name} is missing")
            continue
        size = path.stat().st_size
        if size != record.get("bytes"):
            problems.append(f"{name} has {size:,} bytes instead of {record.get('bytes'):,}")
        elif "sha256" in record and _sha256(path) != record["sha256"]:
            problems.append(f"{name} was modified since it was built")
    return problems


def is_up_to_date(folder: Path, recipe: dict) -> bool:
    """True if `folder` is complete, intact (see `damaged_files`) and was built from exactly `recipe`."""
    marker = read_marker(folder)
    return marker is not None and marker.get("recipe") == recipe and not damaged_files(folder)


def _temporary_sibling(final: Path) -> Path:
    return final.parent / f".tmp-{final.name}-{os.getpid()}"


def _temporary_pattern(final: Path) -> re.Pattern:
    return re.compile(rf"\.tmp-{re.escape(final.name)}-(?:old-)?(\d+)")


def stale_temporaries(final: Path) -> list[Path]:
    """Temporary folders of `final` (not of similarly named folders) that no live process owns."""
    final = Path(final)
    own = _temporary_pattern(final)
    found = []
    for path in final.parent.glob(f".tmp-{final.name}-*"):
        match = own.fullmatch(path.name)
        if match and not _owned_by_another_live_process(path, int(match.group(1))):
            found.append(path)
    return found


def live_temporaries(final: Path) -> list[Path]:
    """Temporary folders of `final` that belong to another process still running (a build in progress)."""
    final = Path(final)
    own = _temporary_pattern(final)
    return [path for path in final.parent.glob(f".tmp-{final.name}-*")
            if (match := own.fullmatch(path.name)) and _owned_by_another_live_process(path, int(match.group(1)))]


def _owned_by_another_live_process(temporary: Path, pid: int) -> bool:
    """True if process `pid` runs, is not this one, and is old enough to have created `temporary` (pid reuse)."""
    import psutil

    if pid == os.getpid():
        return False  # ours: a leftover of an earlier build in this process, or of a dead process with our pid
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        started = process.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True
    try:
        modified = temporary.stat().st_mtime
    except FileNotFoundError:
        return False
    return started <= modified + PID_REUSE_SLACK_S


def remove_stale_temporaries(final: Path) -> None:
    """Delete temporary folders of `final` left behind by builds whose process is gone."""
    final = Path(final)
    if not final.parent.is_dir() or not any(final.parent.glob(f".tmp-{final.name}-*")):
        return  # nothing to do: no lock, no write (the models folder may be read-only)
    with build_lock(final):
        for leftover in stale_temporaries(final):
            shutil.rmtree(leftover, ignore_errors=True)


@contextmanager
def atomic_folder(final: Path, recipe: dict) -> Iterator[Path]:
    """Yield a temporary folder to fill; on success it replaces `final`, marked complete. On any exception (Ctrl-C
    included) it is deleted and `final` is left as it was."""
    final = Path(final)
    with build_lock(final):
        remove_stale_temporaries(final)
        temporary = _temporary_sibling(final)
        temporary.mkdir()
        try:
            yield temporary
            marker = {"recipe": recipe, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      "files": describe_files(temporary)}
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
