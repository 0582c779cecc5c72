"""Stage 1: the main model writes its own training data: prompts it samples, answered greedily.

A head learns to guess what *this* main says next, so its data is the main's
own greedy answers. The user prompts are sampled from the main itself right
after the chat template's user tag (most of them started by a task opener
such as "Write a Python function that"), so no data set is needed and the
prompts cover the kinds of requests the head will serve. The benchmark
prompts of `utils.prompts` are held out: any sampled prompt that equals one
of them is dropped (`held_out_overlap` checks it).

Everything runs batched on OpenVINO GenAI's continuous-batching pipeline
(`run_batched`, the same loop as notebook 06's draft data).
"""
from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eagle3.settings import Eagle3Error, Eagle3Settings

SAMPLES_FILE = "samples.jsonl"
STATS_FILE = "generation_stats.json"

# Task openers for the user messages the main writes; "" lets it choose freely. More code and
# rewriting openers than notebook 06 uses: that is where a head's guesses pay off most.
OPENERS: dict[str, tuple[str, ...]] = {
    "code": ("Write a Python function that", "Write a Python program that", "Write a function in Python to",
             "How do I", "Explain this Python code:", "Fix the bug in this Python function:",
             "Write a Python class that", "Write a SQL query that", "Write a JavaScript function that",
             "Write a bash script that", "Implement in Python", "Write unit tests for a Python function that"),
    "chat": ("", "", "", "Why", "What is", "Give me", "Explain", "How can I", "What are the", "Tell me about",
             "Write a short story about", "Describe", "List"),
    "summarisation": ("Summarise the following text", "Summarize this article in a few sentences:",
                      "Write a short summary of the following", "Give the main points of this text:"),
    "input_grounded": ("Rewrite the following", "List every", "Extract the", "Add comments to this Python code:",
                       "Correct the grammar in this text:", "Translate this Python code to", "Rename the variables in"),
}


@dataclass
class Sample:
    """One sequence: chat-templated prompt written by the main, then its greedy answer."""

    sample_id: int
    task: str
    opener: str
    user_text: str
    token_ids: list[int]
    answer_start: int

    @property
    def answer_tokens(self) -> int:
        return len(self.token_ids) - self.answer_start


def choose_openers(count: int, steered_share: float, seed: int) -> list[tuple[str, str]]:
    """(task, opener) for each prompt: `steered_share` of them steered, the tasks in turn, the rest free."""
    rng = random.Random(seed)
    steered = round(count * steered_share)
    tasks = list(OPENERS)
    chosen = [(tasks[i % len(tasks)], rng.choice(OPENERS[tasks[i % len(tasks)]])) if i < steered else ("chat", "")
              for i in range(count)]
    rng.shuffle(chosen)
    return chosen


def normalise(text: str) -> str:
    return " ".join(text.split())


def held_out_overlap(user_texts: Iterable[str], held_out: Sequence[str]) -> list[str]:
    """Held-out prompt texts that appear among `user_texts` (must be none)."""
    written = {normalise(text) for text in user_texts}
    return [text for text in held_out if normalise(text) in written]


PLACEHOLDER = "\x00"


def chat_template_parts(tokenizer: Any) -> tuple[str, str]:
    """The chat template around one user message: (text before it, text after it up to the answer)."""
    templated = tokenizer.apply_chat_template([{"role": "user", "content": PLACEHOLDER}], add_generation_prompt=True)
    if templated.count(PLACEHOLDER) != 1:
        raise Eagle3Error("The main's chat template does not place the user message once; self-written "
                          "prompts need a chat model.")
    before, after = templated.split(PLACEHOLDER)
    return before, after


def text_token_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` (OpenVINO GenAI tokenizer), no special tokens added (the template has them)."""
    return [int(t) for t in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]


def run_batched(pipeline: Any, requests: Sequence[tuple[list[int], Any]], log: Any = None,
                concurrent: int = 64) -> tuple[list[list[int]], float]:
    """Generate for every (input ids, GenerationConfig) on a ContinuousBatchingPipeline, `concurrent` at a time.

    Requests are added as earlier ones finish, so the scheduler always holds about `concurrent`
    sequences. (Queueing a thousand requests at once was 10x slower here: the scheduler kept
    admitting prompts and the decoding of the running ones crawled.) Returns the generated ids per
    request and the wall time.
    """
    import numpy as np
    import openvino as ov
    import openvino_genai

    outputs: list[list[int]] = [[] for _ in requests]
    active: dict[int, Any] = {}
    next_index = 0
    running = openvino_genai.GenerationStatus.RUNNING
    started = last_report = time.perf_counter()
    done = 0
    while next_index < len(requests) or active:
        while next_index < len(requests) and len(active) < concurrent:
            ids, config = requests[next_index]
            active[next_index] = pipeline.add_request(next_index, ov.Tensor(np.asarray([ids], dtype=np.int64)),
                                                      config)
            next_index += 1
        if pipeline.has_non_finished_requests():
            pipeline.step()
        for index, handle in list(active.items()):
            while handle.can_read():
                for output in handle.read().values():
                    outputs[index] += [int(t) for t in output.generated_ids]
            if handle.get_status() != running and not handle.can_read():
                del active[index]
                done += 1
        if not pipeline.has_non_finished_requests() and active:
            if all(h.get_status() != running for h in active.values()):
                done += len(active)
                active.clear()
        if log is not None and time.perf_counter() - last_report > 60:
            last_report = time.perf_counter()
            log(f"{done}/{len(requests)} requests done, {sum(len(o) for o in outputs)} tokens, "
                f"{last_report - started:.0f} s")
    return outputs, time.perf_counter() - started


def _scheduler(concurrent: int) -> Any:
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = 2
    scheduler.max_num_seqs = concurrent
    scheduler.max_num_batched_tokens = 2048
    scheduler.dynamic_split_fuse = True
    return scheduler


def generate_samples(main_ov_dir: Path, settings: Eagle3Settings, held_out: Sequence[str] = (),
                     device: str = "CPU", log: Any = None) -> tuple[list[Sample], dict]:
    """Let the main write `settings.prompts` user prompts and answer each greedily."""
    import openvino_genai

    pipeline = openvino_genai.ContinuousBatchingPipeline(str(main_ov_dir), _scheduler(settings.concurrent_sequences),
                                                         device, {})
    tokenizer = pipeline.get_tokenizer()
    end_id = int(tokenizer.get_eos_token_id())
    before, after = chat_template_parts(tokenizer)
    before_ids, after_ids = text_token_ids(tokenizer, before), text_token_ids(tokenizer, after)

    def config(max_new_tokens: int, seed: int | None) -> Any:
        generation = openvino_genai.GenerationConfig()
        generation.max_new_tokens = max_new_tokens
        generation.stop_token_ids = {end_id}
        generation.eos_token_id = end_id
        if seed is not None:
            generation.do_sample, generation.temperature, generation.top_p = True, 1.0, 0.95
            generation.rng_seed = seed
        return generation

    openers = choose_openers(settings.prompts, settings.steered_share, settings.seed)
    prompt_requests = [(text_token_ids(tokenizer, before + opener),
                        config(settings.prompt_max_tokens, settings.seed * 100_003 + index + 1))
                       for index, (_, opener) in enumerate(openers)]
    continuations, prompt_seconds = run_batched(pipeline, prompt_requests, log, settings.concurrent_sequences)
    held = {normalise(text) for text in held_out}
    prompts = []
    for (task, opener), continuation in zip(openers, continuations, strict=True):
        text = (opener + " " + tokenizer.decode([t for t in continuation if t != end_id],
                                                skip_special_tokens=True).lstrip()).strip()
        if len(text) >= 8 and normalise(text) not in held:
            prompts.append((task, opener, text))
    inputs = [before_ids + text_token_ids(tokenizer, text) + after_ids for _, _, text in prompts]
    answers, answer_seconds = run_batched(pipeline, [(ids, config(settings.answer_max_tokens, None))
                                                    for ids in inputs], log, settings.concurrent_sequences)
    samples = [Sample(index, task, opener, text, ids + answer, len(ids))
               for index, ((task, opener, text), ids, answer) in enumerate(zip(prompts, inputs, answers, strict=True))
               if answer]
    tokens = sum(len(s.token_ids) for s in samples)
    stats = {"prompts_requested": settings.prompts, "prompts_kept": len(prompts), "samples": len(samples),
             "prompt_tokens_generated": sum(len(c) for c in continuations), "prompt_seconds": prompt_seconds,
             "answer_tokens_generated": sum(len(a) for a in answers), "answer_seconds": answer_seconds,
             "sequence_tokens": tokens, "seconds": prompt_seconds + answer_seconds}
    return samples, stats


def save_samples(samples: Sequence[Sample], folder: Path, stats: dict) -> None:
    with (folder / SAMPLES_FILE).open("w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps(asdict(sample), ensure_ascii=False) + "\n")
    (folder / STATS_FILE).write_text(json.dumps(stats, indent=2), encoding="utf-8")


def load_samples(folder: Path) -> list[Sample]:
    with (Path(folder) / SAMPLES_FILE).open(encoding="utf-8") as handle:
        return [Sample(**json.loads(line)) for line in handle if line.strip()]


def write_training_data(main_ov_dir: Path, settings: Eagle3Settings, folder: Path, held_out: Sequence[str] = (),
                        device: str = "CPU", force: bool = False, log: Any = None) -> Path:
    """Build (or reuse) `folder` with the main's samples, atomically (`utils.atomic_folder`)."""
    from eagle3.atomic import atomic_folder, is_up_to_date

    recipe = {"stage": "eagle3-data", "main": Path(main_ov_dir).name, "settings": settings.data_settings()}
    if not force and is_up_to_date(folder, recipe):
        return folder
    started = time.perf_counter()
    samples, stats = generate_samples(Path(main_ov_dir), settings, held_out, device, log)
    overlap = held_out_overlap((s.user_text for s in samples), held_out)
    if overlap:
        raise AssertionError(f"held-out prompts leaked into the training data: {overlap}")
    stats["wall_seconds"] = time.perf_counter() - started
    with atomic_folder(folder, recipe) as work:
        save_samples(samples, work, stats)
    return folder
