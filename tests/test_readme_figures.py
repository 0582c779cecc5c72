"""The README-figures command: finds the right notebooks and records provenance."""
from __future__ import annotations

from pathlib import Path

import pytest

from utils.maintenance import readme_figures
from utils.maintenance.run_notebooks import NotebookOutcome


def test_figure_notebooks_save_the_images_the_readme_shows() -> None:
    """Every image of docs/images/ that the README shows (but the browser test's screenshot) is saved by one of the
    notebooks the figures command runs, under that file name."""
    import re

    import nbformat

    from utils.paths import REPO_ROOT

    shown = set(re.findall(r"\(docs/images/([\w.-]+\.png)\)", (REPO_ROOT / "README.md").read_text(encoding="utf-8")))
    shown.discard("07-playground.png")
    code = "\n".join(cell.source for path in readme_figures.figure_notebooks()
                     for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code")
    saved = {name for name in shown if Path(name).stem in code}
    assert shown and saved == shown, f"no figure notebook saves {sorted(shown - saved)}"


def test_missing_notebook_is_reported() -> None:
    with pytest.raises(FileNotFoundError, match="99-"):
        readme_figures.figure_notebooks(("99-",))


def test_provenance_names_machine_versions_and_outcomes() -> None:
    report = {
        "cpu": {"model": "Test CPU", "logical_cores": 2, "features": {"AVX2": True, "AMX (tile)": False}},
        "memory_disk": {"ram_total_gb": 24.0},
        "devices": [{"device": "CPU", "full_name": "Test CPU", "default_precision": "bf16"}],
        "versions": {"openvino": "2026.4.1"},
    }
    outcomes = [NotebookOutcome("05-tuning.ipynb", "python3", "passed", 123.4)]
    text = readme_figures.provenance_markdown(outcomes, report)
    assert "Test CPU, 2 logical cores; features: AVX2" in text and "AMX" not in text
    assert "openvino 2026.4.1" in text and "default precision bf16" in text
    assert "| 05-tuning.ipynb | passed | 123 s |" in text
