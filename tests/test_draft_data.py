"""Tests for utils.training.draft_data without the real main model: the teacher's top-k from a tiny OpenVINO graph
whose logits depend only on the current token, reading a data folder back (the teacher split per sample), and what
`prepare_training_data` adds to the folder the scaffold writes.

These tests load no real model and train nothing, so they run in the quick tier: the explicit mark below overrides
the "standins" tier that tests/conftest.py gives this file name.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import openvino as ov
import openvino.opset13 as opset
import pytest
from draft_standins import tiny_settings

from utils.training import draft_data
from utils.training.draft_data import (
    TEACHER_FILE,
    load_training_data,
    prepare_training_data,
    teacher_top_k,
)
from utils.training.scaffold import MainModel, Sample, save_samples

pytestmark = pytest.mark.unit

VOCAB = 9
TABLE = np.random.default_rng(3).standard_normal((VOCAB, VOCAB)).astype(np.float32)  # logits of the next token


def sample(index: int, token_ids: list[int], loss_start: int = 1) -> Sample:
    return Sample(sample_id=index, task="chat", opener="", kind="greedy", user_text=f"prompt {index}",
                  token_ids=token_ids, loss_start=loss_start, answer_start=loss_start + 1)


@pytest.fixture
def lookup_main(tmp_path: Path) -> Path:
    """An OpenVINO folder whose "main model" reads the inputs a stateful LLM takes and answers TABLE[token]."""
    inputs = {"input_ids": ov.Type.i64, "attention_mask": ov.Type.i64, "position_ids": ov.Type.i64}
    parameters = [opset.parameter([-1, -1], kind, name=name) for name, kind in inputs.items()]
    parameters.append(opset.parameter([-1], ov.Type.i32, name="beam_idx"))
    for parameter in parameters:
        parameter.output(0).get_tensor().set_names({parameter.get_friendly_name()})
    logits = opset.gather(opset.constant(TABLE), parameters[0], opset.constant(np.int64(0)))
    logits.output(0).get_tensor().set_names({"logits"})
    folder = tmp_path / "lookup-main"
    folder.mkdir()
    ov.save_model(ov.Model([opset.result(logits)], parameters, "lookup"), folder / "openvino_model.xml",
                  compress_to_fp16=False)
    return folder


def expected_top_k(token_ids: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top-k ids and log-probabilities of TABLE's row for each token, computed here with NumPy."""
    rows = TABLE[token_ids].astype(np.float64)
    logprobs = rows - np.log(np.exp(rows).sum(axis=-1, keepdims=True))
    order = np.argsort(-logprobs, axis=-1)[:, :k]
    return order, np.take_along_axis(logprobs, order, axis=-1)


def test_the_teachers_top_k_covers_every_position_in_sample_order(lookup_main: Path) -> None:
    samples = [sample(0, [1, 2, 3, 4, 5]), sample(1, [6, 7]), sample(2, [8, 0, 3])]
    ids, logprobs = teacher_top_k(lookup_main, samples, top_k=3, show_progress=False, batch_tokens=6)
    positions = [token for item in samples for token in item.token_ids]
    expected_ids, expected_logprobs = expected_top_k(positions, 3)
    assert ids.shape == (len(positions), 3) and ids.dtype == np.int32 and logprobs.dtype == np.float16
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(logprobs.astype(np.float64), expected_logprobs, atol=2e-3)


def test_padding_and_batching_do_not_change_the_teacher(lookup_main: Path) -> None:
    samples = [sample(0, [4, 4, 1, 2, 6, 6, 0]), sample(1, [3]), sample(2, [5, 8])]
    alone = teacher_top_k(lookup_main, samples, top_k=2, show_progress=False, batch_tokens=1)
    together = teacher_top_k(lookup_main, samples, top_k=2, show_progress=False, batch_tokens=1000)
    np.testing.assert_array_equal(alone[0], together[0])
    np.testing.assert_array_equal(alone[1], together[1])


def test_a_data_folder_reads_back_with_and_without_the_teacher(tmp_path: Path) -> None:
    samples = [sample(0, [1, 2, 3]), sample(1, [4, 5], loss_start=0)]
    save_samples(samples, tmp_path, {"tokens_generated": 5})
    plain = load_training_data(tmp_path)
    assert plain.samples == samples and plain.stats == {"tokens_generated": 5}
    assert plain.teacher_ids is None and plain.teacher_logprobs is None
    ids = np.arange(10, dtype=np.int32).reshape(5, 2)
    logprobs = -np.ones((5, 2), dtype=np.float16)
    np.savez(tmp_path / TEACHER_FILE, ids=ids, logprobs=logprobs)
    with_teacher = load_training_data(tmp_path)  # one [length, k] array per sample, in sample order
    assert [len(part) for part in with_teacher.teacher_ids] == [len(item.token_ids) for item in samples]
    np.testing.assert_array_equal(np.concatenate(with_teacher.teacher_ids), ids)
    assert all(part.dtype == np.float16 for part in with_teacher.teacher_logprobs)


class ScaffoldRecorder:
    """Stands in for `scaffold.write_samples`: runs the `extra` step on given samples in a work folder."""

    def __init__(self, work: Path, samples: list[Sample]) -> None:
        self.work, self.samples = work, samples
        self.calls: list[dict[str, Any]] = []
        self.stats: dict = {}

    def __call__(self, settings, main, folder, device, show_progress, code, extra) -> Path:
        self.calls.append({"settings": settings, "main": main, "folder": folder, "device": device, "code": code})
        extra(self.samples, self.work, self.stats)
        return folder


def test_preparing_the_data_adds_the_teachers_top_k_and_counts_the_scored_tokens(
        tmp_path: Path, tmp_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    samples = [sample(0, [1, 2, 3, 4], loss_start=1), sample(1, [5, 6, 7], loss_start=2)]
    writer = ScaffoldRecorder(tmp_path, samples)
    teacher_calls: list[tuple] = []

    def fake_teacher(folder: Path, given: list[Sample], top_k: int, device: str, show_progress: bool) -> tuple:
        teacher_calls.append((folder, given, top_k, device))
        return np.zeros((7, top_k), np.int32), np.zeros((7, top_k), np.float16)

    monkeypatch.setattr(draft_data, "write_samples", writer)
    monkeypatch.setattr(draft_data, "teacher_top_k", fake_teacher)
    main = MainModel(tmp_models_dir / "main-ov", tmp_models_dir / "smollm2-135m-instruct-hf")
    settings = tiny_settings(teacher_top_k=4)
    folder = prepare_training_data(settings, main, device="GPU", show_progress=False)
    assert folder == tmp_models_dir / "smollm2-135m-selfdraft-tiny-data"
    assert writer.calls == [{"settings": settings, "main": main, "folder": folder, "device": "GPU",
                             "code": ("utils.training.draft_data",)}]
    assert teacher_calls == [(main.openvino, samples, 4, "GPU")]
    with np.load(tmp_path / TEACHER_FILE) as saved:
        assert saved["ids"].shape == (7, 4)
    assert writer.stats["teacher_seconds"] >= 0 and writer.stats["training_tokens"] == (4 - 1) + (3 - 2)
    json.dumps(writer.stats)  # the stats file is JSON


def test_without_distillation_no_teacher_runs(tmp_path: Path, tmp_models_dir: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    writer = ScaffoldRecorder(tmp_path, [sample(0, [1, 2, 3], loss_start=0)])

    def refuse(*arguments: Any) -> tuple:
        raise AssertionError("the teacher ran with teacher_top_k=0")

    monkeypatch.setattr(draft_data, "write_samples", writer)
    monkeypatch.setattr(draft_data, "teacher_top_k", refuse)
    prepare_training_data(tiny_settings(teacher_top_k=0), MainModel(tmp_path / "ov", tmp_path / "main-hf"))
    assert writer.stats == {"training_tokens": 3} and not (tmp_path / TEACHER_FILE).exists()
