"""Tests for utils.atomic_folder: nothing half-written ever looks complete."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from utils.atomic_folder import (COMPLETE_MARKER, atomic_folder, folder_size_bytes, is_up_to_date, read_marker,
                                 remove_stale_temporaries)

RECIPE = {"weight_format": "int4", "extra_args": ["--group-size", "64"]}


def leftovers(parent: Path) -> list[str]:
    return sorted(path.name for path in parent.iterdir() if path.name.startswith(".tmp-"))


def build(final: Path, content: str, recipe: dict = RECIPE) -> Path:
    with atomic_folder(final, recipe) as work:
        (work / "weights.bin").write_text(content)
    return final


def test_success_gives_folder_with_marker_holding_the_recipe(tmp_path: Path) -> None:
    final = tmp_path / "nested" / "model"  # parents are created
    with atomic_folder(final, RECIPE) as work:
        assert work != final and work.parent == final.parent and work.name.startswith(".tmp-model-")
        assert not final.exists()  # nothing visible under the final name while writing
        (work / "weights.bin").write_text("w")
        (work / "sub").mkdir()
        (work / "sub" / "part.txt").write_text("p")
    assert (final / "weights.bin").read_text() == "w"
    assert (final / "sub" / "part.txt").read_text() == "p"
    marker = json.loads((final / COMPLETE_MARKER).read_text())
    assert marker["recipe"] == RECIPE and "built_at" in marker
    assert read_marker(final) == marker
    assert is_up_to_date(final, RECIPE)
    assert leftovers(final.parent) == []


@pytest.mark.parametrize("interruption", [RuntimeError("export failed"), KeyboardInterrupt()],
                         ids=["exception", "ctrl-c"])
def test_interruption_leaves_no_folder_and_no_temporary(tmp_path: Path, interruption: BaseException) -> None:
    final = tmp_path / "model"
    with pytest.raises(type(interruption)):
        with atomic_folder(final, RECIPE) as work:
            (work / "weights.bin").write_text("half")
            raise interruption
    assert not final.exists()
    assert leftovers(tmp_path) == []
    assert not is_up_to_date(final, RECIPE)


def test_failed_rebuild_keeps_the_old_complete_folder(tmp_path: Path) -> None:
    final = build(tmp_path / "model", "old")
    old_marker = read_marker(final)
    new_recipe = {**RECIPE, "weight_format": "int8"}
    with pytest.raises(KeyboardInterrupt):
        with atomic_folder(final, new_recipe) as work:
            (work / "weights.bin").write_text("new, half written")
            raise KeyboardInterrupt
    assert (final / "weights.bin").read_text() == "old"
    assert read_marker(final) == old_marker and is_up_to_date(final, RECIPE)
    assert leftovers(tmp_path) == []


def test_successful_rebuild_replaces_the_old_folder_entirely(tmp_path: Path) -> None:
    final = build(tmp_path / "model", "old")
    (final / "only-in-old.txt").write_text("x")
    new_recipe = {**RECIPE, "weight_format": "int8"}
    build(final, "new", new_recipe)
    assert (final / "weights.bin").read_text() == "new"
    assert not (final / "only-in-old.txt").exists()
    assert is_up_to_date(final, new_recipe) and not is_up_to_date(final, RECIPE)
    assert leftovers(tmp_path) == []


def test_leftovers_of_a_crashed_build_are_removed(tmp_path: Path) -> None:
    crashed = tmp_path / ".tmp-model-99999"  # another (dead) process's temporary folder
    crashed.mkdir()
    (crashed / "weights.bin").write_text("garbage")
    retired = tmp_path / ".tmp-model-old-99999"
    retired.mkdir()
    unrelated = tmp_path / ".tmp-othermodel-99999"
    unrelated.mkdir()
    build(tmp_path / "model", "fresh")
    assert not crashed.exists() and not retired.exists()
    assert unrelated.exists(), "temporaries of a different folder must be left alone"
    assert (tmp_path / "model" / "weights.bin").read_text() == "fresh"


def test_remove_stale_temporaries_alone(tmp_path: Path) -> None:
    (tmp_path / ".tmp-model-1").mkdir()
    (tmp_path / "model").mkdir()
    remove_stale_temporaries(tmp_path / "model")
    assert leftovers(tmp_path) == [] and (tmp_path / "model").is_dir()


def test_is_up_to_date_is_false_for_missing_marker_other_recipe_or_broken_marker(tmp_path: Path) -> None:
    final = tmp_path / "model"
    assert not is_up_to_date(final, RECIPE)  # no folder at all
    final.mkdir()
    (final / "weights.bin").write_text("w")
    assert not is_up_to_date(final, RECIPE)  # folder without marker (e.g. copied by hand, half done)
    assert read_marker(final) is None
    build(final, "w")
    assert is_up_to_date(final, RECIPE)
    assert not is_up_to_date(final, {**RECIPE, "extra_args": []})
    assert not is_up_to_date(final, {})
    (final / COMPLETE_MARKER).write_text("{ truncated")
    assert read_marker(final) is None and not is_up_to_date(final, RECIPE)


def test_folder_size_counts_nested_files(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y" * 32)
    assert folder_size_bytes(tmp_path) == 42


def test_temporaries_of_a_folder_whose_name_extends_this_one_are_left_alone(tmp_path: Path) -> None:
    """BUG (utils/atomic_folder.py, remove_stale_temporaries): the glob `.tmp-{name}-*` also matches the
    temporary folders of a sibling named `{name}-something` (e.g. `model-int4` while building `model`),
    so building one folder can delete another folder's build in progress. Fails until fixed."""
    sibling_in_progress = tmp_path / ".tmp-model-int4-4242"  # a live build of the folder "model-int4"
    sibling_in_progress.mkdir()
    build(tmp_path / "model", "w")
    assert sibling_in_progress.exists(), (
        "building 'model' deleted the temporary folder of 'model-int4': match only "
        "`.tmp-<name>-<pid>` and `.tmp-<name>-old-<pid>` in remove_stale_temporaries")
