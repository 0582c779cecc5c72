"""The training scaffold both home-made drafts share: notebook 06's draft model and notebook 08's EAGLE-3 head.

Each stage is a folder under `models_dir()`, built atomically and reused while its recipe (`stage_recipe`: settings,
input recipes, package versions, a hash of the building code) matches. Training stops after set epochs, never on
the clock. Why one module: every recipe hashes it (`SCAFFOLD_CODE`), so a code edit here rebuilds every stage.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Self

from utils.models.atomic_folder import atomic_folder, is_up_to_date, read_marker
from utils.models.model_check import is_complete
from utils.paths import models_dir
from utils.system.environment_report import package_versions

SAMPLES_FILE = "samples.jsonl"
STATS_FILE = "generation_stats.json"
PREPARE_THE_MAIN = "prepare the offline pair first: python3 tutorial.py lab, or python -m maintainers.offline_pair"
SCAFFOLD_CODE = ("utils.training.scaffold",)
# The main's Hugging Face tokenizer files a draft or head folder carries (draft and main must share the tokenizer).
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                      "generation_config.json", "vocab.json", "merges.txt", "tokenizer.model")


class TrainingError(ValueError):
    """A setting or an input that cannot work; the message says what to do instead."""


# --------------------------------------------------------------------------- settings and presets


@dataclass(frozen=True)
class TrainingSettings:
    """What both drafts' data and training share; a subclass adds its model's settings and its `PRESETS`."""

    PRESETS: ClassVar[dict[str, Any]] = {}
    DATA_KEYS: ClassVar[tuple[str, ...]] = ("prompts", "prompt_max_tokens", "steered_share", "sampled_answers",
                                            "answer_max_tokens", "sampling_temperature", "seed")
    name: str = "quick"
    prompts: int = 32
    prompt_max_tokens: int = 48
    steered_share: float = 0.75
    sampled_answers: int = 0
    answer_max_tokens: int = 64
    sampling_temperature: float = 0.8
    concurrent_sequences: int = 32
    epochs: float = 3.0
    learning_rate: float = 1e-3
    warmup_steps: int = 5
    seed: int = 0

    def check_shared(self) -> None:
        """Checks of the shared settings (each subclass calls it from `__post_init__`)."""
        from utils.input_checks import as_integer

        for key in ("prompts", "prompt_max_tokens", "answer_max_tokens", "concurrent_sequences"):
            object.__setattr__(self, key, as_integer(getattr(self, key), key, minimum=1, error=TrainingError))
        if self.sampled_answers < 0 or self.warmup_steps < 0:
            raise TrainingError("sampled_answers and warmup_steps must be >= 0.")
        if not 0.0 <= self.steered_share <= 1.0:
            raise TrainingError("steered_share must lie in [0, 1].")
        if self.epochs <= 0 or self.learning_rate <= 0 or self.sampling_temperature <= 0:
            raise TrainingError("epochs, learning_rate and sampling_temperature must be > 0.")

    @classmethod
    def preset(cls, name_or_settings: str | Self, **overrides: object) -> Self:
        """A preset by name (see `PRESETS`), or the settings given, with `overrides` applied (checked)."""
        if isinstance(name_or_settings, cls):
            settings = name_or_settings
        else:
            try:
                settings = cls.PRESETS[str(name_or_settings)]
            except KeyError:
                raise TrainingError(f"Unknown preset '{name_or_settings}'. Use one of: {', '.join(cls.PRESETS)}, "
                                    f"or pass {cls.__name__}(...).") from None
        unknown = sorted(set(overrides) - set(asdict(settings)))
        if unknown:
            raise TrainingError(f"Unknown settings {unknown}; {cls.__name__} has {sorted(asdict(settings))}.")
        return replace(settings, **overrides) if overrides else settings  # type: ignore[arg-type]

    def as_dict(self) -> dict:
        return asdict(self)

    def data_settings(self) -> dict:
        """The settings that decide the training data (its folder's recipe)."""
        return {key: getattr(self, key) for key in self.DATA_KEYS}


# --------------------------------------------------------------------------- the main model


def require_complete(folder: Path, role: str, what_to_do: str = PREPARE_THE_MAIN) -> None:
    """Raise a TrainingError, saying `what_to_do`, unless `folder` is a finished atomic folder."""
    if not is_complete(Path(folder)):
        raise TrainingError(f"The {role} folder {folder} is missing or incomplete; {what_to_do}.")


@dataclass(frozen=True)
class MainModel:
    """The main a draft is trained for: its OpenVINO folder, its Hugging Face folder, a label for tables."""

    openvino: Path
    hf: Path
    label: str = "main"

    @property
    def stem(self) -> str:
        """Its Hugging Face folder's name without the "-hf" and "-instruct" suffixes."""
        return self.hf.name.removesuffix("-hf").removesuffix("-instruct")


def main_folders(pair_name: str = "offline") -> MainModel:
    """The checked folders of a catalogue pair's main; only a main with a Hugging Face folder qualifies."""
    from utils.models.model_catalogue import get_pair

    try:
        spec = get_pair(pair_name).main
    except KeyError as error:
        raise TrainingError(str(error.args[0])) from None
    if spec.hf_folder_name is None:
        raise TrainingError(
                            f"Pair '{pair_name}' has no Hugging Face folder for its main model ({spec.folder_name}) in "
            "utils.models.model_catalogue, and training a draft starts from one. The real pairs already have drafts "
            "(Phi-3-mini has OpenVINO's FastDraft-50M) and their mains are too slow on 2 CPU cores to write enough "
            "training data. Set PAIR = \"offline\", or pass MainModel(openvino_folder, hf_folder) of your own.")
    main = MainModel(spec.path, models_dir() / spec.hf_folder_name, spec.description.split(",")[0])
    require_complete(main.openvino, "main model (OpenVINO)")
    require_complete(main.hf, "main model (Hugging Face)")
    return main


def as_main_model(main: MainModel | str) -> MainModel:
    """A MainModel as given, or the main of the catalogue pair named `main`."""
    return main if isinstance(main, MainModel) else main_folders(main)


def copy_tokenizer_files(main_hf_dir: Path, folder: Path) -> list[str]:
    """Copy the main's tokenizer files missing from `folder`; raise if it lacks tokenizer.json or its config."""
    import shutil

    main_hf_dir = Path(main_hf_dir)
    missing = [name for name in HF_TOKENIZER_FILES[:2] if not (main_hf_dir / name).is_file()]
    if missing:
        raise TrainingError(f"The main's folder {main_hf_dir} lacks {', '.join(missing)}; a draft needs the main's "
                            "tokenizer files (draft and main must share the tokenizer).")
    copied = [name for name in HF_TOKENIZER_FILES
              if (main_hf_dir / name).is_file() and not (Path(folder) / name).exists()]
    for name in copied:
        shutil.copy2(main_hf_dir / name, Path(folder) / name)
    return copied


# --------------------------------------------------------------------------- recipes that know their code


def source_fingerprint(source: str) -> str:
    """A hash of Python source by its syntax tree without docstrings: comments, layout and docstrings do not count."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode("utf-8")).hexdigest()[:16]


def code_fingerprint(module_names: Iterable[str]) -> str:
    """One hash of the code of the named modules (`source_fingerprint` of each, read from disk, not imported)."""
    digest = hashlib.sha256()
    for name in sorted(set(module_names)):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise TrainingError(f"Cannot find the module {name} to fingerprint its code.")
        digest.update(f"{name}:{source_fingerprint(Path(spec.origin).read_text(encoding='utf-8'))};".encode())
    return digest.hexdigest()[:16]


def stage_recipe(stage: str, settings: dict, inputs: Sequence[Path], packages: Sequence[str],
                 code: Sequence[str]) -> dict:
    """What a stage's folder depends on: its settings, the recipes of the folders it reads (`inputs`), the
    versions of `packages`, and the fingerprint of the modules in `code` (plus this scaffold's)."""
    return {"stage": stage, "settings": settings,
            "inputs": {Path(folder).name: (read_marker(Path(folder)) or {}).get("recipe") for folder in inputs},
            "versions": package_versions(tuple(packages), with_python=False),
            "code": code_fingerprint((*SCAFFOLD_CODE, *code))}


# --------------------------------------------------------------------------- driving the main in batches

# The data pipelines' scheduler: a bounded KV cache (GB) and a per-step token budget for dynamic split-fuse.
DATA_CACHE_SIZE_GB = 1
DATA_BATCHED_TOKENS = 2048
SAMPLING_TOP_P = 0.95


def text_token_ids(tokenizer: Any, text: str) -> list[int]:
    """The token ids of `text` from an OpenVINO GenAI tokenizer, adding no special tokens (a chat template has them)."""
    return [int(token) for token in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]


def data_pipeline(main_ov_dir: Path, concurrent_sequences: int, device: str = "CPU") -> Any:
    """A `ContinuousBatchingPipeline` of the main that runs up to `concurrent_sequences` sequences together."""
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = DATA_CACHE_SIZE_GB
    scheduler.max_num_seqs = concurrent_sequences
    scheduler.max_num_batched_tokens = DATA_BATCHED_TOKENS
    scheduler.dynamic_split_fuse = True
    return openvino_genai.ContinuousBatchingPipeline(str(main_ov_dir), scheduler, device, {})


def generation_config(end_id: int, max_new_tokens: int, temperature: float | None = None, seed: int = 0) -> Any:
    """A `GenerationConfig` stopping at `end_id`: greedy if `temperature` is None, else sampled (top-p, `seed`)."""
    import openvino_genai

    generation = openvino_genai.GenerationConfig()
    generation.max_new_tokens = max_new_tokens
    generation.eos_token_id = end_id
    generation.stop_token_ids = {end_id}
    generation.do_sample = temperature is not None
    if temperature is not None:
        generation.temperature = temperature
        generation.top_p = SAMPLING_TOP_P
        generation.rng_seed = seed
    return generation


def run_batched(pipeline: Any, requests: Sequence[tuple[list[int], Any]], description: str,
                show_progress: bool = True, in_flight: int | None = None) -> tuple[list[list[int]], float]:
    """Generate for each (input ids, GenerationConfig) on a ContinuousBatchingPipeline: (ids per request, seconds).
    At most `in_flight` are queued: with hundreds queued, the scheduler admitted prompts while running ones crawled."""
    import numpy as np
    import openvino as ov
    import openvino_genai
    from tqdm.auto import tqdm

    limit = len(requests) if in_flight is None else max(1, int(in_flight))
    outputs: list[list[int]] = [[] for _ in requests]
    active: dict[int, Any] = {}
    queued = 0
    generated = 0
    started = time.perf_counter()
    running = openvino_genai.GenerationStatus.RUNNING
    with tqdm(total=len(requests), desc=description, unit="req", disable=not show_progress) as progress:
        while queued < len(requests) or active:
            while queued < len(requests) and len(active) < limit:
                ids, config = requests[queued]
                active[queued] = pipeline.add_request(queued, ov.Tensor(np.asarray([ids], dtype=np.int64)), config)
                queued += 1
            if pipeline.has_non_finished_requests():
                pipeline.step()
            finished = 0
            for index, handle in list(active.items()):
                while handle.can_read():
                    for output in handle.read().values():  # read() hands out the tokens new since the last read
                        outputs[index] += [int(token) for token in output.generated_ids]
                        generated += len(output.generated_ids)
                if handle.get_status() != running and not handle.can_read():
                    del active[index]
                    finished += 1
            if not pipeline.has_non_finished_requests() and active and not finished:
                break  # nothing left to run: requests that never started (should not happen)
            progress.update(finished)
            progress.set_postfix_str(f"{generated} tokens, {generated / (time.perf_counter() - started):.0f} tokens/s",
                                     refresh=False)
    return outputs, time.perf_counter() - started


def length_batches(lengths: Sequence[int], batch_tokens: int, shuffle_seed: int | None = None) -> list[list[int]]:
    """Indices grouped by similar length, shortest first, so a padded batch holds at most `batch_tokens`
    positions (longer ones stand alone); `shuffle_seed` shuffles the batches so a progress rate means something."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        longest = max([lengths[i] for i in current] + [lengths[index]])
        if current and longest * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(batches)
    return batches


def padded_prefills(request: Any, sequences: Sequence[Sequence[int]],
                    batches: Sequence[Sequence[int]]) -> Iterator[Sequence[int]]:
    """One right-padded prefill of a stateful main's infer `request` per batch (from `length_batches`), its state
    reset first; yields each batch, whose outputs the caller reads from `request` before the next."""
    import numpy as np

    lengths = [len(sequence) for sequence in sequences]
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        ids = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros((len(batch), longest), dtype=np.int64)
        for row, index in enumerate(batch):
            ids[row, :lengths[index]] = sequences[index]
            mask[row, :lengths[index]] = 1
        positions = np.broadcast_to(np.arange(longest, dtype=np.int64), ids.shape).copy()
        request.reset_state()
        request.infer({"input_ids": ids, "attention_mask": mask, "position_ids": positions,
                       "beam_idx": np.arange(len(batch), dtype=np.int32)})
        yield batch


# --------------------------------------------------------------------------- stage 1: the main writes the data

# Openers that start a user message of each task type of `utils.decoding.prompts`; "" lets the model choose freely.
TASK_OPENERS: dict[str, tuple[str, ...]] = {
    "code": ("Write a Python function that", "Write a Python program that", "How do I", "Write a function in Python",
             "Explain this Python code", "Fix the bug in this Python function"),
    "chat": ("", "", "", "Why", "What is", "Give me", "Explain", "How can I", "What are the"),
    "summarisation": ("Summarise the following text", "Summarize this article in a few sentences",
                      "Write a short summary of the following"),
    "input_grounded": ("Rewrite the following", "List every", "Extract the", "Add comments to this Python code",
                       "Correct the grammar in this text"),
}
PLACEHOLDER = "\x00"


@dataclass
class Sample:
    """One training sequence written by the main: chat-templated prompt + answer."""

    sample_id: int
    task: str
    opener: str
    kind: str  # "greedy" or "sampled"
    user_text: str
    token_ids: list[int]  # template, user message, assistant tag, answer (+ end token)
    loss_start: int  # first position the main generated (the user message starts here)
    answer_start: int

    @property
    def answer_tokens(self) -> int:
        return len(self.token_ids) - self.answer_start


def chat_template_parts(tokenizer: Any) -> tuple[str, str]:
    """The chat template around one user message: (text before it, text after it up to the answer)."""
    templated = tokenizer.apply_chat_template([{"role": "user", "content": PLACEHOLDER}], add_generation_prompt=True)
    if templated.count(PLACEHOLDER) != 1:
        raise TrainingError("The main model's chat template does not place the user message once; "
                            "self-generated prompts need a chat model.")
    before, after = templated.split(PLACEHOLDER)
    return before, after


def choose_openers(count: int, steered_share: float, seed: int) -> list[tuple[str, str]]:
    """(task, opener) for each prompt: a share steered by a task opener, the rest free ("chat", "")."""
    rng = random.Random(seed)
    tasks = list(TASK_OPENERS)
    chosen = [(tasks[i % len(tasks)], rng.choice(TASK_OPENERS[tasks[i % len(tasks)]])) if i < round(count * steered_share)
              else ("chat", "") for i in range(count)]
    rng.shuffle(chosen)
    return chosen


def normalise(text: str) -> str:
    return " ".join(text.split())


def held_out_overlap(user_texts: Iterable[str], held_out: Sequence[str]) -> list[str]:
    """The held-out prompt texts that appear among `user_texts` (whitespace ignored); must be none."""
    written = {normalise(text) for text in user_texts}
    return [text for text in held_out if normalise(text) in written]


def generate_samples(main_ov_dir: Path, settings: TrainingSettings, held_out: Sequence[str] = (), device: str = "CPU",
                     show_progress: bool = True) -> tuple[list[Sample], dict]:
    """Let the main write `settings.prompts` prompts (none equal to a `held_out` text), answer them: (samples, stats)"""
    pipeline = data_pipeline(main_ov_dir, settings.concurrent_sequences, device)
    tokenizer = pipeline.get_tokenizer()
    end_id = int(tokenizer.get_eos_token_id())
    before, after = chat_template_parts(tokenizer)
    before_ids, after_ids = text_token_ids(tokenizer, before), text_token_ids(tokenizer, after)
    in_flight = 2 * settings.concurrent_sequences

    openers = choose_openers(settings.prompts, settings.steered_share, settings.seed)
    prompt_requests = [(text_token_ids(tokenizer, before + opener),
                        generation_config(end_id, settings.prompt_max_tokens, 1.0, settings.seed * 100_003 + index + 1))
                       for index, (_, opener) in enumerate(openers)]
    continuations, prompt_seconds = run_batched(pipeline, prompt_requests, "1/2 prompts", show_progress, in_flight)
    held = {normalise(text) for text in held_out}
    prompts = []
    for (task, opener), continuation in zip(openers, continuations, strict=True):
        text = (opener + tokenizer.decode([t for t in continuation if t != end_id], skip_special_tokens=True)).strip()
        if len(text) >= 8 and normalise(text) not in held:
            prompts.append((task, opener, text))

    requests, meta = [], []
    for index, (task, opener, text) in enumerate(prompts):
        input_ids = before_ids + text_token_ids(tokenizer, text) + after_ids
        for copy in range(1 + settings.sampled_answers):
            temperature = settings.sampling_temperature if copy else None
            requests.append((input_ids, generation_config(end_id, settings.answer_max_tokens, temperature,
                                                          settings.seed * 100_003 + 50_000 + index * 7 + copy)))
            meta.append((task, opener, "sampled" if copy else "greedy", text, input_ids))
    answers, answer_seconds = run_batched(pipeline, requests, "2/2 answers", show_progress, in_flight)
    samples = [Sample(index, task, opener, kind, text, list(ids) + answer, len(before_ids), len(ids))
               for index, ((task, opener, kind, text, ids), answer) in enumerate(zip(meta, answers, strict=True))
               if answer]
    prompt_tokens, answer_tokens = sum(len(c) for c in continuations), sum(len(a) for a in answers)
    seconds = prompt_seconds + answer_seconds
    stats = {"prompts_requested": settings.prompts, "prompts_kept": len(prompts), "samples": len(samples),
             "prompt_tokens_generated": prompt_tokens, "answer_tokens_generated": answer_tokens,
             "tokens_generated": prompt_tokens + answer_tokens, "generation_seconds": seconds,
             "tokens_per_second": (prompt_tokens + answer_tokens) / max(seconds, 1e-9),
             "sequence_tokens": sum(len(s.token_ids) for s in samples),
             "concurrent_sequences": settings.concurrent_sequences, "device": device}
    return samples, stats


def save_samples(samples: Sequence[Sample], folder: Path, stats: dict) -> None:
    with (Path(folder) / SAMPLES_FILE).open("w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps(asdict(sample), ensure_ascii=False) + "\n")
    (Path(folder) / STATS_FILE).write_text(json.dumps(stats, indent=2), encoding="utf-8")


def load_samples(folder: Path) -> list[Sample]:
    """The samples of a data folder written by `write_samples`."""
    with (Path(folder) / SAMPLES_FILE).open(encoding="utf-8") as handle:
        return [Sample(**json.loads(line)) for line in handle if line.strip()]


def load_stats(folder: Path) -> dict:
    """The generation statistics of a data folder (counts, tokens, seconds)."""
    return json.loads((Path(folder) / STATS_FILE).read_text(encoding="utf-8"))


def write_samples(settings: TrainingSettings, main: MainModel, folder: Path, device: str = "CPU", force: bool = False,
                  show_progress: bool = True, code: Sequence[str] = (),
                  extra: Callable[[list[Sample], Path, dict], None] | None = None) -> Path:
    """Build (or reuse) the data folder the main writes for `settings`, atomically, the benchmark prompts held out.
    `extra(samples, work_folder, stats)` adds a model's own files before sealing; `code` names its modules (hashed)."""
    from utils.decoding.prompts import PROMPTS

    require_complete(main.openvino, "main model (OpenVINO)")
    held_out = [prompt.text for prompt in PROMPTS]
    # the held-out prompts join the recipe: a new benchmark prompt means new data
    recipe = stage_recipe("data", {"main": main.openvino.name, **settings.data_settings(),
                                   "held_out_prompts": sorted(prompt.id for prompt in PROMPTS),
                                   "held_out_texts": hashlib.sha256("\0".join(held_out).encode()).hexdigest()},
                          [main.openvino], ("openvino", "openvino-genai"), code)
    if not force and is_up_to_date(folder, recipe):
        print(f"Reusing the training data in {folder}")
        return folder
    started = time.perf_counter()
    samples, stats = generate_samples(main.openvino, settings, held_out, device, show_progress)
    overlap = held_out_overlap((sample.user_text for sample in samples), held_out)
    assert not overlap, f"held-out benchmark prompts leaked into the training data: {overlap}"
    with atomic_folder(folder, recipe) as work:
        if extra is not None:
            extra(samples, work, stats)
        stats["wall_seconds"] = time.perf_counter() - started
        save_samples(samples, work, stats)
    return folder


# --------------------------------------------------------------------------- the training loop's shared parts


@dataclass
class TrainingHistory:
    """What a training run did: loss per step, evaluations (dicts with "step"), cost, and the model's `details`."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    evaluations: list[dict] = field(default_factory=list)
    total_steps: int = 0
    epochs_done: float = 0.0
    tokens_seen: int = 0
    training_seconds: float = 0.0
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def training_steps(batches_per_epoch: int, epochs: float) -> int:
    """Steps for `epochs` passes over the batches (rounded up), never on the clock: one recipe, one model."""
    import math

    return max(1, math.ceil(batches_per_epoch * epochs))


def learning_rate(step: int, total_steps: int, peak: float, warmup_steps: int, floor: float = 0.1) -> float:
    """Linear warm-up over `warmup_steps`, then cosine decay from `peak` to `floor` x `peak` at `total_steps`."""
    import math

    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    progress = min(1.0, step / max(total_steps, 1))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))
