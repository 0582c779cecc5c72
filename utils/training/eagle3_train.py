"""Stage 4 of an EAGLE-3 head: training with a training-time unroll ("training-time test", EAGLE-3).

The head's later guesses read its own earlier outputs, so each batch is unrolled `unroll_steps` times; loss =
sum_j step_weight**j x CE_j. Labels outside the draft vocabulary carry no loss but count as misses.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from utils.training.eagle3_head import Eagle3Head
from utils.training.eagle3_hidden import TappedData
from utils.training.eagle3_settings import Eagle3Folders, Eagle3Settings
from utils.training.eagle3_vocab import DraftVocabulary
from utils.training.scaffold import (
    MainModel,
    TrainingError,
    TrainingHistory,
    learning_rate,
    length_batches,
    training_steps,
)


@dataclass
class Batch:
    """One padded batch: fused states, input tokens for every unroll step, labels and masks per step."""

    fused: torch.Tensor  # float32 [B, T, 3H]
    next_tokens: torch.Tensor  # int64 [B, T + steps - 1]
    labels: torch.Tensor  # int64 [steps, B, T], draft ids, -1 = no loss
    counted: torch.Tensor  # bool [steps, B, T]: positions that count in the accuracy (a target exists)
    answer: torch.Tensor  # bool [B, T]: position lies in the answer


def unroll_batch(data: TappedData, samples: list[int], steps: int, target_to_draft: Any) -> Batch:
    """Pad `samples` of `data` into a Batch (right padding; every sequence starts at position 0)."""
    import numpy as np

    lengths = [int(data.offsets[i + 1] - data.offsets[i]) for i in samples]
    longest = max(lengths)
    width = data.hidden.shape[1]
    fused = np.zeros((len(samples), longest, width), dtype=np.float32)
    next_tokens = np.zeros((len(samples), longest + steps - 1), dtype=np.int64)
    labels = np.full((steps, len(samples), longest), -1, dtype=np.int64)
    counted = np.zeros((steps, len(samples), longest), dtype=bool)
    answer = np.zeros((len(samples), longest), dtype=bool)
    for row, (index, size) in enumerate(zip(samples, lengths, strict=True)):
        start = int(data.offsets[index])
        fused[row, :size] = data.hidden[start:start + size]
        tokens = data.tokens[start:start + size]
        targets = data.targets[start:start + size]
        next_tokens[row, :size - 1] = tokens[1:]
        for step in range(steps):
            # position t, step j: input token t + 1 + j, label = main's greedy choice at t + 1 + j
            valid = size - 1 - step
            if valid <= 0:
                continue
            labels[step, row, :valid] = target_to_draft[targets[1 + step:size]]
            counted[step, row, :valid] = True
        begin = int(data.answer_starts[index]) if data.answer_starts is not None else 0
        answer[row, max(begin - 1, 0):size] = True
    return Batch(torch.from_numpy(fused), torch.from_numpy(next_tokens), torch.from_numpy(labels),
                 torch.from_numpy(counted), torch.from_numpy(answer))


def unroll_loss(logits: list[torch.Tensor], labels: torch.Tensor, step_weight: float) -> tuple[torch.Tensor, list[float]]:
    """sum_j step_weight**j x mean cross-entropy of step j (labels -1 ignored); also each step's loss."""
    total = logits[0].new_zeros(())
    per_step = []
    for step, step_logits in enumerate(logits):
        target = labels[step]
        if (target >= 0).any():
            loss = F.cross_entropy(step_logits.reshape(-1, step_logits.shape[-1]), target.reshape(-1),
                                   ignore_index=-1)
        else:
            loss = step_logits.sum() * 0.0
        total = total + (step_weight ** step) * loss
        per_step.append(float(loss.detach()))
    return total, per_step


def split_samples(count: int, validation_share: float, seed: int) -> tuple[list[int], list[int]]:
    """Training and validation sample indices (validation at least 1 sample when there are 2+)."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    held = max(1, round(count * validation_share)) if count > 1 and validation_share > 0 else 0
    return sorted(order[held:]), sorted(order[:held])


@torch.no_grad()
def evaluate_accuracy(head: Eagle3Head, data: TappedData, samples: list[int], settings: Eagle3Settings,
                      target_to_draft: Any) -> dict:
    """Top-1 accuracy per unroll step on `samples`, over all positions and answer positions only.
    Step j counts only where steps 0..j-1 were right too: the share of chains that reach j + 1 tokens."""
    head.eval()
    steps = settings.unroll_steps
    right_all = [0] * steps
    right_answer = [0] * steps
    total_all = total_answer = 0
    for group in length_batches([int(data.offsets[i + 1] - data.offsets[i]) for i in samples], settings.batch_tokens):
        batch = unroll_batch(data, [samples[i] for i in group], steps, target_to_draft)
        logits = head.unrolled_logits(batch.fused, batch.next_tokens, steps)
        chain = batch.counted[0].clone()
        base = batch.counted[0]
        for step in range(steps):
            hit = (logits[step].argmax(-1) == batch.labels[step]) & (batch.labels[step] >= 0) & batch.counted[step]
            chain = chain & hit
            right_all[step] += int(chain.sum())
            right_answer[step] += int((chain & batch.answer).sum())
        total_all += int(base.sum())
        total_answer += int((base & batch.answer).sum())
    head.train()
    return {"chain_accuracy": [r / max(total_all, 1) for r in right_all],
            "answer_chain_accuracy": [r / max(total_answer, 1) for r in right_answer],
            "positions": total_all, "answer_positions": total_answer}


def init_from_main(head: Eagle3Head, embedding: torch.Tensor, vocab: DraftVocabulary, output_weight: torch.Tensor
                   | None = None) -> None:
    """Copy the main's embedding in (frozen) and start `lm_head` from the main's output rows of the kept ids."""
    import numpy as np

    if tuple(embedding.shape) != tuple(head.embed_tokens.weight.shape):
        raise TrainingError(f"main embedding {tuple(embedding.shape)} does not match the head's "
                            f"{tuple(head.embed_tokens.weight.shape)}.")
    with torch.no_grad():
        head.embed_tokens.weight.copy_(embedding)
        rows = (output_weight if output_weight is not None else embedding)[torch.from_numpy(vocab.target_ids)]
        head.lm_head.weight.copy_(rows)
        head.d2t.copy_(torch.from_numpy(vocab.d2t()))
        head.t2d.copy_(torch.from_numpy(np.asarray(vocab.t2d())))


def train_head(head: Eagle3Head, data: TappedData, vocab: DraftVocabulary, settings: Eagle3Settings,
               show_progress: bool = True) -> TrainingHistory:
    """Train `head` for `settings.epochs` passes; validation accuracies after every epoch and at the end."""
    from tqdm.auto import tqdm

    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    target_to_draft = vocab.target_to_draft()
    train_ids, val_ids = split_samples(data.samples, settings.validation_share, settings.seed)
    lengths = [int(data.offsets[i + 1] - data.offsets[i]) for i in train_ids]
    groups = [[train_ids[i] for i in g] for g in length_batches(lengths, settings.batch_tokens)]
    total_steps = training_steps(len(groups), settings.epochs)
    trainable = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=settings.learning_rate, weight_decay=0.0, betas=(0.9, 0.95))
    history = TrainingHistory(total_steps=total_steps)

    def validate(step: int) -> None:
        if val_ids:
            history.evaluations.append({"step": step, **evaluate_accuracy(head, data, val_ids, settings,
                                                                          target_to_draft)})

    started = time.perf_counter()
    head.train()
    order: list[list[int]] = []
    for step in tqdm(range(total_steps), desc="training the head", unit="step", disable=not show_progress):
        if not order:
            if step:
                validate(step)
            order = list(groups)
            rng.shuffle(order)
        for param_group in optimizer.param_groups:
            param_group["lr"] = learning_rate(step, total_steps, settings.learning_rate, settings.warmup_steps, 0.05)
        batch = unroll_batch(data, order.pop(), settings.unroll_steps, target_to_draft)
        if settings.answers_only:  # the prompts are the main's samples: noise to learn; the answers are what it serves
            batch.labels[:, ~batch.answer] = -1
        logits = head.unrolled_logits(batch.fused, batch.next_tokens, settings.unroll_steps)
        loss, _ = unroll_loss(logits, batch.labels, settings.step_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        history.tokens_seen += int(batch.counted[0].sum())
        history.steps.append(step + 1)
        history.loss.append(float(loss.detach()))
    history.training_seconds = time.perf_counter() - started
    history.epochs_done = total_steps / max(len(groups), 1)
    validate(total_steps)
    head.eval()
    return history


def end_token_ids(main_hf_dir: Path, main_config: dict) -> list[int]:
    """Every id that ends the main's turn: its config's `eos_token_id` and its generation config's (Qwen has two)."""
    import json

    ids: list[int] = []
    generation_config = Path(main_hf_dir) / "generation_config.json"
    extra = json.loads(generation_config.read_text(encoding="utf-8")) if generation_config.is_file() else {}
    for value in (main_config.get("eos_token_id"), extra.get("eos_token_id")):
        for token in value if isinstance(value, list) else [value] if value is not None else []:
            if int(token) not in ids:
                ids.append(int(token))
    return ids


def train_and_save_head(settings: Eagle3Settings, main: MainModel, folders: Eagle3Folders, recipe: dict,
                        show_progress: bool = True) -> dict:
    """Train a head on `folders.hidden` and save it to `folders.head`; return the training record.
    Keeps every end-of-turn id; `lm_head` starts from the main's output rows (untied lm_head, else the embedding)."""
    from utils.training.eagle3_checks import check_main
    from utils.training.eagle3_folder import save_head_folder
    from utils.training.eagle3_head import load_main_embedding, load_main_output_layer, shape_from_main_config
    from utils.training.eagle3_hidden import load_tapped
    from utils.training.eagle3_vocab import draft_vocabulary

    main_config = check_main(main.hf)
    data = load_tapped(folders.hidden)
    vocab = draft_vocabulary(data.targets, settings.draft_vocab_size, int(main_config["vocab_size"]),
                             end_token_ids(main.hf, main_config))
    torch.manual_seed(settings.seed)
    head = Eagle3Head(shape_from_main_config(main_config, settings.draft_vocab_size, settings.intermediate_size))
    output = load_main_output_layer(main.hf, main_config)
    init_from_main(head, load_main_embedding(main.hf), vocab, output_weight=output)
    history = train_head(head, data, vocab, settings, show_progress=show_progress)
    training = {"positions": int(len(data.tokens)), "samples": data.samples, "vocab_coverage": vocab.coverage,
                "head_parameters": head.parameter_count(),
                "output_rows_from": "embedding" if output is None else "lm_head", **history.as_dict()}
    save_head_folder(head, main.hf, folders.head, recipe, training)
    return training
