"""What the playground's widgets may say, checked, and the pipelines it runs (notebook 07).

Starting values outside the sliders' ranges (K_RANGE, THRESHOLD_MAX, ...) raise a one-line InputError, never clamped;
a choice's decoding settings are checked by `DecodingSettings`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from utils.decoding.generation import DecodingSettings, encode_prompt, run_prompt
from utils.decoding.pipelines import LoadedPipeline, load_pipeline
from utils.input_checks import InputError, as_integer, check_prompt_fits, check_text, context_length
from utils.models.model_catalogue import get_pair
from utils.models.model_check import check_model_folder
from utils.tuning.pipeline_pool import DEFAULT_KEEP, BoundedPipelines

MODE_LABELS = {"plain": "plain", "draft model": "speculative", "prompt lookup": "prompt_lookup"}
DEFAULT_PROMPT = "Explain in two sentences why the sky is blue."
DEFAULT_DRAFT_VARIANT = "default"
WARMUP_TOKENS = 4
# The widgets' ranges: the sliders are built from these and the starting values checked against them.
K_RANGE = (1, 10)
THRESHOLD_MAX = 0.95  # thresholds run from 0 (off: fixed K) to this
THRESHOLD_STEP = 0.05
MAX_NEW_TOKENS_RANGE = (4, 256)


def check_integer_setting(value: Any, name: str, allowed: tuple[int, int], slider: str, example: str) -> int:
    """`value` as an int within a slider's (min, max), else a one-line InputError."""
    low, high = allowed
    where = f"from {low} to {high} (the {slider} slider's range)"
    number = as_integer(value, name, advice=f"Choose a whole number {where}, e.g. {example}.")
    if not low <= number <= high:
        raise InputError(f"{name} must be {where}, got {number}: choose e.g. {example}.")
    return number


def check_threshold(value: Any) -> float:
    """`value` as a float from 0 (fixed K) to THRESHOLD_MAX, else a one-line InputError."""
    try:
        number = None if isinstance(value, (bool, str, bytes)) else float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not 0.0 <= number <= THRESHOLD_MAX:
        raise InputError(f"threshold must be a number from 0 to {THRESHOLD_MAX} (the Threshold slider's range; "
                         f"0 = fixed K), got {value!r}: choose e.g. threshold=0.4, or 0 for a fixed K.")
    return number


# --------------------------------------------------------------------------- what the widgets say


@dataclass(frozen=True)
class PlaygroundChoice:
    """The playground's settings, as read from its widgets at the moment of a click."""

    prompt: str
    pair: str = "offline"
    draft_variant: str = DEFAULT_DRAFT_VARIANT  # "default" or one of the pair's alternative drafts
    mode: str = "speculative"  # "plain", "speculative" or "prompt_lookup"
    k: int = 3
    threshold: float = 0.0  # 0 = off (fixed K); > 0 = dynamic speculation (draft model only)
    precision: str = "f32"
    device: str = "CPU"
    max_new_tokens: int = 32

    def settings(self) -> DecodingSettings:
        """The decoding settings; `DecodingSettings` raises SpeculationSetupError for a bad value or combination."""
        if self.mode == "plain":
            return DecodingSettings("plain", max_new_tokens=self.max_new_tokens)
        if self.threshold:  # raises for prompt lookup: it has no probabilities
            return DecodingSettings(self.mode, assistant_confidence_threshold=self.threshold,
                                    max_new_tokens=self.max_new_tokens)
        return DecodingSettings(self.mode, num_assistant_tokens=self.k, max_new_tokens=self.max_new_tokens)

    def folders(self) -> tuple[Path, Path | None]:
        """(main folder, draft folder or None), checked: a missing pair says how to prepare it."""
        pair = get_pair(self.pair)
        variant = None if self.draft_variant == DEFAULT_DRAFT_VARIANT else self.draft_variant
        main_dir = check_model_folder(pair.main.path, "main model")
        if self.mode != "speculative":
            return main_dir, None
        return main_dir, check_model_folder(pair.draft_variant(variant).path, "draft model")


def check_prompt(prompt: str) -> str:
    """The prompt stripped of surrounding blanks; raises ValueError (saying what to do) if empty."""
    if not prompt or not prompt.strip():
        raise ValueError("The prompt is empty: type a question or an instruction in the prompt box, then click again.")
    return check_text(prompt.strip())


def load_playground_tokenizer(main_dir: Path) -> Any:
    """The main model's OpenVINO GenAI tokenizer alone (no model compiled), as `run_prompt` encodes."""
    import openvino_genai

    return openvino_genai.Tokenizer(str(main_dir))


class PromptTokens:
    """Counts a prompt's tokens as `run_prompt` will (chat template included), with the tokenizer alone.

    So a prompt too long for the context is refused before any pipeline loads.
    """

    def __init__(self, load: Callable[[Path], Any] = load_playground_tokenizer) -> None:
        self.load = load
        self.tokenizers: dict[Path, Any] = {}

    def count(self, main_dir: Path, text: str, apply_chat_template: bool = True) -> int:
        if main_dir not in self.tokenizers:
            self.tokenizers[main_dir] = self.load(main_dir)
        return int(encode_prompt(self.tokenizers[main_dir], text, apply_chat_template).input_ids.get_shape()[-1])

    def check_fits(self, main_dir: Path, text: str, settings: DecodingSettings) -> None:
        """An InputError if the prompt's tokens plus max_new_tokens exceed the main model's context."""
        context = context_length(main_dir)
        if context is None:
            return
        check_prompt_fits(self.count(main_dir, text, settings.apply_chat_template), settings.max_new_tokens, context,
                          main_dir.name)


# --------------------------------------------------------------------------- pipelines, loaded once


@dataclass(frozen=True)
class PlaygroundPipeline:
    """Which pipeline a click needs: the key of `PipelineCache`."""

    mode: str
    main_dir: Path
    draft_dir: Path | None
    device: str
    precision: str

    @property
    def label(self) -> str:
        models = self.main_dir.name + (f" + draft {self.draft_dir.name}" if self.draft_dir else "")
        return f"{self.mode} ({models}, {self.device}, {self.precision})"


class PipelineCache(BoundedPipelines[PlaygroundPipeline]):
    """The playground's pipelines, loaded and warmed up once, at most `keep` kept."""

    def __init__(self, loader: Callable[..., LoadedPipeline] = load_pipeline, keep: int = DEFAULT_KEEP) -> None:
        super().__init__(self._load, keep)
        self.loader = loader

    def _load(self, key: PlaygroundPipeline) -> LoadedPipeline:
        loaded = self.loader(key.mode, key.main_dir, key.device, draft_dir=key.draft_dir, precision=key.precision)
        # Untimed warm-up: the first generate compiles kernels and allocates the KV cache.
        run_prompt(loaded, "Hello", DecodingSettings(key.mode, max_new_tokens=WARMUP_TOKENS))
        return loaded

    def for_choice(self, choice: PlaygroundChoice, mode: str | None = None) -> LoadedPipeline:
        """The pipeline for a choice (or for another mode on the same pair, e.g. plain for the race)."""
        mode = mode or choice.mode
        main_dir, draft_dir = replace(choice, mode=mode).folders()
        return self.get(PlaygroundPipeline(mode, main_dir, draft_dir, choice.device, choice.precision))
