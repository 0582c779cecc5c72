"""The notebooks' committed outputs: regenerate them from a reference run, and tell when they are stale.

The notebooks are committed with the outputs of a run of the project's own
command on the default (offline) pair, so a reader sees plots, tables and
coloured tokens on GitHub and on opening. Never edit outputs by hand:

    python -m maintainers.notebook_outputs                       # or: python3 tutorial.py refresh-outputs
    python -m maintainers.notebook_outputs notebooks/02-*.ipynb  # only these
    python -m maintainers.notebook_outputs --check               # exit 1 if a notebook's outputs are stale

Each notebook runs in its own kernel (as `maintainers.run_notebooks` does); only a
run in which every cell passed replaces the committed notebook. Before it is
written, what only adds diff noise is removed (saved widget state and widget
views, progress-bar redraws, memory addresses, execution timing metadata), and
the notebook's metadata records the reference run: when, on what machine,
with which package versions, and fingerprints of what made the outputs: its
code cells, the source of every `utils` module it imports (directly or through
other modules, lazy imports inside functions included), and
the lock files of the pinned environment. A module's fingerprint is that of its
code, not its bytes: docstrings, comments and layout do not count, so editing
them never makes a notebook stale. A notebook whose fingerprints no longer match is *stale*,
and `--check` says what changed; the full test command fails on it
(tests/test_notebook_outputs.py, tier `freshness`: not the quick unit loop). The metadata also keeps the
seconds each section took (`section_seconds`), which the teacher's guide's
workshop track is built from; after the runs the command writes the README's
images from the stored outputs (`maintainers.readme_images`) and the times
the README and the teacher's guide quote (`maintainers.run_times`).
"""
from __future__ import annotations

import argparse
import ast
import datetime as dt
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

from maintainers.run_notebooks import default_notebooks
from utils.paths import REPO_ROOT, build_dir

REFERENCE_RUN_KEY = "reference_run"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
MAX_NOTEBOOK_BYTES = 5_000_000  # GitHub stops rendering notebooks well beyond a few MB
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]{6,16}")
_CELL_TIMING_KEYS = ("execution",)  # nbclient's per-cell timestamps: new on every run
PACKAGE = "utils"
# The pinned environment: a change to any of these can change what a notebook prints.
ENVIRONMENT_FILES = ("requirements.lock", "requirements-ipex.lock", "requirements-offline-model.lock",
                     "requirements-coder-pair.lock")
_IMPORT_LINE = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+([\w\s,()*]+)|import\s+([\w.,\s]+))", re.MULTILINE)


def code_fingerprint(notebook: Any) -> str:
    """SHA-256 of the notebook's kernel name and the sources of its code cells, in order."""
    digest = hashlib.sha256(str(notebook.metadata.get("kernelspec", {}).get("name", "")).encode())
    for cell in notebook.cells:
        if cell.cell_type == "code":
            digest.update(b"\x00" + cell.source.encode("utf-8"))
    return digest.hexdigest()


def _module_file(module: str, root: Path) -> Path | None:
    """The file of a module of the package under `root` (a .py file or a package's __init__.py), or None."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported_names(source: str, package: str | None = None) -> set[str]:
    """Dotted names a piece of Python imports (`from a import b` gives a and a.b); relative imports resolved.

    Notebook cells may hold IPython magics that do not parse: then the import lines are read one by one.
    """
    names: set[str] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        for match in _IMPORT_LINE.finditer(source):
            if match.group(1):
                items = match.group(2).replace("(", " ").replace(")", " ").split(",")
                names.add(match.group(1))
                names.update(f"{match.group(1)}.{item.split()[0]}" for item in items if item.split())
            else:
                names.update(item.split()[0] for item in match.group(3).split(",") if item.split())
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level and package:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def utils_dependencies(sources: Iterable[str], root: Path | None = None) -> list[Path]:
    """The files of `utils` that code importing what `sources` import runs, found by following imports.

    Parent packages' __init__.py files count (importing utils.a.b runs them); lazy imports inside functions
    count too. Absolute paths under `root` (default: this repository), sorted.
    """
    root = root or REPO_ROOT
    pending = [name for source in sources for name in _imported_names(source)]
    found: dict[str, Path] = {}
    while pending:
        name = pending.pop()
        parts = name.split(".")
        if parts[0] != PACKAGE:
            continue
        for depth in range(1, len(parts) + 1):
            module = ".".join(parts[:depth])
            file = _module_file(module, root)
            if file is None or module in found:
                continue
            found[module] = file
            package = module if file.name == "__init__.py" else module.rpartition(".")[0]
            pending.extend(_imported_names(file.read_text(encoding="utf-8"), package))
    return sorted(found.values())


# How a module's fingerprint is made: its syntax tree without docstrings (comments and layout never reach the tree).
FINGERPRINT_SCHEME = "python-code"


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """The tree with every module, class and function docstring removed (in place; also returned)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def file_fingerprint(path: Path) -> str:
    """SHA-256 of what in a file can change what a notebook prints: a Python module's code, any other file's bytes."""
    data = path.read_bytes()
    if path.suffix == ".py":
        data = ast.dump(_without_docstrings(ast.parse(data, filename=str(path)))).encode()
    return hashlib.sha256(data).hexdigest()


def code_sources(notebook: Any) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def source_fingerprints(notebook: Any, root: Path | None = None) -> dict[str, str]:
    """The fingerprint of each utils file the notebook's code runs, by path."""
    root = root or REPO_ROOT
    files = utils_dependencies(code_sources(notebook), root)
    return {path.relative_to(root).as_posix(): file_fingerprint(path) for path in files}


def environment_fingerprint(root: Path | None = None) -> str:
    """SHA-256 of the lock files of the pinned environment (a missing one counts as empty)."""
    root = root or REPO_ROOT
    digest = hashlib.sha256()
    for name in ENVIRONMENT_FILES:
        path = root / name
        digest.update(name.encode() + b"\x00" + (path.read_bytes() if path.is_file() else b"") + b"\x00")
    return digest.hexdigest()


def _changed_sources(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    changed = [path for path in sorted(set(recorded) | set(current)) if recorded.get(path) != current.get(path)]
    return [path + ("" if path in current else " (gone)") + ("" if path in recorded else " (new)")
            for path in changed]


def stale_reason(notebook: Any, root: Path | None = None) -> str | None:
    """Why the committed outputs are not what the committed code and environment make, or None when they are."""
    reference = notebook.metadata.get(REFERENCE_RUN_KEY)
    if not reference:
        return "it has no reference run (no outputs were ever generated by the project's command)"
    if reference.get("code_fingerprint") != code_fingerprint(notebook):
        return "its code cells changed after its outputs were made"
    if "utils_sources" not in reference or reference.get("fingerprint_scheme") != FINGERPRINT_SCHEME:
        return "its reference run recorded no code fingerprints of the utils modules it uses (made by an older command)"
    changed = _changed_sources(reference["utils_sources"], source_fingerprints(notebook, root))
    if changed:
        shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        return f"utils code it runs changed after its outputs were made: {shown}"
    if reference.get("environment_fingerprint") != environment_fingerprint(root):
        return f"the pinned environment ({', '.join(ENVIRONMENT_FILES)}) changed after its outputs were made"
    unexecuted = [index for index, cell in enumerate(notebook.cells)
                  if cell.cell_type == "code" and cell.source.strip() and cell.get("execution_count") is None]
    if unexecuted:
        return f"code cells {unexecuted} have no outputs from the reference run"
    return None


def _collapse_redraws(text: str) -> str:
    """Keep what a terminal would show: for each line, the text after its last carriage return."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def _clean_output_list(outputs: list) -> list:
    merged: list = []
    for output in outputs:
        if output.output_type in ("display_data", "execute_result") and WIDGET_VIEW_MIME in output.get("data", {}):
            continue  # a widget view shows nothing without the kernel; the cell's other outputs carry the result
        previous = merged[-1] if merged else None
        if (output.output_type == "stream" and previous is not None and previous.output_type == "stream"
                and previous.name == output.name):
            previous.text += output.text  # one stream, so that progress-bar redraws can be collapsed
            continue
        merged.append(output)
    cleaned = []
    for output in merged:
        if output.output_type == "stream":
            output.text = _ADDRESS.sub(" at 0x…", _collapse_redraws(output.text))
            if not output.text.strip():
                continue
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/") and isinstance(value, str):
                output.data[mime] = _ADDRESS.sub(" at 0x…", value)
        cleaned.append(output)
    return cleaned


_SECTION_HEADING = re.compile(r"^## (?:(\d+)\.\s|(.+)$)", re.M)


def section_of_heading(markdown: str, current: str) -> str:
    """The section a markdown cell starts ('§3' for '## 3. ...', else the heading's text), or `current`."""
    for match in _SECTION_HEADING.finditer(markdown):
        current = f"§{match.group(1)}" if match.group(1) else match.group(2).strip()
    return current


def section_seconds(notebook: Any) -> dict[str, float]:
    """Seconds each section's code cells took, from nbclient's per-cell timestamps (before they are cleaned)."""
    seconds: dict[str, float] = {}
    section = "Parameters"
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            section = section_of_heading(cell.source, section)
            continue
        timing = cell.get("metadata", {}).get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if cell.cell_type == "code" and start and end:
            took = (dt.datetime.fromisoformat(end.replace("Z", "+00:00"))
                    - dt.datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
            seconds[section] = round(seconds.get(section, 0.0) + took, 1)
    return seconds


def clean_outputs(notebook: Any) -> Any:
    """Remove what only adds diff noise from an executed notebook (in place; also returned)."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        for key in _CELL_TIMING_KEYS:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs = _clean_output_list(cell.outputs)
    return notebook


# Besides what the main environment's report lists, the packages a notebook's own kernel may teach (IPEX-LLM's).
KERNEL_EXTRA_PACKAGES = ("ipex-llm", "accelerate")
_VERSIONS_SCRIPT = """import importlib.metadata as metadata, json, sys
versions = {"python": sys.version.split()[0]}
for name in sys.argv[1:]:
    try:
        versions[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
print(json.dumps(versions))
"""


def kernel_python(kernel_name: str | None) -> str:
    """The interpreter a notebook's kernel runs (its kernelspec's first argument); this one for the default kernel."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        program = KernelSpecManager().get_kernel_spec(kernel_name or "python3").argv[0]
    except NoSuchKernel:
        return sys.executable
    return program if Path(program).is_absolute() else sys.executable


def kernel_package_versions(kernel_name: str | None) -> dict[str, str]:
    """The versions installed where the notebook ran (notebook 04's IPEX-LLM kernel has its own environment)."""
    from utils.system.environment_report import PACKAGES

    shown = subprocess.run([kernel_python(kernel_name), "-c", _VERSIONS_SCRIPT, *PACKAGES, *KERNEL_EXTRA_PACKAGES],
                           capture_output=True, text=True, check=True, timeout=120)
    return json.loads(shown.stdout)


def reference_run_metadata(notebook: Any, seconds: float, load_average: float | None,
                           sections: dict[str, float] | None = None) -> dict:
    """What the metadata records about a reference run (the CPU and its load matter to every timing)."""
    from utils.system.environment_report import cpu_features, openvino_devices

    cpu = cpu_features()
    precisions = {device["device"]: device["default_precision"] for device in openvino_devices()}
    return {
        "code_fingerprint": code_fingerprint(notebook),
        "fingerprint_scheme": FINGERPRINT_SCHEME,
        "utils_sources": source_fingerprints(notebook),
        "environment_fingerprint": environment_fingerprint(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(seconds),
        "run_size": os.environ.get("SPECDEC_RUN_SIZE", "full") or "full",
        "section_seconds": sections or {},
        "kernel": notebook.metadata.get("kernelspec", {}).get("name"),
        "machine": {"cpu": cpu["model"], "cores": cpu["logical_cores"], "platform": platform.platform(),
                    "default_precision": precisions},
        "load_average_at_start": None if load_average is None else round(load_average, 2),
        "packages": kernel_package_versions(notebook.metadata.get("kernelspec", {}).get("name")),
        "command": "python3 tutorial.py refresh-outputs",
    }


def refresh(notebook_path: Path, work_dir: Path, cell_timeout: int) -> tuple[bool, str]:
    """Run one notebook; if every cell passed, write it back with clean outputs. Returns (ok, message)."""
    import nbformat

    from maintainers.run_notebooks import PASSED, run_notebook

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    outcome = run_notebook(notebook_path, work_dir, cell_timeout=cell_timeout)
    if outcome.status != PASSED:
        where = f"cell {outcome.failed_cell_number}" if outcome.failed_cell_number else "setup"
        return False, (f"{notebook_path.name}: not updated: {outcome.error_name} in {where}: {outcome.error_message} "
                       f"(the failed run is in {outcome.executed_path})")
    executed = nbformat.read(outcome.executed_path, as_version=4)
    sections = section_seconds(executed)
    executed = clean_outputs(executed)
    executed.metadata[REFERENCE_RUN_KEY] = reference_run_metadata(executed, outcome.seconds, load, sections)
    nbformat.validate(executed)
    nbformat.write(executed, notebook_path)
    size = notebook_path.stat().st_size
    note = f" (warning: {size / 1e6:.1f} MB; GitHub renders notebooks up to a few MB)" if size > MAX_NOTEBOOK_BYTES else ""
    return True, f"{notebook_path.name}: outputs refreshed in {outcome.seconds:.0f} s, {size / 1e3:.0f} kB{note}"


def describe_reference_run(notebook: Any) -> str:
    """One line on when and how fast the committed outputs were made."""
    run = notebook.metadata.get(REFERENCE_RUN_KEY, {})
    return (f"reference run {run.get('date')}: {run.get('seconds')} s on {run.get('machine', {}).get('cores')} cores "
            f"of {run.get('machine', {}).get('cpu')}, load average {run.get('load_average_at_start')} at its start")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m maintainers.notebook_outputs",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to refresh (default: all)")
    parser.add_argument("--check", action="store_true", help="only report stale notebooks; exit 1 if any")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell (default 3600)")
    arguments = parser.parse_args(argv)
    notebooks = [path.resolve() for path in arguments.notebooks] or default_notebooks()
    missing = [str(path) for path in notebooks if not path.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    if arguments.timeout < 1:
        parser.error("--timeout must be at least 1 second")
    if arguments.check:
        import nbformat

        stale = False
        for path in notebooks:
            notebook = nbformat.read(path, as_version=4)
            reason = stale_reason(notebook)
            stale |= reason is not None
            print(f"{path.name}: stale: {reason}" if reason else f"{path.name}: fresh ({describe_reference_run(notebook)})")
        return 1 if stale else 0
    work_dir = build_dir() / "reference-run"
    os.environ.pop("MPLBACKEND", None)  # the kernels must draw inline plots into the outputs
    failures = 0
    for path in notebooks:
        print(f"running {path.name} ...", flush=True)
        ok, message = refresh(path, work_dir, arguments.timeout)
        print(message, flush=True)
        failures += not ok
    from maintainers.readme_images import export_images, image_problems
    from maintainers.run_times import out_of_date, track_problems, update_all

    for written in export_images():
        print(f"README image written from the stored outputs: {written.relative_to(REPO_ROOT)}")
    for updated in update_all():
        print(f"times from the reference run written into {updated.relative_to(REPO_ROOT)}")
    for problem in image_problems() + out_of_date() + track_problems():
        print(f"to fix: {problem}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
