"""Tests for utils.models.atomic_folder: nothing half-written ever looks complete."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from utils.models.atomic_folder import (
    COMPLETE_MARKER,
    DIGEST_MAX_BYTES,
    FolderNotWritableError,
    atomic_folder,
    damaged_files,
    folder_size_bytes,
    is_up_to_date,
    live_temporaries,
    lock_path,
    read_marker,
    remove_stale_temporaries,
    require_writable,
    stale_temporaries,
)
from utils.paths import REPO_ROOT

RECIPE = {"weight_format": "int4", "extra_args": ["--group-size", "64"]}


def dead_pid() -> int:
    """The pid of a process that has ended (and been waited for)."""
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    return finished.pid


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
    pid = dead_pid()
    crashed = tmp_path / f".tmp-model-{pid}"  # another (dead) process's temporary folder
    crashed.mkdir()
    (crashed / "weights.bin").write_text("garbage")
    retired = tmp_path / f".tmp-model-old-{pid}"
    retired.mkdir()
    unrelated = tmp_path / f".tmp-othermodel-{pid}"
    unrelated.mkdir()
    build(tmp_path / "model", "fresh")
    assert not crashed.exists() and not retired.exists()
    assert unrelated.exists(), "temporaries of a different folder must be left alone"
    assert (tmp_path / "model" / "weights.bin").read_text() == "fresh"


def test_remove_stale_temporaries_alone(tmp_path: Path) -> None:
    (tmp_path / f".tmp-model-{dead_pid()}").mkdir()
    (tmp_path / f".tmp-model-{os.getpid()}").mkdir()  # this process is not building it: a leftover too
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
    """BUG (utils/models/atomic_folder.py, remove_stale_temporaries): the glob `.tmp-{name}-*` also matches the
    temporary folders of a sibling named `{name}-something` (e.g. `model-int4` while building `model`),
    so building one folder can delete another folder's build in progress. Fails until fixed."""
    sibling_in_progress = tmp_path / ".tmp-model-int4-4242"  # a live build of the folder "model-int4"
    sibling_in_progress.mkdir()
    build(tmp_path / "model", "w")
    assert sibling_in_progress.exists(), (
        "building 'model' deleted the temporary folder of 'model-int4': match only "
        "`.tmp-<name>-<pid>` and `.tmp-<name>-old-<pid>` in remove_stale_temporaries")


# --- builds of one folder exclude each other -----------------------------------------------------------------------

@pytest.fixture
def live_process():
    """A running process (another pid than this one) for the duration of a test: it waits for input that never comes."""
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE) as process:
        yield process
        process.kill()


def test_temporary_folder_of_a_live_process_is_never_touched(tmp_path: Path, live_process) -> None:
    """The bug of issue 15 (item 2): a second build deleted the first build's live temporary folder."""
    in_progress = tmp_path / f".tmp-model-{live_process.pid}"  # made by the live process, after it started
    in_progress.mkdir()
    (in_progress / "openvino_model.bin").write_text("being written")
    assert stale_temporaries(tmp_path / "model") == [] and live_temporaries(tmp_path / "model") == [in_progress]
    build(tmp_path / "model", "w")
    remove_stale_temporaries(tmp_path / "model")
    assert (in_progress / "openvino_model.bin").read_text() == "being written"
    live_process.kill()
    live_process.wait()
    remove_stale_temporaries(tmp_path / "model")  # once its process is gone, the next run removes it
    assert not in_progress.exists()


def test_temporary_folder_older_than_the_process_with_its_pid_is_stale(tmp_path: Path, live_process) -> None:
    """A pid reused by a process that started after the folder was last written cannot own that folder."""
    leftover = tmp_path / f".tmp-model-{live_process.pid}"
    leftover.mkdir()
    an_hour_ago = time.time() - 3600
    os.utime(leftover, (an_hour_ago, an_hour_ago))
    assert stale_temporaries(tmp_path / "model") == [leftover]
    remove_stale_temporaries(tmp_path / "model")
    assert not leftover.exists()


# Holds the build lock of argv[1] until told to let go on stdin (or after two minutes, so a test never hangs);
# marks the moment it lets go by creating argv[2] while it still holds the lock.
HOLD_LOCK = """
import select, sys
from pathlib import Path
from utils.models.atomic_folder import build_lock
with build_lock(Path(sys.argv[1])):
    print("holding", flush=True)
    select.select([sys.stdin], [], [], 120)
    Path(sys.argv[2]).touch()
"""


class LetGoWhenWaiting(io.StringIO):
    """Stands in for stdout: once the build says it waits for another process, tells the lock holder to let go."""

    def __init__(self, holder: subprocess.Popen) -> None:
        super().__init__()
        self.holder = holder

    def write(self, text: str) -> int:
        written = super().write(text)
        if "Another process is building" in self.getvalue() and not self.holder.stdin.closed:
            self.holder.stdin.write("let go\n")
            self.holder.stdin.close()
        return written


def test_a_second_build_waits_for_the_first_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    final, released = tmp_path / "model", tmp_path / "released"
    with subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(final), str(released)], cwd=REPO_ROOT,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout.readline().strip() == "holding"
            output = LetGoWhenWaiting(holder)
            monkeypatch.setattr(sys, "stdout", output)
            with atomic_folder(final, RECIPE) as work:
                assert released.exists(), "built while another process held the lock"
                (work / "weights.bin").write_text("second")
            assert holder.wait(timeout=30) == 0
        finally:
            holder.kill()  # does nothing once it has ended
    assert f"Another process is building {final}; waiting" in output.getvalue()
    assert (final / "weights.bin").read_text() == "second" and leftovers(tmp_path) == []


def test_lock_is_reentrant_within_one_process(tmp_path: Path) -> None:
    from utils.models.atomic_folder import build_lock

    with build_lock(tmp_path / "model"):
        build(tmp_path / "model", "nested")  # atomic_folder takes the same lock again: must not wait for itself
    assert (tmp_path / "model" / "weights.bin").read_text() == "nested"
    assert lock_path(tmp_path / "model") == tmp_path / ".model.lock"


def test_unwritable_folder_is_reported_in_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(FolderNotWritableError) as error:
        build(blocker / "models" / "model", "w")
    message = str(error.value)
    assert "\n" not in message and str(blocker / "models") in message and "SPECDEC_MODELS_DIR" in message
    with pytest.raises(FolderNotWritableError):
        require_writable(blocker)
    assert require_writable(tmp_path / "new" / "models") == tmp_path / "new" / "models"
    assert [p.name for p in (tmp_path / "new" / "models").iterdir()] == []  # the write test leaves nothing


# --- the marker records every file ----------------------------------------------------------------------------------

def test_marker_records_sizes_and_digests_of_small_files(tmp_path: Path) -> None:
    final = tmp_path / "model"
    with atomic_folder(final, RECIPE) as work:
        (work / "config.json").write_text('{"a": 1}')
        (work / "sub").mkdir()
        (work / "sub" / "big.bin").write_bytes(b"\0" * (DIGEST_MAX_BYTES + 1))
    files = read_marker(final)["files"]
    assert set(files) == {"config.json", "sub/big.bin"}
    assert files["config.json"]["bytes"] == 8 and len(files["config.json"]["sha256"]) == 64
    assert files["sub/big.bin"] == {"bytes": DIGEST_MAX_BYTES + 1}  # weights: size only
    assert damaged_files(final) == [] and isinstance(read_marker(final)["files"], dict)


@pytest.mark.parametrize("damage, expected", [
    (lambda f: (f / "weights.bin").write_bytes(b"0123"), "weights.bin has 4 bytes instead of 8"),
    (lambda f: (f / "config.json").write_text('{"b": 1}'), "config.json was modified since it was built"),  # same size
    (lambda f: (f / "config.json").unlink(), "config.json is missing"),
], ids=["truncated", "edited", "deleted"])
def test_damage_is_detected_and_makes_the_folder_stale(tmp_path: Path, damage, expected: str) -> None:
    final = tmp_path / "model"
    with atomic_folder(final, RECIPE) as work:
        (work / "weights.bin").write_bytes(b"01234567")
        (work / "config.json").write_text('{"a": 1}')
    assert is_up_to_date(final, RECIPE)
    damage(final)
    assert damaged_files(final) == [expected]
    assert not is_up_to_date(final, RECIPE)  # so the next preparation rebuilds it


def test_marker_without_file_records_is_still_accepted(tmp_path: Path) -> None:
    """Folders built before sizes were recorded: accepted as before (nothing to compare with)."""
    final = tmp_path / "model"
    final.mkdir()
    (final / "weights.bin").write_text("w")
    (final / COMPLETE_MARKER).write_text(json.dumps({"recipe": RECIPE, "built_at": "2026-11-29T10:00:00+0000"}))
    assert damaged_files(final) == [] and "files" not in read_marker(final) and is_up_to_date(final, RECIPE)
