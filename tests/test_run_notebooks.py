"""Tests for maintainers.run_notebooks on tiny throwaway notebooks (real kernels, no models)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from maintainers import run_notebooks
from utils.paths import REPO_ROOT


def write_notebook(path: Path, code_cells: list[str], kernel: str | None = "python3") -> Path:
    """A notebook with a markdown title, then the given code cells."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# throwaway")]
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in code_cells]
    if kernel is not None:
        notebook.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    nbformat.write(notebook, path)
    return path


@pytest.fixture
def marked_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernelspec named ``marked-kernel`` that sets KERNEL_MARKER, found through JUPYTER_PATH."""
    kernel_dir = tmp_path / "jupyter" / "kernels" / "marked-kernel"
    kernel_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "marked",
        "language": "python",
        "env": {"KERNEL_MARKER": "marked-kernel-was-used"},
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return "marked-kernel"


def test_kernel_name_comes_from_metadata_with_python3_fallback() -> None:
    with_kernel = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "ipex-llm", "display_name": "IPEX-LLM"}})
    assert run_notebooks.kernel_name_of(with_kernel) == "ipex-llm"
    assert run_notebooks.kernel_name_of(nbformat.v4.new_notebook()) == "python3"


def test_summary_records_pass_failure_and_missing_kernel(
    tmp_path: Path, marked_kernel: str, capsys: pytest.CaptureFixture[str]
) -> None:
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    passing = write_notebook(
        notebooks / "01-passes.ipynb",
        ["import os\nassert os.environ['KERNEL_MARKER'] == 'marked-kernel-was-used'",
         "from pathlib import Path\nassert Path.cwd().name == 'notebooks'\nprint('ok')"],
        kernel=marked_kernel,
    )
    failing = write_notebook(
        notebooks / "02-fails.ipynb",
        ["x = 1", "raise ValueError('the draft is too slow')", "print('never reached')"],
        kernel=None,
    )
    missing_kernel = write_notebook(notebooks / "03-other-kernel.ipynb", ["x = 1"], kernel="no-such-kernel-xyz")
    output = tmp_path / "out"

    status = run_notebooks.main([str(passing), str(failing), str(missing_kernel), "--output", str(output)])

    assert status == 1
    summary = json.loads((output / "summary.json").read_text())
    by_name = {entry["notebook"]: entry for entry in summary["notebooks"]}
    assert list(by_name) == ["01-passes.ipynb", "02-fails.ipynb", "03-other-kernel.ipynb"]

    assert by_name["01-passes.ipynb"]["status"] == "passed"
    assert by_name["01-passes.ipynb"]["kernel"] == "marked-kernel"
    assert by_name["01-passes.ipynb"]["error_name"] is None
    assert by_name["01-passes.ipynb"]["seconds"] > 0

    failed = by_name["02-fails.ipynb"]
    assert failed["status"] == "failed"
    assert failed["kernel"] == "python3"
    assert failed["error_name"] == "ValueError"
    assert failed["error_message"] == "the draft is too slow"
    assert failed["failed_cell_number"] == 3  # markdown title, x = 1, then the raise
    assert failed["failed_cell_source"].startswith("raise ValueError")

    other = by_name["03-other-kernel.ipynb"]
    assert other["status"] == "failed" and other["error_name"] == "NoSuchKernel"
    assert "no-such-kernel-xyz" in other["error_message"]

    executed_pass = nbformat.read(output / "01-passes.ipynb", as_version=4)
    assert executed_pass.cells[2].outputs[0]["text"] == "ok\n"
    executed_fail = nbformat.read(output / "02-fails.ipynb", as_version=4)
    assert executed_fail.cells[2].outputs[0]["output_type"] == "error"
    assert executed_fail.cells[3].outputs == []
    assert not (output / "03-other-kernel.ipynb").exists()

    page = (output / "summary.html").read_text()
    assert "1 passed, 2 failed, 0 skipped" in page
    assert "ValueError: the draft is too slow" in page
    assert 'href="02-fails.html"' in page and 'href="02-fails.ipynb"' in page
    assert "the draft is too slow" in (output / "02-fails.html").read_text()  # the traceback, for a browser
    assert "cpu_count" in page
    assert "passed in" in capsys.readouterr().out


def test_all_passing_exits_zero_and_missing_kernel_can_be_skipped(tmp_path: Path) -> None:
    passing = write_notebook(tmp_path / "a.ipynb", ["print(1 + 1)"])
    other = write_notebook(tmp_path / "b.ipynb", ["x = 1"], kernel="no-such-kernel-xyz")
    output = tmp_path / "out"

    status = run_notebooks.main([str(passing), str(other), "--output", str(output), "--skip-missing-kernels"])

    assert status == 0
    statuses = [e["status"] for e in json.loads((output / "summary.json").read_text())["notebooks"]]
    assert statuses == ["passed", "skipped"]


def test_cell_timeout_is_a_failure(tmp_path: Path) -> None:
    slow = write_notebook(tmp_path / "slow.ipynb", ["import time\ntime.sleep(30)"])

    outcome = run_notebooks.run_notebook(slow, tmp_path / "out", cell_timeout=2)

    assert outcome.status == "failed"
    assert outcome.error_name == "CellTimeoutError"
    assert outcome.failed_cell_number == 2


def test_unreadable_notebook_and_missing_path(tmp_path: Path) -> None:
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json")
    outcome = run_notebooks.run_notebook(broken, tmp_path / "out")
    assert outcome.status == "failed" and "cannot read the notebook" in outcome.error_message

    assert run_notebooks.main([str(tmp_path / "absent.ipynb"), "--output", str(tmp_path / "out")]) == 2

    source = write_notebook(tmp_path / "source.ipynb", ["x = 1"])
    before = source.read_text()
    assert run_notebooks.main([str(source), "--output", str(tmp_path)]) == 2  # would overwrite its source
    assert source.read_text() == before


@pytest.mark.parametrize("value, message", [("0", "--timeout must be an integer >= 1, got 0"),
                                            ("-5", "--timeout must be an integer >= 1, got -5"),
                                            ("ten", "got the string 'ten'")])
def test_a_timeout_below_one_second_is_refused_before_running(tmp_path: Path, capsys, value: str,
                                                              message: str) -> None:
    """nbclient reads 0 as "no limit": the command refuses it instead of silently never timing out."""
    notebook = write_notebook(tmp_path / "a.ipynb", ["x = 1"])
    with pytest.raises(SystemExit) as exit_info:
        run_notebooks.main([str(notebook), "--timeout", value, "--output", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error and "86400" in error
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="cell timeout"):
        run_notebooks.run_notebooks([notebook], tmp_path / "out", cell_timeout=0)


def test_an_output_folder_that_cannot_be_written_is_refused_before_running(tmp_path: Path, capsys) -> None:
    notebook = write_notebook(tmp_path / "a.ipynb", ["raise SystemExit('must not run')"])
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert run_notebooks.main([str(notebook), "--output", str(blocker / "out")]) == 2
    captured = capsys.readouterr()
    assert "is a file, not a folder" in captured.err and "running" not in captured.out


def test_command_line_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "maintainers.run_notebooks", "--help"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    assert "--timeout" in result.stdout and "--output" in result.stdout
    assert "summary.html" in result.stdout


def test_teachers_guide_solutions_run(capsys: pytest.CaptureFixture[str]) -> None:
    """Every ```python block of docs/teachers-guide.md runs, in order, and its asserts hold."""
    guide = (REPO_ROOT / "docs" / "teachers-guide.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", guide, flags=re.DOTALL | re.MULTILINE)
    assert len(blocks) >= 4, "the guide's exercises lost their solution code"
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"teachers-guide.md python block {number}", "exec"), {"__name__": "__guide__"})
    assert "predicted speed-up 2.80x" in capsys.readouterr().out


@pytest.mark.notebooks  # runs real notebooks
def test_real_notebooks_run_headless_each_in_its_kernel(tmp_path: Path) -> None:
    """The workshop check on the course's own notebooks: 00 and 01 whole, and the set-up cells of 04 in the
    IPEX-LLM kernel (its measurements take ~10 minutes; nbval runs all of it)."""
    notebooks_dir = REPO_ROOT / "notebooks"
    whole = [next(notebooks_dir.glob("00-*.ipynb")), next(notebooks_dir.glob("01-*.ipynb"))]
    ipex_notebook = nbformat.read(next(notebooks_dir.glob("04-*.ipynb")), as_version=4)
    first_import = next(i for i, cell in enumerate(ipex_notebook.cells) if "ipex_self_speculation" in cell.source)
    ipex_notebook.cells = ipex_notebook.cells[: first_import + 1]
    ipex_notebook.cells.append(nbformat.v4.new_code_cell(
        "import ipex_llm, transformers\nassert transformers.__version__.startswith('4.37')\nprint(VIEW)"))
    (tmp_path / "notebooks").mkdir()
    ipex_setup = tmp_path / "notebooks" / "04-setup-cells.ipynb"
    nbformat.write(ipex_notebook, ipex_setup)

    outcomes = run_notebooks.run_notebooks(whole + [ipex_setup], tmp_path / "out")

    assert [(o.status, o.kernel) for o in outcomes] == [("passed", "python3"), ("passed", "python3"),
                                                         ("passed", "ipex-llm")], outcomes
    for outcome in outcomes:
        executed = nbformat.read(outcome.executed_path, as_version=4)
        code_cells = [cell for cell in executed.cells if cell.cell_type == "code"]
        assert all(cell.execution_count for cell in code_cells)
        assert any(cell.outputs for cell in code_cells)
    summary = (tmp_path / "out" / "summary.html").read_text(encoding="utf-8")
    assert all(path.name in summary for path in whole + [ipex_setup])
