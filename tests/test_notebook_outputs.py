"""Committed outputs: fresh for every notebook, cleaned of noise, and checked by nbval where marked."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from maintainers.notebook_outputs import (
    MAX_NOTEBOOK_BYTES,
    REFERENCE_RUN_KEY,
    WIDGET_VIEW_MIME,
    clean_outputs,
    code_fingerprint,
    environment_fingerprint,
    main,
    source_fingerprints,
    stale_reason,
    utils_dependencies,
)
from utils.paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
CHECK_MARK = "# NBVAL_CHECK_OUTPUT"


def executed_notebook(*sources: str) -> nbformat.NotebookNode:
    notebook = new_notebook(cells=[new_markdown_cell("# Title")] + [new_code_cell(s) for s in sources],
                            metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    for number, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
        cell.execution_count = number + 1
    notebook.metadata[REFERENCE_RUN_KEY] = {"code_fingerprint": code_fingerprint(notebook),
                                            "fingerprint_scheme": "python-code",
                                            "utils_sources": source_fingerprints(notebook),
                                            "environment_fingerprint": environment_fingerprint()}
    return notebook


def test_fingerprint_follows_code_not_markdown_or_outputs() -> None:
    notebook = executed_notebook("x = 1", "print(x)")
    before = code_fingerprint(notebook)
    notebook.cells[0].source = "# Another title"
    notebook.cells[1].outputs = [new_output("stream", name="stdout", text="1\n")]
    assert code_fingerprint(notebook) == before
    notebook.cells[2].source = "print(x + 1)"
    assert code_fingerprint(notebook) != before


def test_fingerprint_sees_a_moved_line_between_cells() -> None:
    assert code_fingerprint(executed_notebook("a\nb", "c")) != code_fingerprint(executed_notebook("a", "b\nc"))


def test_fresh_and_stale() -> None:
    notebook = executed_notebook("x = 1")
    assert stale_reason(notebook) is None
    notebook.cells[1].source = "x = 2"
    assert "changed" in stale_reason(notebook)
    del notebook.metadata[REFERENCE_RUN_KEY]
    assert "no reference run" in stale_reason(notebook)


def test_a_new_unexecuted_cell_is_stale_even_with_a_matching_fingerprint() -> None:
    notebook = executed_notebook("x = 1")
    notebook.cells.append(new_code_cell("y = 2"))
    notebook.metadata[REFERENCE_RUN_KEY]["code_fingerprint"] = code_fingerprint(notebook)
    assert "[2]" in stale_reason(notebook)


def test_clean_outputs_removes_noise_and_keeps_results() -> None:
    notebook = executed_notebook("run()")
    notebook.metadata["widgets"] = {"state": {}}
    cell = notebook.cells[1]
    cell.metadata["execution"] = {"iopub.execute_input": "2026-11-30T12:00:00"}
    cell.outputs = [
        new_output("stream", name="stderr", text="  0%|          | 0/3\r 33%|###       | 1/3"),
        new_output("stream", name="stderr", text="\r100%|##########| 3/3\n"),
        new_output("display_data", data={WIDGET_VIEW_MIME: {"model_id": "abc"}, "text/plain": "HBox()"}),
        new_output("stream", name="stdout", text="<Pipeline object at 0x7f3a2b1c9d10>\n"),
        new_output("execute_result", data={"text/plain": "<Figure at 0x7fa1b2c3d4e5>"}, execution_count=1),
    ]
    clean_outputs(notebook)
    assert "widgets" not in notebook.metadata and "execution" not in cell.metadata
    assert [o.output_type for o in cell.outputs] == ["stream", "stream", "execute_result"]
    assert cell.outputs[0].text == "100%|##########| 3/3\n"
    assert cell.outputs[1].text == "<Pipeline object at 0x…>\n"
    assert cell.outputs[2].data["text/plain"] == "<Figure at 0x…>"


def test_a_failed_reference_run_leaves_the_committed_notebook_alone(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from maintainers import run_notebooks
    from maintainers.notebook_outputs import refresh

    def fake_run(notebook_path: Path, work_dir: Path, cell_timeout: int) -> run_notebooks.NotebookOutcome:
        return run_notebooks.NotebookOutcome(notebook_path.name, "python3", "FAILED", 0.0, error_name="Stop")

    monkeypatch.setattr(run_notebooks, "run_notebook", fake_run)
    notebook = tmp_path / "05.ipynb"
    nbformat.write(executed_notebook("x = 1"), notebook)
    written = notebook.read_bytes()
    ok, message = refresh(notebook, tmp_path / "work", cell_timeout=10)
    assert not ok and "not updated" in message and notebook.read_bytes() == written


def test_check_command_reports_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fresh, stale = tmp_path / "fresh.ipynb", tmp_path / "stale.ipynb"
    nbformat.write(executed_notebook("x = 1"), fresh)
    changed = executed_notebook("x = 1")
    changed.cells[1].source = "x = 3"
    nbformat.write(changed, stale)
    assert main(["--check", str(fresh)]) == 0
    assert main(["--check", str(fresh), str(stale)]) == 1
    assert "stale.ipynb: stale: its code cells changed" in capsys.readouterr().out


def small_repository(root: Path) -> Path:
    """A repository with a utils package: a imports b lazily inside a function, b imports c relatively; d is unused."""
    package = root / "utils"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text('"""The package."""\n')
    (package / "a.py").write_text("def f():\n    from utils.b import g\n    return g()\n")
    (package / "b.py").write_text("from .c import h\n\n\ndef g():\n    return h() + 1\n")
    (package / "c.py").write_text("import json\n\n\ndef h():\n    return 1\n")
    (package / "d.py").write_text("x = 1\n")
    (package / "data" / "table.json").write_text("{}\n")
    (root / "requirements.lock").write_text("numpy==2.4.6\n")
    return root


def fingerprinted(root: Path, *sources: str) -> nbformat.NotebookNode:
    notebook = executed_notebook(*sources)
    notebook.metadata[REFERENCE_RUN_KEY].update(utils_sources=source_fingerprints(notebook, root),
                                                environment_fingerprint=environment_fingerprint(root))
    return notebook


def test_dependencies_follow_lazy_and_relative_imports_through_magics(tmp_path: Path) -> None:
    root = small_repository(tmp_path)
    files = utils_dependencies(["%matplotlib inline\nfrom utils.a import f\n!ls"], root)
    assert [path.relative_to(root).as_posix() for path in files] == [
        "utils/__init__.py", "utils/a.py", "utils/b.py", "utils/c.py"]
    assert utils_dependencies(["import json\nprint(1)"], root) == []
    assert [p.name for p in utils_dependencies(["from utils import d"], root)] == ["__init__.py", "d.py"]


def test_a_changed_line_in_a_module_the_notebook_uses_makes_it_stale(tmp_path: Path, monkeypatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The check sees a module reached only through another module's lazy import, and ignores unused ones."""
    import maintainers.notebook_outputs as notebook_outputs

    root = small_repository(tmp_path)
    monkeypatch.setattr(notebook_outputs, "REPO_ROOT", root)
    path = tmp_path / "uses-a.ipynb"
    nbformat.write(fingerprinted(root, "from utils.a import f\nf()"), path)
    assert main(["--check", str(path)]) == 0
    (root / "utils" / "d.py").write_text("x = 2\n")  # not imported by the notebook: still fresh
    assert main(["--check", str(path)]) == 0
    capsys.readouterr()
    (root / "utils" / "c.py").write_text("import json\n\n\ndef h():\n    return 2\n")
    assert main(["--check", str(path)]) == 1
    assert "uses-a.ipynb: stale: utils code it runs changed after its outputs were made: utils/c.py" in (
        capsys.readouterr().out)


def test_a_changed_pinned_environment_makes_it_stale(tmp_path: Path) -> None:
    root = small_repository(tmp_path)
    notebook = fingerprinted(root, "from utils.a import f")
    assert stale_reason(notebook, root) is None
    (root / "requirements.lock").write_text("numpy==2.4.7\n")
    assert "pinned environment" in stale_reason(notebook, root)


def test_docstrings_comments_and_layout_never_make_a_notebook_stale(tmp_path: Path) -> None:
    """The quick loop stays green while you edit prose in a module; a change of its code is still refused."""
    root = small_repository(tmp_path)
    notebook = fingerprinted(root, "from utils.a import f")
    (root / "utils" / "c.py").write_text('"""Now with a docstring."""\nimport json  # and a comment\n\n\n'
                                         'def h():\n    """One."""\n\n    return 1\n')
    (root / "utils" / "__init__.py").write_text('"""The package, described at length."""\n')
    assert stale_reason(notebook, root) is None
    (root / "utils" / "c.py").write_text('"""Now with a docstring."""\nimport json\n\n\ndef h():\n    return "1"\n')
    assert "utils/c.py" in stale_reason(notebook, root)


def test_outputs_made_before_source_fingerprints_are_stale() -> None:
    notebook = executed_notebook("x = 1")
    del notebook.metadata[REFERENCE_RUN_KEY]["utils_sources"]
    assert "recorded no code fingerprints" in stale_reason(notebook)
    notebook = executed_notebook("x = 1")
    del notebook.metadata[REFERENCE_RUN_KEY]["fingerprint_scheme"]  # fingerprinted by bytes, before the code rule
    assert "recorded no code fingerprints" in stale_reason(notebook)


@pytest.mark.freshness  # stale after any edit of a module a notebook runs: not in the quick unit loop
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_committed_outputs_are_fresh(notebook: Path) -> None:
    content = nbformat.read(notebook, as_version=4)
    nbformat.validate(content)
    reason = stale_reason(content)
    assert reason is None, (f"{notebook.name}: committed outputs are stale: {reason}. Regenerate them with "
                            f"`python3 tutorial.py refresh-outputs {notebook.relative_to(REPO_ROOT)}`")
    assert "widgets" not in content.metadata, f"{notebook.name}: saved widget state; refresh its outputs"
    assert notebook.stat().st_size < MAX_NOTEBOOK_BYTES, f"{notebook.name} is too large to render on GitHub"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_notebook_shows_results_and_has_checked_cells(notebook: Path) -> None:
    cells = nbformat.read(notebook, as_version=4).cells
    code = [cell for cell in cells if cell.cell_type == "code"]
    assert any(cell.outputs for cell in code), f"{notebook.name} shows no output at all"
    checked = [cell for cell in code if cell.source.lstrip().startswith(CHECK_MARK)]
    assert checked, f"{notebook.name}: no cell is marked {CHECK_MARK} for nbval's comparison"
    assert all(cell.outputs for cell in checked), f"{notebook.name}: a checked cell has no committed output"


def run_nbval(notebook: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "-q",
                           "--rootdir", str(notebook.parent), str(notebook)],
                          cwd=notebook.parent, capture_output=True, text=True, timeout=600)


@pytest.mark.notebooks  # runs nbval on a notebook
def test_nbval_fails_when_a_checked_output_was_altered(tmp_path: Path) -> None:
    """The comparison bites: the setup notebook passes as committed and fails with one checked output changed."""
    source = REPO_ROOT / "notebooks" / "00-setup-and-environment-check.ipynb"
    folder = tmp_path / "notebooks"
    folder.mkdir()
    original, altered = folder / "original.ipynb", folder / "altered.ipynb"
    shutil.copy(source, original)
    content = nbformat.read(source, as_version=4)
    checked = [cell for cell in content.cells if cell.cell_type == "code"
               and cell.source.lstrip().startswith(CHECK_MARK) and cell.outputs]
    assert checked, "notebook 00 has no checked cell with output"
    output = next(o for o in checked[0].outputs if o.output_type in ("stream", "execute_result", "display_data"))
    if output.output_type == "stream":
        output.text = "an output the code does not print\n"
    else:
        output.data["text/plain"] = "an output the code does not print"
    nbformat.write(content, altered)
    as_committed = run_nbval(original)
    assert as_committed.returncode == 0, as_committed.stdout[-3000:]
    tampered = run_nbval(altered)
    assert tampered.returncode != 0, tampered.stdout[-3000:]
    assert "an output the code does not print" in tampered.stdout


def test_section_seconds_add_up_each_sections_cells() -> None:
    from maintainers.notebook_outputs import section_seconds

    def timed(source: str, start: str, end: str):
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["execution"] = {"iopub.execute_input": f"2026-12-02T07:00:{start}Z",
                                      "shell.execute_reply": f"2026-12-02T07:00:{end}Z"}
        return cell

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# Title\n## Parameters"), timed("a = 1", "00.0", "01.5"),
                      nbformat.v4.new_markdown_cell("## 1. First"), timed("b = 2", "02.0", "12.0"),
                      timed("c = 3", "12.0", "14.5"), nbformat.v4.new_markdown_cell("### a subsection"),
                      timed("d = 4", "15.0", "16.0"), nbformat.v4.new_markdown_cell("## Exercises"),
                      nbformat.v4.new_code_cell("untimed = 0")]
    assert section_seconds(notebook) == {"Parameters": 1.5, "§1": 13.5}


def test_the_metadata_records_the_packages_of_the_kernel_that_ran_the_notebook(tmp_path: Path, monkeypatch) -> None:
    """Notebook 04 runs in IPEX-LLM's own environment: its reference run lists that environment's packages."""
    import json
    import venv

    from maintainers.notebook_outputs import kernel_package_versions

    bare = tmp_path / "bare-env"
    venv.EnvBuilder(with_pip=False).create(bare)
    spec = tmp_path / "jupyter" / "kernels" / "bare"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": [str(bare / "bin" / "python"), "-m", "ipykernel_launcher"],
                                                  "display_name": "bare", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    assert set(kernel_package_versions("bare")) == {"python"}  # nothing of the main environment's
    assert "openvino" in kernel_package_versions("python3")
