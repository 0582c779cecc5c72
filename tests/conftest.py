"""Shared fixtures: the prepared offline model folders, a throwaway models folder, and a fake pair on disk."""
from __future__ import annotations

import socket
from pathlib import Path
from typing import NamedTuple

import pytest

from utils.models.model_catalogue import (
    SMOLLM2_FP16,
    SMOLLM2_HF_FOLDER,
    SMOLLM2_INT4,
    SMOLLM2_INT8,
    ModelPair,
    ModelSpec,
)
from utils.models.model_check import REQUIRED_OPENVINO_FILES, check_model_folder
from utils.paths import MODELS_DIR_ENV, models_dir


class OfflinePairFolders(NamedTuple):
    """Folders of the offline pair as prepared by the test command (`python3 tutorial.py test`)."""

    main: Path  # fp16, the offline pair's main model
    draft: Path  # int4, its default draft
    int8: Path
    hf: Path  # Hugging Face folder the exports were made from


@pytest.fixture(scope="session")
def offline_pair() -> OfflinePairFolders:
    """The real offline model folders. Never skipped: the test command prepares them before pytest runs."""
    folders = OfflinePairFolders(main=SMOLLM2_FP16.path, draft=SMOLLM2_INT4.path, int8=SMOLLM2_INT8.path,
                                 hf=models_dir() / SMOLLM2_HF_FOLDER)
    for folder in (folders.main, folders.draft, folders.int8):
        check_model_folder(folder)  # a clear error if `python -m maintainers.offline_pair` was not run
    assert (folders.hf / "tokenizer.json").is_file(), f"{folders.hf} is not prepared: run python -m maintainers.offline_pair"
    return folders


@pytest.fixture
def tmp_models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty models folder that `utils.paths.models_dir()` points at for one test."""
    folder = tmp_path / "models"
    folder.mkdir()
    monkeypatch.setenv(MODELS_DIR_ENV, str(folder))
    assert models_dir() == folder.resolve()
    return folder.resolve()


@pytest.fixture
def fake_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModelPair:
    """A pair of placeholder model folders (main, default draft, an "int8" draft); nothing can load them."""
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    monkeypatch.setenv("SPECDEC_BUILD_DIR", str(tmp_path / "build"))
    specs = {}
    for name in ("main", "draft", "draft8"):
        folder = tmp_path / "models" / f"fake-{name}"
        folder.mkdir(parents=True)
        for file_name in REQUIRED_OPENVINO_FILES:
            (folder / file_name).write_text("placeholder")
        (folder / "openvino_model.bin").write_bytes(b"0" * 1000)
        specs[name] = ModelSpec(f"fake-{name}", name, 1e6, "fp16")
    return ModelPair("fake", "fake pair", specs["main"], specs["draft"], needs_network=False,
                     alternative_drafts={"int8": specs["draft8"]})


def closed_local_url() -> str:
    """An http URL on 127.0.0.1 whose port nothing listens on (connections are refused at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def unreachable_hubs(monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the Hugging Face and ModelScope endpoints at a closed local port; return that URL."""
    url = closed_local_url()
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("MODELSCOPE_DOMAIN", url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return url


# --------------------------------------------------------------------------- test tiers

# Every test belongs to exactly one tier (pytest.ini lists them); `python3 tutorial.py test -m unit` is the quick loop.
# "freshness" is only ever given explicitly (a mark): an edit of a utils module makes the committed outputs stale until
# they are refreshed, which the full test command refuses but the quick loop must not.
TIERS = ("unit", "freshness", "models", "standins", "notebooks", "browser")
# Fixtures that stand for the built models: a test that asks for one is in the "models" tier.
MODEL_FIXTURES = {"offline_pair", "prepared_coder_pair"}
# Test files whose tests export or train stand-in models (the article pairs' code paths, the draft pipeline).
STANDIN_FILES = {"test_article_pairs.py", "test_draft_data.py", "test_draft_export.py", "test_draft_train.py"}
BROWSER_FILES = {"test_browser_playground.py"}


def tier_of(item: pytest.Item) -> str:
    """The tier of a collected test: an explicit tier mark wins, then what the test is and what it needs."""
    explicit = [mark.name for mark in item.iter_markers() if mark.name in TIERS]
    if explicit:
        return explicit[0]
    path = Path(str(item.fspath))
    if path.suffix == ".ipynb":
        return "notebooks"
    if path.name in BROWSER_FILES:
        return "browser"
    if path.name in STANDIN_FILES:
        return "standins"
    if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "models"
    return "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item)
        if not item.get_closest_marker(tier):
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture
def no_model_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to build an OpenVINO GenAI pipeline fails the test: input checks must come before loading."""
    import openvino_genai

    def refuse(*args, **kwargs):
        raise AssertionError("a pipeline was loaded; the bad input should have been refused before any loading")

    monkeypatch.setattr(openvino_genai, "LLMPipeline", refuse)
    monkeypatch.setattr(openvino_genai, "draft_model", refuse)
