"""Regenerate the README's result images by running the notebooks that draw them.

    python -m utils.maintenance.readme_figures            # or: python3 tutorial.py figures

The notebooks save their plots with `figures_dir()`; this command points that
at `docs/images/`, runs them headless with their default parameters, and writes
`docs/images/measured-on.md` (machine, versions, date, run times), so every
image in the README is what the code measured, on a stated machine.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path

from utils.paths import FIGURES_DIR_ENV, REPO_ROOT, build_dir

IMAGES_DIR = REPO_ROOT / "docs" / "images"
FIGURE_NOTEBOOK_PREFIXES = ("02-", "03-", "05-")


def figure_notebooks(prefixes: tuple[str, ...] = FIGURE_NOTEBOOK_PREFIXES) -> list[Path]:
    """The notebooks whose plots the README shows."""
    found = [path for prefix in prefixes for path in sorted((REPO_ROOT / "notebooks").glob(f"{prefix}*.ipynb"))]
    if len(found) != len(prefixes):
        raise FileNotFoundError(f"Expected one notebook for each of {prefixes} in notebooks/, found {found}")
    return found


def provenance_markdown(outcomes, report: dict) -> str:
    """The machine, versions and run outcomes the images were measured with."""
    cpu, memory = report["cpu"], report["memory_disk"]
    features = ", ".join(name for name, present in cpu["features"].items() if present) or "none of note"
    lines = [
        "# Where the README's images were measured",
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- CPU: {cpu['model']}, {cpu['logical_cores']} logical cores; features: {features}",
        f"- RAM: {memory['ram_total_gb']:.0f} GB; load average at the end: {os.getloadavg()[0]:.1f}",
        "- Devices: " + ", ".join(f"{d['device']} ({d['full_name']}, default precision {d['default_precision']})"
                                  for d in report["devices"]),
        "- Versions: " + ", ".join(f"{name} {version}" for name, version in report["versions"].items()),
        "- Regenerate: `python3 tutorial.py figures` (runs the notebooks below with their default parameters)",
        "",
        "| notebook | outcome | run time |",
        "|---|---|---|",
    ]
    lines += [f"| {o.notebook} | {o.status} | {o.seconds:.0f} s |" for o in outcomes]
    return "\n".join(lines) + "\n"


def regenerate(images_dir: Path = IMAGES_DIR) -> int:
    """Run the figure notebooks with `figures_dir()` set to `images_dir`; 0 if all passed."""
    from utils.maintenance.run_notebooks import FAILED, run_notebooks
    from utils.system.environment_report import environment_report

    images_dir.mkdir(parents=True, exist_ok=True)
    os.environ[FIGURES_DIR_ENV] = str(images_dir)  # inherited by the kernels started below
    outcomes = run_notebooks(figure_notebooks(), build_dir() / "readme-figures")
    (images_dir / "measured-on.md").write_text(provenance_markdown(outcomes, environment_report()), encoding="utf-8")
    print(f"images and provenance written to {images_dir}")
    return 1 if any(o.status == FAILED for o in outcomes) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images-dir", type=Path, default=IMAGES_DIR, help="where to write the PNGs (default docs/images)")
    return regenerate(parser.parse_args(argv).images_dir)


if __name__ == "__main__":
    raise SystemExit(main())
