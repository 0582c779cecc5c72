"""Times the README and the teacher's guide quote, taken from the notebooks' reference run.

    python -m maintainers.run_times            # rewrite them from the notebooks' metadata
    python -m maintainers.run_times --check    # exit 1 if a quoted time or the workshop track is out of date

The README's notebook table ends each row with the notebook's reference-run time, its footnote says between two
markers which machine and run size made each notebook's run (`machines_sentence`), and the teacher's guide holds the
3-hour workshop track (`TRACK`) between two markers: which sections of which notebook are the core path, their run
time (`section_seconds` in the metadata), the whole notebook's, and the minutes planned for the block. Sections
off the track say "(optional)" in their headings. `python3 tutorial.py refresh-outputs` calls `update_all`.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from maintainers.page_commands import write_then_check
from utils.paths import REPO_ROOT

WORKSHOP_MINUTES = 180
NOTEBOOK_CORE_MINUTES = 25  # the most a notebook's core path may take to read and run on 2 cores
TRACK_START, TRACK_END = "<!-- workshop-track:start -->", "<!-- workshop-track:end -->"
MACHINES_START, MACHINES_END = "<!-- reference-machines:start -->", "<!-- reference-machines:end -->"
_README_ROW = re.compile(r"^(\| (\d\d) \|.*\| )([^|]*?)( \|)$", re.M)
_SECTION = re.compile(r"^## (\d+)\. (.+)$", re.M)


@dataclass(frozen=True)
class Block:
    """One block of the workshop: a notebook's core sections (numbers), or a break (notebook None)."""

    notebook: str | None
    core: tuple[int, ...]
    planned_minutes: int
    activity: str


TRACK: tuple[Block, ...] = (
    Block("00", (1, 2, 3, 4, 6), 10, "everyone runs it; compare machines (bf16? AMX? RAM?)"),
    Block("01", (1, 2, 4, 6), 15, "the catalogue, one export, the tokenizer check"),
    Block("02", (1, 2, 3, 4), 25, "the idea on the board, the article's code, the honest measurement, why a draft must be cheap"),
    Block(None, (), 10, "break"),
    Block("03", (1, 2, 3), 15, "prompt lookup: where copying the prompt pays"),
    Block("04", (1, 2, 5, 11, 12), 20, "IPEX-LLM's self-draft, then the same idea in OpenVINO"),
    Block("05", (1, 2, 8, 10), 25, "the knobs, the cost of verification, the formula against measurement"),
    Block(None, (), 10, "break"),
    Block("06", (1, 3, 4, 5, 6), 20, "the main writes its data, a draft trains, its speed-up"),
    Block("07", (1, 2, 3, 4), 15, "the playground on the projector: guess the race"),
    Block("08", (1, 2, 3, 4, 5), 15, "an EAGLE-3 head: what it reads, its folder, export and run; the trained "
                                     "head's figures on the projector"),
)


def notebook_path(number: str, root: Path = REPO_ROOT) -> Path:
    found = sorted((root / "notebooks").glob(f"{number}-*.ipynb"))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one notebook {number}-*.ipynb in {root / 'notebooks'}, found {found}")
    return found[0]


def reference_run(number: str, root: Path = REPO_ROOT) -> dict:
    import nbformat

    return nbformat.read(notebook_path(number, root), as_version=4).metadata.get("reference_run", {})


def sections(number: str, root: Path = REPO_ROOT) -> dict[int, str]:
    """The notebook's numbered sections: number -> heading text."""
    import nbformat

    notebook = nbformat.read(notebook_path(number, root), as_version=4)
    return {int(match.group(1)): match.group(2).strip() for cell in notebook.cells if cell.cell_type == "markdown"
            for match in _SECTION.finditer(cell.source)}


def as_time(seconds: float) -> str:
    """'45 s' under two minutes, else '7.2 min'."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def readme_with_times(text: str, root: Path = REPO_ROOT) -> str:
    """The README with each notebook row's last column set to that notebook's reference-run time."""
    def replace(match: re.Match) -> str:
        seconds = reference_run(match.group(2), root).get("seconds")
        return f"{match.group(1)}{as_time(seconds) if seconds is not None else 'not run'}{match.group(4)}"

    return _README_ROW.sub(replace, text)


def hand_written(text: str) -> str:
    """A page without what this module writes into it (the README's times, the track, the machines' sentence)."""
    text = _README_ROW.sub(lambda match: f"{match.group(1)}{match.group(4)}", text)
    return re.sub(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", " ", text, flags=re.S)


def number_ranges(numbers: list[str]) -> str:
    """["00", "01", "02", "05"] -> "00–02, 05" (consecutive notebook numbers as a range)."""
    runs: list[list[str]] = []
    for number in numbers:
        if runs and int(number) == int(runs[-1][-1]) + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}" if len(run) > 2 else ", ".join(run)
                     for run in runs)


def machines_sentence(root: Path = REPO_ROOT) -> str:
    """Which CPU and run size made each notebook's reference run, from the metadata: "00–05, 07 on AMD EPYC at run
    size `full`; 06, 08 on ..." (notebooks without a reference run: "not run")."""
    groups: dict[str, list[str]] = {}
    for path in sorted((root / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        run = reference_run(path.name[:2], root)
        cpu = (run.get("machine") or {}).get("cpu")
        label = f"on {cpu} at run size `{run.get('run_size', 'full')}`" if cpu else "not run"
        groups.setdefault(label, []).append(path.name[:2])
    return "; ".join(f"{number_ranges(numbers)} {label}" for label, numbers in groups.items())


def readme_with_machines(text: str, root: Path = REPO_ROOT) -> str:
    """The README with the text between the machine markers set to `machines_sentence` (no markers: unchanged)."""
    start, end = text.find(MACHINES_START), text.find(MACHINES_END)
    if start < 0 or end < start:
        return text
    return text[:start + len(MACHINES_START)] + machines_sentence(root) + text[end:]


def track_table(root: Path = REPO_ROOT) -> str:
    """The workshop track as a markdown table, run times from the reference run."""
    lines = ["| block | notebook: core sections | run time of the core sections | whole notebook | planned | what the room does |",
             "|---|---|---|---|---|---|"]
    for index, block in enumerate(TRACK, start=1):
        if block.notebook is None:
            lines.append(f"| {index} | — | — | — | {block.planned_minutes} min | {block.activity} |")
            continue
        run = reference_run(block.notebook, root)
        per_section = run.get("section_seconds", {})
        core_seconds = sum(per_section.get(f"§{number}", 0.0) for number in block.core)
        names = sections(block.notebook, root)
        core = ", ".join(f"§{number} {names.get(number, '?')}" for number in block.core)
        lines.append(f"| {index} | {block.notebook}: {core} | {as_time(core_seconds)} | {as_time(run.get('seconds', 0))} "
                     f"| {block.planned_minutes} min | {block.activity} |")
    total = sum(block.planned_minutes for block in TRACK)
    lines.append(f"| | | | | **{total} min** | |")
    return "\n".join(lines)


def guide_with_track(text: str, root: Path = REPO_ROOT) -> str:
    if TRACK_START not in text or TRACK_END not in text:
        raise ValueError(f"the teacher's guide has no {TRACK_START} ... {TRACK_END} block")
    head, rest = text.split(TRACK_START, 1)
    _, tail = rest.split(TRACK_END, 1)
    return f"{head}{TRACK_START}\n{track_table(root)}\n{TRACK_END}{tail}"


def track_problems(root: Path = REPO_ROOT) -> list[str]:
    """What breaks the track's promises: too long, a core path over its budget, a missing or mislabelled section."""
    problems = []
    total = sum(block.planned_minutes for block in TRACK)
    if total > WORKSHOP_MINUTES:
        problems.append(f"the track plans {total} min, more than {WORKSHOP_MINUTES}")
    on_track: dict[str, set[int]] = {}
    for block in TRACK:
        if block.notebook is None:
            continue
        on_track.setdefault(block.notebook, set()).update(block.core)
        if block.planned_minutes > NOTEBOOK_CORE_MINUTES:
            problems.append(f"notebook {block.notebook}: {block.planned_minutes} min planned, more than {NOTEBOOK_CORE_MINUTES}")
        per_section = reference_run(block.notebook, root).get("section_seconds")
        core_seconds = sum((per_section or {}).get(f"§{number}", 0.0) for number in block.core)
        if per_section is not None and core_seconds > block.planned_minutes * 60:
            problems.append(f"notebook {block.notebook}'s core sections run {as_time(core_seconds)}, longer than "
                            f"its {block.planned_minutes} planned minutes")
    for number in sorted({path.name[:2] for path in (root / "notebooks").glob("[0-9][0-9]-*.ipynb")}):
        for section, heading in sections(number, root).items():
            optional = "(optional)" in heading.lower()
            if section in on_track.get(number, set()) and optional:
                problems.append(f"notebook {number} §{section} is on the track but its heading says (optional)")
            if section not in on_track.get(number, set()) and not optional:
                problems.append(f"notebook {number} §{section} is off the track: add (optional) to its heading")
        missing = on_track.get(number, set()) - set(sections(number, root))
        if missing:
            problems.append(f"notebook {number} has no sections {sorted(missing)} that the track names")
    return problems


def pages(root: Path = REPO_ROOT) -> tuple[Path, Path]:
    return root / "README.md", root / "docs" / "teachers-guide.md"


def out_of_date(root: Path = REPO_ROOT) -> list[str]:
    readme, guide = pages(root)
    stale = []
    text = readme.read_text(encoding="utf-8")
    if readme_with_times(text, root) != text:
        stale.append("README.md: the notebook table's times differ from the reference run")
    if readme_with_machines(text, root) != text:
        stale.append("README.md: the reference run's machines differ from the notebooks' metadata")
    if guide_with_track(guide.read_text(encoding="utf-8"), root) != guide.read_text(encoding="utf-8"):
        stale.append("docs/teachers-guide.md: the workshop track differs from the reference run")
    return stale


def update_all(root: Path = REPO_ROOT) -> list[Path]:
    """Rewrite the README's times and the guide's track from the metadata; return the files changed."""
    changed = []
    readme, guide = pages(root)

    def readme_rewrite(text: str, root: Path) -> str:
        return readme_with_machines(readme_with_times(text, root), root)

    for path, rewrite in ((readme, readme_rewrite), (guide, guide_with_track)):
        old = path.read_text(encoding="utf-8")
        new = rewrite(old, root)
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    return write_then_check(argv, "python -m maintainers.run_times", __doc__.split("\n\n")[0], update_all,
                            lambda: out_of_date() + track_problems())


if __name__ == "__main__":
    sys.exit(main())
