"""The images the README and docs show are the notebooks' reference run, byte for byte; quoted speed-ups too."""
from __future__ import annotations

import base64
import re
from pathlib import Path

import nbformat

from maintainers import readme_images
from utils.paths import REPO_ROOT
from utils.result_files import FIGURE_NAME_KEY


def test_every_shown_image_is_a_stored_notebook_output() -> None:
    assert readme_images.shown_images(), "the README shows no result image"
    assert readme_images.image_problems() == []


def fake_repository(root: Path, png: bytes, on_disk: bytes | None) -> None:
    (root / "docs" / "images").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "README.md").write_text("![a](docs/images/02-win.png)\n![shot](docs/images/07-playground.png)\n")
    notebook = nbformat.v4.new_notebook()
    output = nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(png).decode()},
                                    metadata={FIGURE_NAME_KEY: "02-win"})
    notebook.cells.append(nbformat.v4.new_code_cell("save_figure(...)", outputs=[output]))
    nbformat.write(notebook, root / "notebooks" / "02-x.ipynb")
    if on_disk is not None:
        (root / "docs" / "images" / "02-win.png").write_bytes(on_disk)


def test_a_changed_image_is_found_and_export_writes_the_stored_bytes(tmp_path: Path) -> None:
    fake_repository(tmp_path, b"\x89PNG stored", b"\x89PNG older")
    assert readme_images.shown_images(tmp_path) == {"02-win.png"}  # the screenshot is the browser test's
    assert readme_images.image_problems(tmp_path) == ["02-win.png: differs from the figure stored in 02-x.ipynb"]
    assert readme_images.export_images(tmp_path) == [tmp_path / "docs" / "images" / "02-win.png"]
    assert (tmp_path / "docs" / "images" / "02-win.png").read_bytes() == b"\x89PNG stored"
    assert readme_images.image_problems(tmp_path) == []


def test_an_image_no_notebook_stores_is_reported(tmp_path: Path) -> None:
    fake_repository(tmp_path, b"\x89PNG", None)
    (tmp_path / "README.md").write_text("![b](docs/images/05-gone.png)\n")
    assert readme_images.image_problems(tmp_path) == [
        "05-gone.png: no notebook's stored outputs show a figure saved under this name"]


SPEED_UP = re.compile(r"(?<![\w.])(\d+\.\d{2})x\b")


def stored_text() -> str:
    """Every text output of every notebook's reference run."""
    parts = []
    for notebook in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(notebook, as_version=4).cells:
            for output in cell.get("outputs", []):
                parts.append(output.get("text", ""))
                parts.extend(value for mime, value in output.get("data", {}).items() if mime.startswith("text/"))
    return "\n".join(parts)


def test_every_speed_up_the_pages_quote_was_printed_by_the_reference_run() -> None:
    """A speed-up such as '1.27x' in the README or docs/ must appear in some notebook's stored outputs."""
    printed = set(SPEED_UP.findall(stored_text()))
    quoted = {(page.name, value) for page in readme_images.pages()
              for value in SPEED_UP.findall(page.read_text(encoding="utf-8"))}
    unbacked = sorted((page, value) for page, value in quoted if value not in printed)
    assert not unbacked, f"these quoted speed-ups are not in the reference run's outputs: {unbacked}"


def test_the_front_page_reads_in_two_minutes() -> None:
    """At most about 1,000 words; the details live in docs/, which the README links."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.split()) <= 1000, f"README.md has {len(text.split())} words: move details to docs/"
    for page in ("docs/setup.md", "docs/results.md", "docs/troubleshooting.md", "docs/glossary.md"):
        assert f"({page})" in text and (REPO_ROOT / page).is_file(), page
