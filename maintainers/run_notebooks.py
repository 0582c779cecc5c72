"""Run every notebook headless and write a summary a teacher can read.

Each notebook runs in a fresh kernel named by its own metadata (falling back to
``python3``), with its folder as the working directory, as in JupyterLab. The
executed notebooks (``.ipynb`` and a browser-readable ``.html``),
``summary.json`` and ``summary.html`` (run time and outcome per notebook, plus
the machine it ran on) go to the output folder.

    python -m maintainers.run_notebooks                       # every notebooks/*.ipynb
    python -m maintainers.run_notebooks notebooks/01-*.ipynb --timeout 900
    python -m maintainers.run_notebooks --output /tmp/check --skip-missing-kernels

The exit status is 1 if any notebook failed, 0 otherwise.
"""
from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from maintainers.run_context import check_writable_file
from utils.input_checks import InputError, as_integer
from utils.paths import REPO_ROOT, build_dir

if TYPE_CHECKING:
    from nbformat import NotebookNode

FALLBACK_KERNEL = "python3"
DEFAULT_CELL_TIMEOUT_SECONDS = 3600  # as the nbval run in `tutorial.py test`
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass
class NotebookOutcome:
    """What happened when one notebook ran."""

    notebook: str
    kernel: str
    status: str  # PASSED, FAILED or SKIPPED
    seconds: float
    executed_path: str | None = None
    html_path: str | None = None  # the executed notebook rendered for a browser
    failed_cell_number: int | None = None  # 1 = the notebook's first cell (markdown included)
    failed_cell_source: str | None = None  # first line of that cell's code
    error_name: str | None = None
    error_message: str | None = None


def default_notebooks() -> list[Path]:
    """Every notebook of the tutorial, in name order."""
    return sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


def kernel_name_of(notebook: dict) -> str:
    """Kernel the notebook asks for in its metadata, or ``python3``."""
    spec = notebook.get("metadata", {}).get("kernelspec") or {}
    return spec.get("name") or FALLBACK_KERNEL


def installed_kernels() -> set[str]:
    """Names of the Jupyter kernels this environment can start."""
    from jupyter_client.kernelspec import KernelSpecManager

    return set(KernelSpecManager().find_kernel_specs())


def _one_line(text: str, limit: int = 500) -> str:
    """First non-empty line of an error message, shortened to ``limit`` characters."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def run_notebook(
    notebook_path: Path,
    output_dir: Path,
    cell_timeout: int = DEFAULT_CELL_TIMEOUT_SECONDS,
    available_kernels: set[str] | None = None,
    skip_missing_kernels: bool = False,
) -> NotebookOutcome:
    """Execute one notebook in its own kernel and save the executed copy.

    Never raises for a notebook that fails: the failure (error name, message,
    failing cell) is returned in the outcome, and the partly executed notebook
    is still written so the failing cell's output can be inspected.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    notebook_path = Path(notebook_path).resolve()
    name = notebook_path.name
    try:
        notebook = nbformat.read(notebook_path, as_version=4)
    except Exception as error:  # not JSON, not a notebook, unreadable
        return NotebookOutcome(name, "?", FAILED, 0.0, error_name=type(error).__name__,
                               error_message=f"cannot read the notebook: {_one_line(str(error))}")
    kernel = kernel_name_of(notebook)
    if available_kernels is not None and kernel not in available_kernels:
        message = (
            f"Jupyter kernel {kernel!r} is not installed here (installed: "
            f"{', '.join(sorted(available_kernels)) or 'none'}). Install it, "
            "e.g. with `python3 tutorial.py setup`, then run again."
        )
        status = SKIPPED if skip_missing_kernels else FAILED
        return NotebookOutcome(name, kernel, status, 0.0, error_name="NoSuchKernel", error_message=message)

    current_cell: dict[str, int] = {"index": -1}

    def remember_cell(cell: object, cell_index: int, **_: object) -> None:
        current_cell["index"] = cell_index

    client = NotebookClient(
        notebook,
        timeout=cell_timeout,
        kernel_name=kernel,
        resources={"metadata": {"path": str(notebook_path.parent)}},
        on_cell_start=remember_cell,
    )
    outcome = NotebookOutcome(name, kernel, PASSED, 0.0)
    started = time.perf_counter()
    try:
        client.execute()
    except CellExecutionError as error:
        outcome.status, outcome.error_name = FAILED, error.ename
        outcome.error_message = _one_line(error.evalue) or error.ename
    except CellTimeoutError as error:
        outcome.status, outcome.error_name = FAILED, "CellTimeoutError"
        outcome.error_message = f"a cell ran longer than {cell_timeout} s ({_one_line(str(error))})"
    except Exception as error:  # dead kernel, kernel that cannot start, ...
        outcome.status, outcome.error_name = FAILED, type(error).__name__
        outcome.error_message = _one_line(str(error)) or repr(error)
    outcome.seconds = round(time.perf_counter() - started, 2)
    if outcome.status == FAILED and current_cell["index"] >= 0:
        outcome.failed_cell_number = current_cell["index"] + 1
        outcome.failed_cell_source = _one_line(notebook.cells[current_cell["index"]].source, 120)

    output_dir.mkdir(parents=True, exist_ok=True)
    executed_path = output_dir / name
    nbformat.write(notebook, executed_path)
    outcome.executed_path = str(executed_path)
    outcome.html_path = render_html(notebook, executed_path.with_suffix(".html"))
    return outcome


def render_html(notebook: NotebookNode, destination: Path) -> str | None:
    """Write the executed notebook as a standalone HTML page; None if nbconvert cannot."""
    try:
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter().from_notebook_node(notebook)
    except Exception as error:  # a missing template must not hide the run's outcome
        print(f"  (no HTML copy of {destination.stem}: {type(error).__name__}: {error})", file=sys.stderr)
        return None
    destination.write_text(body, encoding="utf-8")
    return str(destination)


def machine_description() -> dict[str, str | int | None]:
    """Facts about the machine that ran the notebooks, for the summary's header."""
    return {
        "host": platform.node(),
        "system": f"{platform.system()} {platform.release()}",
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "finished": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def summary_html(outcomes: Sequence[NotebookOutcome], machine: dict) -> str:
    """A self-contained HTML page: one row per notebook with its time and outcome."""
    colours = {PASSED: "#d7f5dd", FAILED: "#fbd5d5", SKIPPED: "#eeeeee"}
    rows = []
    for outcome in outcomes:
        link = html.escape(outcome.notebook)
        if outcome.html_path:
            link = f'<a href="{html.escape(Path(outcome.html_path).name)}">{link}</a>'
        if outcome.executed_path:
            link += f' (<a href="{html.escape(Path(outcome.executed_path).name)}">.ipynb</a>)'

        details = ""
        if outcome.error_name:
            where = (f"cell {outcome.failed_cell_number} ({outcome.failed_cell_source}): "
                     if outcome.failed_cell_number is not None else "")
            details = html.escape(f"{where}{outcome.error_name}: {outcome.error_message}")
        rows.append(
            f'<tr style="background:{colours.get(outcome.status, "#fff")}">'
            f"<td>{link}</td><td>{html.escape(outcome.kernel)}</td>"
            f"<td>{html.escape(outcome.status)}</td><td>{outcome.seconds:.1f}</td>"
            f"<td>{details}</td></tr>"
        )
    counts = {status: sum(o.status == status for o in outcomes) for status in (PASSED, FAILED, SKIPPED)}
    total_seconds = sum(o.seconds for o in outcomes)
    machine_text = ", ".join(f"{key}: {value}" for key, value in machine.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Notebook run summary</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #999; padding: 4px 8px; text-align: left; vertical-align: top; }}
</style></head><body>
<h1>Notebook run summary</h1>
<p>{counts[PASSED]} passed, {counts[FAILED]} failed, {counts[SKIPPED]} skipped;
total {total_seconds:.0f} s.</p>
<p><small>{html.escape(machine_text)}</small></p>
<table>
<tr><th>Notebook</th><th>Kernel</th><th>Outcome</th><th>Seconds</th><th>Error</th></tr>
{chr(10).join(rows)}
</table></body></html>
"""


def write_summary(outcomes: Sequence[NotebookOutcome], output_dir: Path) -> tuple[Path, Path]:
    """Write ``summary.json`` and ``summary.html`` into ``output_dir``; return both paths."""
    output_dir.mkdir(parents=True, exist_ok=True)
    machine = machine_description()
    json_path, html_path = output_dir / "summary.json", output_dir / "summary.html"
    json_path.write_text(
        json.dumps({"machine": machine, "notebooks": [asdict(o) for o in outcomes]}, indent=2),
        encoding="utf-8",
    )
    html_path.write_text(summary_html(outcomes, machine), encoding="utf-8")
    return json_path, html_path


def run_notebooks(
    notebooks: Sequence[Path],
    output_dir: Path,
    cell_timeout: int = DEFAULT_CELL_TIMEOUT_SECONDS,
    skip_missing_kernels: bool = False,
) -> list[NotebookOutcome]:
    """Run the notebooks one after another, printing one line each, and write the summary.

    Raises a ValueError (before running anything) for a cell timeout below 1 s or an output folder that
    cannot be written, FileNotFoundError for a missing notebook.
    """
    cell_timeout = as_integer(cell_timeout, "the cell timeout (seconds)", minimum=1,
                              advice="There is no 'no limit' setting: give a large number such as 86400.")
    check_writable_file(Path(output_dir) / "summary.json", "the output folder's summary")
    missing = [str(path) for path in notebooks if not Path(path).is_file()]
    if missing:
        raise FileNotFoundError(f"No such notebook: {', '.join(missing)}")
    overwritten = [str(path) for path in notebooks if Path(path).resolve().parent == Path(output_dir).resolve()]
    if overwritten:
        raise ValueError(f"--output {output_dir} would overwrite the notebooks being run ({', '.join(overwritten)}); "
                         "choose another folder")
    kernels = installed_kernels()
    outcomes = []
    for path in notebooks:
        print(f"running {Path(path).name} ...", flush=True)
        outcome = run_notebook(Path(path), output_dir, cell_timeout, kernels, skip_missing_kernels)
        detail = f" ({outcome.error_name}: {outcome.error_message})" if outcome.error_name else ""
        if outcome.failed_cell_number is not None:
            detail += f" in cell {outcome.failed_cell_number}"
        print(f"  {outcome.status} in {outcome.seconds:.1f} s{detail}", flush=True)
        outcomes.append(outcome)
    write_summary(outcomes, output_dir)
    return outcomes


def timeout_argument(text: str) -> int:
    """--timeout as whole seconds >= 1 (nbclient would read 0 or a negative number as 'no limit')."""
    try:
        return as_integer(int(text) if text.strip().lstrip("-").isdigit() else text, "--timeout", minimum=1,
                          advice="Give whole seconds, e.g. --timeout 900; for no practical limit, --timeout 86400.")
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m maintainers.run_notebooks",
        description="Execute notebooks headless, each in the kernel its metadata names "
        f"(default {FALLBACK_KERNEL}), and write the executed copies plus summary.html/.json.",
    )
    parser.add_argument(
        "notebooks", nargs="*", type=Path,
        help="notebooks to run (default: every notebooks/*.ipynb of the tutorial)",
    )
    parser.add_argument(
        "--output", type=Path, default=None,
        help="folder for executed notebooks and the summary (default: build/executed)",
    )
    parser.add_argument(
        "--timeout", type=timeout_argument, default=DEFAULT_CELL_TIMEOUT_SECONDS, metavar="SECONDS",
        help=f"seconds (>= 1) one cell may run before it counts as failed (default {DEFAULT_CELL_TIMEOUT_SECONDS}); "
             "there is no unlimited setting, give a large number instead",
    )
    parser.add_argument(
        "--skip-missing-kernels", action="store_true",
        help="record a notebook whose kernel is not installed as skipped instead of failed",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    arguments = parse_arguments(argv)
    notebooks = arguments.notebooks or default_notebooks()
    if not notebooks:
        print("No notebooks to run.", file=sys.stderr)
        return 2
    output_dir = (arguments.output or build_dir() / "executed").resolve()
    try:
        outcomes = run_notebooks(notebooks, output_dir, arguments.timeout, arguments.skip_missing_kernels)
    except (FileNotFoundError, ValueError) as error:
        print(error, file=sys.stderr)
        return 2
    print(f"summary: {output_dir / 'summary.html'}")
    return 1 if any(outcome.status == FAILED for outcome in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
