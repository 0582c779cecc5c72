"""Stage 2b of notebook 06's draft: distillation training in torch on the main-written data.

`prepare_trained_draft(settings, main)` trains, expands and saves the draft; `load_history` reads what training did.
"""
from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from utils.models.atomic_folder import atomic_folder, is_up_to_date
from utils.training.draft_data import TrainingData, load_training_data
from utils.training.draft_model import build_draft, data_vocabulary, expand_vocabulary, projected_embeddings
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
DRAFT_CODE = ("utils.training.draft_data", "utils.training.draft_model", "utils.training.draft_train")


def draft_batch(data: TrainingData, indices: Sequence[int], local: Any, answers_only: bool = False) -> dict:
    """Samples as a right-padded batch of the draft's ids (`local[token id]`): inputs, attention mask, `labels`
    (-100 where nothing is scored: template, padding, with `answers_only` the user's message) and, with a teacher,
    its top-k at each position (`teacher_ids` -1 outside the draft's vocabulary)."""
    import torch

    rows, length = len(indices), max(len(data.samples[i].token_ids) for i in indices) - 1
    batch = {"input_ids": torch.zeros((rows, length), dtype=torch.int64),
             "attention_mask": torch.zeros((rows, length), dtype=torch.int64),
             "labels": torch.full((rows, length), -100, dtype=torch.int64)}
    if data.teacher_ids is not None:
        k = data.teacher_ids[indices[0]].shape[1]
        batch["teacher_ids"] = torch.full((rows, length, k), -1, dtype=torch.int64)
        batch["teacher_logprobs"] = torch.zeros((rows, length, k))
    for row, index in enumerate(indices):
        sample = data.samples[index]
        tokens = local[torch.as_tensor(sample.token_ids, dtype=torch.int64)]
        size, first = len(tokens) - 1, sample.answer_start if answers_only else max(sample.loss_start, 1)
        batch["input_ids"][row, :size] = tokens[:-1]
        batch["attention_mask"][row, :size] = 1
        batch["labels"][row, first - 1:size] = tokens[first:]  # position i predicts token i + 1
        if data.teacher_ids is not None and data.teacher_logprobs is not None:
            batch["teacher_ids"][row, :size] = local[torch.from_numpy(data.teacher_ids[index][:size].astype("int64"))]
            batch["teacher_logprobs"][row, :size] = torch.from_numpy(data.teacher_logprobs[index][:size].astype("float32"))
    return batch


def scored_logits(model: Any, batch: dict) -> Any:
    """The draft's logits at the scored positions only, [positions, vocabulary]."""
    hidden = model.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    return model.lm_head(hidden[batch["labels"] >= 0])


def draft_loss(model: Any, batch: dict, distill_weight: float) -> Any:
    """(1 - w) x cross-entropy on the main's tokens + w x distillation, -sum p_main log p_draft over the main's
    top-k renormalised over the draft's vocabulary (rows with no known token add nothing)."""
    import torch

    scored = batch["labels"] >= 0
    logprobs = torch.log_softmax(scored_logits(model, batch).float(), dim=-1)
    loss = torch.nn.functional.nll_loss(logprobs, batch["labels"][scored])
    if distill_weight > 0 and "teacher_ids" in batch:
        ids = batch["teacher_ids"][scored]
        teacher = torch.softmax(batch["teacher_logprobs"][scored].masked_fill(ids < 0, float("-inf")), dim=-1)
        distillation = -(teacher.nan_to_num(0.0) * logprobs.gather(1, ids.clamp(min=0))).sum(-1).mean()
        loss = (1 - distill_weight) * loss + distill_weight * distillation
    return loss


def split_by_prompt(data: TrainingData, held_out_share: float, seed: int) -> tuple[list[int], list[int]]:
    """Train/held-out sample indices; all answers to one prompt stay on the same side."""
    prompts = sorted({sample.user_text for sample in data.samples})
    random.Random(seed).shuffle(prompts)
    held = set(prompts[:max(1, round(len(prompts) * held_out_share))]) if held_out_share > 0 else set()
    return ([i for i, s in enumerate(data.samples) if s.user_text not in held],
            [i for i, s in enumerate(data.samples) if s.user_text in held])


def length_bucketed_batches(data: TrainingData, indices: Sequence[int], batch_size: int,
                            rng: random.Random) -> list[list[int]]:
    """Shuffled batches of samples of similar length (less padding)."""
    shuffled = list(indices)
    rng.shuffle(shuffled)
    batches = []
    for start in range(0, len(shuffled), batch_size * 8):
        chunk = sorted(shuffled[start:start + batch_size * 8], key=lambda i: len(data.samples[i].token_ids))
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def greedy_agreement(model: Any, data: TrainingData, indices: Sequence[int], local: Any) -> float:
    """Share of the main's greedy answer tokens the draft's top token predicts (teacher-forced): on held-out
    answers, an early estimate of `a`. `local`: token id -> the model's id (`torch.arange` once expanded)."""
    import torch

    greedy = [i for i in indices if data.samples[i].kind == "greedy"]
    hits = total = 0
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(greedy), 16):
            batch = draft_batch(data, greedy[start:start + 16], local, answers_only=True)
            targets = batch["labels"][batch["labels"] >= 0]
            hits += int((scored_logits(model, batch).argmax(-1) == targets).sum())
            total += int(targets.numel())
    model.train(was_training)
    return hits / total if total else float("nan")


def train_draft(draft: Any, data: TrainingData, local: Any, settings: DraftTrainingSettings, train: Sequence[int],
                held_out: Sequence[int] = (), evaluations: int = 8, show_progress: bool = True) -> TrainingHistory:
    """Train the (compact) `draft` in place on the samples `train`, its agreement on `held_out` measured
    `evaluations` times; AdamW, warm-up then cosine decay, for `settings.epochs`. Returns the history."""
    import torch
    from tqdm.auto import tqdm

    if not train:
        raise TrainingError("No training samples: generate more data (settings.prompts).")
    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    steps_per_epoch = math.ceil(len(train) / settings.batch_size)
    total_steps = training_steps(steps_per_epoch, settings.epochs)
    optimizer = torch.optim.AdamW(draft.parameters(), lr=settings.learning_rate, betas=(0.9, 0.95),
                                  weight_decay=0.01)
    history = TrainingHistory(total_steps=total_steps, details={
        "train_samples": len(train), "held_out_samples": len(held_out),
        "train_tokens": sum(len(data.samples[i].token_ids) - max(data.samples[i].loss_start, 1) for i in train)})
    evaluate_at = {round(total_steps * (i + 1) / evaluations) for i in range(evaluations)}
    batches: list[list[int]] = []
    started = time.perf_counter()
    draft.train()
    for step in tqdm(range(total_steps), desc="training the draft", unit="step", disable=not show_progress):
        batches = batches or length_bucketed_batches(data, train, settings.batch_size, rng)
        batch = draft_batch(data, batches.pop(), local)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, total_steps, settings.learning_rate, settings.warmup_steps)
        loss = draft_loss(draft, batch, settings.distill_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        optimizer.step()
        history.steps.append(step + 1)
        history.loss.append(float(loss.detach()))
        history.tokens_seen += int((batch["labels"] >= 0).sum())
        if held_out and step + 1 in evaluate_at:
            history.evaluations.append({"step": step + 1, "agreement": greedy_agreement(draft, data, held_out, local)})
    history.training_seconds = time.perf_counter() - started
    history.epochs_done = total_steps / steps_per_epoch
    draft.eval()
    return history


def load_history(hf_dir: Path) -> TrainingHistory:
    """The training history stored next to a trained draft."""
    return TrainingHistory(**json.loads((Path(hf_dir) / HISTORY_FILE).read_text(encoding="utf-8")))


def prepare_trained_draft(settings: DraftTrainingSettings | str, main: MainModel | str, show_progress: bool = True,
                          threads: int | None = None) -> Path:
    """Train (or reuse) the Hugging Face draft for `settings` and `main` (the data folder must be ready): build it
    from the main, train it over the data's tokens, expand it to the full vocabulary, save it.
    `threads`: torch CPU threads (None: one per core; on a machine shared with busy processes 1 can be much faster)."""
    settings = DraftTrainingSettings.preset(settings)
    main = as_main_model(main)
    require_complete(main.hf, "main model (Hugging Face)")
    folders = draft_folders(settings, main)
    require_complete(folders.data, "training data", "write it first with utils.training.draft_data.prepare_training_data")
    recipe = stage_recipe("draft", settings.draft_settings(), [folders.data, main.hf], ("torch", "transformers"),
                          DRAFT_CODE)
    if is_up_to_date(folders.hf, recipe):
        print(f"Reusing the trained draft in {folders.hf}")
        return folders.hf
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig

    if threads is not None:
        torch.set_num_threads(threads)
    data = load_training_data(folders.data)
    main_config = AutoConfig.from_pretrained(str(main.hf))
    with safe_open(str(main.hf / "model.safetensors"), framework="pt") as weights:
        initial = projected_embeddings(weights.get_tensor("model.embed_tokens.weight"), settings.hidden_size)
    kept = data_vocabulary(data, main_config.vocab_size, settings.restrict_vocabulary)  # the compact draft's tokens
    local = torch.full((main_config.vocab_size,), -1, dtype=torch.int64)
    local[kept] = torch.arange(len(kept))
    train, held_out = split_by_prompt(data, 0.05, settings.seed)
    draft = build_draft(main_config, initial, settings, kept)
    history = train_draft(draft, data, local, settings, train, held_out, show_progress=show_progress)
    expand_vocabulary(draft, kept, initial, settings)
    history.details |= {"subset_size": len(kept), "parameters": sum(p.numel() for p in draft.parameters()),  # tied once
                        # the expanded draft's agreement on the held-out prompts:
                        "final_agreement": greedy_agreement(draft, data, held_out, torch.arange(len(local)))}
    with atomic_folder(folders.hf, recipe) as work:
        draft.save_pretrained(work)
        copy_tokenizer_files(main.hf, work)
        (work / HISTORY_FILE).write_text(json.dumps(history.as_dict(), indent=1), encoding="utf-8")
        (work / VOCABULARY_FILE).write_text(json.dumps(kept.tolist()), encoding="utf-8")
    return folders.hf
