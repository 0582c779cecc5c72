"""Stage 1 of training a draft: the main model writes its own training data, on OpenVINO GenAI.

User prompts are *sampled from the main model* right after the chat
template's user tag (most started with an opener such as "Write a Python
function that", to stay close to the prompts the draft will serve), then the
main model answers each prompt greedily and by sampling. All of it runs
batched on OpenVINO GenAI's continuous-batching pipeline. A teacher-forced
pass stores the main model's top-k next-token probabilities at every
position, for distillation.

Order of use: `prepare_training_data(settings, main)` builds (or reuses) the
data folder of `utils.training.draft_settings.draft_folders`; `load_training_data`
reads it for `utils.training.draft_train`; `example_rows` and
`benchmark_prompts_in_data` describe it. Heavy imports are done inside functions.
"""
from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from utils.models.atomic_folder import atomic_folder, is_up_to_date
from utils.training.draft_settings import (
    DraftTrainingError,
    DraftTrainingSettings,
    MainModel,
    as_main_model,
    data_recipe,
    draft_folders,
    get_settings,
    require_complete,
)
from utils.training.main_batches import (
    data_pipeline,
    generation_config,
    length_batches,
    padded_prefills,
    run_batched,
    text_token_ids,
)

SAMPLES_FILE = "samples.jsonl"
TEACHER_FILE = "teacher_topk.npz"
STATS_FILE = "generation_stats.json"
PLACEHOLDER = "\x00"

# Openers that start a user message of each task type of `utils.decoding.prompts`; "" lets the model choose freely.
# They steer the self-generated data towards the kinds of prompts the draft will serve.
TASK_OPENERS: dict[str, tuple[str, ...]] = {
    "code": ("Write a Python function that", "Write a Python program that", "How do I", "Write a function in Python",
             "Explain this Python code", "Fix the bug in this Python function"),
    "chat": ("", "", "", "Why", "What is", "Give me", "Explain", "How can I", "What are the"),
    "summarisation": ("Summarise the following text", "Summarize this article in a few sentences",
                      "Write a short summary of the following"),
    "input_grounded": ("Rewrite the following", "List every", "Extract the", "Add comments to this Python code",
                       "Correct the grammar in this text"),
}


@dataclass
class Sample:
    """One training sequence written by the main model: chat-templated prompt + answer."""

    sample_id: int
    task: str
    opener: str
    kind: str  # "greedy" or "sampled"
    user_text: str
    token_ids: list[int]  # the whole sequence: template, user message, assistant tag, answer (+ end token)
    loss_start: int  # first position whose token the main model generated (the user message starts here)
    answer_start: int  # first answer token

    @property
    def answer_tokens(self) -> int:
        return len(self.token_ids) - self.answer_start


def chat_template_parts(tokenizer: Any) -> tuple[str, str]:
    """The chat template around one user message: (text before it, text after it up to the answer)."""
    templated = tokenizer.apply_chat_template([{"role": "user", "content": PLACEHOLDER}], add_generation_prompt=True)
    if templated.count(PLACEHOLDER) != 1:
        raise DraftTrainingError("The main model's chat template does not place the user message once; "
                                 "self-generated prompts need a chat model.")
    before, after = templated.split(PLACEHOLDER)
    return before, after


def choose_openers(count: int, steered_share: float, seed: int) -> list[tuple[str, str]]:
    """(task, opener) for each prompt: a share steered by a task opener, the rest free ("chat", "")."""
    rng = random.Random(seed)
    steered = round(count * steered_share)
    tasks = list(TASK_OPENERS)
    chosen = []
    for index in range(count):
        if index < steered:
            task = tasks[index % len(tasks)]
            chosen.append((task, rng.choice(TASK_OPENERS[task])))
        else:
            chosen.append(("chat", ""))
    rng.shuffle(chosen)
    return chosen


def generate_samples(main_ov_dir: Path, settings: DraftTrainingSettings, device: str = "CPU",
                     show_progress: bool = True) -> tuple[list[Sample], dict]:
    """Let the main model write prompts and answers; return the samples and generation statistics."""
    pipeline = data_pipeline(main_ov_dir, settings.concurrent_sequences, device)
    tokenizer = pipeline.get_tokenizer()
    end_id = int(tokenizer.get_eos_token_id())
    before, after = chat_template_parts(tokenizer)
    after_ids = text_token_ids(tokenizer, after)

    # 1. prompts, sampled at temperature 1 after the user tag (and an optional opener)
    openers = choose_openers(settings.prompts, settings.steered_share, settings.seed)
    prompt_requests = []
    for index, (_, opener) in enumerate(openers):
        prompt_config = generation_config(end_id, settings.prompt_max_tokens, 1.0, settings.seed * 100003 + index + 1)
        prompt_requests.append((text_token_ids(tokenizer, before + opener), prompt_config))
    continuations, prompt_seconds = run_batched(pipeline, prompt_requests, "1/2 prompts", show_progress)
    prompt_tokens = sum(len(ids) for ids in continuations)

    prompts = []
    for (task, opener), continuation in zip(openers, continuations, strict=True):
        text = (opener + tokenizer.decode([t for t in continuation if t != end_id], skip_special_tokens=True))
        text = text.strip()
        if len(text) >= 8:
            prompts.append((task, opener, text))

    # 2. answers: one greedy and `sampled_answers` sampled per prompt
    answer_requests, answer_meta = [], []
    for index, (task, opener, text) in enumerate(prompts):
        prefix_ids = text_token_ids(tokenizer, before)
        input_ids = prefix_ids + text_token_ids(tokenizer, text) + after_ids
        for copy in range(1 + settings.sampled_answers):
            sampled = copy > 0
            temperature = settings.sampling_temperature if sampled else None
            answer_requests.append((input_ids, generation_config(end_id, settings.answer_max_tokens, temperature,
                                                                 settings.seed * 100003 + 50000 + index * 7 + copy)))
            answer_meta.append((task, opener, "sampled" if sampled else "greedy", text, input_ids, len(prefix_ids)))
    answers, answer_seconds = run_batched(pipeline, answer_requests, "2/2 answers", show_progress)
    answer_tokens = sum(len(ids) for ids in answers)

    samples = [
        Sample(sample_id=index, task=task, opener=opener, kind=kind, user_text=text,
               token_ids=list(input_ids) + answer, loss_start=loss_start, answer_start=len(input_ids))
        for index, ((task, opener, kind, text, input_ids, loss_start), answer)
        in enumerate(zip(answer_meta, answers, strict=True))
        if answer
    ]
    stats = {
        "prompt_requests": len(prompt_requests), "prompts_kept": len(prompts), "samples": len(samples),
        "prompt_tokens_generated": prompt_tokens, "prompt_seconds": prompt_seconds,
        "answer_tokens_generated": answer_tokens, "answer_seconds": answer_seconds,
        "tokens_generated": prompt_tokens + answer_tokens,
        "generation_seconds": prompt_seconds + answer_seconds,
        "tokens_per_second": (prompt_tokens + answer_tokens) / max(prompt_seconds + answer_seconds, 1e-9),
        "concurrent_sequences": settings.concurrent_sequences, "device": device,
        "training_tokens": sum(len(s.token_ids) - s.loss_start for s in samples),
    }
    return samples, stats


def teacher_top_k(main_ov_dir: Path, samples: Sequence[Sample], top_k: int, device: str = "CPU",
                  show_progress: bool = True, batch_tokens: int = 2048) -> tuple[Any, Any, float]:
    """The main model's top-k next-token ids and log-probabilities at every position of every sample.

    One teacher-forced pass of the main model's OpenVINO IR per batch of
    sequences (a prefill computes the logits at every position at once).
    Returns (ids int32 [positions, k], log-probs float16 [positions, k], seconds),
    positions concatenated in sample order (sample i's position j predicts its token j + 1;
    the last position of each sample is included and predicts nothing).
    """
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


def save_samples(samples: Sequence[Sample], path: Path) -> None:
    with Path(path).open("w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps(asdict(sample), ensure_ascii=False) + "\n")


def load_samples(path: Path) -> list[Sample]:
    with Path(path).open(encoding="utf-8") as handle:
        return [Sample(**json.loads(line)) for line in handle if line.strip()]


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
    samples = load_samples(folder / SAMPLES_FILE)
    stats = json.loads((folder / STATS_FILE).read_text(encoding="utf-8"))
    teacher_ids = teacher_logprobs = None
    if (folder / TEACHER_FILE).exists():
        arrays = np.load(folder / TEACHER_FILE)
        teacher_ids, teacher_logprobs = arrays["ids"], arrays["logprobs"]
    return TrainingData(samples, teacher_ids, teacher_logprobs, stats)


def prepare_training_data(settings: DraftTrainingSettings | str, main: MainModel | str, device: str = "CPU",
                          force: bool = False, show_progress: bool = True) -> Path:
    """Build (or reuse) the folder of training data that `main` writes for `settings`."""
    settings = get_settings(settings)
    main = as_main_model(main)
    require_complete(main.openvino, "main model (OpenVINO)")
    folder = draft_folders(settings, main).data
    recipe = data_recipe(settings, main.openvino)
    if not force and is_up_to_date(folder, recipe):
        print(f"Reusing the training data in {folder}")
        return folder
    import numpy as np

    samples, stats = generate_samples(main.openvino, settings, device, show_progress)
    with atomic_folder(folder, recipe) as work:
        save_samples(samples, work / SAMPLES_FILE)
        if settings.teacher_top_k:
            ids, logprobs, seconds = teacher_top_k(main.openvino, samples, settings.teacher_top_k, device,
                                                   show_progress)
            np.savez(work / TEACHER_FILE, ids=ids, logprobs=logprobs)
            stats["teacher_seconds"] = seconds
        (work / STATS_FILE).write_text(json.dumps(stats, indent=2), encoding="utf-8")
    return folder


# --------------------------------------------------------------------------- describing the data


def example_rows(data: TrainingData, per_task: int = 2, width: int = 110) -> list[dict]:
    """A few self-written prompts and greedy answers per task type, shortened, for display."""
    rows: list[dict] = []
    shown: dict[str, int] = {}
    for sample in data.samples:
        if sample.kind != "greedy" or shown.get(sample.task, 0) >= per_task:
            continue
        shown[sample.task] = shown.get(sample.task, 0) + 1
        rows.append({"task": sample.task, "opener": sample.opener or "(free)",
                     "prompt written by the main": _shorten(sample.user_text, width),
                     "answer tokens": sample.answer_tokens})
    return rows


def _shorten(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def benchmark_prompts_in_data(data: TrainingData, prompts: Sequence[Any]) -> list[str]:
    """Ids of benchmark prompts whose text appears among the training prompts (should be none: held out)."""
    written = {" ".join(sample.user_text.split()) for sample in data.samples}
    return [prompt.id for prompt in prompts if " ".join(prompt.text.split()) in written]

