"""Fetch the real model pairs ahead of time, so a classroom can run offline afterwards.

Run it on a machine with a network, before the session:

    python -m maintainers.prefetch --pairs dolly-v2 phi-3
    python -m maintainers.prefetch --pairs phi-3 --source modelscope huggingface
    python -m maintainers.prefetch --pairs dolly-v2 --models-dir /media/usb/models --dry-run

For every model of the chosen pairs it skips a folder that is already complete
(it has a `.complete` marker), fetches the others from the first source in
`--source` that the model offers, checks that each folder has the files
OpenVINO GenAI loads, and prints a table of sizes and outcomes.
Disk space (and RAM, for exports) is checked against the catalogue's estimates
before anything is downloaded. The exit status is 1 if any model failed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from utils.input_checks import free_disk_bytes
from utils.models.atomic_folder import COMPLETE_MARKER, folder_size_bytes, read_marker
from utils.models.model_catalogue import PAIRS, ModelSpec, get_pair
from utils.models.model_check import is_complete
from utils.paths import MODELS_DIR_ENV, models_dir

NETWORK_SOURCES = ("huggingface", "modelscope", "export")
DEFAULT_PAIRS = ("dolly-v2", "phi-3")
ALREADY_THERE, FETCHED, FAILED, PLANNED = "already there", "fetched", "failed", "to fetch"
DISK_MARGIN = 1.1  # ask for 10% more free space than the estimate


class PrefetchError(RuntimeError):
    """The request cannot be carried out; the message says what to change."""


@dataclass
class PlannedModel:
    """One model folder to make ready, and how."""

    pair: str
    role: str  # "main" or "draft"
    spec: ModelSpec
    source: str  # "offline", "huggingface", "modelscope" or "export"
    status: str = PLANNED
    size_bytes: int = 0
    seconds: float = 0.0
    message: str = ""


def choose_source(spec: ModelSpec, preferred_sources: Sequence[str]) -> str:
    """The first of `preferred_sources` the model offers; models built locally use "offline"."""
    if spec.built_locally:
        return "offline"
    for source in preferred_sources:
        if source in spec.sources:
            return source
    raise PrefetchError(
        f"{spec.folder_name} cannot be fetched from {', '.join(preferred_sources)}; it offers: "
        f"{', '.join(spec.sources)}. Add one of those to --source (several may be given, in order)."
    )


def plan_prefetch(pair_names: Sequence[str], preferred_sources: Sequence[str]) -> list[PlannedModel]:
    """One entry per distinct model folder of the pairs, each with its source; fails on bad input."""
    plan: list[PlannedModel] = []
    problems: list[str] = []
    seen: set[str] = set()
    for pair_name in pair_names:
        pair = get_pair(pair_name)
        for role, spec in (("main", pair.main), ("draft", pair.draft)):
            if spec.folder_name in seen:
                continue
            seen.add(spec.folder_name)
            marker = read_marker(spec.path)
            if marker is not None:  # already there: show where it came from, if the marker says
                recipe = marker.get("recipe")
                recorded = recipe.get("source") if isinstance(recipe, dict) else None
                source = "offline" if spec.built_locally else recorded if isinstance(recorded, str) else "-"
            else:
                try:
                    source = choose_source(spec, preferred_sources)
                except PrefetchError as error:
                    problems.append(str(error))
                    continue
            entry = PlannedModel(pair.name, role, spec, source)
            if marker is not None:
                entry.status, entry.size_bytes = ALREADY_THERE, folder_size_bytes(spec.path)
            plan.append(entry)
    if problems:
        raise PrefetchError("\n".join(problems))
    return plan


def total_memory_bytes() -> int | None:
    """Physical RAM of this machine, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def resource_problems(plan: Sequence[PlannedModel], free_disk_bytes: int,
                      memory_bytes: int | None) -> list[str]:
    """Why the planned fetches would not fit on this machine (empty if they should)."""
    to_fetch = [entry for entry in plan if entry.status == PLANNED]
    problems = []
    needed_disk = sum(entry.spec.disk_gb for entry in to_fetch) * 1e9 * DISK_MARGIN
    if needed_disk > free_disk_bytes:
        problems.append(
            f"the models to fetch need about {needed_disk / 1e9:.1f} GB but only "
            f"{free_disk_bytes / 1e9:.1f} GB is free in the models folder; free space or use --models-dir"
        )
    if memory_bytes is not None:
        for entry in to_fetch:
            if entry.source == "export" and entry.spec.export_memory_gb * 1e9 > memory_bytes:
                problems.append(
                    f"exporting {entry.spec.folder_name} needs about {entry.spec.export_memory_gb:.0f} GB "
                    f"of RAM, this machine has {memory_bytes / 1e9:.0f} GB; choose another --source "
                    f"({', '.join(s for s in entry.spec.sources if s != 'export') or 'none offered'}) "
                    "or export on a bigger machine"
                )
    return problems


def fetch_model(entry: PlannedModel) -> None:
    """Make `entry.spec.path` ready from `entry.source` (`utils.models.model_fetch` writes atomically)."""
    from utils.models.model_fetch import get_model

    if entry.source == "offline":
        from maintainers.offline_pair import prepare_offline_models

        prepare_offline_models()
    else:
        get_model(entry.spec, entry.source)


def folder_problem(folder: Path) -> str | None:
    """Why OpenVINO GenAI could not load `folder` (missing files), or None if it looks loadable."""
    from utils.models.model_check import ModelFolderError, check_model_folder

    try:
        check_model_folder(folder)
    except ModelFolderError as error:
        return str(error)
    return None


def run_plan(plan: Sequence[PlannedModel], fetch: Callable[[PlannedModel], None] = fetch_model) -> None:
    """Fetch every planned model in turn, then check every folder's files.

    A failure is recorded in the entry (status and message) and the next model
    still runs; a folder that is there but lacks files counts as failed too.
    """
    for entry in plan:
        if entry.status == PLANNED and is_complete(entry.spec.path):  # made meanwhile (offline build)
            entry.status = ALREADY_THERE
        if entry.status == PLANNED:
            print(f"fetching {entry.spec.folder_name} from {entry.source} ...", flush=True)
            started = time.perf_counter()
            try:
                fetch(entry)
                if not is_complete(entry.spec.path):
                    raise PrefetchError(f"the fetch ended but {entry.spec.path} has no {COMPLETE_MARKER} marker")
                entry.status = FETCHED
            except Exception as error:  # reported in the table; KeyboardInterrupt still stops
                entry.status = FAILED
                entry.message = f"{type(error).__name__}: {_first_lines(str(error))}"
            entry.seconds = time.perf_counter() - started
        if entry.status != FAILED:
            problem = folder_problem(entry.spec.path)
            if problem:
                entry.status, entry.message = FAILED, problem
        entry.size_bytes = folder_size_bytes(entry.spec.path) if entry.spec.path.exists() else 0


def _first_lines(text: str, count: int = 2, limit: int = 400) -> str:
    """The first `count` non-empty lines of an error message, on one line, at most `limit` characters."""
    joined = " ".join([line.strip() for line in text.splitlines() if line.strip()][:count])
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def plan_table(plan: Sequence[PlannedModel]) -> str:
    """A plain-text table (pair, role, folder, source, MB on disk, seconds, status), then any errors."""
    header = ("pair", "role", "folder", "source", "MB on disk", "seconds", "status")
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for entry in plan:
        status = entry.status
        if entry.message:
            notes.append(f"[{len(notes) + 1}] {entry.spec.folder_name}: {entry.message}")
            status += f" [{len(notes)}]"
        rows.append((
            entry.pair, entry.role, entry.spec.folder_name, entry.source,
            f"{entry.size_bytes / 1e6:.1f}" if entry.status != PLANNED else f"~{entry.spec.disk_gb * 1e3:.0f} (est.)",
            f"{entry.seconds:.1f}" if entry.status in (FETCHED, FAILED) else "-",
            status,
        ))
    total_mb = sum(entry.size_bytes for entry in plan) / 1e6
    still_to_fetch_mb = sum(entry.spec.disk_gb * 1e3 for entry in plan if entry.status == PLANNED)
    rows.append(("total", "", "", "", f"{total_mb:.1f}", "",
                 f"+ ~{still_to_fetch_mb:.0f} MB to fetch (est.)" if still_to_fetch_mb else ""))
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip()

    return "\n".join([line(header), line(["-" * width for width in widths]), *map(line, rows), *notes])


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m maintainers.prefetch",
        description="Fetch model pairs into the models folder ahead of a session, skipping what is "
        "already complete, and print their sizes on disk.",
    )
    parser.add_argument("--pairs", nargs="+", default=list(DEFAULT_PAIRS), choices=sorted(PAIRS),
                        help=f"pairs to prepare (default: {' '.join(DEFAULT_PAIRS)})")
    parser.add_argument("--source", nargs="+", default=list(NETWORK_SOURCES), choices=NETWORK_SOURCES,
                        help="where to get each model: the first of these the model offers "
                        f"(default: {' '.join(NETWORK_SOURCES)})")
    parser.add_argument("--models-dir", type=Path, default=None,
                        help=f"models folder to fill (default: ${MODELS_DIR_ENV} or <repo>/models)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would be fetched, with estimated sizes, and stop")
    parser.add_argument("--allow-low-resources", action="store_true",
                        help="fetch even if the estimates say disk or RAM is too small")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status (0 ok, 1 a model failed, 2 bad request)."""
    arguments = parse_arguments(argv)
    if arguments.models_dir is not None:
        # The catalogue and the offline build read the folder from the environment.
        os.environ[MODELS_DIR_ENV] = str(arguments.models_dir.expanduser().resolve())
    root = models_dir()
    try:
        plan = plan_prefetch(arguments.pairs, arguments.source)
        problems = resource_problems(plan, free_disk_bytes(root), total_memory_bytes())
        if problems and not (arguments.allow_low_resources or arguments.dry_run):
            raise PrefetchError("; ".join(problems) + " (or pass --allow-low-resources)")
    except (PrefetchError, KeyError) as error:
        print(f"prefetch: {error.args[0] if error.args else error}", file=sys.stderr)
        return 2
    print(f"models folder: {root}")
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    if not arguments.dry_run:
        root.mkdir(parents=True, exist_ok=True)
        run_plan(plan)
    print(plan_table(plan))
    if arguments.models_dir is not None:
        print(f"Notebooks find these models when {MODELS_DIR_ENV}={root} is set.")
    return 1 if any(entry.status == FAILED for entry in plan) else 0


if __name__ == "__main__":
    sys.exit(main())
