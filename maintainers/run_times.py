"""Times the README and the teacher's guide quote, taken from the notebooks' reference run and a clean-clone setup.

    python -m maintainers.run_times            # rewrite them from the notebooks' metadata
    python -m maintainers.run_times --check    # exit 1 if a quoted time or the workshop track is out of date
    python -m maintainers.run_times --setup-times build/setup-times.json   # a clean clone's setup becomes the reference

The README's notebook table ends each row with the notebook's reference-run time, its footnote says between two
markers which machine and run size made each notebook's run (`machines_sentence`), and the teacher's guide holds the
3-hour workshop track (`TRACK`) between two markers: which sections of which notebook are the core path, their run
time (`section_seconds` in the metadata), the whole notebook's, and the minutes planned for the block. Sections
off the track say "(optional)" in their headings. `python3 tutorial.py refresh-outputs` calls `update_all`.

The guide's preparation times (`preparation_text`, between their own markers) are what `python3 tutorial.py setup`
recorded on the reference machine from a clean clone (docs/preparation-times.json, copied from that clone's
build/setup-times.json by `--setup-times`), and for the day-before check the sum of the notebooks' reference runs.
"""
from __future__ import annotations

import argparse
import json
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
PREPARATION_START, PREPARATION_END = "<!-- preparation-times:start -->", "<!-- preparation-times:end -->"
CODER_BUILD_START, CODER_BUILD_END = "<!-- coder-pair-time:start -->", "<!-- coder-pair-time:end -->"
# The steps tutorial.py's setup times (its SETUP_STEPS), as the guide names them; "setup" is the whole of it.
SETUP_STEPS = {"main_environment": "the main environment", "ipex_environment": "the IPEX-LLM environment",
               "offline_pair": "the offline pair", "coder_pair": "the Qwen2.5-Coder pair (its wheels and its build)",
               "setup": "the whole setup"}
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


def between_markers(text: str, start: str, end: str, body: str, inline: bool = False) -> str:
    """`text` with what lies between the markers `start` and `end` replaced by `body` (on lines of its own, or
    `inline` within a sentence: a line that starts with `<!--` would begin a raw HTML block in markdown)."""
    if start not in text or end not in text:
        raise ValueError(f"the page has no {start} ... {end} block")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}{body}{end}{tail}" if inline else f"{head}{start}\n{body}\n{end}{tail}"


def guide_with_track(text: str, root: Path = REPO_ROOT) -> str:
    return between_markers(text, TRACK_START, TRACK_END, track_table(root))


def preparation_times_path(root: Path = REPO_ROOT) -> Path:
    return root / "docs" / "preparation-times.json"


def preparation_text(root: Path = REPO_ROOT) -> str:
    """How long preparing one machine took: the setup's steps from docs/preparation-times.json (which machine, when),
    and the day-before check, which runs every notebook: the sum of their reference runs."""
    record = json.loads(preparation_times_path(root).read_text(encoding="utf-8"))
    steps, machine = record.get("steps") or {}, record.get("machine") or {}

    def took(name: str) -> str:
        step = steps.get(name) or {}
        if step.get("seconds") is None:
            return "not measured yet"
        return as_time(step["seconds"]) + ("" if step.get("did_work", True) else " (already up to date)")

    parts = ", ".join(f"{label} {took(name)}" for name, label in SETUP_STEPS.items() if name != "setup")
    again = (record.get("up_to_date") or {}).get("seconds")
    second = "has not been timed yet" if again is None else f"took {as_time(again)}"
    runs = {path.name[:2]: reference_run(path.name[:2], root).get("seconds")
            for path in sorted((root / "notebooks").glob("[0-9][0-9]-*.ipynb"))}
    not_run = [number for number, seconds in runs.items() if seconds is None]
    total = as_time(sum(seconds for seconds in runs.values() if seconds is not None))
    return (f"- The setup (section 1) took {took('setup')} from a clean clone on {machine.get('cpu', 'an unnamed CPU')} "
            f"({machine.get('cores', '?')} cores, {machine.get('platform', 'unnamed OS')}) on "
            f"{record.get('date', 'an unrecorded date')}: {parts}. Our machines install from a package mirror nearby: "
            "on a laptop the environments and the pair's wheels also wait for their downloads. A second run, with "
            f"everything up to date, {second}.\n"
            f"- The day-before check (section 3) runs every notebook: {total} by their reference runs (the sum of the "
            f"README's times; {machines_sentence(root)})"
            + (f", without {number_ranges(not_run)}, not run yet." if not_run else "."))


def coder_pair_time_text(root: Path = REPO_ROOT) -> str:
    """The setup page's words for building the Coder pair, from docs/preparation-times.json."""
    record = json.loads(preparation_times_path(root).read_text(encoding="utf-8"))
    step = (record.get("steps") or {}).get("coder_pair") or {}
    machine = record.get("machine") or {}
    if step.get("seconds") is None:
        return "its build has not been timed yet"
    return (f"its wheels and build took {as_time(step['seconds'])} on {machine.get('cpu', 'an unnamed CPU')} with "
            f"{machine.get('cores', '?')} cores, from a package mirror nearby")


def setup_page_rewrite(text: str, root: Path = REPO_ROOT) -> str:
    return between_markers(text, CODER_BUILD_START, CODER_BUILD_END, coder_pair_time_text(root), inline=True)


def guide_with_preparation(text: str, root: Path = REPO_ROOT) -> str:
    return between_markers(text, PREPARATION_START, PREPARATION_END, preparation_text(root))


def guide_rewrite(text: str, root: Path = REPO_ROOT) -> str:
    """The guide with its workshop track and its preparation times written."""
    return guide_with_preparation(guide_with_track(text, root), root)


def adopt_setup_times(source: Path, root: Path = REPO_ROOT) -> Path:
    """Copy a clean clone's build/setup-times.json to docs/preparation-times.json; refuse one in which a step was
    skipped or found up to date (it would not time a clean clone)."""
    record = json.loads(Path(source).read_text(encoding="utf-8"))
    steps = record.get("steps") or {}
    idle = [name for name in SETUP_STEPS if not (steps.get(name) or {}).get("did_work")]
    if idle:
        raise ValueError(f"{source}: {', '.join(idle)} did no work in that setup (or was skipped): give the build/setup-times.json of "
                         "`python3 tutorial.py setup` in a clean clone (run twice, to time an up-to-date run too)")
    record.setdefault("up_to_date", None)
    target = preparation_times_path(root)
    target.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return target


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


def pages(root: Path = REPO_ROOT) -> tuple[Path, Path, Path]:
    return root / "README.md", root / "docs" / "teachers-guide.md", root / "docs" / "setup.md"


def out_of_date(root: Path = REPO_ROOT) -> list[str]:
    readme, guide, setup_page = pages(root)
    stale = []
    text = readme.read_text(encoding="utf-8")
    if readme_with_times(text, root) != text:
        stale.append("README.md: the notebook table's times differ from the reference run")
    if readme_with_machines(text, root) != text:
        stale.append("README.md: the reference run's machines differ from the notebooks' metadata")
    text = guide.read_text(encoding="utf-8")
    if guide_with_track(text, root) != text:
        stale.append("docs/teachers-guide.md: the workshop track differs from the reference run")
    if guide_with_preparation(text, root) != text:
        stale.append("docs/teachers-guide.md: the preparation times differ from docs/preparation-times.json and the "
                     "notebooks' reference runs")
    text = setup_page.read_text(encoding="utf-8")
    if setup_page_rewrite(text, root) != text:
        stale.append("docs/setup.md: the Coder pair's build time differs from docs/preparation-times.json")
    return stale


def update_all(root: Path = REPO_ROOT) -> list[Path]:
    """Rewrite the README's times, the guide's track and preparation times, the setup page's Coder build time;
    return the files changed."""
    changed = []
    readme, guide, setup_page = pages(root)

    def readme_rewrite(text: str, root: Path) -> str:
        return readme_with_machines(readme_with_times(text, root), root)

    for path, rewrite in ((readme, readme_rewrite), (guide, guide_rewrite), (setup_page, setup_page_rewrite)):
        old = path.read_text(encoding="utf-8")
        new = rewrite(old, root)
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m maintainers.run_times", add_help=False)
    parser.add_argument("--setup-times", type=Path, help="a clean clone's build/setup-times.json")
    arguments, rest = parser.parse_known_args(argv)
    if arguments.setup_times is not None:
        if "--check" in rest:
            parser.error("--setup-times writes docs/preparation-times.json: leave out --check")
        try:
            print(f"wrote {adopt_setup_times(arguments.setup_times).relative_to(REPO_ROOT)}")
        except (OSError, ValueError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    summary = __doc__.split("\n\n")[0]
    description = f"{summary} --setup-times FILE first copies a clean clone's build/setup-times.json to " \
                  "docs/preparation-times.json."
    return write_then_check(rest, "python -m maintainers.run_times", description, update_all,
                            lambda: out_of_date() + track_problems())


if __name__ == "__main__":
    sys.exit(main())
