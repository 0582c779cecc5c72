"""utils.result_files: save_figure writes where SPECDEC_FIGURES_DIR points and refuses paths; write_json."""
from __future__ import annotations

import json
from dataclasses import dataclass

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from utils.result_files import save_figure, write_json  # noqa: E402


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


@dataclass
class Point:
    x: int
    y: int


def test_write_json_creates_the_folder_and_writes_dataclasses_and_numpy(tmp_path) -> None:
    import numpy as np

    path = write_json(tmp_path / "deep" / "data.json", {"point": Point(1, 2), "values": np.arange(3)})
    assert json.loads(path.read_text(encoding="utf-8")) == {"point": {"x": 1, "y": 2}, "values": [0, 1, 2]}
    with pytest.raises(TypeError, match="Cannot write"):
        write_json(tmp_path / "set.json", {1, 2})
    assert json.loads(write_json(tmp_path / "str.json", {1}, default=sorted).read_text()) == [1]
