"""Train a draft model for your own main model: FastDraft in miniature (arXiv:2411.11055).

Four stages, each cached in its own folder under `models_dir()` (built
atomically, reused when its recipe - settings plus package versions - matches):

1. **Data** (`prepare_training_data`): the main model writes its own training
   text. User prompts are *sampled from the main model* right after the chat
   template's user tag (most started with an opener such as "Write a Python
   function that", to stay close to the prompts the draft will serve), then the
   main model answers each prompt greedily and by sampling. All of it runs
   batched on OpenVINO GenAI's continuous-batching pipeline. A teacher-forced
   pass stores the main model's top-k next-token probabilities at every
   position, for distillation.
2. **Draft** (`prepare_trained_draft`): a small Llama model with the main's
   tokenizer and vocabulary, embeddings initialised from a projection of the
   main's, trained in torch on that data (cross-entropy on the main's tokens
   mixed with distillation on its top-k probabilities). Training uses only the
   tokens the data contains (a *compact* vocabulary: the softmax runs over
   those), then the trained rows are put back at their token ids.
3. **Export** (`prepare_exported_draft`): `optimum-cli export openvino`, then
4. **Trim**: the exported graph's output layer is cut to the tokens the data
   uses (others get a logit of -1e4), which makes a draft step much cheaper.

`measure_speculation` measures the
result against plain decoding. Heavy imports are done inside functions.
"""
from __future__ import annotations

import importlib.metadata
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from utils.atomic_folder import atomic_folder, is_up_to_date, read_marker
from utils.paths import models_dir

RECIPE_VERSION = 1
MAIN_OV_FOLDER = "smollm2-135m-instruct-fp16-ov"
MAIN_HF_FOLDER = "smollm2-135m-instruct-hf"
SAMPLES_FILE = "samples.jsonl"
TEACHER_FILE = "teacher_topk.npz"
STATS_FILE = "generation_stats.json"
HISTORY_FILE = "training_history.json"
VOCABULARY_FILE = "vocabulary_subset.json"  # token ids the training data uses
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")
PLACEHOLDER = "\x00"

# Openers that start a user message of each task type of `utils.prompts`; "" lets the model choose freely.
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


class DraftTrainingError(ValueError):
    """A setting or an input that cannot work; the message says what to do instead."""


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class DraftTrainingSettings:
    """Everything that decides what draft comes out (and so the folders' recipes).

    Data: `prompts` user prompts sampled from the main model (`prompt_max_tokens`
    each), a share `steered_share` of them started with a task opener; each
    answered greedily and `sampled_answers` times by sampling (`answer_max_tokens`).
    `teacher_top_k` next-token probabilities of the main model are kept per
    position (0 = no distillation). Draft: a Llama model `hidden_size` wide with
    `layers` layers. Training: `epochs` passes over the data (stopped early after
    `max_training_minutes`), `batch_size` sequences per step, learning rate
    `learning_rate`, loss = `distill_weight` * distillation + (1 - it) * cross-entropy.
    """

    name: str = "quick"
    prompts: int = 128
    prompt_max_tokens: int = 48
    steered_share: float = 0.75
    sampled_answers: int = 1
    answer_max_tokens: int = 128
    sampling_temperature: float = 0.8
    concurrent_sequences: int = 32
    teacher_top_k: int = 16
    hidden_size: int = 256
    layers: int = 4
    attention_heads: int = 4
    key_value_heads: int = 2
    intermediate_size: int = 768
    epochs: float = 12.0
    max_training_minutes: float = 4.0
    batch_size: int = 16
    learning_rate: float = 2e-3
    warmup_steps: int = 20
    distill_weight: float = 0.5
    restrict_vocabulary: bool = True
    final_norm_init: float = 1.0
    unused_token_scale: float = 0.25
    draft_weight_format: str = "fp16"
    seed: int = 0

    def __post_init__(self) -> None:
        positive_ints = ("prompts", "prompt_max_tokens", "answer_max_tokens", "concurrent_sequences", "hidden_size",
                         "layers", "attention_heads", "key_value_heads", "intermediate_size", "batch_size")
        for name in positive_ints:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DraftTrainingError(f"{name} must be an integer >= 1, got {value!r}.")
        if self.sampled_answers < 0 or self.teacher_top_k < 0 or self.warmup_steps < 0:
            raise DraftTrainingError("sampled_answers, teacher_top_k and warmup_steps must be >= 0.")
        if not 0.0 <= self.steered_share <= 1.0 or not 0.0 <= self.distill_weight <= 1.0:
            raise DraftTrainingError("steered_share and distill_weight must lie in [0, 1].")
        if self.distill_weight > 0 and self.teacher_top_k == 0:
            raise DraftTrainingError("distill_weight > 0 needs teacher_top_k > 0 (the main's probabilities to "
                                     "distil). Set teacher_top_k, e.g. 16, or distill_weight=0.")
        if self.hidden_size % self.attention_heads:
            raise DraftTrainingError(f"hidden_size {self.hidden_size} must be a multiple of attention_heads "
                                     f"{self.attention_heads}.")
        if self.attention_heads % self.key_value_heads:
            raise DraftTrainingError(f"attention_heads {self.attention_heads} must be a multiple of "
                                     f"key_value_heads {self.key_value_heads}.")
        if self.epochs <= 0 or self.max_training_minutes <= 0 or self.learning_rate <= 0:
            raise DraftTrainingError("epochs, max_training_minutes and learning_rate must be > 0.")
        if self.sampling_temperature <= 0:
            raise DraftTrainingError("sampling_temperature must be > 0.")
        if self.draft_weight_format not in ("fp32", "fp16", "int8"):
            raise DraftTrainingError("draft_weight_format must be fp32, fp16 or int8 (a draft this small gains "
                                     "nothing from int4).")

    def data_settings(self) -> dict:
        """The settings that decide the training data (its folder's recipe)."""
        keys = ("prompts", "prompt_max_tokens", "steered_share", "sampled_answers", "answer_max_tokens",
                "sampling_temperature", "teacher_top_k", "seed")
        return {key: getattr(self, key) for key in keys}

    def draft_settings(self) -> dict:
        """The settings that decide the trained weights, given the data."""
        skip = set(self.data_settings()) | {"name", "concurrent_sequences", "draft_weight_format"}
        # the seed also decides the draft's initial weights and the batch order
        return {key: value for key, value in asdict(self).items() if key not in skip} | {"seed": self.seed}


PRESETS: dict[str, DraftTrainingSettings] = {
    # minutes on 2 cores: ~28k tokens of data, many epochs over them; shows the recipe end to end
    "quick": DraftTrainingSettings(),
    # about an hour on 2 cores: ~10x the data, ~8x the training
    "full": DraftTrainingSettings(name="full", prompts=1600, epochs=6.0, max_training_minutes=30.0),
}


def get_settings(name_or_settings: str | DraftTrainingSettings) -> DraftTrainingSettings:
    """A preset by name ("quick", "full"), or the settings given."""
    if isinstance(name_or_settings, DraftTrainingSettings):
        return name_or_settings
    try:
        return PRESETS[name_or_settings]
    except KeyError:
        raise DraftTrainingError(f"Unknown training size '{name_or_settings}'. Use one of: {', '.join(PRESETS)}, "
                                 "or pass DraftTrainingSettings(...).") from None


def _versions(*packages: str) -> dict[str, str]:
    return {package: importlib.metadata.version(package) for package in packages}


@dataclass(frozen=True)
class DraftFolders:
    """Where each stage of a draft lives."""

    data: Path  # main-written samples and the main's top-k probabilities
    hf: Path  # the trained draft, Hugging Face format
    openvino: Path  # its `optimum-cli export openvino` export (output layer over the whole vocabulary)
    trimmed: Path  # the export with its output layer trimmed to the tokens the data uses (the draft to use)


def draft_folders(settings: DraftTrainingSettings, root: Path | None = None) -> DraftFolders:
    """Folders for the data, the trained Hugging Face draft and its OpenVINO exports."""
    root = models_dir() if root is None else Path(root)
    stem = f"smollm2-135m-selfdraft-{settings.name}"
    return DraftFolders(data=root / f"{stem}-data", hf=root / f"{stem}-hf",
                        openvino=root / f"{stem}-{settings.draft_weight_format}-ov",
                        trimmed=root / f"{stem}-{settings.draft_weight_format}-trimmed-ov")


def data_recipe(settings: DraftTrainingSettings, main_ov_dir: Path) -> dict:
    main_marker = read_marker(main_ov_dir) or {}
    return {"recipe_version": RECIPE_VERSION, "stage": "data", "main": main_ov_dir.name,
            "main_recipe": main_marker.get("recipe"), "settings": settings.data_settings(),
            "versions": _versions("openvino", "openvino-genai", "numpy")}


def draft_recipe(settings: DraftTrainingSettings, data_dir: Path, main_hf_dir: Path) -> dict:
    return {"recipe_version": RECIPE_VERSION, "stage": "draft", "data_recipe": (read_marker(data_dir) or {}).get(
        "recipe"), "main_hf_recipe": (read_marker(main_hf_dir) or {}).get("recipe"),
            "settings": settings.draft_settings(), "versions": _versions("torch", "transformers")}


def export_recipe(settings: DraftTrainingSettings, hf_dir: Path) -> dict:
    return {"recipe_version": RECIPE_VERSION, "stage": "export", "draft_recipe": (read_marker(hf_dir) or {}).get(
        "recipe"), "weight_format": settings.draft_weight_format,
            "versions": _versions("optimum-intel", "openvino", "nncf")}


# --------------------------------------------------------------------------- stage 1: data


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


def _ov_ids(tokenizer: Any, text: str) -> list[int]:
    return [int(token) for token in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]


def _tensor(ids: Sequence[int]) -> Any:
    import numpy as np
    import openvino as ov

    return ov.Tensor(np.asarray([ids], dtype=np.int64))


def run_batched(pipeline: Any, requests: Sequence[tuple[list[int], Any]], description: str,
                show_progress: bool = True) -> tuple[list[list[int]], float]:
    """Generate for every (input ids, GenerationConfig) on a ContinuousBatchingPipeline.

    All requests are queued at once; the pipeline's scheduler runs up to
    `max_num_seqs` of them together. Tokens are streamed from each request's
    handle after every step, so the progress bar shows finished requests and
    the true generation throughput. Returns the generated ids per request and
    the wall time.
    """
    from tqdm.auto import tqdm

    import openvino_genai

    handles = [pipeline.add_request(index, _tensor(ids), config) for index, (ids, config) in enumerate(requests)]
    outputs: list[list[int]] = [[] for _ in handles]
    pending = set(range(len(handles)))
    generated = 0
    started = time.perf_counter()
    running = openvino_genai.GenerationStatus.RUNNING
    with tqdm(total=len(handles), desc=description, unit="req", disable=not show_progress) as progress:
        while pending:
            if pipeline.has_non_finished_requests():
                pipeline.step()
            finished = 0
            for index in list(pending):
                handle = handles[index]
                while handle.can_read():
                    for output in handle.read().values():  # read() hands out the tokens new since the last read
                        outputs[index] += [int(token) for token in output.generated_ids]
                        generated += len(output.generated_ids)
                if handle.get_status() != running and not handle.can_read():
                    pending.discard(index)
                    finished += 1
            if not pipeline.has_non_finished_requests() and pending and not finished:
                break  # nothing left to run: requests that never started (should not happen)
            progress.update(finished)
            progress.set_postfix_str(f"{generated} tokens, {generated / (time.perf_counter() - started):.0f} tokens/s",
                                     refresh=False)
    return outputs, time.perf_counter() - started


def generate_samples(main_ov_dir: Path, settings: DraftTrainingSettings, device: str = "CPU",
                     show_progress: bool = True) -> tuple[list[Sample], dict]:
    """Let the main model write prompts and answers; return the samples and generation statistics."""
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = 1  # GB of KV cache, reserved once: plenty for the concurrent sequences, and bounded
    scheduler.max_num_seqs = settings.concurrent_sequences
    scheduler.max_num_batched_tokens = 2048
    scheduler.dynamic_split_fuse = True
    pipeline = openvino_genai.ContinuousBatchingPipeline(str(main_ov_dir), scheduler, device, {})
    tokenizer = pipeline.get_tokenizer()
    end_id = int(tokenizer.get_eos_token_id())
    before, after = chat_template_parts(tokenizer)
    after_ids = _ov_ids(tokenizer, after)

    def config(sampled: bool, max_new_tokens: int, seed: int) -> Any:
        generation = openvino_genai.GenerationConfig()
        generation.max_new_tokens = max_new_tokens
        generation.eos_token_id = end_id
        generation.stop_token_ids = {end_id}
        generation.do_sample = sampled
        if sampled:
            generation.temperature = settings.sampling_temperature
            generation.top_p = 0.95
            generation.rng_seed = seed
        return generation

    # 1. prompts, sampled at temperature 1 after the user tag (and an optional opener)
    openers = choose_openers(settings.prompts, settings.steered_share, settings.seed)
    prompt_requests = []
    for index, (_, opener) in enumerate(openers):
        prompt_config = config(True, settings.prompt_max_tokens, settings.seed * 100003 + index + 1)
        prompt_config.temperature = 1.0
        prompt_requests.append((_ov_ids(tokenizer, before + opener), prompt_config))
    continuations, prompt_seconds = run_batched(pipeline, prompt_requests, "1/2 prompts", show_progress)
    prompt_tokens = sum(len(ids) for ids in continuations)

    prompts = []
    for (task, opener), continuation in zip(openers, continuations):
        text = (opener + tokenizer.decode([t for t in continuation if t != end_id], skip_special_tokens=True))
        text = text.strip()
        if len(text) >= 8:
            prompts.append((task, opener, text))

    # 2. answers: one greedy and `sampled_answers` sampled per prompt
    answer_requests, answer_meta = [], []
    for index, (task, opener, text) in enumerate(prompts):
        prefix_ids = _ov_ids(tokenizer, before)
        input_ids = prefix_ids + _ov_ids(tokenizer, text) + after_ids
        for copy in range(1 + settings.sampled_answers):
            sampled = copy > 0
            answer_requests.append((input_ids, config(sampled, settings.answer_max_tokens,
                                                      settings.seed * 100003 + 50000 + index * 7 + copy)))
            answer_meta.append((task, opener, "sampled" if sampled else "greedy", text, input_ids, len(prefix_ids)))
    answers, answer_seconds = run_batched(pipeline, answer_requests, "2/2 answers", show_progress)
    answer_tokens = sum(len(ids) for ids in answers)

    samples = [
        Sample(sample_id=index, task=task, opener=opener, kind=kind, user_text=text,
               token_ids=list(input_ids) + answer, loss_start=loss_start, answer_start=len(input_ids))
        for index, ((task, opener, kind, text, input_ids, loss_start), answer) in enumerate(zip(answer_meta, answers))
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
    order = sorted(range(len(samples)), key=lambda i: len(samples[i].token_ids))
    batches, current = [], []
    for index in order:
        longest = max([len(samples[i].token_ids) for i in current] + [len(samples[index].token_ids)])
        if current and longest * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    ids_per_sample: list[Any] = [None] * len(samples)
    logprobs_per_sample: list[Any] = [None] * len(samples)
    started = time.perf_counter()
    done_tokens = 0
    with tqdm(total=sum(len(s.token_ids) for s in samples), desc="teacher top-k", unit="tok",
              disable=not show_progress) as progress:
        for batch in batches:
            length = max(len(samples[i].token_ids) for i in batch)
            input_ids = np.zeros((len(batch), length), dtype=np.int64)
            mask = np.zeros((len(batch), length), dtype=np.int64)
            for row, index in enumerate(batch):
                tokens = samples[index].token_ids
                input_ids[row, :len(tokens)] = tokens
                mask[row, :len(tokens)] = 1
            positions = np.broadcast_to(np.arange(length, dtype=np.int64), (len(batch), length)).copy()
            request.reset_state()
            request.infer({"input_ids": input_ids, "attention_mask": mask, "position_ids": positions,
                           "beam_idx": np.arange(len(batch), dtype=np.int32)})
            logits = torch.from_numpy(request.get_tensor("logits").data.copy()).float()
            logprobs = torch.log_softmax(logits, dim=-1)
            values, indices = logprobs.topk(top_k, dim=-1)
            for row, index in enumerate(batch):
                size = len(samples[index].token_ids)
                ids_per_sample[index] = indices[row, :size].to(torch.int32).numpy()
                logprobs_per_sample[index] = values[row, :size].to(torch.float16).numpy()
            done_tokens += int(mask.sum())
            progress.update(int(mask.sum()))
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


def prepare_training_data(settings: DraftTrainingSettings | str = "quick", main_ov_dir: Path | None = None,
                          device: str = "CPU", force: bool = False, show_progress: bool = True) -> Path:
    """Build (or reuse) the folder of main-written training data for `settings`."""
    settings = get_settings(settings)
    main_ov_dir = Path(main_ov_dir) if main_ov_dir else models_dir() / MAIN_OV_FOLDER
    _require_complete(main_ov_dir, "main model (OpenVINO)")
    folder = draft_folders(settings).data
    recipe = data_recipe(settings, main_ov_dir)
    if not force and is_up_to_date(folder, recipe):
        print(f"Reusing the training data in {folder}")
        return folder
    import numpy as np

    samples, stats = generate_samples(main_ov_dir, settings, device, show_progress)
    with atomic_folder(folder, recipe) as work:
        save_samples(samples, work / SAMPLES_FILE)
        if settings.teacher_top_k:
            ids, logprobs, seconds = teacher_top_k(main_ov_dir, samples, settings.teacher_top_k, device,
                                                   show_progress)
            np.savez(work / TEACHER_FILE, ids=ids, logprobs=logprobs)
            stats["teacher_seconds"] = seconds
        (work / STATS_FILE).write_text(json.dumps(stats, indent=2), encoding="utf-8")
    return folder


def _require_complete(folder: Path, role: str) -> None:
    if not (Path(folder) / ".complete").is_file():
        raise DraftTrainingError(f"The {role} folder {folder} is missing or incomplete. Prepare the offline pair "
                                 "first: python3 tutorial.py lab, or python -m utils.offline_pair.")


# --------------------------------------------------------------------------- stage 2: the draft


def projected_embeddings(main_embeddings: Any, hidden_size: int) -> Any:
    """The main's embedding matrix [vocab, d] projected onto its `hidden_size` main directions [vocab, hidden].

    The projection keeps the top right-singular vectors of the matrix, so dot
    products between rows (what a tied output layer computes) are preserved as
    well as a `hidden_size`-wide matrix can. With hidden_size == d it is a copy.
    """
    import torch

    embeddings = main_embeddings.detach().float()
    width = embeddings.shape[1]
    if hidden_size > width:
        raise DraftTrainingError(f"A draft wider than its main model ({hidden_size} > {width}) cannot be "
                                 "initialised by projection; choose hidden_size <= the main's.")
    if hidden_size == width:
        return embeddings.clone()
    _, vectors = torch.linalg.eigh(embeddings.T @ embeddings)  # ascending eigenvalues
    projection = vectors[:, -hidden_size:].flip(-1)  # [d, hidden], strongest direction first
    return embeddings @ projection


@dataclass
class VocabularySubset:
    """The tokens the training data uses; the draft trains with a softmax over these only.

    `global_ids` (sorted) maps local index -> token id; `local_index` maps token
    id -> local index, or -1 for tokens outside the subset.
    """

    global_ids: Any  # int64 tensor [subset]
    local_index: Any  # int64 tensor [vocab]

    @classmethod
    def from_token_ids(cls, token_ids: Any, vocab_size: int) -> VocabularySubset:
        import torch

        ids = torch.unique(torch.as_tensor(token_ids, dtype=torch.int64).flatten())
        if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
            raise DraftTrainingError(f"Token ids must lie in [0, {vocab_size}); got {ids.min()}..{ids.max()}.")
        local = torch.full((vocab_size,), -1, dtype=torch.int64)
        local[ids] = torch.arange(ids.numel())
        return cls(ids, local)

    @classmethod
    def full(cls, vocab_size: int) -> VocabularySubset:
        import torch

        return cls.from_token_ids(torch.arange(vocab_size), vocab_size)

    @property
    def vocab_size(self) -> int:
        return int(self.local_index.numel())

    def __len__(self) -> int:
        return int(self.global_ids.numel())

    def to_local(self, token_ids: Any) -> Any:
        """Local indices of token ids that must all be in the subset."""
        local = self.local_index[token_ids]
        if (local < 0).any():
            raise DraftTrainingError("A token outside the vocabulary subset was asked for.")
        return local

    def to_local_or_missing(self, token_ids: Any) -> Any:
        """Local indices, -1 where a token is outside the subset."""
        return self.local_index[token_ids]

    def to_global(self, local_ids: Any) -> Any:
        return self.global_ids[local_ids]


def data_vocabulary(data: TrainingData, vocab_size: int, restrict: bool = True) -> VocabularySubset:
    """Every token that occurs in the samples (or the whole vocabulary if `restrict` is False)."""
    import torch

    if not restrict:
        return VocabularySubset.full(vocab_size)
    return VocabularySubset.from_token_ids(torch.cat([torch.as_tensor(s.token_ids) for s in data.samples]),
                                           vocab_size)


def draft_config(main_config: Any, settings: DraftTrainingSettings, vocab_size: int | None = None) -> Any:
    """A Llama config for the draft: the main's vocabulary, special tokens and rope, the draft's own size."""
    from transformers import LlamaConfig

    rope = getattr(main_config, "rope_parameters", None) or {"rope_type": "default", "rope_theta": 100000.0}
    return LlamaConfig(
        vocab_size=vocab_size or main_config.vocab_size, hidden_size=settings.hidden_size,
        intermediate_size=settings.intermediate_size, num_hidden_layers=settings.layers,
        num_attention_heads=settings.attention_heads, num_key_value_heads=settings.key_value_heads,
        head_dim=settings.hidden_size // settings.attention_heads,
        max_position_embeddings=min(int(main_config.max_position_embeddings), 2048),
        rms_norm_eps=main_config.rms_norm_eps, rope_parameters=dict(rope), tie_word_embeddings=True,
        bos_token_id=main_config.bos_token_id, eos_token_id=main_config.eos_token_id,
        pad_token_id=main_config.pad_token_id, hidden_act="silu", attention_bias=False, mlp_bias=False,
    )


def build_draft(main_config: Any, initial_embeddings: Any, settings: DraftTrainingSettings,
                subset: VocabularySubset | None = None) -> Any:
    """A new Llama draft whose tied embeddings start from `initial_embeddings` (rows of `subset` only, if given).

    With a subset the draft is *compact*: its vocabulary is the subset, its
    token ids are the subset's local indices (see `expand_vocabulary`).
    """
    import torch
    from transformers import LlamaForCausalLM

    if initial_embeddings.shape[1] != settings.hidden_size:
        raise DraftTrainingError(f"Initial embeddings are {initial_embeddings.shape[1]} wide, the draft "
                                 f"{settings.hidden_size}.")
    rows = initial_embeddings if subset is None else initial_embeddings[subset.global_ids]
    torch.manual_seed(settings.seed)
    draft = LlamaForCausalLM(draft_config(main_config, settings, vocab_size=rows.shape[0]))
    with torch.no_grad():
        draft.get_input_embeddings().weight.copy_(rows)
        draft.model.norm.weight.fill_(settings.final_norm_init)
    draft.tie_weights()
    if draft.get_output_embeddings().weight.data_ptr() != draft.get_input_embeddings().weight.data_ptr():
        raise DraftTrainingError("The draft's output layer is not tied to its embeddings.")
    return draft


def expand_vocabulary(compact: Any, subset: VocabularySubset, initial_embeddings: Any, main_config: Any,
                      settings: DraftTrainingSettings) -> Any:
    """The compact draft as a full-vocabulary model: trained rows go back to their token ids.

    Tokens the data never used keep their initial (projected) embedding,
    scaled by `settings.unused_token_scale` so that they rarely win the draft's argmax.
    """
    from transformers import LlamaForCausalLM

    full = LlamaForCausalLM(draft_config(main_config, settings, vocab_size=subset.vocab_size))
    state = {key: value for key, value in compact.state_dict().items() if "embed_tokens" not in key
             and "lm_head" not in key}
    embeddings = initial_embeddings.detach().clone() * settings.unused_token_scale
    embeddings[subset.global_ids] = compact.get_input_embeddings().weight.detach()
    state["model.embed_tokens.weight"] = embeddings
    missing, unexpected = full.load_state_dict(state, strict=False)
    if unexpected or any("embed_tokens" not in key and "lm_head" not in key for key in missing):
        raise DraftTrainingError(f"Expanding the draft lost weights: missing {missing}, unexpected {unexpected}.")
    full.tie_weights()
    full.eval()
    return full


def parameter_count(model: Any) -> int:
    """Number of distinct weights (tied matrices counted once)."""
    seen, total = set(), 0
    for parameter in model.parameters():
        if parameter.data_ptr() not in seen:
            seen.add(parameter.data_ptr())
            total += parameter.numel()
    return total


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


def prepare_trained_draft(settings: DraftTrainingSettings | str = "quick", main_hf_dir: Path | None = None,
                          force: bool = False, show_progress: bool = True,
                          on_evaluation: Callable[[TrainingHistory], None] | None = None,
                          threads: int | None = None) -> Path:
    """Train (or reuse) the Hugging Face draft for `settings`; the data folder must be ready.

    threads: torch CPU threads for training (None keeps torch's default, one per
    core; on a machine shared with other busy processes, 1 can be much faster).
    """
    settings = get_settings(settings)
    main_hf_dir = Path(main_hf_dir) if main_hf_dir else models_dir() / MAIN_HF_FOLDER
    _require_complete(main_hf_dir, "main model (Hugging Face)")
    folders = draft_folders(settings)
    _require_complete(folders.data, "training data")
    recipe = draft_recipe(settings, folders.data, main_hf_dir)
    if not force and is_up_to_date(folders.hf, recipe):
        print(f"Reusing the trained draft in {folders.hf}")
        return folders.hf
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    data = load_training_data(folders.data)
    draft, history, subset = train_full_draft(main_hf_dir, data, settings, show_progress=show_progress,
                                              on_evaluation=on_evaluation)
    with atomic_folder(folders.hf, recipe) as work:
        save_draft(draft, work, main_hf_dir, history, subset.global_ids.tolist())
    return folders.hf


def trim_output_layer(source_dir: Path, destination: Path, keep_token_ids: Sequence[int], recipe: dict) -> Path:
    """Copy an exported draft, its output layer computing only `keep_token_ids` (others get logit -1e4).

    A small draft spends most of a step on its output layer (hidden x 49,152
    tokens). Tokens its training data never used cannot be predicted well
    anyway, so the layer is cut to the used ones and a Gather spreads their
    logits back over the full vocabulary: the draft still speaks the main
    model's token ids, for a fraction of the cost (the idea of FR-Spec,
    arXiv:2502.14856). The edit is made on the OpenVINO graph:

        logits = MatMul(hidden, E^T)  ->  Gather(Pad(MatMul(hidden, E[keep]^T), -1e4), position of each token)
    """
    import shutil

    import numpy as np
    import openvino as ov
    import openvino.opset13 as opset

    source_dir = Path(source_dir)
    keep = np.asarray(sorted(set(int(t) for t in keep_token_ids)), dtype=np.int64)
    model = ov.Core().read_model(source_dir / "openvino_model.xml")
    result = next((r for r in model.get_results() if "logits" in r.input_value(0).get_names()), None)
    head = result.input_value(0).get_node() if result is not None else None
    if head is None or head.get_type_name() != "MatMul" or not head.get_attributes().get("transpose_b"):
        raise DraftTrainingError(f"{source_dir} does not end in MatMul(hidden, embeddings^T) -> logits; "
                                 "only plain optimum-cli exports of Llama drafts can be trimmed.")
    weights_node = head.input_value(1).get_node()
    while weights_node.get_type_name() != "Constant":
        if weights_node.get_type_name() != "Convert":
            raise DraftTrainingError("The output layer's weights are not a (converted) constant; cannot trim.")
        weights_node = weights_node.input_value(0).get_node()
    weights = weights_node.get_data()
    vocab_size = weights.shape[0]
    if keep.size == 0 or keep.min() < 0 or keep.max() >= vocab_size:
        raise DraftTrainingError(f"Token ids to keep must lie in [0, {vocab_size}) and not be empty.")
    kept = opset.convert(opset.constant(np.ascontiguousarray(weights[keep])), ov.Type.f32)
    small = opset.matmul(head.input_value(0), kept, False, True)
    padded = opset.pad(small, opset.constant(np.zeros(3, np.int64)), opset.constant(np.array([0, 0, 1], np.int64)),
                       "constant", opset.constant(np.float32(-1e4)))
    position = np.full(vocab_size, keep.size, dtype=np.int32)  # unknown tokens read the padded -1e4 column
    position[keep] = np.arange(keep.size, dtype=np.int32)
    logits = opset.gather(padded, opset.constant(position), opset.constant(np.int64(2)))
    names = head.output(0).get_names()
    head.output(0).get_tensor().set_names(set())
    logits.output(0).get_tensor().set_names(names)
    result.input(0).replace_source_output(logits.output(0))
    model.validate_nodes_and_infer_types()
    with atomic_folder(destination, recipe) as work:
        for item in source_dir.iterdir():
            if item.is_file() and not item.name.startswith("openvino_model.") and item.name != ".complete":
                shutil.copy2(item, work / item.name)
        ov.save_model(model, work / "openvino_model.xml")
    return Path(destination)


def prepare_exported_draft(settings: DraftTrainingSettings | str = "quick", force: bool = False) -> DraftFolders:
    """Export (or reuse) the trained draft with `optimum-cli export openvino`, then trim its output layer."""
    from utils.optimum_export import export_with_optimum

    settings = get_settings(settings)
    folders = draft_folders(settings)
    _require_complete(folders.hf, "trained draft")
    recipe = export_recipe(settings, folders.hf)
    if not force and is_up_to_date(folders.openvino, recipe):
        print(f"Reusing the exported draft in {folders.openvino}")
    else:
        export_with_optimum(str(folders.hf), folders.openvino, settings.draft_weight_format, recipe,
                            local_folder=True)
    trim_recipe = {"trimmed_from": recipe, "stage": "trim"}
    if not force and is_up_to_date(folders.trimmed, trim_recipe):
        print(f"Reusing the trimmed draft in {folders.trimmed}")
    else:
        keep = json.loads((folders.hf / VOCABULARY_FILE).read_text(encoding="utf-8"))
        trim_output_layer(folders.openvino, folders.trimmed, keep, trim_recipe)
    return folders


# --------------------------------------------------------------------------- describing what was built


def main_folders(pair_name: str = "offline") -> tuple[Path, Path]:
    """(OpenVINO folder, Hugging Face folder) of the pair's main model, checked; only the offline pair is supported.

    Training a draft needs the main model's Hugging Face weights (for the
    embedding projection) and a main model fast enough to write its own
    training data on this machine: the offline pair's SmolLM2-135M.
    """
    if pair_name != "offline":
        raise DraftTrainingError(
            f"This notebook trains a draft for the offline pair's main model only, not '{pair_name}': the real pairs "
            "already have drafts (Phi-3-mini has OpenVINO's FastDraft-50M) and their mains are too slow on 2 CPU cores "
            "to write enough training data. Set PAIR = \"offline\".")
    ov_dir, hf_dir = models_dir() / MAIN_OV_FOLDER, models_dir() / MAIN_HF_FOLDER
    _require_complete(ov_dir, "main model (OpenVINO)")
    _require_complete(hf_dir, "main model (Hugging Face)")
    return ov_dir, hf_dir


def size_rows(settings: DraftTrainingSettings, main_hf_dir: Path) -> list[dict]:
    """Weights of the draft and of the main model, by part (computed from the configs, nothing is trained)."""
    from transformers import AutoConfig

    main_config = AutoConfig.from_pretrained(str(main_hf_dir))

    def parts(config: Any) -> dict:
        hidden, inner, heads = config.hidden_size, config.intermediate_size, config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or hidden // heads
        attention = hidden * head_dim * (2 * heads + 2 * config.num_key_value_heads)
        per_layer = attention + 3 * hidden * inner + 2 * hidden
        return {"hidden size": hidden, "layers": config.num_hidden_layers,
                "embeddings (= output layer)": config.vocab_size * hidden,
                "all layers": per_layer * config.num_hidden_layers,
                "total": config.vocab_size * hidden + per_layer * config.num_hidden_layers + hidden}

    rows = [{"model": "main (SmolLM2-135M)", **parts(main_config)},
            {"model": f"draft ({settings.name})", **parts(draft_config(main_config, settings))}]
    rows[1]["share of main"] = rows[1]["total"] / rows[0]["total"]
    return rows


def example_rows(data: TrainingData, per_task: int = 2, width: int = 110) -> list[dict]:
    """A few self-written prompts and greedy answers per task type, shortened, for display."""
    rows, shown = [], {}
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


# --------------------------------------------------------------------------- measuring the draft


def measure_draft_step_times(main_dir: Path, drafts: dict[str, Path], device: str = "CPU",
                             token_counts: Sequence[int] = (1,), context_tokens: int = 128, repeats: int = 15,
                             precision: str = "f32") -> tuple[list[Any], dict[str, Any]]:
    """Main-model step times for `token_counts` and each draft's one-token step, all interleaved.

    Like `utils.verification_cost.measure_pair_step_times`, with several drafts
    timed in the same rounds, so that their cost ratios (draft step / main
    one-token step) see the same background load and can be compared.
    Returns (main StepTimes, {name: draft StepTime}).
    """
    from utils.verification_cost import StepTimer, step_times_from_samples, time_interleaved

    counts = sorted(set(int(count) for count in token_counts) | {1})
    main = StepTimer(main_dir, device, precision, context_tokens, max(counts))
    timers = [(main, counts)] + [(StepTimer(folder, device, precision, context_tokens, 1), [1])
                                 for folder in drafts.values()]
    samples = time_interleaved(timers, repeats, warmup=2, progress=None)
    draft_steps = {name: step_times_from_samples(timer, timer_samples)[0]
                   for name, (timer, _), timer_samples in zip(drafts, timers[1:], samples[1:])}
    return step_times_from_samples(main, samples[0]), draft_steps


def speedup_verdicts(theory: Sequence[dict], tolerance: float = 0.02, noise: float = 0.15) -> list[str]:
    """One sentence per K saying what the measured speed-up means, and whether the formula backs it.

    theory: rows of `utils.autotune.theory_rows` ("K", "measured", "a_K",
    "with_verification_cost"). A measurement more than `noise` away from the
    prediction is flagged: with so few, short runs on a busy machine, timing
    noise is the likelier explanation than a draft beating its own arithmetic.
    """
    sentences = []
    for row in theory:
        measured, predicted = row["measured"], row["with_verification_cost"]
        if measured > 1 + tolerance:
            meaning = "faster than plain decoding"
        elif measured < 1 - tolerance:
            meaning = "slower than plain decoding"
        else:
            meaning = "no measurable difference"
        sentence = (f"K={row['K']}: measured {measured:.2f}x ({meaning}); the formula predicts {predicted:.2f}x "
                    f"from a = {row['a_K']:.2f} and the measured step times")
        if abs(measured / predicted - 1) > noise:
            sentence += (" - a gap this large is timing noise, not the draft: raise REPEATS or measure on a quiet "
                         "machine before trusting the measured figure")
        sentences.append(sentence + ".")
    return sentences


def measure_speculation(main_dir: Path, draft_dir: Path, prompts: Sequence[Any], draft_lengths: Sequence[int],
                        device: str = "CPU", max_new_tokens: int = 64, repeats: int = 2, precision: str = "f32",
                        progress: Callable[[str], None] | None = None) -> tuple[list[dict], list]:
    """Plain vs speculative decoding with the draft for each K, on the same prompts, interleaved.

    Returns one row per K - the measured speed-up over the prompts whose token
    counts matched plain decoding ("speedup"), the per-token acceptance `a`
    explaining its tokens per main pass ("per_token_acceptance"), the acceptance
    rate from GenAI's counters (both pooled over prompts, `utils.decoding_metrics`),
    and how many prompts gave output identical to plain decoding - in the shape `utils.autotune.theory_rows` takes ("value" = K),
    and the compared records.
    """
    from utils.decoding_metrics import per_token_acceptance as per_token_acceptance_for
    from utils.pipelines import load_pipeline
    from utils.generation import DecodingSettings, compare_with_plain, measure_side_by_side
    from utils.generation_reports import summarise

    if not draft_lengths or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in draft_lengths):
        raise DraftTrainingError(f"Draft lengths K must be integers >= 1, got {list(draft_lengths)}.")
    plain = load_pipeline("plain", main_dir, device, precision=precision)
    speculative = load_pipeline("speculative", main_dir, device, draft_dir=draft_dir, precision=precision)
    candidates = [(plain, DecodingSettings("plain", max_new_tokens=max_new_tokens))]
    candidates += [(speculative, DecodingSettings("speculative", num_assistant_tokens=k,
                                                  max_new_tokens=max_new_tokens)) for k in draft_lengths]
    records = compare_with_plain(measure_side_by_side(candidates, prompts, warmup=1, repeats=repeats,
                                                      progress=progress))
    summary = {row["setting"]: row for row in summarise(records)}
    rows = []
    for k in draft_lengths:
        label = f"K={k}"
        group = [record for record in records if record.mode == "speculative" and record.setting == label]
        rows.append({
            "value": k, "K": k, "speedup": summary[label]["speedup_vs_plain"],
            "per_token_acceptance": per_token_acceptance_for(summary[label]["tokens_per_pass"], k),
            "genai_acceptance_rate": summary[label]["acceptance_rate"],
            "tokens_per_pass": summary[label]["tokens_per_pass"],
            "identical_prompts": summary[label]["identical_prompts"], "prompts": len(group),
            "comparable_prompts": summary[label]["comparable_prompts"],
        })
    return rows, records
