"""The times the README and the teacher's guide quote are the reference run's, and the workshop track keeps its
promises (3 hours, at most 25 minutes per notebook, sections off the track marked optional)."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from maintainers import run_times


def test_the_pages_quote_the_reference_runs_times_and_the_track_holds() -> None:
    assert run_times.out_of_date() == []
    assert run_times.track_problems() == []


def fake_repository(root: Path, seconds: float, headings: list[str], first_section_seconds: float = 30.0) -> None:
    (root / "notebooks").mkdir()
    (root / "docs").mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(heading) for heading in headings]
    notebook.metadata["reference_run"] = {"seconds": seconds, "section_seconds": {"§1": first_section_seconds, "§2": 95.5}}
    nbformat.write(notebook, root / "notebooks" / "02-x.ipynb")
    (root / "README.md").write_text("| # | a | b | time |\n|---|---|---|---|\n| 02 | [x](x) | you see | 1 s |\n")
    (root / "docs" / "teachers-guide.md").write_text(f"intro\n{run_times.TRACK_START}\nold\n{run_times.TRACK_END}\nend\n")


def test_the_readme_row_gets_the_metadata_time(tmp_path: Path) -> None:
    fake_repository(tmp_path, 432, ["## 1. One", "## 2. Two"])
    assert run_times.readme_with_times((tmp_path / "README.md").read_text(), tmp_path).endswith("| 7.2 min |\n")
    assert run_times.as_time(45) == "45 s" and run_times.as_time(119.4) == "119 s" and run_times.as_time(600) == "10.0 min"


def test_the_track_table_sums_its_core_sections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_repository(tmp_path, 200, ["## 1. One", "## 2. Two", "## 3. Three (optional)"])
    monkeypatch.setattr(run_times, "TRACK", (run_times.Block("02", (1, 2), 20, "read it"),
                                             run_times.Block(None, (), 10, "break")))
    table = run_times.track_table(tmp_path)
    assert "| 1 | 02: §1 One, §2 Two | 2.1 min | 3.3 min | 20 min | read it |" in table
    assert "**30 min**" in table
    guide = run_times.guide_with_track((tmp_path / "docs" / "teachers-guide.md").read_text(), tmp_path)
    assert "old" not in guide and guide.startswith("intro\n") and guide.endswith("end\n")
    assert run_times.track_problems(tmp_path) == []


def test_broken_promises_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_repository(tmp_path, 2000, ["## 1. One (optional)", "## 2. Two"], first_section_seconds=2000)
    monkeypatch.setattr(run_times, "TRACK", (run_times.Block("02", (1, 4), 30, "too long"),
                                             run_times.Block(None, (), 160, "break")))
    problems = "\n".join(run_times.track_problems(tmp_path))
    assert "190 min, more than 180" in problems and "30 min planned, more than 25" in problems
    assert "core sections run 33.3 min, longer than its 30 planned minutes" in problems
    assert "§1 is on the track but its heading says (optional)" in problems
    assert "§2 is off the track: add (optional)" in problems and "no sections [4]" in problems


def test_notebook_numbers_become_ranges() -> None:
    assert run_times.number_ranges(["00", "01", "02", "03", "04", "05", "07"]) == "00–05, 07"
    assert run_times.number_ranges(["06", "08"]) == "06, 08"
    assert run_times.number_ranges(["01", "02", "04"]) == "01, 02, 04"


def test_the_readme_names_the_machine_of_each_notebooks_run(tmp_path: Path) -> None:
    fake_repository(tmp_path, 432, ["## 1. One"])
    for number, cpu in (("03", "AMD EPYC"), ("04", "Intel Xeon")):
        notebook = nbformat.v4.new_notebook()
        notebook.metadata["reference_run"] = {"seconds": 1, "run_size": "full", "machine": {"cpu": cpu}}
        nbformat.write(notebook, tmp_path / "notebooks" / f"{number}-y.ipynb")
    assert run_times.machines_sentence(tmp_path) == "02 not run; 03 on AMD EPYC at run size `full`; 04 on Intel Xeon at run size `full`"
    stale = f"ran: {run_times.MACHINES_START}old{run_times.MACHINES_END}."
    fresh = run_times.readme_with_machines(stale, tmp_path)
    assert fresh == f"ran: {run_times.MACHINES_START}{run_times.machines_sentence(tmp_path)}{run_times.MACHINES_END}."
    assert run_times.readme_with_machines(fresh, tmp_path) == fresh, "a fresh README is left as it is"
    assert run_times.readme_with_machines("no markers here", tmp_path) == "no markers here"


def test_the_page_writers_command_writes_unless_asked_only_to_check(tmp_path, capsys) -> None:
    from maintainers.page_commands import write_then_check

    written: list[str] = []

    def write() -> list:
        written.append("called")
        return [tmp_path / "docs" / "page.md"]

    assert write_then_check(["--check"], "prog", "d", write, lambda: ["README.md: a time is out of date"],
                            root=tmp_path) == 1
    assert written == [] and "a time is out of date" in capsys.readouterr().out
    assert write_then_check([], "prog", "d", write, lambda: [], root=tmp_path) == 0
    assert written == ["called"] and capsys.readouterr().out.strip() == "wrote docs/page.md"
