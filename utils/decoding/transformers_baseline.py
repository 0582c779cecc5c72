"""The same three decodings with Hugging Face transformers, side by side with OpenVINO GenAI (notebook 03).

`measure_transformers` gives `GenerationRecord`s (backend "transformers") for the usual reports. The draft is a folder
with the same tokenizer or "int8-dynamic" (the main model with dynamic int8 Linear layers). Weights compute in f32
(PyTorch's CPU default): compare with OpenVINO at f32.
"""
from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.decoding.generation import DecodingSettings, GenerationRecord, measure_runners
from utils.decoding.pipelines import SpeculationSetupError
from utils.decoding.prompts import Prompt, as_prompt
from utils.paths import models_dir

HF_FOLDER_NAME = "smollm2-135m-instruct-hf"


def default_hf_folder() -> Path:
    """The offline pair's Hugging Face folder (fp32 weights, verified tokenizer)."""
    return models_dir() / HF_FOLDER_NAME


@dataclass
class TransformersModels:
    """A transformers main model, its draft (None: plain and prompt lookup only) and the tokenizer."""

    main: Any
    draft: Any
    tokenizer: Any


def load_transformers_models(folder: Path | str | None = None, draft: str | Path | None = "int8-dynamic",
                             threads: int | None = None) -> TransformersModels:
    """The main model (f32, eval mode) and its draft: a Hugging Face folder, "int8-dynamic" or None.

    threads: process-wide; on a small shared machine all cores can be far slower than one, so match OpenVINO's.
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise SpeculationSetupError(f"threads must be an integer >= 1 or None, got {threads!r}.")
    draft_folder: Path | None = None
    if isinstance(draft, Path) or (isinstance(draft, str) and ("/" in draft or Path(draft).expanduser().is_dir())):
        draft_folder = Path(draft).expanduser()
    elif draft not in ("int8-dynamic", None):
        raise SpeculationSetupError(f"draft must be 'int8-dynamic', None or a Hugging Face model folder, got {draft!r}.")
    folder = Path(folder).expanduser() if folder is not None else default_hf_folder()
    for path, role in ((folder, "main"), (draft_folder, "draft")):
        if path is not None and not (path / "config.json").is_file():
            raise SpeculationSetupError(
                f"{path} is not a Hugging Face model folder (no config.json) for the {role} model: run the setup "
                "command (`python3 tutorial.py lab`), which builds the pairs' folders, first.")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads is not None:
        torch.set_num_threads(threads)
    with _quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(folder)
        if draft_folder is not None:
            _check_same_vocabulary(tokenizer, AutoTokenizer.from_pretrained(draft_folder), folder, draft_folder)
        main = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        draft_model = None
        if draft_folder is not None:
            draft_model = AutoModelForCausalLM.from_pretrained(draft_folder, dtype=torch.float32).eval()
        elif draft == "int8-dynamic":
            draft_model = _dynamic_int8_copy(folder)
    return TransformersModels(main, draft_model, tokenizer)


def _check_same_vocabulary(main_tokenizer: Any, draft_tokenizer: Any, main_folder: Path, draft_folder: Path) -> None:
    """Assisted generation passes token ids from draft to main: refuse a draft whose vocabulary differs."""
    if main_tokenizer.get_vocab() != draft_tokenizer.get_vocab():
        raise SpeculationSetupError(
            f"The tokenizers of {main_folder.name} (main) and {draft_folder.name} (draft) differ, so draft token "
            "ids would mean other tokens to the main model. Use a draft of the same model family with the same "
            "tokenizer (transformers can also translate between two tokenizers: `assistant_tokenizer=`, not "
            "covered here).")


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars and advice for the duration, then restore."""
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def _dynamic_int8_copy(folder: Path) -> Any:
    """The model with int8 weights in every Linear layer (activations quantised on the fly)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization announces its move to torchao
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def generate_arguments(models: TransformersModels, settings: DecodingSettings) -> dict:
    """Keyword arguments for `model.generate` that mirror `settings`: greedy, a fixed K, or an n-gram size."""
    if settings.do_sample or settings.ignore_eos or settings.assistant_confidence_threshold is not None:
        raise SpeculationSetupError("The transformers side of notebook 03 decodes greedily with a fixed K: leave "
                                    "do_sample, ignore_eos and assistant_confidence_threshold at their defaults.")
    arguments: dict[str, Any] = {
        "max_new_tokens": settings.max_new_tokens,
        "do_sample": False,
        "num_beams": settings.num_beams,
        "pad_token_id": models.tokenizer.pad_token_id or models.tokenizer.eos_token_id,
    }
    if settings.mode == "speculative":
        if models.draft is None:
            raise SpeculationSetupError("These transformers models were loaded with draft=None; load a draft.")
        arguments["assistant_model"] = models.draft
    elif settings.mode == "prompt_lookup":
        arguments.update(prompt_lookup_num_tokens=settings.num_assistant_tokens,
                         max_matching_ngram_size=settings.max_ngram_size)
    return arguments


def configure_draft(models: TransformersModels, settings: DecodingSettings) -> None:
    """Set K where transformers reads it, the draft's own generation_config: a constant schedule and no confidence
    cut-off (transformers otherwise adapts K and stops drafting below 0.4 confidence)."""
    config = models.draft.generation_config
    config.num_assistant_tokens_schedule = "constant"
    config.num_assistant_tokens = settings.num_assistant_tokens  # DecodingSettings resolves the default K
    config.assistant_confidence_threshold = 0.0


def _encode(models: TransformersModels, text: str, apply_chat_template: bool) -> Any:
    tokenizer = models.tokenizer
    if apply_chat_template and tokenizer.chat_template:
        return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                             return_tensors="pt", return_dict=True)
    return tokenizer(text, return_tensors="pt")


class _StepSizes:
    """A transformers streamer: the prompt first, then each step's new tokens (as OpenVINO GenAI's streamer)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self._prompt_seen = False

    def put(self, value) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.sizes.append(int(value.numel()))

    def end(self) -> None:
        pass


def run_transformers_prompt(models: TransformersModels, prompt: Prompt | str, settings: DecodingSettings
                            ) -> GenerationRecord:
    """Generate once with transformers and return a `GenerationRecord` (backend "transformers")."""
    import torch

    prompt = as_prompt(prompt)
    inputs = _encode(models, prompt.text, settings.apply_chat_template)
    arguments = generate_arguments(models, settings)
    if settings.mode == "speculative":
        configure_draft(models, settings)
    main_passes = 0

    def count_pass(*_):
        nonlocal main_passes
        main_passes += 1

    steps = _StepSizes()
    hook = models.main.register_forward_hook(count_pass)
    try:
        with torch.inference_mode(), _quiet_transformers():
            started = time.perf_counter()
            output = models.main.generate(**inputs, **arguments, streamer=steps)
            wall = time.perf_counter() - started
    finally:
        hook.remove()
    input_length = inputs["input_ids"].shape[1]
    token_ids = [int(token) for token in output[0, input_length:]]
    generated = len(token_ids)
    tokens_per_step = steps.sizes if sum(steps.sizes) == generated else None
    return GenerationRecord(
        mode=settings.mode,
        setting=settings.label,
        prompt_id=prompt.id,
        task=prompt.task,
        device="CPU",
        precision="f32",
        backend="transformers",
        input_tokens=int(input_length),
        generated_tokens=generated,
        token_ids=token_ids,
        text=models.tokenizer.decode(token_ids, skip_special_tokens=True),
        wall_seconds=wall,
        tokens_per_second=generated / wall if wall > 0 else 0.0,
        ttft_ms=None,
        tpot_ms=None,
        genai_tokens_per_second=None,
        main_passes=main_passes or None,
        tokens_per_step=tokens_per_step,
        accepted_from_steps=generated - main_passes if main_passes else None,
        wall_seconds_all=[wall],
    )


def measure_transformers(
    models: TransformersModels,
    settings_list: list[DecodingSettings],
    prompts: list[Prompt | str],
    *,
    warmup: int = 1,
    repeats: int = 3,
) -> list[GenerationRecord]:
    """Warm-up, interleaved repeats, median per prompt (as `measure_runners`)."""
    runners = [lambda prompt, settings=settings: run_transformers_prompt(models, prompt, settings)
               for settings in settings_list]
    return measure_runners(runners, prompts, warmup=warmup, repeats=repeats)
