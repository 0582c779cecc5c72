"""Stage 2b of notebook 06's draft: distillation training in torch on the main-written data.

`prepare_trained_draft(settings, main)` trains, expands and saves the draft; `greedy_agreement` estimates `a`.
"""
from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.models.atomic_folder import atomic_folder, is_up_to_date
from utils.training.draft_data import TrainingData, load_training_data
from utils.training.draft_model import (
    VocabularySubset,
    build_draft,
    data_vocabulary,
    expand_vocabulary,
    parameter_count,
    projected_embeddings,
)
from utils.training.draft_settings import DraftTrainingSettings, draft_folders
from utils.training.scaffold import (
    MainModel,
    TrainingError,
    TrainingHistory,
    as_main_model,
    copy_tokenizer_files,
    learning_rate,
    require_complete,
    stage_recipe,
    training_steps,
)

HISTORY_FILE = "training_history.json"
VOCABULARY_FILE = "vocabulary_subset.json"  # token ids the training data uses
DRAFT_CODE = ("utils.training.draft_model", "utils.training.draft_train")


@dataclass
class TrainingBatch:
    """Padded inputs (local ids) plus the scored positions, their targets and the teacher's top-k."""

    input_ids: Any  # [B, T] local ids
    attention_mask: Any  # [B, T]
    loss_rows: Any  # [N] batch row of each scored position
    loss_columns: Any  # [N] position (the token at column + 1 is predicted)
    targets: Any  # [N] local ids
    target_token_ids: Any  # [N] token ids
    teacher_ids: Any = None  # [N, k] local ids, -1 outside the subset
    teacher_logprobs: Any = None  # [N, k]


def draft_batch(data: TrainingData, indices: Sequence[int], subset: VocabularySubset, offsets: Sequence[int],
               answers_only: bool = False, with_teacher: bool = True) -> TrainingBatch:
    """Collate samples into a right-padded batch; scored positions are the tokens the main model generated."""
    import torch

    length = max(len(data.samples[i].token_ids) for i in indices) - 1
    pad = int(subset.to_local(torch.tensor(data.samples[indices[0]].token_ids[-1])))
    input_ids = torch.full((len(indices), length), pad, dtype=torch.int64)
    mask = torch.zeros((len(indices), length), dtype=torch.int64)
    rows, columns, targets, positions = [], [], [], []
    for row, index in enumerate(indices):
        sample = data.samples[index]
        tokens = torch.as_tensor(sample.token_ids, dtype=torch.int64)
        input_ids[row, :len(tokens) - 1] = tokens[:-1]
        mask[row, :len(tokens) - 1] = 1
        first_target = sample.answer_start if answers_only else max(sample.loss_start, 1)
        scored = torch.arange(first_target - 1, len(tokens) - 1)
        rows.append(torch.full_like(scored, row))
        columns.append(scored)
        targets.append(tokens[scored + 1])
        positions.append(scored + offsets[index])
    target_token_ids = torch.cat(targets)
    valid = mask.bool()
    input_ids[valid] = subset.to_local(input_ids[valid])
    batch = TrainingBatch(input_ids, mask, torch.cat(rows), torch.cat(columns), subset.to_local(target_token_ids),
                          target_token_ids)
    if with_teacher and data.teacher_ids is not None:
        flat = torch.cat(positions).numpy()
        batch.teacher_ids = subset.to_local_or_missing(torch.from_numpy(data.teacher_ids[flat].astype("int64")))
        batch.teacher_logprobs = torch.from_numpy(data.teacher_logprobs[flat].astype("float32"))
    return batch


def draft_loss(model: Any, batch: TrainingBatch, distill_weight: float) -> tuple[Any, dict]:
    """(1 - w) x cross-entropy on the main's tokens + w x distillation on its top-k; returns (loss, parts).
    The teacher's top-k is renormalised over the draft's (possibly restricted) vocabulary."""
    import torch

    hidden = model.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    logprobs = torch.log_softmax(model.lm_head(hidden[batch.loss_rows, batch.loss_columns]).float(), dim=-1)
    cross_entropy = -logprobs.gather(1, batch.targets[:, None]).squeeze(1).mean()
    parts = {"cross_entropy": float(cross_entropy.detach())}
    loss = cross_entropy
    if distill_weight > 0 and batch.teacher_ids is not None:
        known = batch.teacher_ids >= 0
        teacher = torch.softmax(batch.teacher_logprobs.masked_fill(~known, float("-inf")), dim=-1)
        teacher = torch.nan_to_num(teacher, nan=0.0)  # rows with no known token contribute nothing
        draft_on_teacher = logprobs.gather(1, batch.teacher_ids.clamp(min=0))
        distillation = -(teacher * draft_on_teacher).sum(-1).mean()
        parts["distillation"] = float(distillation.detach())
        loss = (1 - distill_weight) * cross_entropy + distill_weight * distillation
    return loss, parts


def split_by_prompt(data: TrainingData, held_out_share: float, seed: int) -> tuple[list[int], list[int]]:
    """Train/held-out sample indices; all answers to one prompt stay on the same side."""
    prompts = sorted({sample.user_text for sample in data.samples})
    random.Random(seed).shuffle(prompts)
    held_out_prompts = set(prompts[:max(1, round(len(prompts) * held_out_share))]) if held_out_share > 0 else set()
    train = [i for i, sample in enumerate(data.samples) if sample.user_text not in held_out_prompts]
    held_out = [i for i, sample in enumerate(data.samples) if sample.user_text in held_out_prompts]
    return train, held_out


def length_bucketed_batches(data: TrainingData, indices: Sequence[int], batch_size: int,
                            rng: random.Random) -> list[list[int]]:
    """Shuffled batches of samples of similar length (less padding)."""
    shuffled = list(indices)
    rng.shuffle(shuffled)
    window = batch_size * 8
    batches = []
    for start in range(0, len(shuffled), window):
        chunk = sorted(shuffled[start:start + window], key=lambda i: len(data.samples[i].token_ids))
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def greedy_agreement(model: Any, data: TrainingData, indices: Sequence[int], subset: VocabularySubset,
                     batch_size: int = 16) -> float:
    """Share of the main's greedy answer tokens the draft's top token predicts (teacher-forced).
    On held-out answers it estimates `a`. `subset`: the model's vocabulary (`VocabularySubset.full` once expanded)."""
    import torch

    greedy = [i for i in indices if data.samples[i].kind == "greedy"]
    if not greedy:
        return float("nan")
    offsets = data.offsets
    hits = total = 0
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(greedy), batch_size):
            batch = draft_batch(data, greedy[start:start + batch_size], subset, offsets, answers_only=True,
                               with_teacher=False)
            hidden = model.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
            predicted = subset.to_global(model.lm_head(hidden[batch.loss_rows, batch.loss_columns]).argmax(-1))
            hits += int((predicted == batch.target_token_ids).sum())
            total += int(batch.target_token_ids.numel())
    model.train(was_training)
    return hits / total


def train_draft(draft: Any, data: TrainingData, subset: VocabularySubset, settings: DraftTrainingSettings,
                held_out: Sequence[int] = (), train: Sequence[int] | None = None, evaluations: int = 8,
                show_progress: bool = True,
                on_evaluation: Callable[[TrainingHistory], None] | None = None) -> TrainingHistory:
    """Train the compact `draft` in place (default `train`: every sample not held out); return its history."""
    import torch
    from tqdm.auto import tqdm

    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    held_out_set = set(held_out)
    train = [i for i in range(len(data.samples)) if i not in held_out_set] if train is None else list(train)
    if not train:
        raise TrainingError("No training samples: generate more data (settings.prompts).")
    offsets = data.offsets
    train_tokens = sum(len(data.samples[i].token_ids) - max(data.samples[i].loss_start, 1) for i in train)
    steps_per_epoch = math.ceil(len(train) / settings.batch_size)
    total_steps = training_steps(steps_per_epoch, settings.epochs)
    optimizer = torch.optim.AdamW(draft.parameters(), lr=settings.learning_rate, betas=(0.9, 0.95),
                                  weight_decay=0.01)
    history = TrainingHistory(total_steps=total_steps, details={
        "parameters": parameter_count(draft), "subset_size": len(subset), "train_samples": len(train),
        "held_out_samples": len(held_out), "train_tokens": train_tokens})
    evaluate_at = {round(total_steps * (i + 1) / max(1, evaluations)) for i in range(max(1, evaluations))}
    batches: list[list[int]] = []
    started = time.perf_counter()
    draft.train()
    for step in tqdm(range(total_steps), desc="training the draft", unit="step", disable=not show_progress):
        if not batches:
            batches = length_bucketed_batches(data, train, settings.batch_size, rng)
        batch = draft_batch(data, batches.pop(), subset, offsets)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, total_steps, settings.learning_rate, settings.warmup_steps)
        loss, _ = draft_loss(draft, batch, settings.distill_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        optimizer.step()
        history.steps.append(step + 1)
        history.loss.append(float(loss.detach()))
        history.tokens_seen += int(batch.targets.numel())
        if held_out and step + 1 in evaluate_at:
            history.evaluations.append({"step": step + 1,
                                        "agreement": greedy_agreement(draft, data, held_out, subset)})
            if on_evaluation:
                on_evaluation(history)
    history.training_seconds = time.perf_counter() - started
    history.epochs_done = total_steps / steps_per_epoch
    draft.eval()
    if held_out:
        history.details["final_agreement_subset"] = history.evaluations[-1]["agreement"]
    return history


def train_full_draft(main_hf_dir: Path, data: TrainingData, settings: DraftTrainingSettings,
                     held_out_share: float = 0.05, show_progress: bool = True,
                     on_evaluation: Callable[[TrainingHistory], None] | None = None,
                     ) -> tuple[Any, TrainingHistory, VocabularySubset]:
    """Build the draft from the main, train it compactly, expand it: (full draft, history, subset).
    The history's `final_agreement` is measured on the expanded draft."""
    from safetensors import safe_open
    from transformers import AutoConfig

    main_config = AutoConfig.from_pretrained(str(main_hf_dir))
    with safe_open(str(Path(main_hf_dir) / "model.safetensors"), framework="pt") as weights:
        main_embeddings = weights.get_tensor("model.embed_tokens.weight").float()
    initial = projected_embeddings(main_embeddings, settings.hidden_size)
    subset = data_vocabulary(data, main_config.vocab_size, settings.restrict_vocabulary)
    train, held_out = split_by_prompt(data, held_out_share, settings.seed)
    compact = build_draft(main_config, initial, settings, subset)
    history = train_draft(compact, data, subset, settings, held_out=held_out, train=train,
                          show_progress=show_progress, on_evaluation=on_evaluation)
    draft = expand_vocabulary(compact, subset, initial, main_config, settings)
    history.details["parameters"] = parameter_count(draft)
    if held_out:
        history.details["final_agreement"] = greedy_agreement(draft, data, held_out,
                                                              VocabularySubset.full(subset.vocab_size))
    return draft, history, subset


def save_draft(draft: Any, destination: Path, main_hf_dir: Path, history: TrainingHistory,
               kept_token_ids: Sequence[int]) -> None:
    """Write the draft as a Hugging Face folder with the main's tokenizer files, history and used tokens."""
    from transformers import GenerationConfig

    draft.generation_config = GenerationConfig(bos_token_id=draft.config.bos_token_id,
                                               eos_token_id=draft.config.eos_token_id,
                                               pad_token_id=draft.config.pad_token_id)
    draft.save_pretrained(destination)
    copy_tokenizer_files(main_hf_dir, destination)
    (Path(destination) / HISTORY_FILE).write_text(json.dumps(history.as_dict(), indent=1), encoding="utf-8")
    (Path(destination) / VOCABULARY_FILE).write_text(json.dumps([int(t) for t in kept_token_ids]), encoding="utf-8")


def load_history(hf_dir: Path) -> TrainingHistory:
    """The training history stored next to a trained draft."""
    return TrainingHistory(**json.loads((Path(hf_dir) / HISTORY_FILE).read_text(encoding="utf-8")))


def prepare_trained_draft(settings: DraftTrainingSettings | str, main: MainModel | str, force: bool = False,
                          show_progress: bool = True, on_evaluation: Callable[[TrainingHistory], None] | None = None,
                          threads: int | None = None) -> Path:
    """Train (or reuse) the Hugging Face draft for `settings` and `main`; the data folder must be ready.
    `threads`: torch CPU threads (None: one per core; on a machine shared with busy processes 1 can be much faster)."""
    settings = DraftTrainingSettings.preset(settings)
    main = as_main_model(main)
    require_complete(main.hf, "main model (Hugging Face)")
    folders = draft_folders(settings, main)
    require_complete(folders.data, "training data", "write it first with utils.training.draft_data.prepare_training_data")
    recipe = stage_recipe("draft", settings.draft_settings(), [folders.data, main.hf], ("torch", "transformers"),
                          DRAFT_CODE)
    if not force and is_up_to_date(folders.hf, recipe):
        print(f"Reusing the trained draft in {folders.hf}")
        return folders.hf
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    data = load_training_data(folders.data)
    draft, history, subset = train_full_draft(main.hf, data, settings, show_progress=show_progress,
                                              on_evaluation=on_evaluation)
    with atomic_folder(folders.hf, recipe) as work:
        save_draft(draft, work, main.hf, history, subset.global_ids.tolist())
    return folders.hf
