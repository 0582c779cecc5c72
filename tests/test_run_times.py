"""The times the README and the teacher's guide quote are the reference run's, and the workshop track keeps its
promises (3 hours, at most 25 minutes per notebook, sections off the track marked optional)."""
from __future__ import annotations

import json
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
    (root / "docs" / "setup.md").write_text(f"RAM while it builds ({run_times.CODER_BUILD_START}"
                                            f"{run_times.CODER_BUILD_END}).\n")


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


SETUP_TIMES = {"date": "2026-12-04 12:24 UTC", "machine": {"cpu": "AMD EPYC", "cores": 2, "platform": "Linux-x"},
               "steps": {"main_environment": {"seconds": 82.2, "did_work": True},
                         "ipex_environment": {"seconds": 3.0, "did_work": False},
                         "offline_pair": {"seconds": 127.3, "did_work": True},
                         "coder_pair": {"seconds": None, "did_work": True},
                         "setup": {"seconds": 634.0, "did_work": True}},
               "up_to_date": {"date": "2026-12-04 12:30 UTC", "seconds": 0.9}}


def with_setup_times(root: Path, record: dict) -> None:
    (root / "docs" / "preparation-times.json").write_text(json.dumps(record))
    notebook = nbformat.read(root / "notebooks" / "02-x.ipynb", as_version=4)
    notebook.metadata["reference_run"]["machine"] = {"cpu": "AMD EPYC"}
    nbformat.write(notebook, root / "notebooks" / "02-x.ipynb")


def test_the_guide_says_what_preparing_a_machine_took_and_where(tmp_path: Path) -> None:
    fake_repository(tmp_path, 432, ["## 1. One"])
    with_setup_times(tmp_path, SETUP_TIMES)
    text = run_times.preparation_text(tmp_path)
    assert ("The setup (section 1) took 10.6 min from a clean clone on AMD EPYC (2 cores, Linux-x) on 2026-12-04 12:24 "
            "UTC: the main environment 82 s, the IPEX-LLM environment 3 s (already up to date), the offline pair "
            "2.1 min, the Qwen2.5-Coder pair (its wheels and its build) not measured yet.") in text
    assert "A second run, with everything up to date, took 1 s." in text
    assert "The day-before check (section 3) runs every notebook: 7.2 min by their reference runs" in text
    assert text.endswith("02 on AMD EPYC at run size `full`).")
    with_setup_times(tmp_path, {key: value for key, value in SETUP_TIMES.items() if key != "up_to_date"})
    assert "A second run, with everything up to date, has not been timed yet." in run_times.preparation_text(tmp_path)


def test_the_preparation_times_are_written_between_their_markers(tmp_path: Path) -> None:
    fake_repository(tmp_path, 432, ["## 1. One"])
    with_setup_times(tmp_path, SETUP_TIMES)
    page = f"intro\n{run_times.PREPARATION_START}\nold: about 7 minutes\n{run_times.PREPARATION_END}\nend\n"
    fresh = run_times.guide_with_preparation(page, tmp_path)
    assert fresh == (f"intro\n{run_times.PREPARATION_START}\n{run_times.preparation_text(tmp_path)}\n"
                     f"{run_times.PREPARATION_END}\nend\n")
    assert run_times.guide_with_preparation(fresh, tmp_path) == fresh, "a fresh guide is left as it is"
    assert "7 minutes" not in run_times.hand_written(fresh)  # the prose check sees only what a person wrote
    with pytest.raises(ValueError, match="preparation-times"):
        run_times.guide_with_preparation("no markers", tmp_path)


def test_only_a_clean_clones_setup_becomes_the_reference(tmp_path: Path, capsys) -> None:
    (tmp_path / "docs").mkdir()
    source = tmp_path / "setup-times.json"
    source.write_text(json.dumps(SETUP_TIMES))
    with pytest.raises(ValueError, match="ipex_environment did no work"):
        run_times.adopt_setup_times(source, tmp_path)
    assert not run_times.preparation_times_path(tmp_path).exists()
    clean = json.loads(json.dumps(SETUP_TIMES))
    clean["steps"]["ipex_environment"]["did_work"] = True
    del clean["up_to_date"]
    source.write_text(json.dumps(clean))
    assert run_times.adopt_setup_times(source, tmp_path) == run_times.preparation_times_path(tmp_path)
    assert json.loads(run_times.preparation_times_path(tmp_path).read_text()) == clean | {"up_to_date": None}
    assert run_times.main(["--setup-times", str(tmp_path / "missing.json")]) == 1
    assert "missing.json" in capsys.readouterr().err


def test_the_committed_preparation_times_have_every_step() -> None:
    record = json.loads(run_times.preparation_times_path().read_text(encoding="utf-8"))
    assert set(record["steps"]) == set(run_times.SETUP_STEPS)
    assert {"cpu", "cores", "platform"} <= set(record["machine"]) and record["date"].endswith(" UTC")


def test_the_setup_page_quotes_the_coder_pairs_build_inline(tmp_path: Path) -> None:
    fake_repository(tmp_path, 432, ["## 1. One"])
    with_setup_times(tmp_path, SETUP_TIMES)
    page = (tmp_path / "docs" / "setup.md").read_text()
    assert run_times.setup_page_rewrite(page, tmp_path) == (
        f"RAM while it builds ({run_times.CODER_BUILD_START}its build has not been timed yet"
        f"{run_times.CODER_BUILD_END}).\n")
    timed = json.loads(json.dumps(SETUP_TIMES))
    timed["steps"]["coder_pair"] = {"seconds": 411.0, "did_work": True}
    with_setup_times(tmp_path, timed)
    fresh = run_times.setup_page_rewrite(page, tmp_path)
    assert "its wheels and build took 6.8 min on AMD EPYC with 2 cores" in fresh and "\n<!--" not in fresh
    assert run_times.setup_page_rewrite(fresh, tmp_path) == fresh
    assert "6.8 min" not in run_times.hand_written(fresh)
