"""Tests for maintainers.run_context: an output path is checked before long work, and nothing is left behind."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from maintainers.run_context import check_writable_file, measurement_context
from utils.input_checks import InputError


def one_line(error: pytest.ExceptionInfo) -> str:
    return str(error.value).replace("\n", " ")


def test_writable_file_checks_leave_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper" / "bench.json"
    assert check_writable_file(target, "--json") == target
    assert list(tmp_path.iterdir()) == []  # no folder created, no probe left
    with pytest.raises(InputError, match="is a folder"):
        check_writable_file(tmp_path, "--json")
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    with pytest.raises(InputError) as error:
        check_writable_file(blocker / "bench.json", "--json")
    assert "is a file, not a folder" in one_line(error)


def test_an_unwritable_folder_is_refused(tmp_path: Path) -> None:
    # /proc cannot hold new files even for root; a read-only folder works for other users
    with pytest.raises(InputError, match="cannot be written"):
        check_writable_file(Path("/proc/bench.json"), "--json")
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(InputError, match="cannot be written"):
            check_writable_file(locked / "bench.json", "--json")


def test_the_context_says_when_and_where_with_the_cpus_features() -> None:
    context = measurement_context()
    assert context["cpu_count"] == os.cpu_count() and "features" in context["cpu"]
    assert context["when"].endswith("+00:00")
