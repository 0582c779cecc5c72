"""The notebooks' prose: short, and never a measured number (cells print those, as verdicts computed from the data).

A "measured-looking" figure is a number with a unit of speed, time, size or share (1.3x, 40 ms, 2 min, 12 GB, 5%);
inline code, link targets and HTML are not prose. What a page may state (a requirement, a setting, a file size a
catalogue fixes) is allowed per page below, by its exact text.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from maintainers.run_times import hand_written
from utils.paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
UNIT = r"(?:x|×|%|ms|s|seconds?|min|minutes?|h|hours?|tokens/s|tok/s|GB|MB|kB|GiB|MiB)"
MEASURED = re.compile(r"(?<![\w.`/-])~?\d+(?:[.,]\d+)*(?:\s?[-–]\s?\d+(?:[.,]\d+)*)?\s?" + UNIT + r"(?![\w/])")
NOT_PROSE = re.compile(r"`[^`]*`|\]\([^)]*\)|<[^>]+>|\$[^$]*\$")
# Words of markdown: a notebook's core path at most about 1,200 and its optional sections about 800 more.
MAX_WORDS_PER_NOTEBOOK = 2000
MAX_WORDS_IN_ALL_NOTEBOOKS = 10_000
# Figures a page may state, by page: requirements, settings (timeouts, defaults, thresholds) and the catalogue's
# estimates, never a result. The setup page also states what preparing a machine took on ours (the teacher's guide
# quotes it between markers, from docs/preparation-times.json).
REQUIREMENTS = {"14 GB", "27 GB", "12 GB", "12.8 GB", "1.6 GB", "6.3 GB", "4.8 GB", "1.5 GB", "3 GB"}
ALLOWED: dict[str, set[str]] = {
    "README.md": {"14 GB", "27 GB", "12 GB", "3 hours"},
    "docs/results.md": {"1.00x"},  # the verdict's line between faster and slower
    "docs/setup.md": REQUIREMENTS | {"~20 GB", "~36 GB", "~2.5 GB", "1.5x"},
    "docs/troubleshooting.md": {"10 seconds", "3 s", "5 s", "10 s"},  # the hub checks' timeouts
    "docs/teachers-guide.md": REQUIREMENTS | {
        "1.0 GB", "517 MB", "265 MB", "138 MB", "91 MB",
        "~2.3 GB", "~22.7 GB", "2.2 GB", "2.6 GB", "0.05 GB", "0.6 GB", "14.5 GB", "28 GB", "5.9 GB", "3 hours",
        "24 GiB", "3-hour",
        "5%", "4 x", "2.8x", "90%", "1.38x"},  # its exercises' arithmetic with the formula
    "notebooks/01-getting-model-pairs.ipynb": {"20 GB", "36 GB", "2.5 GB"},  # the catalogue's needs of the real pairs
}


def markdown_cells(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"]


def measured_figures(text: str) -> list[str]:
    return [match.group(0) for match in MEASURED.finditer(NOT_PROSE.sub(" ", text))]


def words(text: str) -> int:
    return len(re.sub(r"\]\([^)]*\)", "]", text).split())


@pytest.mark.parametrize("page", [*NOTEBOOKS, *PAGES], ids=lambda path: path.name)
def test_prose_states_no_measured_figure(page: Path) -> None:
    text = "\n".join(markdown_cells(page)) if page.suffix == ".ipynb" else hand_written(page.read_text(encoding="utf-8"))
    name = page.relative_to(REPO_ROOT).as_posix()
    figures = [figure for figure in measured_figures(text) if figure not in ALLOWED.get(name, set())]
    assert not figures, (f"{name} states {figures} in prose: let a cell print it (or, for a requirement or a "
                         "setting, allow it in tests/test_notebook_prose.py)")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.name)
def test_a_notebook_says_it_in_few_words(notebook: Path) -> None:
    count = sum(words(cell) for cell in markdown_cells(notebook))
    assert count <= MAX_WORDS_PER_NOTEBOOK, f"{notebook.name} has {count} words of markdown"


def test_the_course_says_it_in_few_words() -> None:
    count = sum(words(cell) for notebook in NOTEBOOKS for cell in markdown_cells(notebook))
    assert count <= MAX_WORDS_IN_ALL_NOTEBOOKS, f"the notebooks hold {count} words of markdown"


def test_the_rule_sees_results_and_ignores_code() -> None:
    assert measured_figures("code 1.34x faster, 40 ms a step, 12.5 min, 5% of 2 GB") == [
        "1.34x", "40 ms", "12.5 min", "5%", "2 GB"]
    assert measured_figures("`--max-new-tokens 64`, K = 3, 135M parameters, [link](a/1.5x), 2 cores, x86_64") == []
