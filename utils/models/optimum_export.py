"""Run `optimum-cli export openvino`, printing the exact command, into an atomic folder."""
from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from utils.models.atomic_folder import atomic_folder
from utils.system.die_with_parent import die_with_parent_command
from utils.system.environment_report import package_versions

EXPORT_PACKAGES = ("optimum-intel", "openvino", "nncf")


class ExportError(RuntimeError):
    """optimum-cli failed; the message carries the end of its log."""


def export_recipe(recipe_version: int, source: dict | None, weight_format: str,
                  extra_args: Sequence[str] = ()) -> dict:
    """The recipe an export's marker records: a change to `source` (what is exported), the weight format, the extra
    arguments or an exporting package's version makes the export stale."""
    versions = package_versions(EXPORT_PACKAGES, with_python=False)
    return {"recipe_version": recipe_version, "source": source, "weight_format": weight_format,
            "extra_args": list(extra_args), "optimum_intel": versions["optimum-intel"],
            "openvino": versions["openvino"], "nncf": versions["nncf"]}


def optimum_export_command(model: str, output: Path, weight_format: str, extra_args: tuple[str, ...] = (),
                           local_folder: bool = False) -> list[str]:
    """The optimum-cli command line that exports `model` (hub id or local folder)."""
    command = [str(Path(sys.executable).with_name("optimum-cli")), "export", "openvino",
               "--model", str(model), "--weight-format", weight_format]
    if local_folder:
        # optimum cannot infer the task from a local folder's name
        command += ["--task", "text-generation-with-past"]
    return command + list(extra_args) + [str(output)]


def run_dying_with_parent(command: list[str], log_path: Path) -> int:
    """Run `command` with its output in `log_path`; return its exit code. The child never outlives us (even `kill -9`,
    on Linux), so nothing writes into a folder being removed."""
    with log_path.open("w", encoding="utf-8") as log:
        child = subprocess.Popen(die_with_parent_command(command), stdout=log, stderr=subprocess.STDOUT)
        try:
            return child.wait()
        except BaseException:
            child.kill()
            child.wait()
            raise


def export_with_optimum(model: str, destination: Path, weight_format: str, recipe: dict,
                        extra_args: tuple[str, ...] = (), local_folder: bool = False,
                        check: Callable[[Path], None] | None = None) -> Path:
    """Export `model` to `destination` atomically (log in `export.log`); `check(folder)` may reject it before."""
    destination = Path(destination)
    if local_folder and not (Path(model) / "config.json").is_file():
        raise ExportError(f"{model} is not a Hugging Face model folder (no config.json): nothing to export.")
    with atomic_folder(destination, recipe) as work:
        command = optimum_export_command(model, work, weight_format, extra_args, local_folder)
        shown = [c if c != str(work) else str(destination) for c in command]
        shown[0] = "optimum-cli"
        print("$", shlex.join(shown), flush=True)
        log_path = work / "export.log"
        exit_code = run_dying_with_parent(command, log_path)
        if exit_code != 0 or not (work / "openvino_model.xml").exists():
            tail = "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
            raise ExportError(f"optimum-cli export of {model} ({weight_format}) failed "
                              f"(exit code {exit_code}). Last lines of its log:\n{tail}")
        if check is not None:
            check(work)
    return destination
