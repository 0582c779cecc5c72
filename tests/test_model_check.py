"""Tests for utils.models.model_check and utils.models.tokenizer_mismatch_demo on the real offline pair."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from utils.models.atomic_folder import atomic_folder, is_up_to_date, read_marker
from utils.models.model_check import (
    REQUIRED_OPENVINO_FILES,
    ModelFolderError,
    TokenizerMismatchError,
    check_model_folder,
    check_pair,
    is_complete,
    openvino_token_ids,
)
from utils.models.tokenizer_mismatch_demo import TOKENIZER_FILES, make_mismatched_draft, truncated_merges_tokenizer_json

SHORT_TEXT = "Speculative decoding lets a small draft propose tokens."


def copy_without_weights(source: Path, destination: Path, weights: bytes | None) -> Path:
    """Copy a model folder's small files; `openvino_model.bin` is left out (None) or written with `weights`."""
    shutil.copytree(source, destination, ignore=lambda _folder, names: ["openvino_model.bin"])
    if weights is not None:
        (destination / "openvino_model.bin").write_bytes(weights)
    return destination


@pytest.fixture(scope="module")
def mismatched_draft(offline_pair, tmp_path_factory) -> Path:
    """The offline draft with half of its BPE merges dropped from its tokenizer."""
    return make_mismatched_draft(offline_pair.draft, tmp_path_factory.mktemp("mismatch") / "int4-mismatched")


# --- check_model_folder -------------------------------------------------------------------------------------------

def test_prepared_folders_pass(offline_pair) -> None:
    for folder in (offline_pair.main, offline_pair.draft, offline_pair.int8):
        assert check_model_folder(folder) == folder
        assert check_model_folder(str(folder)) == folder  # str accepted too
        assert is_complete(folder)


def test_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model-ov"
    with pytest.raises(ModelFolderError, match="does not exist") as error:
        check_model_folder(missing, "draft model")
    assert "no-such-model-ov" in str(error.value) and "draft model" in str(error.value)
    assert "tutorial.py" in str(error.value)  # says how to get it
    assert "interrupted" not in str(error.value)


def test_missing_folder_with_interrupted_build_says_so(tmp_path: Path) -> None:
    import subprocess
    import sys

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    (tmp_path / f".tmp-no-such-model-ov-{ended.pid}").mkdir()
    with pytest.raises(ModelFolderError, match="interrupted build"):
        check_model_folder(tmp_path / "no-such-model-ov")


@pytest.mark.parametrize("weights", [None, b""], ids=["weights-missing", "weights-empty"])
def test_half_written_folder_is_incomplete(offline_pair, tmp_path: Path, weights: bytes | None) -> None:
    half = copy_without_weights(offline_pair.draft, tmp_path / "half-written-ov", weights)
    assert is_complete(half)  # even with the copied marker, the missing file is what counts
    with pytest.raises(ModelFolderError) as error:
        check_model_folder(half)
    message = str(error.value)
    assert "half-written-ov" in message and "incomplete" in message and "openvino_model.bin" in message
    assert "openvino_tokenizer.xml" not in message  # only what is actually missing is named


def test_every_required_file_is_checked(offline_pair, tmp_path: Path) -> None:
    folder = copy_without_weights(offline_pair.draft, tmp_path / "model-ov", b"\x00" * 16)
    (folder / ".complete").unlink()  # exported by hand: no marker, so no recorded sizes to compare with
    assert check_model_folder(folder) == folder  # all present: accepted (weights are not loaded here)
    for name in REQUIRED_OPENVINO_FILES:
        kept = (folder / name).read_bytes()
        (folder / name).unlink()
        with pytest.raises(ModelFolderError, match=name.replace(".", r"\.")):
            check_model_folder(folder)
        (folder / name).write_bytes(kept)


def damage_weights_cut_in_half(folder: Path) -> str:
    weights = (folder / "openvino_model.bin").read_bytes()
    (folder / "openvino_model.bin").unlink()  # a hard-linked copy: do not write through to the source
    (folder / "openvino_model.bin").write_bytes(weights[:len(weights) // 2])
    return f"openvino_model.bin has {len(weights) // 2:,} bytes instead of {len(weights):,}"


def damage_truncated_xml(folder: Path) -> str:
    text = (folder / "openvino_model.xml").read_bytes()
    (folder / "openvino_model.xml").unlink()
    (folder / "openvino_model.xml").write_bytes(text[:len(text) - 100])
    return f"openvino_model.xml has {len(text) - 100:,} bytes instead of {len(text):,}"


def damage_broken_config(folder: Path) -> str:
    text = (folder / "config.json").read_text()
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(text.replace("{", "[", 1))  # same size, invalid JSON
    return "config.json was modified since it was built"


def link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:  # another file system
        shutil.copy2(source, destination)


def linked_copy(source: Path, destination: Path) -> Path:
    """A copy of a model folder, built through `atomic_folder` so its marker records every file (whatever
    the source's marker holds). Big files are hard links: the damage functions replace files, never write
    through to the source."""
    with atomic_folder(destination, {"copy_of": str(source)}) as work:
        shutil.copytree(source, work, copy_function=link_or_copy, dirs_exist_ok=True,
                        ignore=lambda _folder, names: [".complete"])
    return destination


@pytest.mark.parametrize("damage", [damage_weights_cut_in_half, damage_truncated_xml, damage_broken_config],
                         ids=["bin-cut-in-half", "xml-truncated", "config-broken"])
def test_damaged_folder_is_reported_before_openvino_reads_it(offline_pair, tmp_path: Path, damage) -> None:
    """Issue 15, item 4: such folders passed the check, then OpenVINO failed with "Incorrect weights in bin
    file!" or a JSON error that named no folder."""
    from utils.decoding.pipelines import check_draft_folder, check_main_folder

    folder = linked_copy(offline_pair.draft, tmp_path / "damaged-ov")
    assert check_model_folder(folder) == folder
    what = damage(folder)
    for check in (check_model_folder, check_main_folder, check_draft_folder):
        with pytest.raises(ModelFolderError) as error:
            check(folder)
        message = str(error.value)
        assert f"folder {folder} is damaged: {what}." in message
        assert "Delete it and prepare it again" in message and "python3 tutorial.py lab" in message
        assert "\n" not in message
    assert check_model_folder(offline_pair.draft) == offline_pair.draft  # the source is intact


def test_folder_built_before_sizes_were_recorded_is_accepted(offline_pair, tmp_path: Path) -> None:
    folder = linked_copy(offline_pair.draft, tmp_path / "old-marker-ov")
    marker = json.loads((folder / ".complete").read_text())
    (folder / ".complete").unlink()
    (folder / ".complete").write_text(json.dumps({"recipe": marker["recipe"], "built_at": marker["built_at"]}))
    assert check_model_folder(folder) == folder and is_complete(folder)


def test_missing_folder_being_built_says_wait(tmp_path: Path) -> None:
    import subprocess
    import sys

    # a live process (it waits for input that never comes) whose pid names the temporary folder
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE) as builder:
        try:
            (tmp_path / f".tmp-no-such-model-ov-{builder.pid}").mkdir()
            with pytest.raises(ModelFolderError, match="being built right now by another process"):
                check_model_folder(tmp_path / "no-such-model-ov")
        finally:
            builder.kill()
    with pytest.raises(ModelFolderError, match="interrupted build"):
        check_model_folder(tmp_path / "no-such-model-ov")


def test_gguf_path_is_refused(tmp_path: Path) -> None:
    gguf = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ModelFolderError, match="GGUF") as error:
        check_model_folder(gguf, "draft model")
    assert "optimum-cli export openvino" in str(error.value) and "draft" in str(error.value)


def test_file_instead_of_folder(tmp_path: Path) -> None:
    file = tmp_path / "openvino_model.xml"
    file.write_text("<net/>")
    with pytest.raises(ModelFolderError, match="not a folder") as error:
        check_model_folder(file)
    assert str(file) in str(error.value)


# --- check_pair ---------------------------------------------------------------------------------------------------

def test_offline_pair_shares_its_tokenizer(offline_pair) -> None:
    check_pair(offline_pair.main, offline_pair.draft)
    check_pair(offline_pair.main, offline_pair.int8)
    assert openvino_token_ids(offline_pair.main, SHORT_TEXT) == openvino_token_ids(offline_pair.draft, SHORT_TEXT)


def test_pair_with_missing_draft_names_the_draft(offline_pair, tmp_path: Path) -> None:
    with pytest.raises(ModelFolderError, match="draft model"):
        check_pair(offline_pair.main, tmp_path / "missing-draft")
    with pytest.raises(ModelFolderError, match="main model"):
        check_pair(tmp_path / "missing-main", offline_pair.draft)


def test_mismatched_pair_names_both_folders(offline_pair, mismatched_draft: Path) -> None:
    with pytest.raises(TokenizerMismatchError) as error:
        check_pair(offline_pair.main, mismatched_draft)
    message = str(error.value)
    assert str(offline_pair.main) in message and str(mismatched_draft) in message
    assert "same model family" in message


# --- make_mismatched_draft ----------------------------------------------------------------------------------------

def test_mismatched_draft_keeps_weights_and_changes_only_the_tokenizer(offline_pair, mismatched_draft: Path) -> None:
    assert check_model_folder(mismatched_draft) == mismatched_draft
    assert read_marker(mismatched_draft)["recipe"]["kept_merges"] > 0
    source_weights, copied_weights = offline_pair.draft / "openvino_model.bin", mismatched_draft / "openvino_model.bin"
    assert source_weights.stat().st_size == copied_weights.stat().st_size
    assert (offline_pair.draft / "config.json").read_bytes() == (mismatched_draft / "config.json").read_bytes()
    main_ids = openvino_token_ids(offline_pair.main, SHORT_TEXT)
    draft_ids = openvino_token_ids(mismatched_draft, SHORT_TEXT)
    assert draft_ids != main_ids and len(draft_ids) > len(main_ids)  # fewer merges, more pieces


def test_mismatched_draft_still_round_trips_text(mismatched_draft: Path) -> None:
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(mismatched_draft))
    ids = tokenizer.encode(SHORT_TEXT, add_special_tokens=False).input_ids.data[0].tolist()
    assert tokenizer.decode(ids) == SHORT_TEXT


def test_openvino_genai_refuses_the_mismatched_pair(offline_pair, mismatched_draft: Path) -> None:
    import openvino_genai

    with pytest.raises(RuntimeError, match="[Tt]okenizers for draft and main models are different"):
        openvino_genai.LLMPipeline(str(offline_pair.main), "CPU",
                                   draft_model=openvino_genai.draft_model(str(mismatched_draft), "CPU"))


def test_source_folder_is_untouched(offline_pair, mismatched_draft: Path) -> None:
    # the copy hard-links the weights: the source's tokenizer must still be the original one
    check_pair(offline_pair.main, offline_pair.draft)
    assert is_up_to_date(offline_pair.draft, read_marker(offline_pair.draft)["recipe"])
    for name in TOKENIZER_FILES:
        assert not (offline_pair.draft / name).samefile(mismatched_draft / name)
    assert (offline_pair.draft / "tokenizer.json").read_bytes() != (mismatched_draft / "tokenizer.json").read_bytes()


def test_all_merges_kept_gives_a_matching_pair(offline_pair, tmp_path: Path, monkeypatch) -> None:
    """Control: the same procedure without truncation rebuilds the original tokenizer."""
    control = make_mismatched_draft(offline_pair.draft, tmp_path / "control", kept_merges_fraction=1.0)
    check_pair(offline_pair.main, control)
    # a second call finds it up to date and does no work
    import openvino_tokenizers

    def must_not_convert(*_args, **_kwargs):
        raise AssertionError("rebuilt although up to date")

    monkeypatch.setattr(openvino_tokenizers, "convert_tokenizer", must_not_convert)
    assert make_mismatched_draft(offline_pair.draft, tmp_path / "control", kept_merges_fraction=1.0) == control


def test_bad_arguments_are_refused(offline_pair, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="own folder"):
        make_mismatched_draft(offline_pair.draft, offline_pair.draft)
    with pytest.raises(ModelFolderError):
        make_mismatched_draft(tmp_path / "missing", tmp_path / "out")
    with pytest.raises(ValueError, match="between 0 and 1"):
        truncated_merges_tokenizer_json({"model": {"type": "BPE", "merges": []}}, 1.5)
    with pytest.raises(ValueError, match="Only BPE"):
        truncated_merges_tokenizer_json({"model": {"type": "Unigram"}}, 0.5)
    assert not (tmp_path / "out").exists()


def test_truncation_keeps_the_first_merges_and_leaves_the_input_alone() -> None:
    document = {"model": {"type": "BPE", "merges": [["a", "b"], ["ab", "c"], ["d", "e"], ["f", "g"]]}}
    truncated = truncated_merges_tokenizer_json(document, 0.5)
    assert truncated["model"]["merges"] == [["a", "b"], ["ab", "c"]]
    assert len(document["model"]["merges"]) == 4
