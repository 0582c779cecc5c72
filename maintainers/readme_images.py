"""The README's and docs' result images are the notebooks' reference run: taken from the stored outputs.

    python -m maintainers.readme_images            # write docs/images/ from the notebooks' outputs
    python -m maintainers.readme_images --check    # exit 1 if an image differs from its notebook's output

`utils.result_files.save_figure` shows each saved plot in its notebook as the PNG bytes it wrote, named in the
output's metadata; `python3 tutorial.py refresh-outputs` calls `export_images` after the notebooks ran, so every
image under docs/images/ that a page shows is byte-identical to a stored output. The one exception is the
playground screenshot, which the browser test takes (`SCREENSHOT_IMAGES`).
"""
from __future__ import annotations

import base64
import re
import sys
from pathlib import Path

from maintainers.page_commands import write_then_check
from utils.paths import REPO_ROOT
from utils.result_files import FIGURE_NAME_KEY

IMAGES_DIR = REPO_ROOT / "docs" / "images"
SCREENSHOT_IMAGES = ("07-playground.png",)  # made by tests/test_browser_playground.py, not by a notebook
_IMAGE_LINK = re.compile(r"\]\((?:\.\./)?(?:docs/)?images/([\w.-]+\.png)\)")


def pages(root: Path = REPO_ROOT) -> list[Path]:
    """The pages that may show result images: the README and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def shown_images(root: Path = REPO_ROOT) -> set[str]:
    """File names under docs/images/ that the pages link to, the screenshot excepted."""
    names = {name for page in pages(root) for name in _IMAGE_LINK.findall(page.read_text(encoding="utf-8"))}
    return names - set(SCREENSHOT_IMAGES)


def stored_figures(root: Path = REPO_ROOT) -> dict[str, tuple[str, bytes]]:
    """Each named figure in the notebooks' stored outputs: file name -> (notebook, PNG bytes)."""
    import nbformat

    found: dict[str, tuple[str, bytes]] = {}
    for notebook in sorted((root / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(notebook, as_version=4).cells:
            for output in cell.get("outputs", []):
                name = output.get("metadata", {}).get(FIGURE_NAME_KEY)
                if name and "image/png" in output.get("data", {}):
                    found[f"{name}.png"] = (notebook.name, base64.b64decode(output["data"]["image/png"]))
    return found


def image_problems(root: Path = REPO_ROOT) -> list[str]:
    """What is wrong with the shown images: not stored by any notebook, missing, or different bytes."""
    figures = stored_figures(root)
    problems = []
    for name in sorted(shown_images(root)):
        if name not in figures:
            problems.append(f"{name}: no notebook's stored outputs show a figure saved under this name")
        elif not (root / "docs" / "images" / name).is_file():
            problems.append(f"{name}: missing from docs/images/")
        elif (root / "docs" / "images" / name).read_bytes() != figures[name][1]:
            problems.append(f"{name}: differs from the figure stored in {figures[name][0]}")
    return problems


def export_images(root: Path = REPO_ROOT) -> list[Path]:
    """Write every shown image from the notebooks' stored outputs into docs/images/; return the files written."""
    figures = stored_figures(root)
    written = []
    for name in sorted(shown_images(root) & set(figures)):
        path = root / "docs" / "images" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != figures[name][1]:
            path.write_bytes(figures[name][1])
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    return write_then_check(argv, "python -m maintainers.readme_images", __doc__.split("\n\n")[0],
                            export_images, image_problems)


if __name__ == "__main__":
    sys.exit(main())
