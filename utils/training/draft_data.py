"""Stage 1 of notebook 06's draft: the main writes its own training data, plus its top-k next-token choices.

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
                  show_progress: bool = True, batch_tokens: int = 2048) -> tuple[Any, Any, float]:
    """The main's top-k next-token ids (int32) and log-probs (float16), [positions, k] each, and the seconds taken.
    Positions are concatenated in sample order; each sample's last position is included and predicts nothing."""
    import numpy as np
    import openvino as ov
    import torch
    from tqdm.auto import tqdm

    core = ov.Core()
    compiled = core.compile_model(str(Path(main_ov_dir) / "openvino_model.xml"), device)
    request = compiled.create_infer_request()
    ids_per_sample: list[Any] = [None] * len(samples)
    logprobs_per_sample: list[Any] = [None] * len(samples)
    started = time.perf_counter()
    done_tokens = 0
    with tqdm(total=sum(len(s.token_ids) for s in samples), desc="teacher top-k", unit="tok",
              disable=not show_progress) as progress:
        sequences = [sample.token_ids for sample in samples]
        for batch in padded_prefills(request, sequences, length_batches([len(s) for s in sequences], batch_tokens)):
            batch_positions = sum(len(samples[i].token_ids) for i in batch)
            logits = torch.from_numpy(request.get_tensor("logits").data.copy()).float()
            logprobs = torch.log_softmax(logits, dim=-1)
            values, indices = logprobs.topk(top_k, dim=-1)
            for row, index in enumerate(batch):
                size = len(samples[index].token_ids)
                ids_per_sample[index] = indices[row, :size].to(torch.int32).numpy()
                logprobs_per_sample[index] = values[row, :size].to(torch.float16).numpy()
            done_tokens += batch_positions
            progress.update(batch_positions)
            progress.set_postfix_str(f"{done_tokens / (time.perf_counter() - started):.0f} tokens/s")
    return (np.concatenate(ids_per_sample), np.concatenate(logprobs_per_sample), time.perf_counter() - started)


@dataclass
class TrainingData:
    """Samples plus, optionally, the main model's top-k targets (aligned with the concatenated positions)."""

    samples: list[Sample]
    teacher_ids: Any = None
    teacher_logprobs: Any = None
    stats: dict = field(default_factory=dict)

    @property
    def offsets(self) -> list[int]:
        """Start of each sample in the concatenated positions."""
        starts, total = [], 0
        for sample in self.samples:
            starts.append(total)
            total += len(sample.token_ids)
        return starts


def load_training_data(folder: Path) -> TrainingData:
    """Read a data folder written by `prepare_training_data`."""
    import numpy as np

    folder = Path(folder)
    teacher_ids = teacher_logprobs = None
    if (folder / TEACHER_FILE).exists():
        arrays = np.load(folder / TEACHER_FILE)
        teacher_ids, teacher_logprobs = arrays["ids"], arrays["logprobs"]
    return TrainingData(load_samples(folder), teacher_ids, teacher_logprobs, load_stats(folder))


def prepare_training_data(settings: DraftTrainingSettings | str, main: MainModel | str, device: str = "CPU",
                          force: bool = False, show_progress: bool = True) -> Path:
    """Build (or reuse) the folder of training data that `main` writes for `settings`, with the teacher's top-k."""
    settings = DraftTrainingSettings.preset(settings)
    main = as_main_model(main)

    def add_teacher(samples: list[Sample], work: Path, stats: dict) -> None:
        import numpy as np

        if settings.teacher_top_k:
            ids, logprobs, seconds = teacher_top_k(main.openvino, samples, settings.teacher_top_k, device,
                                                   show_progress)
            np.savez(work / TEACHER_FILE, ids=ids, logprobs=logprobs)
            stats["teacher_seconds"] = seconds
        stats["training_tokens"] = sum(len(s.token_ids) - s.loss_start for s in samples)

    return write_samples(settings, main, draft_folders(settings, main).data, device, force, show_progress,
                         code=("utils.training.draft_data",), extra=add_teacher)
