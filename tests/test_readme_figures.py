"""The README-figures command: finds the right notebooks and records provenance."""
from __future__ import annotations


import pytest

from utils import readme_figures
from utils.run_notebooks import NotebookOutcome


def test_figure_notebooks_are_the_measuring_ones() -> None:
    names = [path.name for path in readme_figures.figure_notebooks()]
    assert [name[:3] for name in names] == list(readme_figures.FIGURE_NOTEBOOK_PREFIXES)


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
