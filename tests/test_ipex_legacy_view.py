"""Tests for utils.selfspec.ipex_legacy_view on hand-made folders and documents: the cases the translation leaves
alone, the files the view links, and a view made again after the source changed.

(tests/test_ipex_self_speculation.py covers the main translations and a view of the real offline folder.)
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from utils.selfspec.ipex_legacy_view import (
    LegacyViewError,
    check_hf_folder,
    legacy_config,
    legacy_model_view,
    legacy_tokenizer_config,
    legacy_tokenizer_json,
)


def hf_folder(folder: Path, weights: str = "model.safetensors", template: str | None = None) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"rope_theta": 10000.0, "torch_dtype": "bfloat16"}))
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {"a": 0}}}))
    (folder / weights).write_bytes(b"weights")
    if template is not None:
        (folder / "chat_template.jinja").write_text(template)
    return folder


def test_a_config_transformers_437_already_reads_is_left_as_it_is() -> None:
    config = {"rope_theta": 10000.0, "torch_dtype": "float16", "dtype": "float32", "hidden_size": 8}
    assert legacy_config(config) == config


def test_a_scaled_rope_with_an_old_style_rope_scaling_entry_is_accepted() -> None:
    config = {"rope_parameters": {"rope_type": "linear", "rope_theta": 5e5},
              "rope_scaling": {"type": "linear", "factor": 2.0}}
    fixed = legacy_config(config)
    assert fixed["rope_theta"] == 5e5 and fixed["rope_scaling"] == config["rope_scaling"]


def test_a_tokenizer_that_is_not_bpe_is_copied_unchanged() -> None:
    tokenizer = {"model": {"type": "Unigram", "vocab": [["a", -1.0]], "ignore_merges": True}}
    fixed = legacy_tokenizer_json(tokenizer)
    assert fixed == tokenizer and fixed is not tokenizer


def test_an_inline_chat_template_is_kept_over_the_file() -> None:
    fixed = legacy_tokenizer_config({"chat_template": "INLINE", "model_input_names": ["input_ids", "token_type_ids"]},
                                    "FROM FILE")
    assert fixed["chat_template"] == "INLINE" and fixed["model_input_names"] == ["input_ids", "attention_mask"]
    assert "chat_template" not in legacy_tokenizer_config({}, None)


def test_pytorch_bin_weights_are_enough(tmp_path: Path) -> None:
    folder = hf_folder(tmp_path / "hf", weights="pytorch_model.bin")
    assert check_hf_folder(str(folder)) == folder


def test_an_incomplete_folder_names_everything_it_lacks(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(LegacyViewError, match=r"incomplete \(missing tokenizer.json, \*.safetensors\)"):
        check_hf_folder(folder)
    with pytest.raises(LegacyViewError, match="does not exist"):
        check_hf_folder(tmp_path / "missing")


def test_a_view_without_a_tokenizer_config_gets_one_and_links_everything_else(tmp_path: Path) -> None:
    source = hf_folder(tmp_path / "hf", template="TEMPLATE")
    (source / "generation_config.json").write_text("{}")
    (source / ".cache").mkdir()
    view = legacy_model_view(source, tmp_path / "deep" / "view")
    assert sorted(item.name for item in view.iterdir()) == [
        "chat_template.jinja", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
        "tokenizer_config.json"]
    assert json.loads((view / "tokenizer_config.json").read_text()) == {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_input_names": ["input_ids", "attention_mask"],
        "chat_template": "TEMPLATE"}
    linked = [item.name for item in view.iterdir() if item.is_symlink()]
    assert sorted(linked) == ["chat_template.jinja", "generation_config.json", "model.safetensors"]
    assert (view / "model.safetensors").resolve() == (source / "model.safetensors").resolve()


def test_a_view_made_again_follows_the_source(tmp_path: Path) -> None:
    source = hf_folder(tmp_path / "hf")
    view = legacy_model_view(source, tmp_path / "view")
    (view / "model.safetensors").unlink()
    (view / "model.safetensors").write_bytes(b"a stale copy")  # a file where a link belongs
    (source / "config.json").write_text(json.dumps({"rope_parameters": {"rope_theta": 7.0}}))
    legacy_model_view(source, view)
    assert (view / "model.safetensors").is_symlink() and (view / "model.safetensors").read_bytes() == b"weights"
    assert json.loads((view / "config.json").read_text())["rope_theta"] == 7.0


def test_a_file_where_the_folder_should_be_is_named_as_such(tmp_path: Path) -> None:
    blocker = tmp_path / "model"
    blocker.write_text("not a folder")
    with pytest.raises(LegacyViewError, match="is a file, not a folder"):
        check_hf_folder(blocker)


def test_a_link_to_a_file_the_source_no_longer_has_is_removed(tmp_path: Path) -> None:
    source = hf_folder(tmp_path / "hf")
    (source / "generation_config.json").write_text("{}")
    view = legacy_model_view(source, tmp_path / "view")
    (source / "generation_config.json").unlink()
    legacy_model_view(source, view)
    assert not (view / "generation_config.json").is_symlink()
    assert (view / "model.safetensors").is_symlink()
