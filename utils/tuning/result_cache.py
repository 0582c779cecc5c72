"""Measured results cached on disk as JSON, one file per key: re-running a notebook reuses what it measured.

A key holds everything that could change the result; raise ``CACHE_VERSION`` when results change meaning.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from utils.models.atomic_folder import COMPLETE_MARKER
from utils.paths import build_dir
from utils.system.environment_report import package_versions

CACHE_VERSION = 3  # 2: token probabilities on; 3: VmHWM
CACHE_FOLDER_NAME = "sweep-cache"
VERSIONED_PACKAGES = ("openvino", "openvino-genai", "openvino-tokenizers")


def measured_versions() -> dict[str, str]:
    """Versions of the packages the measurements depend on (part of every cache key)."""
    return package_versions(VERSIONED_PACKAGES, with_python=False)


def model_fingerprint(folder: Path) -> str:
    """Identity of a model folder: its build marker's content if any, else the weights' size and mtime."""
    folder = Path(folder)
    marker = folder / COMPLETE_MARKER
    if marker.is_file():
        return hashlib.sha256(marker.read_bytes()).hexdigest()[:16]
    weights = folder / "openvino_model.bin"
    if weights.is_file():
        status = weights.stat()
        return f"{status.st_size}-{int(status.st_mtime)}"
    return "missing"


class ResultCache:
    """JSON results on disk, one file per key, named by the key's hash; enabled=False makes it a no-op."""

    def __init__(self, folder: Path | str | None = None, enabled: bool = True) -> None:
        self.folder = Path(folder) if folder is not None else build_dir() / CACHE_FOLDER_NAME
        self.enabled = enabled

    @staticmethod
    def digest(key: dict) -> str:
        canonical = json.dumps({"cache_version": CACHE_VERSION, **key}, sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:24]

    def path_of(self, key: dict) -> Path:
        return self.folder / f"{key.get('kind', 'result')}-{self.digest(key)}.json"

    def get(self, key: dict) -> Any | None:
        """The stored value for `key`, or None (also for unreadable files, which are then re-measured)."""
        if not self.enabled:
            return None
        path = self.path_of(key)
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text())["value"]
        except (json.JSONDecodeError, KeyError):
            return None

    def put(self, key: dict, value: Any) -> None:
        if not self.enabled:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path_of(key)
        temporary = path.with_suffix(".tmp")
        stored = {"key": key, "stored_at": dt.datetime.now(dt.timezone.utc).isoformat(), "value": value}
        temporary.write_text(json.dumps(stored, indent=1, default=str))
        temporary.replace(path)

    def get_or_compute(self, key: dict, compute: Callable[[], Any]) -> tuple[Any, bool]:
        """(value, True) from the cache, or (compute(), False) after storing it."""
        cached = self.get(key)
        if cached is not None:
            return cached, True
        value = compute()
        self.put(key, value)
        return value, False

    def clear(self) -> int:
        """Delete every cached result; returns how many files were removed."""
        if not self.folder.is_dir():
            return 0
        removed = 0
        for path in self.folder.glob("*.json"):
            path.unlink()
            removed += 1
        return removed


def make_cache(use_cache: bool = True, clear_cache: bool = False, folder: Path | str | None = None) -> ResultCache:
    """The cache a notebook passes to every sweep; `clear_cache=True` empties it first."""
    cache = ResultCache(folder, enabled=use_cache)
    if clear_cache:
        cache.clear()
    return cache
