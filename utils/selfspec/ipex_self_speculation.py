"""IPEX-LLM self-speculative decoding: the article's recipe, generate, its statistics, weights and memory.

IPEX-LLM (archived by Intel) with ``speculative=True`` loads the main model and a ``sym_int4`` copy as
``model.draft_model``; the draft stops when its top probability falls below ``th_stop_draft`` (or after
``max_step_draft`` tokens), then the main model verifies (`generate_greedy`). torch / ipex_llm are imported lazily.
"""
from __future__ import annotations

import statistics
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.decoding import decoding_metrics
from utils.input_checks import as_integer

DRAFT_OPTIONS = ("th_stop_draft", "max_step_draft", "auto_th_stop_draft", "min_step_draft", "hf_adjust")


class SelfSpeculationError(ValueError):
    """An input IPEX-LLM self-speculation cannot use; the message says what to do instead."""


def article_recipe(device: str) -> dict[str, str]:
    """The source article's `from_pretrained` precision settings: bf16 on 'cpu', fp16 on 'xpu' (Intel GPU)."""
    recipes = {"cpu": {"torch_dtype": "bfloat16", "load_in_low_bit": "bf16"},
               "xpu": {"torch_dtype": "float16", "load_in_low_bit": "fp16"}}
    if device not in recipes:
        raise SelfSpeculationError(f"Unknown device {device!r}: IPEX-LLM runs on 'cpu' or 'xpu' (Intel GPU).")
    return recipes[device]


def load_ipex_tokenizer(view: Path | str) -> Any:
    """The model's tokenizer, checked: eos must end the assistant's turn and no token_type_ids."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(view))
    if tokenizer.eos_token != "<|im_end|>" and tokenizer.chat_template and "<|im_end|>" in tokenizer.chat_template:
        raise SelfSpeculationError(
            f"eos token is {tokenizer.eos_token!r}, but chat turns end with '<|im_end|>': generation would not "
            "stop at the end of the answer. Rebuild the folder (python -m maintainers.offline_pair --force).")
    if "token_type_ids" in tokenizer("a"):
        raise SelfSpeculationError("The tokenizer returns token_type_ids, which breaks generate(); "
                                   "set model_input_names to ['input_ids', 'attention_mask'].")
    return tokenizer


@dataclass
class SpeculationStats:
    """IPEX-LLM's record of its last speculative `generate` (reset each call; seconds). tokens_per_step is its
    ``accept_num``: accepted drafts + the main model's own token, prefill excluded."""

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
    def mean_tokens_per_step(self) -> float:
        """Mean tokens per verification pass (`decoding_metrics.tokens_per_main_pass` of `ipex_llm_steps`)."""
        steps = decoding_metrics.ipex_llm_steps(self.tokens_per_step, self.generated_tokens)
        return decoding_metrics.tokens_per_main_pass(steps) or 0.0

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
    """IPEX-LLM's own counters on the model (``n_drafted``, ``accept_num``, ...) after a speculative `generate`."""
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


@contextmanager
def draft_disabled(model: Any) -> Iterator[Any]:
    """Temporarily hide ``model.draft_model``: IPEX-LLM's generate then decodes plainly, same weights."""
    draft = model.__dict__.get("_modules", {}).pop("draft_model", None)
    try:
        yield model
    finally:
        if draft is not None:
            model._modules["draft_model"] = draft


@dataclass
class GenerationRun:
    """One greedy generation: the new tokens and, if speculative, IPEX-LLM's statistics (timed by the caller)."""

    token_ids: list[int]
    stats: SpeculationStats | None = None

    @property
    def generated_tokens(self) -> int:
        return len(self.token_ids)


def check_generate_inputs(input_ids: Any, max_new_tokens: Any, draft_options: dict) -> None:
    """Raise (before any work) for inputs IPEX-LLM's self-speculation mishandles silently or cryptically."""
    as_integer(max_new_tokens, "max_new_tokens", minimum=1, error=SelfSpeculationError,
               advice="Pass it explicitly: without it IPEX-LLM's speculative generate stops after 10 tokens.")
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
    if draft_options.get("max_step_draft") is not None:
        as_integer(draft_options["max_step_draft"], "max_step_draft", minimum=1, error=SelfSpeculationError)


def generate_greedy(model: Any, input_ids: Any, *, max_new_tokens: int, speculative: bool = True,
                    **draft_options: Any) -> GenerationRun:
    """Greedy generation with (or, ``speculative=False``, without) the INT4 draft; `draft_options` are IPEX-LLM's.
    The ids go in by position: ``generate(**tokenizer(...))`` crashes in IPEX-LLM's speculative path."""
    import torch

    check_generate_inputs(input_ids, max_new_tokens, draft_options)
    if speculative and not hasattr(model, "draft_model"):
        raise SelfSpeculationError("This model has no draft: load it with speculative=True.")
    if not speculative and draft_options:
        raise SelfSpeculationError(f"Draft options {sorted(draft_options)} have no effect without speculation.")
    with torch.inference_mode(), (draft_disabled(model) if not speculative else nullcontext()):
        output = model.generate(input_ids, max_new_tokens=max_new_tokens, do_sample=False, **draft_options)
    new_ids = [int(token) for token in output[0, input_ids.shape[1]:]]
    stats = read_speculation_stats(model) if speculative else None
    return GenerationRun(new_ids, stats)


def weight_bytes(module: Any) -> int:
    """Bytes of a module's parameters (shared tensors once), leaving out the attached draft."""
    seen, total = set(), 0
    for name, parameter in module.named_parameters():
        if name.startswith("draft_model.") or parameter.data_ptr() in seen:
            continue
        seen.add(parameter.data_ptr())
        total += parameter.data.nbytes
    return total


def measure_peak_rss(view: Path | str, speculative: bool, device: str = "cpu", threads: int = 1) -> dict:
    """Peak RSS of a fresh process running `load_and_generate_once` (VmHWM, via `utils.system.peak_memory`)."""
    from utils.system.peak_memory import measure_in_fresh_process

    return measure_in_fresh_process("utils.selfspec.ipex_self_speculation:load_and_generate_once",
                                    {"view": str(view), "speculative": speculative, "device": device,
                                     "threads": threads})


def load_and_generate_once(view: str, speculative: bool, device: str, threads: int) -> dict:
    """The work `measure_peak_rss` measures: notebook 04's load with the article's recipe (and the INT4 draft if
    `speculative`), then 32 new tokens for one chat prompt."""
    import torch
    from transformers.utils import logging as transformers_logging

    from utils.system.peak_memory import current_rss_bytes

    torch.set_num_threads(threads)
    tokenizer = load_ipex_tokenizer(view)
    transformers_logging.set_verbosity_error()
    recipe = article_recipe(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ipex_llm.transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(view, optimize_model=True, use_cache=True, trust_remote_code=True,
                                                     torch_dtype=getattr(torch, recipe["torch_dtype"]),
                                                     load_in_low_bit=recipe["load_in_low_bit"], speculative=speculative)
    if device != "cpu":
        model = model.to(device)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    after_load = current_rss_bytes()
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Write a short story about a lighthouse keeper."}],
                                        add_generation_prompt=True, return_tensors="pt")
    generate_greedy(model, ids, max_new_tokens=32, speculative=speculative)
    return {
        "speculative": speculative,
        "rss_after_load_mb": after_load / 1e6,
        "rss_after_generate_mb": current_rss_bytes() / 1e6,
        "main_weights_mb": weight_bytes(model) / 1e6,
        "draft_weights_mb": weight_bytes(model.draft_model) / 1e6 if speculative else 0.0,
    }
