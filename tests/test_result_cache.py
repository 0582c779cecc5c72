"""Tests of utils.tuning.result_cache: keys, round trips, clearing, corrupt files and model fingerprints."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from utils.tuning import result_cache
from utils.tuning.result_cache import ResultCache, make_cache, model_fingerprint


def test_cache_round_trip_clear_and_disable(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    key = {"kind": "point", "a": 1, "b": [1, 2]}
    assert cache.get(key) is None
    cache.put(key, [{"x": 1.5}])
    assert cache.get({"b": [1, 2], "a": 1, "kind": "point"}) == [{"x": 1.5}]  # key order does not matter
    assert cache.get({**key, "a": 2}) is None
    assert cache.clear() == 1
    assert cache.get(key) is None
    disabled = ResultCache(tmp_path, enabled=False)
    disabled.put(key, 1)
    assert disabled.get(key) is None
    assert not list(tmp_path.glob("*.json"))


def test_corrupt_cache_file_is_measured_again(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    key = {"kind": "point", "a": 1}
    cache.path_of(key).parent.mkdir(parents=True, exist_ok=True)
    cache.path_of(key).write_text("{not json")
    value, from_cache = cache.get_or_compute(key, lambda: 42)
    assert (value, from_cache) == (42, False)
    assert cache.get_or_compute(key, lambda: 0) == (42, True)
    assert json.loads(cache.path_of(key).read_text())["key"] == key


def test_make_cache_can_clear_first(tmp_path: Path) -> None:
    ResultCache(tmp_path).put({"kind": "x"}, 1)
    assert make_cache(folder=tmp_path).get({"kind": "x"}) == 1
    assert make_cache(folder=tmp_path, clear_cache=True).get({"kind": "x"}) is None


def test_default_cache_lives_in_the_build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_BUILD_DIR", str(tmp_path))
    assert ResultCache().folder == tmp_path / result_cache.CACHE_FOLDER_NAME


def test_model_fingerprint_follows_the_build_marker(tmp_path: Path) -> None:
    (tmp_path / "openvino_model.bin").write_bytes(b"12345")
    without_marker = model_fingerprint(tmp_path)
    assert without_marker.startswith("5-")
    (tmp_path / ".complete").write_text('{"built_at": 1}')
    first = model_fingerprint(tmp_path)
    (tmp_path / ".complete").write_text('{"built_at": 2}')
    assert model_fingerprint(tmp_path) != first
    assert model_fingerprint(tmp_path / "missing") == "missing"
