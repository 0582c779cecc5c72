"""Stage 2b of training a draft: training it in torch on the main-written data.

Each step scores, at every token the main model wrote, cross-entropy on the
main's token mixed with distillation on its top-k probabilities
(`draft_loss`), over length-bucketed batches (`make_batch`), with a
learning-rate warm-up and cosine decay (`train_draft`). Held-out greedy
answers measure how often the draft's top token is the main's next token
(`greedy_agreement`, an estimate of the acceptance `a`).

Order of use: after `utils.training.draft_data.prepare_training_data`,
`prepare_trained_draft(settings, main)` builds the draft (`utils.training.draft_model`),
trains it, expands it to the full vocabulary and saves it, with its
`TrainingHistory`, in the Hugging Face folder of `utils.training.draft_settings.draft_folders`;
`utils.training.draft_export` exports it next. Heavy imports are done inside functions.
"""
from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
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
from utils.training.draft_settings import (
    DraftTrainingError,
    DraftTrainingSettings,
    MainModel,
    as_main_model,
    draft_folders,
    draft_recipe,
    get_settings,
    require_complete,
)

HISTORY_FILE = "training_history.json"
VOCABULARY_FILE = "vocabulary_subset.json"  # token ids the training data uses
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


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


def make_batch(data: TrainingData, indices: Sequence[int], subset: VocabularySubset, offsets: Sequence[int],
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
    """(1 - w) * cross-entropy on the main's tokens + w * distillation on the main's top-k probabilities.

    The distillation target is the main's top-k distribution, renormalised over
    the tokens of the draft's (possibly restricted) vocabulary.
    """
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
    """Share of the main's greedy answer tokens that the draft's top token predicts (teacher-forced).

    On held-out greedy answers this estimates the per-token acceptance `a` of
    greedy speculative decoding. `subset` is the model's vocabulary (the data's
    subset for a compact draft, `VocabularySubset.full` for an expanded one).
    """
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
            batch = make_batch(data, greedy[start:start + batch_size], subset, offsets, answers_only=True,
                               with_teacher=False)
            hidden = model.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
            predicted = subset.to_global(model.lm_head(hidden[batch.loss_rows, batch.loss_columns]).argmax(-1))
            hits += int((predicted == batch.target_token_ids).sum())
            total += int(batch.target_token_ids.numel())
    model.train(was_training)
    return hits / total


@dataclass
class TrainingHistory:
    """What training did: loss per step, held-out agreement over time, cost."""

    steps: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    cross_entropy: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_agreement: list[float] = field(default_factory=list)
    parameters: int = 0
    subset_size: int = 0
    train_samples: int = 0
    held_out_samples: int = 0
    train_tokens: int = 0
    tokens_seen: int = 0
    training_seconds: float = 0.0
    stopped_by: str = ""
    final_agreement: float = float("nan")  # the exported (full-vocabulary) draft
    final_agreement_subset: float = float("nan")  # the compact draft, argmax over the data's tokens only

    def as_dict(self) -> dict:
        return asdict(self)


def train_draft(draft: Any, data: TrainingData, subset: VocabularySubset, settings: DraftTrainingSettings,
                held_out: Sequence[int] = (), train: Sequence[int] | None = None, evaluations: int = 8,
                show_progress: bool = True,
                on_evaluation: Callable[[TrainingHistory], None] | None = None) -> TrainingHistory:
    """Train the (compact) `draft` in place on the main-written data; returns the loss curve, agreement and cost.

    Runs `settings.epochs` passes over `train` (default: every sample not held
    out), or stops after `settings.max_training_minutes`. Held-out agreement is
    evaluated `evaluations` times.
    """
    import torch
    from tqdm.auto import tqdm

    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    held_out_set = set(held_out)
    train = [i for i in range(len(data.samples)) if i not in held_out_set] if train is None else list(train)
    if not train:
        raise DraftTrainingError("No training samples: generate more data (settings.prompts).")
    offsets = data.offsets
    train_tokens = sum(len(data.samples[i].token_ids) - max(data.samples[i].loss_start, 1) for i in train)
    total_steps = max(1, round(settings.epochs * math.ceil(len(train) / settings.batch_size)))
    optimizer = torch.optim.AdamW(draft.parameters(), lr=settings.learning_rate, betas=(0.9, 0.95),
                                  weight_decay=0.01)

    budget = settings.max_training_minutes * 60

    def progress_made(step: int, elapsed: float) -> float:
        """How far training is, 0..1, by whichever limit (steps or time) comes first."""
        return min(1.0, max(step / total_steps, elapsed / budget))

    def learning_rate(step: int, elapsed: float) -> float:
        """Linear warm-up, then cosine decay to 10% of the peak by the end of training."""
        if step < settings.warmup_steps:
            return settings.learning_rate * (step + 1) / settings.warmup_steps
        return settings.learning_rate * (0.1 + 0.45 * (1 + math.cos(math.pi * progress_made(step, elapsed))))

    history = TrainingHistory(parameters=parameter_count(draft), subset_size=len(subset), train_samples=len(train),
                              held_out_samples=len(held_out), train_tokens=train_tokens, stopped_by="epochs")
    next_evaluation = 1.0 / max(1, evaluations)
    batches: list[list[int]] = []
    started = time.perf_counter()
    draft.train()
    with tqdm(total=total_steps, desc="training the draft", unit="step", disable=not show_progress) as progress:
        for step in range(total_steps):
            if not batches:
                batches = length_bucketed_batches(data, train, settings.batch_size, rng)
            batch = make_batch(data, batches.pop(), subset, offsets)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, time.perf_counter() - started)
            loss, parts = draft_loss(draft, batch, settings.distill_weight)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
            optimizer.step()
            elapsed = time.perf_counter() - started
            history.steps.append(step + 1)
            history.seconds.append(elapsed)
            history.loss.append(float(loss.detach()))
            history.cross_entropy.append(parts["cross_entropy"])
            history.tokens_seen += int(batch.targets.numel())
            progress.update()
            progress.set_postfix_str(f"loss {history.loss[-1]:.2f}, {history.tokens_seen / elapsed:.0f} tokens/s",
                                     refresh=False)
            last = step + 1 == total_steps
            out_of_time = elapsed > budget
            if held_out and (progress_made(step + 1, elapsed) >= next_evaluation or last or out_of_time):
                next_evaluation += 1.0 / max(1, evaluations)
                history.eval_steps.append(step + 1)
                history.eval_agreement.append(greedy_agreement(draft, data, held_out, subset))
                if on_evaluation:
                    on_evaluation(history)
            if out_of_time and not last:
                history.stopped_by = f"time budget ({settings.max_training_minutes:g} min)"
                break
    history.training_seconds = time.perf_counter() - started
    draft.eval()
    if held_out:
        history.final_agreement_subset = history.eval_agreement[-1]
    return history


def train_full_draft(main_hf_dir: Path, data: TrainingData, settings: DraftTrainingSettings,
                     held_out_share: float = 0.05, show_progress: bool = True,
                     on_evaluation: Callable[[TrainingHistory], None] | None = None,
                     ) -> tuple[Any, TrainingHistory, VocabularySubset]:
    """Build the draft from the main model, train it compactly, expand it to the full vocabulary.

    Returns the full-vocabulary draft (ready to save), the training history
    (whose `final_agreement` is measured on that expanded draft) and the
    vocabulary subset it was trained on.
    """
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
    history.parameters = parameter_count(draft)
    if held_out:
        history.final_agreement = greedy_agreement(draft, data, held_out, VocabularySubset.full(subset.vocab_size))
    return draft, history, subset


def save_draft(draft: Any, destination: Path, main_hf_dir: Path, history: TrainingHistory,
               kept_token_ids: Sequence[int]) -> None:
    """Write the draft as a Hugging Face folder with the main's tokenizer files, history and used tokens."""
    import shutil

    from transformers import GenerationConfig

    draft.generation_config = GenerationConfig(bos_token_id=draft.config.bos_token_id,
                                               eos_token_id=draft.config.eos_token_id,
                                               pad_token_id=draft.config.pad_token_id)
    draft.save_pretrained(destination)
    for name in TOKENIZER_FILES:
        if (Path(main_hf_dir) / name).exists():
            shutil.copy2(Path(main_hf_dir) / name, Path(destination) / name)
    (Path(destination) / HISTORY_FILE).write_text(json.dumps(history.as_dict(), indent=1), encoding="utf-8")
    (Path(destination) / VOCABULARY_FILE).write_text(json.dumps([int(t) for t in kept_token_ids]), encoding="utf-8")


def load_history(hf_dir: Path) -> TrainingHistory:
    """The training history stored next to a trained draft."""
    return TrainingHistory(**json.loads((Path(hf_dir) / HISTORY_FILE).read_text(encoding="utf-8")))


def prepare_trained_draft(settings: DraftTrainingSettings | str, main: MainModel | str, force: bool = False,
                          show_progress: bool = True, on_evaluation: Callable[[TrainingHistory], None] | None = None,
                          threads: int | None = None) -> Path:
    """Train (or reuse) the Hugging Face draft for `settings` and `main`; the data folder must be ready.

    threads: torch CPU threads for training (None keeps torch's default, one per
    core; on a machine shared with other busy processes, 1 can be much faster).
    """
    settings = get_settings(settings)
    main = as_main_model(main)
    require_complete(main.hf, "main model (Hugging Face)")
    folders = draft_folders(settings, main)
    require_complete(folders.data, "training data", "write it first with utils.training.draft_data.prepare_training_data")
    recipe = draft_recipe(settings, folders.data, main.hf)
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
