"""Tests for utils.models.tokenizer_mismatch_demo's parts that need no model: cutting a BPE merge list, and linking
(or, where a link is impossible, copying) the files the mismatched copy shares with its source.

(tests/test_model_check.py builds a mismatched draft of the offline pair and checks that the pair is refused.)
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from utils.models import tokenizer_mismatch_demo as demo
from utils.models.tokenizer_mismatch_demo import truncated_merges_tokenizer_json


def bpe_document(merges: list) -> dict:
    return {"version": "1.0", "added_tokens": [{"id": 0, "content": "<s>"}],
            "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": merges}}


@pytest.mark.parametrize("fraction, kept", [(0.5, 2), (0.6, 2), (0.75, 3), (1.0, 4), (0.0, 0)])
def test_the_first_part_of_the_merges_is_kept(fraction: float, kept: int) -> None:
    merges = [["a", "b"], ["ab", "c"], ["c", "d"], ["abc", "d"]]
    changed = truncated_merges_tokenizer_json(bpe_document(merges), fraction)
    assert changed["model"]["merges"] == merges[:kept]  # rounded down: never more merges than asked for


def test_everything_but_the_merges_is_kept_and_the_input_is_not_changed() -> None:
    document = bpe_document(["a b", "ab c"])
    changed = truncated_merges_tokenizer_json(document, 0.5)
    assert document["model"]["merges"] == ["a b", "ab c"]
    assert {key: value for key, value in changed["model"].items() if key != "merges"} == \
        {key: value for key, value in document["model"].items() if key != "merges"}
    assert changed["added_tokens"] == document["added_tokens"] and changed["added_tokens"] is not \
        document["added_tokens"]


def test_only_bpe_tokenizers_are_cut() -> None:
    with pytest.raises(ValueError, match="Only BPE tokenizers can be truncated, this one is 'Unigram'"):
        truncated_merges_tokenizer_json({"model": {"type": "Unigram", "vocab": []}}, 0.5)
    with pytest.raises(ValueError, match="this one is 'None'"):
        truncated_merges_tokenizer_json({}, 0.5)


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_the_fraction_kept_lies_between_zero_and_one(fraction: float) -> None:
    with pytest.raises(ValueError, match=f"kept_merges_fraction must be between 0 and 1, got {fraction}"):
        truncated_merges_tokenizer_json(bpe_document([]), fraction)


def test_shared_files_are_hard_linked(tmp_path: Path) -> None:
    source, destination = tmp_path / "weights.bin", tmp_path / "copy.bin"
    source.write_bytes(b"weights")
    assert demo._link_or_copy(str(source), str(destination)) == str(destination)
    assert os.path.samefile(source, destination) and source.stat().st_nlink == 2


def test_a_file_that_cannot_be_linked_is_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(source: str, destination: str) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", refuse)
    source, destination = tmp_path / "weights.bin", tmp_path / "copy.bin"
    source.write_bytes(b"weights")
    demo._link_or_copy(str(source), str(destination))
    assert destination.read_bytes() == b"weights" and not os.path.samefile(source, destination)
