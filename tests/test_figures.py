"""save_figure writes where SPECDEC_FIGURES_DIR points, and refuses paths."""
from __future__ import annotations

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from utils.figures import save_figure  # noqa: E402


def test_figure_lands_in_the_configured_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPECDEC_FIGURES_DIR", str(tmp_path / "images"))
    figure, axis = plt.subplots()
    axis.plot([1, 2], [3, 4])
    path = save_figure(figure, "speedup")
    assert path == (tmp_path / "images" / "speedup.png").resolve()
    assert path.read_bytes().startswith(b"\x89PNG")


def test_default_folder_is_the_build_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("SPECDEC_FIGURES_DIR", raising=False)
    monkeypatch.setenv("SPECDEC_BUILD_DIR", str(tmp_path))
    figure, _ = plt.subplots()
    assert save_figure(figure, "x.png").parent == (tmp_path / "figures").resolve()


def test_names_with_folders_are_refused() -> None:
    figure, _ = plt.subplots()
    with pytest.raises(ValueError, match="plain file name"):
        save_figure(figure, "../escape")
