"""IPEX-LLM self-speculative decoding, measured: load, generate, read its statistics, compare.

IPEX-LLM (archived by Intel) loads a model twice when ``speculative=True``: the
main model in the precision you ask for (bf16 on CPU, fp16 on Intel GPUs) and a
``sym_int4`` copy of the same checkpoint that drafts tokens for it. The draft
stops proposing when its top probability falls below ``th_stop_draft`` (or after
``max_step_draft`` tokens); the main model then verifies the proposal in one pass.

The API, in the order notebook 04 uses it::

    view = legacy_model_view(models_dir() / "smollm2-135m-instruct-hf", build_dir() / "ipex-view")  # ipex_legacy_view
    recipe = article_recipe(pick_device())                       # bf16 on CPU, fp16 on XPU
    model, tokenizer = load_self_speculative(view, recipe)    # main + INT4 draft
    ids = encode_chat(tokenizer, "Why is the sky blue?")
    run = generate_greedy(model, ids, max_new_tokens=48)      # speculative; run.stats from IPEX-LLM
    plain = generate_greedy(model, ids, max_new_tokens=48, speculative=False)   # same weights, no draft

Only this module's functions that take a model import torch / ipex_llm, and they
do so inside the function: the module itself imports anywhere (the main venv's
tests use its pure helpers). `measure_peak_rss` measures a load's peak memory in
a fresh process (`utils.peak_memory`). The plots are in `utils.ipex_plots`.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from utils import decoding_metrics
from utils.ipex_legacy_view import legacy_model_view as legacy_model_view  # notebook 04: ss.legacy_model_view
from utils.paths import REPO_ROOT
from utils.text_compare import first_divergence

# The source article's recipe: bf16 on CPU, fp16 on Intel GPUs ("xpu").
ARTICLE_RECIPES: dict[str, dict[str, str]] = {
    "cpu": {"torch_dtype": "bfloat16", "load_in_low_bit": "bf16"},
    "xpu": {"torch_dtype": "float16", "load_in_low_bit": "fp16"},
}
DRAFT_OPTIONS = ("th_stop_draft", "max_step_draft", "auto_th_stop_draft", "min_step_draft", "hf_adjust")
LONG_PROMPT_MIN_TOKENS = 256
BYTES_PER_WEIGHT = {"bf16": 2.0, "fp16": 2.0, "sym_int4": 0.5625}  # int4: 4 bits + one fp16 scale per 32


class SelfSpeculationError(ValueError):
    """An input IPEX-LLM self-speculation cannot use; the message says what to do instead."""


# --------------------------------------------------------------------------- device, recipe, loading


def pick_device() -> str:
    """'xpu' when an Intel GPU is visible to torch, else 'cpu'."""
    import torch

    xpu = getattr(torch, "xpu", None)
    return "xpu" if xpu is not None and xpu.is_available() else "cpu"


def article_recipe(device: str) -> dict[str, str]:
    """The source article's `from_pretrained` precision settings for a device ('cpu' or 'xpu')."""
    if device not in ARTICLE_RECIPES:
        raise SelfSpeculationError(f"Unknown device {device!r}: IPEX-LLM runs on 'cpu' or 'xpu' (Intel GPU).")
    return dict(ARTICLE_RECIPES[device])


def set_threads(threads: int) -> int:
    """Use `threads` intra-op threads in this process (torch); returns what torch reports."""
    import torch

    if threads < 1:
        raise SelfSpeculationError(f"threads must be >= 1, got {threads}.")
    torch.set_num_threads(threads)
    return torch.get_num_threads()


def load_tokenizer(view: Path | str) -> Any:
    """The model's tokenizer, checked: eos must end the assistant's turn and no token_type_ids."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(view))
    if tokenizer.eos_token != "<|im_end|>" and tokenizer.chat_template and "<|im_end|>" in tokenizer.chat_template:
        raise SelfSpeculationError(
            f"eos token is {tokenizer.eos_token!r}, but chat turns end with '<|im_end|>': generation would not "
            "stop at the end of the answer. Rebuild the folder (python -m utils.offline_pair --force).")
    if "token_type_ids" in tokenizer("a"):
        raise SelfSpeculationError("The tokenizer returns token_type_ids, which breaks generate(); "
                                   "set model_input_names to ['input_ids', 'attention_mask'].")
    return tokenizer


def load_self_speculative(view: Path | str, recipe: dict[str, str], speculative: bool = True) -> tuple[Any, Any]:
    """The source article's call, verbatim but for the precision from `recipe`; returns (model, tokenizer).

    ``speculative=True`` also loads the INT4 draft into ``model.draft_model``.
    The device placement (``.to('xpu')``) is done here for Intel GPUs.
    """
    import torch
    from transformers.utils import logging as transformers_logging

    tokenizer = load_tokenizer(view)
    transformers_logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ipex_llm.transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(
            str(view),
            optimize_model=True,
            torch_dtype=getattr(torch, recipe["torch_dtype"]),
            load_in_low_bit=recipe["load_in_low_bit"],
            speculative=speculative,
            trust_remote_code=True,
            use_cache=True,
        )
    if recipe["torch_dtype"] == "float16":
        model = model.to("xpu")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def encode_chat(tokenizer: Any, user_message: str, min_tokens: int = 0) -> Any:
    """Token ids (a 1 x n tensor) of a user message in the chat template, ready for generation."""
    ids = tokenizer.apply_chat_template([{"role": "user", "content": user_message}],
                                        add_generation_prompt=True, return_tensors="pt")
    if ids.shape[1] < min_tokens:
        raise SelfSpeculationError(f"The prompt has {ids.shape[1]} tokens, fewer than the {min_tokens} required.")
    return ids


def check_weights(model: Any, tokenizer: Any, max_perplexity: float = 100.0) -> float:
    """Perplexity of the model on a plain English sentence; raises if the weights look random.

    A randomly initialised lm_head (a known trap of GGUF conversions with
    ``tie_word_embeddings=False``) gives a perplexity in the tens of thousands.
    """
    import torch

    text = ("The cat sat on the mat. It was a sunny day, and the children were playing in the park "
            "while their parents talked about the weather.")
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits.float()
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])
    perplexity = float(torch.exp(loss))
    if not perplexity < max_perplexity:
        raise SelfSpeculationError(
            f"Perplexity {perplexity:.0f} on plain English: the weights (probably lm_head) are wrong. "
            "Rebuild the model folder: python -m utils.offline_pair --force")
    return perplexity


# --------------------------------------------------------------------------- statistics


@dataclass
class SpeculationStats:
    """What IPEX-LLM recorded about its last speculative `generate` call (reset on every call).

    drafted_per_step[i]: tokens the INT4 draft proposed in verify step i.
    tokens_per_step[i]: tokens step i added (accepted drafts + the main model's own token),
    IPEX-LLM's ``accept_num`` (the prefill pass is not in it). Times in seconds.
    Acceptance and tokens per pass follow `utils.decoding_metrics`.
    """

    drafted: int
    accepted: int
    drafted_per_step: list[int]
    tokens_per_step: list[int]
    draft_seconds: list[float]
    verify_seconds: list[float]
    first_token_seconds: float
    generated_tokens: int

    @property
    def steps(self) -> int:
        return len(self.tokens_per_step)

    @property
    def accepted_per_step(self) -> list[int]:
        return [tokens - 1 for tokens in self.tokens_per_step]

    @property
    def acceptance_rate(self) -> float:
        """Accepted / drafted tokens: the fraction of the draft's proposals the main model kept."""
        return decoding_metrics.acceptance_rate(self.accepted, self.drafted) or 0.0

    @property
    def main_pass_steps(self) -> list[int]:
        """Tokens per main-model pass, the prefill pass first, cut to the generated tokens."""
        return decoding_metrics.ipex_llm_steps(self.tokens_per_step, self.generated_tokens)

    @property
    def mean_tokens_per_step(self) -> float:
        """Mean tokens per verification pass (`utils.decoding_metrics.tokens_per_main_pass`)."""
        return decoding_metrics.tokens_per_main_pass(self.main_pass_steps) or 0.0

    @property
    def mean_drafted_per_step(self) -> float:
        return statistics.mean(self.drafted_per_step) if self.drafted_per_step else 0.0

    @property
    def draft_seconds_per_token(self) -> float:
        """Time of one draft (INT4) forward pass, averaged over all drafted tokens."""
        return sum(self.draft_seconds) / self.drafted if self.drafted else 0.0

    @property
    def verify_seconds_per_step(self) -> float:
        return statistics.mean(self.verify_seconds) if self.verify_seconds else 0.0

    def summary(self) -> dict:
        return {
            "verify steps": self.steps,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance": round(self.acceptance_rate, 3),
            "tokens/step": round(self.mean_tokens_per_step, 2),
            "draft ms/token": round(1000 * self.draft_seconds_per_token, 1),
            "verify ms/step": round(1000 * self.verify_seconds_per_step, 1),
            "first token ms": round(1000 * self.first_token_seconds, 1),
        }


def read_speculation_stats(model: Any) -> SpeculationStats:
    """IPEX-LLM's own counters from the model after a speculative `generate` call.

    IPEX-LLM stores them as attributes: ``n_drafted``, ``n_matched`` (accepted
    drafts), ``draft_num`` / ``accept_num`` (per verify step; accept_num counts
    the main model's own token too), ``draft_time`` / ``verify_time`` (lists of
    seconds), ``first_token_time``, ``n_token_generated``.
    """
    needed = ("n_drafted", "n_matched", "draft_num", "accept_num", "draft_time", "verify_time",
              "first_token_time", "n_token_generated")
    missing = [name for name in needed if not hasattr(model, name)]
    if missing:
        raise SelfSpeculationError(
            f"The model has no speculation statistics ({', '.join(missing)} missing): load it with "
            "speculative=True and call generate() first.")
    stats = SpeculationStats(
        drafted=int(model.n_drafted),
        accepted=int(model.n_matched),
        drafted_per_step=[int(n) for n in model.draft_num],
        tokens_per_step=[int(n) for n in model.accept_num],
        draft_seconds=[float(t) for t in model.draft_time],
        verify_seconds=[float(t) for t in model.verify_time],
        first_token_seconds=float(model.first_token_time),
        generated_tokens=int(model.n_token_generated),
    )
    if len(stats.drafted_per_step) != len(stats.tokens_per_step) or sum(stats.drafted_per_step) != stats.drafted:
        raise SelfSpeculationError("Inconsistent IPEX-LLM statistics: per-step lists do not add up to the totals.")
    return stats


# --------------------------------------------------------------------------- generation


@contextmanager
def draft_disabled(model: Any) -> Iterator[Any]:
    """Temporarily hide ``model.draft_model``: IPEX-LLM's generate then decodes plainly, same weights."""
    draft = model.__dict__.get("_modules", {}).pop("draft_model", None)
    try:
        yield model
    finally:
        if draft is not None:
            model._modules["draft_model"] = draft


CLOCKS = ("wall", "cpu")


@dataclass
class GenerationRun:
    """One greedy generation: the new tokens, its times and (speculative) IPEX-LLM's statistics.

    seconds: wall-clock time. cpu_seconds: CPU time this process used meanwhile;
    with one thread it equals the wall time on an idle machine, and unlike the
    wall time it does not grow while other programs hold the CPU.
    """

    token_ids: list[int]
    seconds: float
    speculative: bool
    stats: SpeculationStats | None = None
    cpu_seconds: float = float("nan")

    @property
    def generated_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def seconds_per_token(self) -> float:
        return self.seconds / self.generated_tokens if self.token_ids else float("nan")


def check_generate_inputs(input_ids: Any, max_new_tokens: Any, draft_options: dict) -> None:
    """Raise (before any work) for inputs IPEX-LLM's self-speculation mishandles silently or cryptically."""
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
        raise SelfSpeculationError(
            f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}. Pass it explicitly: without it "
            "IPEX-LLM's speculative generate stops after 10 tokens.")
    shape = tuple(getattr(input_ids, "shape", ()))
    if len(shape) != 2:
        raise SelfSpeculationError(f"input_ids must be a 2-D tensor (1 x prompt length), got shape {shape}.")
    if shape[0] != 1:
        raise SelfSpeculationError(
            f"IPEX-LLM self-speculation handles one sequence at a time (batch size 1); got a batch of {shape[0]}. "
            "Loop over the prompts instead.")
    unknown = sorted(set(draft_options) - set(DRAFT_OPTIONS))
    if unknown:
        raise SelfSpeculationError(f"Unknown draft option(s) {unknown}; IPEX-LLM knows {list(DRAFT_OPTIONS)}.")
    threshold = draft_options.get("th_stop_draft")
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise SelfSpeculationError(f"th_stop_draft is a probability in [0, 1], got {threshold}.")
    steps = draft_options.get("max_step_draft")
    if steps is not None and (not isinstance(steps, int) or steps < 1):
        raise SelfSpeculationError(f"max_step_draft must be an integer >= 1, got {steps!r}.")


def generate_greedy(model: Any, input_ids: Any, *, max_new_tokens: int, speculative: bool = True,
                    **draft_options: Any) -> GenerationRun:
    """Greedy generation with (or, ``speculative=False``, without) the INT4 draft; timed.

    The ids go in by position: ``generate(**tokenizer(...))`` crashes in
    IPEX-LLM's speculative path. `draft_options` are IPEX-LLM's
    (``th_stop_draft``, ``max_step_draft``, ``auto_th_stop_draft``, ...).
    """
    import torch

    check_generate_inputs(input_ids, max_new_tokens, draft_options)
    if speculative and not hasattr(model, "draft_model"):
        raise SelfSpeculationError("This model has no draft: load it with speculative=True.")
    if not speculative and draft_options:
        raise SelfSpeculationError(f"Draft options {sorted(draft_options)} have no effect without speculation.")
    with torch.inference_mode(), (draft_disabled(model) if not speculative else _nothing()):
        started, started_cpu = time.perf_counter(), time.process_time()
        output = model.generate(input_ids, max_new_tokens=max_new_tokens, do_sample=False, **draft_options)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - started_cpu
    new_ids = [int(token) for token in output[0, input_ids.shape[1]:]]
    stats = read_speculation_stats(model) if speculative else None
    return GenerationRun(token_ids=new_ids, seconds=seconds, speculative=speculative, stats=stats,
                         cpu_seconds=cpu_seconds)


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


def decode_step_seconds(model: Any, input_ids: Any, steps: int = 16, repeats: int = 3, clock: str = "wall"
                        ) -> float:
    """Median time of one plain decode step: (time for 1 + steps tokens - time for 1 token) / steps.

    Works for the main model (its draft hidden) and for ``model.draft_model``
    alone, so the two are timed the same way. Generation ignores eos here.
    clock: "wall", or "cpu" (this process's CPU time; steadier on a shared machine).
    """
    import torch

    if clock not in CLOCKS:
        raise SelfSpeculationError(f"clock must be one of {CLOCKS}, got {clock!r}.")
    now = time.perf_counter if clock == "wall" else time.process_time

    def timed(tokens: int) -> float:
        with torch.inference_mode():
            started = now()
            model.generate(input_ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
            return now() - started

    with draft_disabled(model):
        timed(1 + steps)  # warm-up
        samples = [(timed(1 + steps) - timed(1)) / steps for _ in range(repeats)]
    return statistics.median(samples)


# --------------------------------------------------------------------------- comparisons and sweeps


@dataclass
class Comparison:
    """Plain vs speculative greedy on one prompt with one draft setting (medians over repeats)."""

    prompt_id: str
    setting: dict
    prompt_tokens: int
    plain_tokens: int
    speculative_tokens: int
    plain_seconds: float
    speculative_seconds: float
    acceptance_rate: float
    tokens_per_step: float
    drafted_per_step: float
    draft_ms_per_token: float
    verify_ms_per_step: float
    first_divergence: int | None
    plain_cpu_seconds: float = float("nan")
    speculative_cpu_seconds: float = float("nan")
    plain_ids: list[int] = field(repr=False, default_factory=list)
    speculative_ids: list[int] = field(repr=False, default_factory=list)
    stats: SpeculationStats | None = field(repr=False, default=None)

    @property
    def speedup(self) -> float:
        """Per-token speed-up: plain seconds/token over speculative seconds/token (token counts may differ)."""
        return (self.plain_seconds / self.plain_tokens) / (self.speculative_seconds / self.speculative_tokens)

    @property
    def speedup_cpu(self) -> float:
        """The same ratio from this process's CPU time (robust to other programs on a shared machine)."""
        return (self.plain_cpu_seconds / self.plain_tokens) / (self.speculative_cpu_seconds / self.speculative_tokens)

    def row(self) -> dict:
        return {
            "prompt": self.prompt_id,
            "setting": setting_label(self.setting),
            "prompt tokens": self.prompt_tokens,
            "tokens plain/spec": f"{self.plain_tokens}/{self.speculative_tokens}",
            "speed-up": round(self.speedup, 2),
            "speed-up (CPU time)": round(self.speedup_cpu, 2),
            "acceptance": round(self.acceptance_rate, 2),
            "tokens/step": round(self.tokens_per_step, 2),
            "drafted/step": round(self.drafted_per_step, 2),
            "first difference": "identical" if self.first_divergence is None else self.first_divergence,
        }


def compare_plain_and_speculative(
    model: Any,
    prompts: dict[str, Any],
    settings: Sequence[dict],
    *,
    max_new_tokens: int,
    repeats: int = 3,
    warm_up_each_setting: bool = True,
) -> list[Comparison]:
    """For each prompt and draft setting: plain vs speculative greedy, interleaved, medians of `repeats`.

    `prompts` maps a prompt id to its input ids. Plain runs are shared by all
    settings of a prompt. Each prompt gets an untimed plain warm-up, and every
    (prompt, setting) an untimed speculative one unless `warm_up_each_setting`
    is False (then only the first setting is warmed up).
    """
    if repeats < 1:
        raise SelfSpeculationError(f"repeats must be >= 1, got {repeats}.")
    for options in settings:
        check_generate_inputs(next(iter(prompts.values())), max_new_tokens, options)
    results = []
    for prompt_id, ids in prompts.items():
        generate_greedy(model, ids, max_new_tokens=max_new_tokens, speculative=False)  # warm-up
        plain_runs: list[GenerationRun] = []
        spec_runs: dict[int, list[GenerationRun]] = {index: [] for index in range(len(settings))}
        for options in settings if warm_up_each_setting else settings[:1]:
            generate_greedy(model, ids, max_new_tokens=max_new_tokens, **options)  # warm-up
        for _ in range(repeats):
            plain_runs.append(generate_greedy(model, ids, max_new_tokens=max_new_tokens, speculative=False))
            for index, options in enumerate(settings):
                spec_runs[index].append(generate_greedy(model, ids, max_new_tokens=max_new_tokens, **options))
        plain = _median_run(plain_runs)
        for index, options in enumerate(settings):
            spec = _median_run(spec_runs[index])
            stats = spec.stats
            results.append(Comparison(
                prompt_id=prompt_id,
                setting=dict(options),
                prompt_tokens=int(ids.shape[1]),
                plain_tokens=plain.generated_tokens,
                speculative_tokens=spec.generated_tokens,
                plain_seconds=plain.seconds,
                speculative_seconds=spec.seconds,
                acceptance_rate=stats.acceptance_rate,
                tokens_per_step=stats.mean_tokens_per_step,
                drafted_per_step=stats.mean_drafted_per_step,
                draft_ms_per_token=1000 * stats.draft_seconds_per_token,
                verify_ms_per_step=1000 * stats.verify_seconds_per_step,
                first_divergence=first_divergence(plain.token_ids, spec.token_ids),
                plain_cpu_seconds=statistics.median(run.cpu_seconds for run in plain_runs),
                speculative_cpu_seconds=statistics.median(run.cpu_seconds for run in spec_runs[index]),
                plain_ids=plain.token_ids,
                speculative_ids=spec.token_ids,
                stats=stats,
            ))
    return results


def _median_run(runs: Sequence[GenerationRun]) -> GenerationRun:
    """The run with the median wall time (odd count) or the faster of the middle two."""
    ordered = sorted(runs, key=lambda run: run.seconds)
    return ordered[(len(ordered) - 1) // 2]


def sweep_settings(thresholds: Sequence[float] = (), max_steps: Sequence[int] = (),
                   auto_threshold: Sequence[bool] = (True,)) -> list[dict]:
    """Draft settings to try: every threshold x auto on/off (default max_step_draft), then every max_step_draft."""
    settings = [{"th_stop_draft": threshold, "auto_th_stop_draft": auto}
                for threshold in thresholds for auto in auto_threshold]
    settings += [{"max_step_draft": steps} for steps in max_steps]
    return settings


def setting_label(setting: dict) -> str:
    """Short label, e.g. 'th=0.6 auto', 'th=0.6 fixed', 'max_step=4', 'defaults'."""
    parts = []
    if "th_stop_draft" in setting:
        parts.append(f"th={setting['th_stop_draft']:g}")
    if "auto_th_stop_draft" in setting:
        parts.append("auto" if setting["auto_th_stop_draft"] else "fixed")
    if "max_step_draft" in setting:
        parts.append(f"max_step={setting['max_step_draft']}")
    known = {"th_stop_draft", "auto_th_stop_draft", "max_step_draft"}
    parts += [name if value is True else f"{name}={value}" for name, value in setting.items() if name not in known]
    return " ".join(parts) or "defaults"


def format_table(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    """A fixed-width text table (floats to 2 decimals, None as '-')."""
    if not rows:
        return "(no rows)"
    columns = list(columns or dict.fromkeys(key for row in rows for key in row))

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.2f}"
        return str(value)

    cells = [[cell(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(width) for column, width in zip(columns, widths)).rstrip(),
             "  ".join("-" * width for width in widths)]
    lines += ["  ".join(value.ljust(width) for value, width in zip(line, widths)).rstrip() for line in cells]
    return "\n".join(lines)


def divergence_report(decode: Any, reference: Sequence[int], candidate: Sequence[int]) -> str:
    """Where two generations part: the shared start, then each one's continuation (decoded)."""
    position = first_divergence(reference, candidate)
    if position is None:
        return f"identical ({len(reference)} tokens):\n{decode(list(reference))}"
    return (f"identical for {position} tokens:\n{decode(list(reference[:position]))}\n"
            f"--- plain greedy continues:    {decode(list(reference[position:]))!r}\n"
            f"--- self-speculative continues: {decode(list(candidate[position:]))!r}")


# --------------------------------------------------------------------------- why outputs differ


def argmax_flips(model: Any, prompt_ids: Any, greedy_ids: Sequence[int], draft_hidden: bool = True) -> list[dict]:
    """Positions where one batched forward pass over prompt + greedy tokens picks a different token.

    Plain greedy decoding computes each token's logits in a one-token pass;
    verification computes several positions in one pass. The arithmetic is the
    same, the order of bf16 roundings is not. Each flip reports the greedy token,
    the batched pass's choice and the batched pass's logit margin between them.
    """
    import torch

    generated = torch.tensor([list(greedy_ids)], dtype=prompt_ids.dtype, device=prompt_ids.device)
    sequence = torch.cat([prompt_ids, generated], dim=1)
    with torch.inference_mode(), (draft_disabled(model) if draft_hidden else _nothing()):
        logits = model(sequence).logits[0].float()
    start = prompt_ids.shape[1] - 1
    flips = []
    for offset, token in enumerate(greedy_ids):
        row = logits[start + offset]
        chosen = int(row.argmax())
        if chosen != token:
            flips.append({"position": offset, "greedy token": int(token), "batched choice": chosen,
                          "logit margin": round(float(row[chosen] - row[token]), 4)})
    return flips


# --------------------------------------------------------------------------- cost model and pay-off


def fit_step_cost(main_seconds: float, draft_seconds: float, main_bytes: float, draft_bytes: float) -> dict:
    """Fit step time = overhead + weight bytes / bandwidth through the two measured points.

    A two-point line, not a measurement: it assumes both precisions have the same
    fixed per-step overhead and stream their weights at the same rate.
    """
    if main_bytes <= draft_bytes:
        raise SelfSpeculationError("The main model must have more weight bytes than its draft.")
    seconds_per_byte = (main_seconds - draft_seconds) / (main_bytes - draft_bytes)
    if seconds_per_byte <= 0:
        raise SelfSpeculationError(
            f"The draft step ({draft_seconds * 1e3:.1f} ms) is not cheaper than the main step "
            f"({main_seconds * 1e3:.1f} ms): no bandwidth can be fitted. Re-measure on a quieter machine.")
    overhead = max(0.0, main_seconds - main_bytes * seconds_per_byte)
    return {"overhead_seconds": overhead, "bytes_per_second": 1.0 / seconds_per_byte}


def predicted_cost_ratio(parameters: float, fit: dict, main_format: str = "bf16", draft_format: str = "sym_int4"
                         ) -> float:
    """Draft/main step-time ratio c for a model with `parameters` weights, from `fit_step_cost`."""
    step = lambda fmt: fit["overhead_seconds"] + parameters * BYTES_PER_WEIGHT[fmt] / fit["bytes_per_second"]  # noqa
    return step(draft_format) / step(main_format)


def seconds_per_token_by_threads(model: Any, input_ids: Any, thread_counts: Sequence[int], *,
                                 max_new_tokens: int, repeats: int = 3) -> dict[int, list[float]]:
    """Plain greedy seconds per token at each torch thread count (all repeats); restores the thread count."""
    import torch

    original = torch.get_num_threads()
    timings: dict[int, list[float]] = {threads: [] for threads in thread_counts}
    try:
        for threads in thread_counts:
            set_threads(threads)
            generate_greedy(model, input_ids, max_new_tokens=max_new_tokens, speculative=False)  # warm-up
        for _ in range(repeats):
            for threads in thread_counts:  # interleaved: a busy neighbour slows every count alike
                set_threads(threads)
                run = generate_greedy(model, input_ids, max_new_tokens=max_new_tokens, speculative=False)
                timings[threads].append(run.seconds_per_token)
    finally:
        torch.set_num_threads(original)
    return timings


def summary_rows(comparisons: Sequence[Comparison], cost_ratio: float | None, precision: str) -> list[dict]:
    """Rows in the format `utils.ov_self_speculation.summary_rows` uses, for one side-by-side table."""
    return [{
        "backend": "IPEX-LLM",
        "draft": "INT4 copy",
        "setting": setting_label(comparison.setting),
        "prompt": comparison.prompt_id,
        "prompt tokens": comparison.prompt_tokens,
        "tokens": comparison.speculative_tokens,
        "speed-up": comparison.speedup,
        "speed-up (CPU time)": comparison.speedup_cpu,
        "acceptance": comparison.acceptance_rate,
        "k": max(1, round(comparison.drafted_per_step)),
        "tokens/pass": comparison.tokens_per_step,
        "identical to plain": comparison.first_divergence is None,
        "first difference": comparison.first_divergence,
        "cost ratio c": cost_ratio,
        "precision": precision,
    } for comparison in comparisons]


def step_costs(comparisons: Sequence[Comparison]) -> list[dict]:
    """Inside each speculative run: a verify pass and a draft pass, relative to one plain decode step (wall time).

    The plain step is the plain run's time per generated token (prompt pass
    included, so slightly high for long prompts). Leviathan's formula assumes
    1 and c for these two.
    """
    rows = []
    for comparison in comparisons:
        plain_ms = 1000 * comparison.plain_seconds / comparison.plain_tokens
        rows.append({
            "backend": "IPEX-LLM",
            "draft": "INT4 copy",
            "prompt": comparison.prompt_id,
            "verify pass / plain step": decoding_metrics.verification_cost(comparison.verify_ms_per_step, plain_ms),
            "draft pass / plain step": decoding_metrics.cost_ratio(comparison.draft_ms_per_token, plain_ms),
        })
    return rows


def formula_check(rows: Sequence[dict], costs: Sequence[dict] = ()) -> list[dict]:
    """Leviathan's predicted speed-up beside the measured ones, for side-by-side rows of either backend.

    Each row needs ``k`` (tokens drafted per verify step), ``tokens/pass``
    (tokens per verification pass) and ``cost ratio c``. The per-token
    acceptance ``a`` is the one that explains the measured tokens per pass
    with that k (`utils.decoding_metrics.per_token_acceptance`).
    "predicted" assumes a verify pass costs one plain step and a draft pass c;
    when `costs` (from `step_costs` / `ov_self_speculation.pipeline_step_costs`)
    has the row's measured pass costs, "predicted (measured passes)" uses those.
    """
    from utils.speedup_model import predicted_speedup, predicted_speedup_with_step_times

    by_run = {(cost["backend"], cost["draft"], cost["prompt"]): cost for cost in costs}
    checked = []
    for row in rows:
        draft_length, cost_ratio = row["k"], row["cost ratio c"]
        acceptance = decoding_metrics.per_token_acceptance(row["tokens/pass"], draft_length)
        cost = by_run.get((row["backend"], row["draft"], row["prompt"]))
        checked.append({
            "backend": row["backend"],
            "draft": row["draft"],
            "prompt": row["prompt"],
            "k": draft_length,
            "tokens/pass": row["tokens/pass"],
            "a": acceptance,
            "c": cost_ratio,
            "predicted": predicted_speedup(acceptance, draft_length, cost_ratio),
            "predicted (measured passes)": predicted_speedup_with_step_times(
                acceptance, draft_length, cost["draft pass / plain step"], 1.0, cost["verify pass / plain step"])
            if cost else None,
            "measured (CPU time)": row["speed-up (CPU time)"],
            "measured (wall)": row["speed-up"],
        })
    return checked


# --------------------------------------------------------------------------- results shared with OpenVINO


def write_json(path: Path | str, data: Any) -> Path:
    """Write `data` as JSON (dataclasses become dicts), creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=_jsonable), encoding="utf-8")
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"Cannot write {type(value).__name__} as JSON.")


def check_openvino_half(main_python: Path | str, main_folder: Path | str, draft_folders: dict[str, Path]) -> None:
    """Raise now, not after minutes of IPEX-LLM work, if the OpenVINO half cannot run."""
    how = "Prepare them with `python3 tutorial.py lab` (or `.venv/bin/python -m utils.offline_pair`)."
    if not Path(main_python).exists():
        raise SelfSpeculationError(
            f"{main_python} does not exist: the main environment (with openvino-genai) is not set up. Run "
            "`python3 tutorial.py lab`, or set MAIN_PYTHON in the parameters cell.")
    folders = {"main": Path(main_folder), **{f"draft {name}": Path(path) for name, path in draft_folders.items()}}
    missing = [f"{role} ({folder})" for role, folder in folders.items() if not (folder / "openvino_model.xml").is_file()]
    if missing:
        raise SelfSpeculationError(f"OpenVINO model folder(s) missing: {', '.join(missing)}. {how}")


def run_main_python(module_args: Sequence[str], python: Path | str | None = None, timeout: float = 1800,
                    env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m <module_args>`` with the MAIN environment's python, from the repository root.

    The IPEX-LLM kernel has no OpenVINO; the OpenVINO half runs there instead.
    Raises with the child's stderr if it fails.
    """
    python = Path(python) if python else REPO_ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        raise SelfSpeculationError(
            f"{python} does not exist: the main environment is not set up. Run `python3 tutorial.py lab` first, "
            "or set MAIN_PYTHON in the parameters cell to a python with openvino-genai.")
    child_env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHONPATH", "VIRTUAL_ENV"))}
    child_env.update(env or {})
    completed = subprocess.run([str(python), "-m", *module_args], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=timeout, env=child_env)
    if completed.returncode != 0:
        raise RuntimeError(f"`{python} -m {' '.join(module_args)}` failed:\n{completed.stderr[-3000:]}")
    return completed


# --------------------------------------------------------------------------- peak memory (fresh process)


def measure_peak_rss(view: Path | str, speculative: bool, device: str = "cpu", max_new_tokens: int = 32,
                     threads: int = 1) -> dict:
    """Peak resident memory of a fresh process that loads the model and generates once (`load_and_generate`).

    Measured by `utils.peak_memory` (VmHWM of the child itself).
    """
    from utils.peak_memory import measure_in_fresh_process

    return measure_in_fresh_process("utils.ipex_self_speculation:load_and_generate", {
        "view": str(view), "speculative": speculative, "device": device, "max_new_tokens": max_new_tokens,
        "threads": threads})


def weight_bytes(module: Any, exclude_prefix: str = "draft_model.") -> int:
    """Bytes of a module's parameters (shared tensors once), leaving out the attached draft."""
    seen, total = set(), 0
    for name, parameter in module.named_parameters():
        if name.startswith(exclude_prefix) or parameter.data_ptr() in seen:
            continue
        seen.add(parameter.data_ptr())
        total += parameter.data.nbytes
    return total


def streamed_weight_bytes(model: Any) -> int:
    """Weight bytes one decode step reads: all weights except an input embedding table not shared with lm_head.

    A step looks up one row of the input embedding but multiplies by every
    other weight matrix, the output projection (lm_head) included.
    """
    total = weight_bytes(model)
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    if output is None or output.weight.data_ptr() != embedding.data_ptr():
        total -= embedding.data.nbytes
    return total


def load_and_generate(view: str, speculative: bool, device: str, max_new_tokens: int, threads: int) -> dict:
    """Load the model (with its INT4 draft if `speculative`) and generate once: the work `measure_peak_rss` measures."""
    from utils.peak_memory import current_rss_bytes

    set_threads(threads)
    model, tokenizer = load_self_speculative(view, article_recipe(device), speculative)
    after_load = current_rss_bytes()
    ids = encode_chat(tokenizer, "Write a short story about a lighthouse keeper.")
    generate_greedy(model, ids, max_new_tokens=max_new_tokens, speculative=speculative)
    return {
        "speculative": speculative,
        "rss_after_load_mb": after_load / 1e6,
        "rss_after_generate_mb": current_rss_bytes() / 1e6,
        "main_weights_mb": weight_bytes(model) / 1e6,
        "draft_weights_mb": weight_bytes(model.draft_model) / 1e6 if speculative else 0.0,
    }
