"""Stage 1 of an EAGLE-3 head: the main model writes its own training data, prompts and greedy answers.

A head learns to guess what *this* main says next, so its data is the main's
own greedy answers. The user prompts are sampled from the main right after its
chat template's user tag, most of them started by a task opener, exactly as
notebook 06's draft data is (the openers and template parts of
`utils.training.draft_data`, the batched loop of `utils.training.main_batches`). Only greedy answers are kept:
under greedy verification they are what the main accepts. The benchmark
prompts of `utils.decoding.prompts` are held out: a sampled prompt equal to
one of them is dropped, and `held_out_overlap` checks that none is left.

Order of use: `write_training_data(settings, main)` builds (or reuses) the data
folder of `utils.training.eagle3_settings.eagle3_folders`; `load_samples` reads it.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from utils.models.atomic_folder import atomic_folder, is_up_to_date
from utils.training.draft_settings import MainModel, require_complete
from utils.training.eagle3_settings import Eagle3Settings, data_recipe, eagle3_folders

SAMPLES_FILE = "samples.jsonl"
STATS_FILE = "generation_stats.json"


@dataclass
class Eagle3Sample:
    """One sequence: the chat-templated prompt the main wrote, then its greedy answer."""

    sample_id: int
    task: str
    opener: str
    user_text: str
    token_ids: list[int]
    answer_start: int

    @property
    def answer_tokens(self) -> int:
        return len(self.token_ids) - self.answer_start


def normalise(text: str) -> str:
    return " ".join(text.split())


def held_out_overlap(user_texts: Iterable[str], held_out: Sequence[str]) -> list[str]:
    """The held-out prompt texts that appear among `user_texts` (whitespace ignored); must be none."""
    written = {normalise(text) for text in user_texts}
    return [text for text in held_out if normalise(text) in written]


def generate_samples(main_ov_dir: Path, settings: Eagle3Settings, held_out: Sequence[str] = (), device: str = "CPU",
                     show_progress: bool = True) -> tuple[list[Eagle3Sample], dict]:
    """Let the main write `settings.prompts` user prompts and answer each greedily; return samples and statistics."""
    from utils.training.draft_data import chat_template_parts, choose_openers
    from utils.training.main_batches import data_pipeline, generation_config, run_batched, text_token_ids

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
    inputs = [before_ids + text_token_ids(tokenizer, text) + after_ids for _, _, text in prompts]
    answers, answer_seconds = run_batched(pipeline, [(ids, generation_config(end_id, settings.answer_max_tokens))
                                                     for ids in inputs],
                                          "2/2 answers", show_progress, in_flight)
    samples = [Eagle3Sample(index, task, opener, text, ids + answer, len(ids))
               for index, ((task, opener, text), ids, answer) in enumerate(zip(prompts, inputs, answers, strict=True))
               if answer]
    stats = {"prompts_requested": settings.prompts, "prompts_kept": len(prompts), "samples": len(samples),
             "prompt_tokens_generated": sum(len(c) for c in continuations), "prompt_seconds": prompt_seconds,
             "answer_tokens_generated": sum(len(a) for a in answers), "answer_seconds": answer_seconds,
             "sequence_tokens": sum(len(s.token_ids) for s in samples), "seconds": prompt_seconds + answer_seconds,
             "device": device}
    return samples, stats


def save_samples(samples: Sequence[Eagle3Sample], folder: Path, stats: dict) -> None:
    with (Path(folder) / SAMPLES_FILE).open("w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps(asdict(sample), ensure_ascii=False) + "\n")
    (Path(folder) / STATS_FILE).write_text(json.dumps(stats, indent=2), encoding="utf-8")


def load_samples(folder: Path) -> list[Eagle3Sample]:
    """The samples of a data folder written by `write_training_data`."""
    with (Path(folder) / SAMPLES_FILE).open(encoding="utf-8") as handle:
        return [Eagle3Sample(**json.loads(line)) for line in handle if line.strip()]


def load_stats(folder: Path) -> dict:
    """The generation statistics of a data folder (counts, tokens, seconds)."""
    return json.loads((Path(folder) / STATS_FILE).read_text(encoding="utf-8"))


def write_training_data(settings: Eagle3Settings, main: MainModel, device: str = "CPU", force: bool = False,
                        show_progress: bool = True) -> Path:
    """Build (or reuse) the data folder of `settings` for `main`, atomically; the benchmark prompts held out."""
    from utils.decoding.prompts import PROMPTS

    require_complete(main.openvino, "main model (OpenVINO)")
    folder = eagle3_folders(settings, main).data
    recipe = data_recipe(settings, main.openvino)
    if not force and is_up_to_date(folder, recipe):
        return folder
    held_out = [prompt.text for prompt in PROMPTS]
    started = time.perf_counter()
    samples, stats = generate_samples(main.openvino, settings, held_out, device, show_progress)
    overlap = held_out_overlap((sample.user_text for sample in samples), held_out)
    assert not overlap, f"held-out benchmark prompts leaked into the training data: {overlap}"
    stats["wall_seconds"] = time.perf_counter() - started
    with atomic_folder(folder, recipe) as work:
        save_samples(samples, work, stats)
    return folder
