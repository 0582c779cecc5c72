"""Stage 1 of notebook 06's draft: the scaffold's main-written samples plus the main's top-k next-token choices.

`prepare_training_data(settings, main)` builds or reuses the data folder; `load_training_data` reads it.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.training.draft_settings import DraftTrainingSettings, draft_folders
from utils.training.scaffold import (
    MainModel,
    Sample,
    as_main_model,
    length_batches,
    load_samples,
    load_stats,
    padded_prefills,
    write_samples,
)

TEACHER_FILE = "teacher_topk.npz"


def teacher_top_k(main_ov_dir: Path, samples: Sequence[Sample], top_k: int, device: str = "CPU",
                  show_progress: bool = True, batch_tokens: int = 2048) -> tuple[Any, Any]:
    """The main's top-k next-token ids (int32) and log-probs (float16) at every position, [positions, k] each,
    concatenated in sample order (each sample's last position predicts nothing)."""
    import numpy as np
    import openvino as ov
    import torch
    from tqdm.auto import tqdm

    request = ov.Core().compile_model(str(Path(main_ov_dir) / "openvino_model.xml"), device).create_infer_request()
    sequences = [sample.token_ids for sample in samples]
    batches = length_batches([len(sequence) for sequence in sequences], batch_tokens)
    ids: list[Any] = [None] * len(samples)
    logprobs: list[Any] = [None] * len(samples)
    for batch in tqdm(padded_prefills(request, sequences, batches), total=len(batches), desc="teacher top-k",
                      disable=not show_progress):
        logits = torch.from_numpy(request.get_tensor("logits").data.copy()).float()
        values, indices = torch.log_softmax(logits, dim=-1).topk(top_k, dim=-1)
        for row, index in enumerate(batch):
            size = len(sequences[index])
            ids[index] = indices[row, :size].to(torch.int32).numpy()
            logprobs[index] = values[row, :size].to(torch.float16).numpy()
    return np.concatenate(ids), np.concatenate(logprobs)


@dataclass
class TrainingData:
    """The samples and, with distillation, the main's top-k ids and log-probs per sample ([its length, k] each)."""

    samples: list[Sample]
    teacher_ids: list[Any] | None = None
    teacher_logprobs: list[Any] | None = None
    stats: dict = field(default_factory=dict)


def load_training_data(folder: Path) -> TrainingData:
    """Read a data folder written by `prepare_training_data`."""
    import numpy as np

    folder = Path(folder)
    data = TrainingData(load_samples(folder), stats=load_stats(folder))
    if (folder / TEACHER_FILE).exists():
        starts = np.cumsum([len(sample.token_ids) for sample in data.samples])[:-1]
        with np.load(folder / TEACHER_FILE) as arrays:
            data.teacher_ids, data.teacher_logprobs = np.split(arrays["ids"], starts), np.split(arrays["logprobs"], starts)
    return data


def prepare_training_data(settings: DraftTrainingSettings | str, main: MainModel | str, device: str = "CPU",
                          show_progress: bool = True) -> Path:
    """Build (or reuse) the folder of training data that `main` writes for `settings`, with the teacher's top-k."""
    settings = DraftTrainingSettings.preset(settings)
    main = as_main_model(main)

    def add_teacher(samples: list[Sample], work: Path, stats: dict) -> None:
        import numpy as np

        if settings.teacher_top_k:
            started = time.perf_counter()
            ids, logprobs = teacher_top_k(main.openvino, samples, settings.teacher_top_k, device, show_progress)
            np.savez(work / TEACHER_FILE, ids=ids, logprobs=logprobs)
            stats["teacher_seconds"] = time.perf_counter() - started
        stats["training_tokens"] = sum(len(s.token_ids) - s.loss_start for s in samples)

    return write_samples(settings, main, draft_folders(settings, main).data, device, show_progress=show_progress,
                         code=("utils.training.draft_data",), extra=add_teacher)
