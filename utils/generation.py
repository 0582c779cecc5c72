"""Run plain, speculative and prompt-lookup decoding with OpenVINO GenAI, and measure them honestly.

The API, in the order a notebook uses it::

    settings = DecodingSettings("speculative", num_assistant_tokens=3, max_new_tokens=64)
    spec = load_pipeline("speculative", main_dir, "CPU", draft_dir=draft_dir, precision="f32")
    plain = load_pipeline("plain", main_dir, "CPU", precision="f32")
    record = run_prompt(spec, "Why is the sky blue?", settings)           # one GenerationRecord
    records = measure_side_by_side(                                      # warm-up, repeats, medians
        [(plain, DecodingSettings("plain", max_new_tokens=64)), (spec, settings)], prompts)
    compared = compare_with_plain(records)                               # speed-up + identical_to_plain

Fair comparison (the rules this module enforces)
------------------------------------------------
* **Same backend.** OpenVINO GenAI runs speculative and prompt-lookup decoding on
  its continuous-batching (paged-attention) backend. `load_pipeline` therefore
  builds *plain* pipelines on that backend too, by passing the same
  `scheduler_config` (``backend="continuous_batching"``, the default). The
  stateful backend, which `LLMPipeline(main, device)` picks without a scheduler
  config, is available for plain decoding with ``backend="stateful"``; its speed
  differs, so never divide across backends.
* **Same precision.** ``precision="f32"`` sets ``INFERENCE_PRECISION_HINT=f32`` on
  the main *and* the draft model; ``"default"`` (or None) leaves the device's
  choice (bf16 on CPUs with AMX/AVX512-BF16). Only under f32 is speculative
  greedy output expected to equal plain greedy output token for token.
* **Same number of tokens.** `compare_with_plain` reports a speed-up only when
  both runs generated the same number of tokens, and says why otherwise.
* **Warm-up, repeats, medians, interleaved.** `measure_side_by_side` runs
  untimed warm-ups, then alternates the pipelines prompt by prompt on every
  repeat (so a noisy neighbour slows all of them alike) and keeps medians.

Bad input raises `SpeculationSetupError` (a ValueError) with what to do, before
any model is loaded: see `DecodingSettings` and `check_draft_folder`.

Heavy imports (openvino_genai) happen inside functions.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from utils.prompts import Prompt, as_prompt
from utils.text_compare import first_divergence

MODES = ("plain", "speculative", "prompt_lookup")
PRECISIONS = ("default", "f32")
BACKENDS = ("continuous_batching", "stateful")
DEFAULT_NUM_ASSISTANT_TOKENS = 3  # on this project's CPU, verifying K <= 3 costs about one plain step
DEFAULT_MAX_NGRAM_SIZE = 3
OPENVINO_MODEL_FILE = "openvino_model.xml"


class SpeculationSetupError(ValueError):
    """A setting or a model folder that cannot work; the message says what to do instead."""


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class DecodingSettings:
    """How to decode: mode, speculation knobs and sampling, validated on creation.

    mode: "plain" (one main-model pass per token), "speculative" (a draft model
        proposes tokens, the main model verifies them) or "prompt_lookup" (the
        proposal is an n-gram copied from the prompt; no draft model).
    num_assistant_tokens: K, tokens proposed per step (speculative, prompt_lookup).
        Defaults to DEFAULT_NUM_ASSISTANT_TOKENS when neither K nor a threshold is given.
    assistant_confidence_threshold: dynamic speculation (speculative only): the
        draft keeps proposing while its probability for its token exceeds this.
        Mutually exclusive with K.
    max_ngram_size: longest n-gram prompt lookup matches (prompt_lookup only).
    max_new_tokens, do_sample, temperature, top_p, top_k, rng_seed, num_beams: as in
        `openvino_genai.GenerationConfig`.
    ignore_eos: keep generating after the end-of-sequence token, so every run
        generates exactly max_new_tokens (useful for timing; changes the text).
    apply_chat_template: wrap the prompt in the model's chat template (as
        `LLMPipeline.generate(str)` does by default).
    """

    mode: str = "plain"
    num_assistant_tokens: int | None = None
    assistant_confidence_threshold: float | None = None
    max_ngram_size: int | None = None
    max_new_tokens: int = 64
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    rng_seed: int = 42
    num_beams: int = 1
    ignore_eos: bool = False
    apply_chat_template: bool = True

    def __post_init__(self) -> None:
        mode = self.mode
        if mode not in MODES:
            raise SpeculationSetupError(f"Unknown mode '{mode}'. Use one of: {', '.join(MODES)}.")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise SpeculationSetupError(f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}.")
        k, threshold = self.num_assistant_tokens, self.assistant_confidence_threshold
        if mode == "plain":
            given = [name for name, value in (("num_assistant_tokens", k), ("assistant_confidence_threshold",
                     threshold), ("max_ngram_size", self.max_ngram_size)) if value is not None]
            if given:
                raise SpeculationSetupError(
                    f"Plain decoding has no draft, so {', '.join(given)} would be ignored. "
                    "Remove it, or use mode='speculative' / 'prompt_lookup'.")
        if k is not None and threshold is not None:
            raise SpeculationSetupError(
                "Set either num_assistant_tokens (a fixed K tokens per step) or assistant_confidence_threshold "
                "(dynamic: the draft stops when unsure), not both. Set the other one to None.")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise SpeculationSetupError(
                f"num_assistant_tokens (K) must be an integer >= 1, got {k!r}: it is how many tokens the draft "
                "proposes per step. For no speculation at all use mode='plain'.")
        if threshold is not None:
            if mode == "prompt_lookup":
                raise SpeculationSetupError(
                    "Prompt lookup has no draft probabilities, so assistant_confidence_threshold does not apply. "
                    "Use num_assistant_tokens (and max_ngram_size) instead.")
            if not 0.0 < float(threshold) < 1.0:
                raise SpeculationSetupError(
                    f"assistant_confidence_threshold must lie strictly between 0 and 1, got {threshold!r} "
                    "(e.g. 0.4: the draft keeps proposing while it is at least 40% sure).")
        if self.max_ngram_size is not None:
            if mode != "prompt_lookup":
                raise SpeculationSetupError("max_ngram_size only applies to mode='prompt_lookup'. Remove it.")
            if isinstance(self.max_ngram_size, bool) or not isinstance(self.max_ngram_size, int) \
                    or self.max_ngram_size < 1:
                raise SpeculationSetupError(f"max_ngram_size must be an integer >= 1, got {self.max_ngram_size!r}.")
        if not isinstance(self.num_beams, int) or self.num_beams < 1:
            raise SpeculationSetupError(f"num_beams must be an integer >= 1, got {self.num_beams!r}.")
        if self.num_beams > 1 and mode != "plain":
            raise SpeculationSetupError(
                f"Beam search (num_beams={self.num_beams}) cannot be combined with {mode} decoding: OpenVINO GenAI "
                "verifies draft tokens for greedy decoding and sampling only. Use num_beams=1, or mode='plain'.")
        if self.num_beams > 1 and self.do_sample:
            raise SpeculationSetupError("Choose beam search (num_beams > 1) or sampling (do_sample=True), not both.")
        if self.do_sample and self.temperature <= 0:
            raise SpeculationSetupError(f"temperature must be > 0 when sampling, got {self.temperature!r}.")
        # Resolve defaults so that the label and the GenerationConfig agree.
        if mode != "plain" and k is None and threshold is None:
            object.__setattr__(self, "num_assistant_tokens", DEFAULT_NUM_ASSISTANT_TOKENS)
        if mode == "prompt_lookup" and self.max_ngram_size is None:
            object.__setattr__(self, "max_ngram_size", DEFAULT_MAX_NGRAM_SIZE)

    @property
    def label(self) -> str:
        """Short description of the setting, e.g. 'K=3', 'threshold=0.4', 'K=3, ngram=3', 'greedy'."""
        decoding = "sampling" if self.do_sample else ("beam" if self.num_beams > 1 else "greedy")
        if self.mode == "plain":
            return decoding
        parts = []
        if self.num_assistant_tokens is not None:
            parts.append(f"K={self.num_assistant_tokens}")
        if self.assistant_confidence_threshold is not None:
            parts.append(f"threshold={self.assistant_confidence_threshold:g}")
        if self.mode == "prompt_lookup":
            parts.append(f"ngram={self.max_ngram_size}")
        if self.do_sample:
            parts.append("sampling")
        return ", ".join(parts)

    def generation_config(self, base: Any = None) -> Any:
        """An `openvino_genai.GenerationConfig` for these settings.

        `base` supplies model defaults such as the end-of-sequence token and is
        updated in place: pass `pipeline.get_generation_config()`, which returns
        a fresh copy each call.
        """
        import openvino_genai

        config = openvino_genai.GenerationConfig() if base is None else base
        config.max_new_tokens = self.max_new_tokens
        config.do_sample = self.do_sample
        config.num_beams = self.num_beams
        config.ignore_eos = self.ignore_eos
        config.num_return_sequences = 1
        if self.do_sample:
            config.temperature = self.temperature
            config.top_p = self.top_p
            config.top_k = self.top_k
            config.rng_seed = self.rng_seed
        if self.num_assistant_tokens is not None:
            config.num_assistant_tokens = self.num_assistant_tokens
        if self.assistant_confidence_threshold is not None:
            config.assistant_confidence_threshold = self.assistant_confidence_threshold
        if self.max_ngram_size is not None:
            config.max_ngram_size = self.max_ngram_size
        return config


# --------------------------------------------------------------------------- model folders


def check_main_folder(main_dir: Path | str) -> Path:
    """The main model's location, checked: an OpenVINO folder (or a .gguf file, plain/prompt lookup only)."""
    path = Path(main_dir).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return path
    if not path.exists():
        raise SpeculationSetupError(
            f"Main model folder {path} does not exist. Prepare it first (notebook 01, or "
            "utils.offline_pair.prepare_offline_models() for the offline pair).")
    if not (path / OPENVINO_MODEL_FILE).exists():
        raise SpeculationSetupError(
            f"{path} holds no {OPENVINO_MODEL_FILE}: it is not an OpenVINO model folder. Export the model with "
            "`optimum-cli export openvino --model <model> <folder>`.")
    return path


def check_draft_folder(draft_dir: Path | str, main_dir: Path | str | None = None) -> Path:
    """The draft model folder, checked before loading anything.

    Raises `SpeculationSetupError` for a GGUF file (OpenVINO GenAI cannot use one
    as a draft), a missing folder, a folder without an OpenVINO model, and (when
    `main_dir` is given) a tokenizer that differs from the main model's.
    """
    path = Path(draft_dir).expanduser()
    if path.suffix.lower() == ".gguf" or (path.is_file() and path.read_bytes()[:4] == b"GGUF"):
        raise SpeculationSetupError(
            f"{path} is a GGUF file. OpenVINO GenAI loads GGUF files as a main model only, not as a draft. Export "
            "the draft to an OpenVINO folder (`optimum-cli export openvino --model <hf folder> --weight-format int4 "
            "<folder>`) and pass that folder.")
    if not path.exists():
        raise SpeculationSetupError(
            f"Draft model folder {path} does not exist. Prepare it first (notebook 01, or "
            "utils.offline_pair.prepare_offline_models() for the offline pair), or check the path.")
    if not path.is_dir() or not (path / OPENVINO_MODEL_FILE).exists():
        raise SpeculationSetupError(
            f"{path} is not an OpenVINO model folder (no {OPENVINO_MODEL_FILE}). Export the draft with "
            "`optimum-cli export openvino` and pass the folder.")
    if main_dir is not None:
        _check_same_tokenizer(Path(main_dir).expanduser(), path)
    return path


def _check_same_tokenizer(main_dir: Path, draft_dir: Path) -> None:
    """Use the project's `utils.model_check.check_pair` when available; else compare the tokenizer IR files."""
    try:
        from utils.model_check import check_pair
    except ImportError:
        check_pair = None
    if check_pair is not None:
        try:
            check_pair(main_dir, draft_dir)
        except SpeculationSetupError:
            raise
        except (ValueError, FileNotFoundError) as error:
            raise SpeculationSetupError(str(error)) from error
        return
    main_tokenizer = main_dir / "openvino_tokenizer.xml"
    draft_tokenizer = draft_dir / "openvino_tokenizer.xml"
    if main_tokenizer.exists() and draft_tokenizer.exists() and \
            _tokenizer_vocab(main_tokenizer) != _tokenizer_vocab(draft_tokenizer):
        raise SpeculationSetupError(
            f"The draft {draft_dir.name} and the main model {main_dir.name} use different tokenizers; speculative "
            "decoding needs the same token ids on both sides. Pick a draft from the main model's family.")


def _tokenizer_vocab(tokenizer_xml: Path) -> bytes:
    """Bytes of the tokenizer IR's weights, which hold the vocabulary (the .xml alone names only the ops)."""
    weights = tokenizer_xml.with_suffix(".bin")
    return weights.read_bytes() if weights.exists() else tokenizer_xml.read_bytes()


# --------------------------------------------------------------------------- pipelines


def device_properties(precision: str | None) -> dict[str, str]:
    """OpenVINO properties for a precision choice: "f32" forces f32 inference, "default"/None keeps the device's."""
    if precision is None or precision == "default":
        return {}
    if precision == "f32":
        return {"INFERENCE_PRECISION_HINT": "f32"}
    raise SpeculationSetupError(f"precision must be one of {PRECISIONS} or None, got '{precision}'.")


def make_scheduler_config(cache_size_gb: int = 0) -> Any:
    """A `SchedulerConfig` for the continuous-batching backend.

    cache_size_gb: size of the paged KV cache in GB, allocated up front;
    0 (default) lets the cache grow with demand (dynamic allocation).
    """
    import openvino_genai

    if cache_size_gb < 0:
        raise SpeculationSetupError(f"cache_size_gb must be >= 0 (0 = dynamic), got {cache_size_gb}.")
    config = openvino_genai.SchedulerConfig()
    config.cache_size = int(cache_size_gb)
    return config


@dataclass
class LoadedPipeline:
    """An `openvino_genai.LLMPipeline` and how it was built."""

    mode: str
    pipeline: Any
    main_dir: Path
    draft_dir: Path | None
    device: str
    precision: str
    backend: str
    load_seconds: float

    @property
    def tokenizer(self) -> Any:
        return self.pipeline.get_tokenizer()

    @property
    def description(self) -> str:
        draft = f", draft={self.draft_dir.name}" if self.draft_dir else ""
        return f"{self.mode} on {self.device} ({self.backend}, precision={self.precision}), main={self.main_dir.name}{draft}"


def load_pipeline(
    mode: str,
    main_dir: Path | str,
    device: str = "CPU",
    *,
    draft_dir: Path | str | None = None,
    draft_device: str | None = None,
    precision: str | None = "default",
    cache_size_gb: int = 0,
    backend: str = "continuous_batching",
) -> LoadedPipeline:
    """Build the pipeline for one decoding mode. Inputs are checked before any model is loaded.

    plain:          LLMPipeline(main, device, scheduler_config=..., **props)
    speculative:    LLMPipeline(main, device, scheduler_config=..., draft_model=draft_model(draft, device, **props), **props)
    prompt_lookup:  LLMPipeline(main, device, scheduler_config=..., prompt_lookup=True, **props)

    `props` comes from `device_properties(precision)` and is applied to main and
    draft alike. ``backend="stateful"`` (plain only) omits the scheduler config.
    """
    if mode not in MODES:
        raise SpeculationSetupError(f"Unknown mode '{mode}'. Use one of: {', '.join(MODES)}.")
    if backend not in BACKENDS:
        raise SpeculationSetupError(f"backend must be one of {BACKENDS}, got '{backend}'.")
    if backend == "stateful" and mode != "plain":
        raise SpeculationSetupError(
            f"{mode} decoding always runs on OpenVINO GenAI's continuous-batching backend; backend='stateful' "
            "is for plain decoding only.")
    properties = device_properties(precision)
    main_path = check_main_folder(main_dir)
    draft_path: Path | None = None
    if mode == "speculative":
        if draft_dir is None:
            raise SpeculationSetupError("Speculative decoding needs draft_dir, the draft model's OpenVINO folder.")
        if main_path.suffix.lower() == ".gguf":
            raise SpeculationSetupError(
                "A GGUF main model cannot be combined with a draft here; use the OpenVINO export of the main model.")
        draft_path = check_draft_folder(draft_dir, main_path)
    elif draft_dir is not None:
        raise SpeculationSetupError(f"draft_dir is only used by mode='speculative', not '{mode}'. Remove it.")

    import openvino_genai

    arguments: dict[str, Any] = dict(properties)
    if backend == "continuous_batching":
        arguments["scheduler_config"] = make_scheduler_config(cache_size_gb)
    if mode == "speculative":
        arguments["draft_model"] = openvino_genai.draft_model(str(draft_path), draft_device or device, **properties)
    if mode == "prompt_lookup":
        arguments["prompt_lookup"] = True
    started = time.perf_counter()
    pipeline = openvino_genai.LLMPipeline(str(main_path), device, **arguments)
    return LoadedPipeline(
        mode=mode, pipeline=pipeline, main_dir=main_path, draft_dir=draft_path, device=device,
        precision=precision or "default", backend=backend, load_seconds=time.perf_counter() - started)


# --------------------------------------------------------------------------- one prompt


@dataclass
class GenerationRecord:
    """What one generation (or the median of repeats of it) produced and cost.

    Times: wall_seconds is measured around `generate`; ttft_ms / tpot_ms /
    genai_tokens_per_second are OpenVINO GenAI's own perf metrics.
    tokens_per_second = generated_tokens / wall_seconds.
    main_passes: main-model forward passes (prefill + one per verification step),
    from GenAI's raw metrics; tokens_per_step lists how many tokens each pass
    yielded (accepted draft tokens + the main model's own token).
    acceptance_rate (fraction of proposed draft tokens the main model kept),
    accepted_tokens, draft_tokens (proposed), main_model_metrics and
    draft_model_metrics: GenAI's `extended_perf_metrics` (None for plain and
    prompt lookup, where GenAI reports none).
    accepted_from_steps: generated_tokens - main_passes, i.e. tokens the main
    model did not have to produce itself (works for prompt lookup too).
    The comparison fields are filled by `compare_with_plain`.
    """

    mode: str
    setting: str
    prompt_id: str
    task: str
    device: str
    precision: str
    input_tokens: int
    generated_tokens: int
    token_ids: list[int]
    text: str
    wall_seconds: float
    tokens_per_second: float
    ttft_ms: float | None
    tpot_ms: float | None
    genai_tokens_per_second: float | None
    main_passes: int | None
    tokens_per_step: list[int] | None
    accepted_from_steps: int | None
    acceptance_rate: float | None = None
    accepted_tokens: int | None = None
    draft_tokens: int | None = None
    main_model_metrics: dict | None = None
    draft_model_metrics: dict | None = None
    repeats: int = 1
    wall_seconds_all: list[float] = field(default_factory=list)
    outputs_stable: bool = True  # all repeats produced the same tokens
    speedup_vs_plain: float | None = None
    identical_to_plain: bool | None = None
    first_difference: int | None = None
    comparison_note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def tokens_per_pass(self) -> float | None:
        return self.generated_tokens / self.main_passes if self.main_passes else None


def encode_prompt(tokenizer: Any, text: str, apply_chat_template: bool = True) -> Any:
    """Token ids for a user message, wrapped in the chat template as `LLMPipeline.generate(str)` would.

    Models without a chat template get the raw text (with the tokenizer's special tokens).
    """
    if apply_chat_template and getattr(tokenizer, "chat_template", ""):
        templated = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        return tokenizer.encode(templated, add_special_tokens=False)
    return tokenizer.encode(text)


def _scalar(value: Any) -> float:
    """A float from a GenAI metric that is either a number or a MeanStdPair."""
    return float(getattr(value, "mean", value))


def _per_model_metrics(metrics: Any) -> dict:
    raw = metrics.raw_metrics
    return {
        "generated_tokens": int(metrics.get_num_generated_tokens()),
        "ttft_ms": float(metrics.get_ttft().mean),
        "tpot_ms": float(metrics.get_tpot().mean),
        "tokens_per_second": float(metrics.get_throughput().mean),
        "inference_ms": float(metrics.get_inference_duration().mean),
        "passes": len(raw.m_batch_sizes),
    }


def run_prompt(
    loaded: LoadedPipeline,
    prompt: Prompt | str,
    settings: DecodingSettings,
    streamer: Any = None,
) -> GenerationRecord:
    """Generate once for one prompt and return its record (no warm-up, no repeats).

    streamer: anything `LLMPipeline.generate` accepts, or a
    `utils.step_streamer.StepRecorder` (to see tokens step by step).
    """
    if settings.mode != loaded.mode:
        raise SpeculationSetupError(
            f"Settings are for mode '{settings.mode}' but the pipeline was built for '{loaded.mode}'. "
            "Load a pipeline with the same mode (load_pipeline(settings.mode, ...)).")
    prompt = as_prompt(prompt)
    tokenizer = loaded.pipeline.get_tokenizer()
    inputs = encode_prompt(tokenizer, prompt.text, settings.apply_chat_template)
    config = settings.generation_config(loaded.pipeline.get_generation_config())
    if hasattr(streamer, "as_genai_streamer"):
        streamer = streamer.as_genai_streamer()
    started = time.perf_counter()
    result = loaded.pipeline.generate(inputs, config, streamer)
    wall = time.perf_counter() - started
    token_ids = [int(token) for token in result.tokens[0]]
    metrics = result.perf_metrics
    steps = [int(size) for size in metrics.raw_metrics.m_batch_sizes]
    # The stateful backend reports a batch size of 1 per pass; the continuous-batching one reports tokens per pass.
    steps_valid = sum(steps) == len(token_ids) and len(steps) > 0
    extended = result.extended_perf_metrics
    acceptance = accepted = drafted = None
    main_metrics = draft_metrics = None
    if extended is not None:
        acceptance = _scalar(extended.get_draft_acceptance_rate())
        accepted = int(extended.get_num_accepted_tokens())
        drafted = int(extended.get_num_draft_tokens())
        main_metrics = _per_model_metrics(extended.main_model_metrics)
        draft_metrics = _per_model_metrics(extended.draft_model_metrics)
    generated = len(token_ids)
    return GenerationRecord(
        mode=loaded.mode,
        setting=settings.label,
        prompt_id=prompt.id,
        task=prompt.task,
        device=loaded.device,
        precision=loaded.precision,
        input_tokens=int(metrics.get_num_input_tokens()),
        generated_tokens=generated,
        token_ids=token_ids,
        text=tokenizer.decode(token_ids, skip_special_tokens=True),
        wall_seconds=wall,
        tokens_per_second=generated / wall if wall > 0 else 0.0,
        ttft_ms=float(metrics.get_ttft().mean),
        tpot_ms=float(metrics.get_tpot().mean),
        genai_tokens_per_second=float(metrics.get_throughput().mean),
        main_passes=len(steps) if steps_valid else None,
        tokens_per_step=steps if steps_valid else None,
        accepted_from_steps=generated - len(steps) if steps_valid else None,
        acceptance_rate=acceptance,
        accepted_tokens=accepted,
        draft_tokens=drafted,
        main_model_metrics=main_metrics,
        draft_model_metrics=draft_metrics,
        wall_seconds_all=[wall],
    )


# --------------------------------------------------------------------------- many prompts


Candidate = tuple[LoadedPipeline, DecodingSettings]


def measure_side_by_side(
    candidates: Sequence[Candidate],
    prompts: Sequence[Prompt | str],
    *,
    warmup: int = 1,
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
) -> list[GenerationRecord]:
    """Time several (pipeline, settings) candidates on the same prompts, interleaved.

    warmup: untimed runs of every candidate on the first prompt before timing
    (model compilation, cache allocation). repeats: timed runs per prompt and
    candidate; the record keeps the run with the median wall time (its TTFT,
    TPOT and metrics) and all wall times in `wall_seconds_all`.
    Records come back grouped by candidate, then prompt, in the given order.
    """
    if repeats < 1:
        raise SpeculationSetupError(f"repeats must be >= 1, got {repeats}.")
    if warmup < 0:
        raise SpeculationSetupError(f"warmup must be >= 0, got {warmup}.")
    if not prompts:
        raise SpeculationSetupError("No prompts to measure.")
    for loaded, settings in candidates:
        if settings.mode != loaded.mode:
            raise SpeculationSetupError(
                f"A candidate pairs settings for '{settings.mode}' with a '{loaded.mode}' pipeline.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    for loaded, settings in candidates:
        for _ in range(warmup):
            run_prompt(loaded, prompt_list[0], settings)
    runs: dict[tuple[int, int], list[GenerationRecord]] = {}
    for repeat in range(repeats):
        for prompt_index, prompt in enumerate(prompt_list):
            for candidate_index, (loaded, settings) in enumerate(candidates):
                if progress:
                    progress(f"repeat {repeat + 1}/{repeats}: {settings.mode} {settings.label} on {prompt.id}")
                runs.setdefault((candidate_index, prompt_index), []).append(run_prompt(loaded, prompt, settings))
    records = []
    for candidate_index in range(len(candidates)):
        for prompt_index in range(len(prompt_list)):
            records.append(_median_record(runs[(candidate_index, prompt_index)]))
    return records


def measure_prompts(
    loaded: LoadedPipeline,
    settings: DecodingSettings,
    prompts: Sequence[Prompt | str],
    *,
    warmup: int = 1,
    repeats: int = 3,
) -> list[GenerationRecord]:
    """`measure_side_by_side` for a single pipeline."""
    return measure_side_by_side([(loaded, settings)], prompts, warmup=warmup, repeats=repeats)


def _median_record(runs: list[GenerationRecord]) -> GenerationRecord:
    """The run with the median wall time, annotated with all wall times and output stability."""
    ordered = sorted(runs, key=lambda record: record.wall_seconds)
    chosen = ordered[(len(ordered) - 1) // 2]
    walls = [record.wall_seconds for record in runs]
    return replace(
        chosen,
        repeats=len(runs),
        wall_seconds=statistics.median(walls),
        tokens_per_second=chosen.generated_tokens / statistics.median(walls),
        wall_seconds_all=walls,
        outputs_stable=all(record.token_ids == runs[0].token_ids for record in runs),
    )


def compare_with_plain(
    records: Sequence[GenerationRecord],
    plain_records: Sequence[GenerationRecord] | None = None,
) -> list[GenerationRecord]:
    """Copies of `records` with speed-up and identity to plain decoding filled in.

    Plain references are matched by prompt id (taken from `plain_records`, or
    from the plain records inside `records`). The speed-up (plain wall time /
    this wall time) is reported only when both generated the same number of
    tokens; `identical_to_plain` is True when the token ids are equal and
    `first_difference` gives the first differing position otherwise.
    """
    references = [record for record in (plain_records if plain_records is not None else records)
                  if record.mode == "plain"]
    by_prompt: dict[str, GenerationRecord] = {}
    for record in references:
        by_prompt.setdefault(record.prompt_id, record)
    compared = []
    for record in records:
        plain = by_prompt.get(record.prompt_id)
        if plain is None:
            compared.append(replace(record, comparison_note="no plain run of this prompt to compare with"))
            continue
        divergence = first_divergence(plain.token_ids, record.token_ids)
        notes = []
        if plain.precision != record.precision:
            notes.append(f"precision differs (plain {plain.precision}, this {record.precision})")
        if plain.device != record.device:
            notes.append(f"device differs (plain {plain.device}, this {record.device})")
        speedup = None
        if notes:
            pass
        elif plain.generated_tokens != record.generated_tokens:
            notes.append(f"token counts differ (plain {plain.generated_tokens}, this {record.generated_tokens}): "
                         "no speed-up reported")
        elif record.wall_seconds > 0:
            speedup = plain.wall_seconds / record.wall_seconds
        if not record.outputs_stable or not plain.outputs_stable:
            notes.append("repeats produced different outputs")
        compared.append(replace(
            record,
            speedup_vs_plain=speedup,
            identical_to_plain=divergence is None,
            first_difference=divergence,
            comparison_note="; ".join(notes),
        ))
    return compared


def summarise(records: Sequence[GenerationRecord]) -> list[dict]:
    """One row per (mode, setting): totals over prompts and the speed-up over comparable prompts only.

    The speed-up is total plain time / total time over the prompts whose token
    counts matched plain (None if there are none). Needs compared records.
    """
    groups: dict[tuple[str, str], list[GenerationRecord]] = {}
    for record in records:
        groups.setdefault((record.mode, record.setting), []).append(record)
    rows = []
    for (mode, setting), group in groups.items():
        comparable = [record for record in group if record.speedup_vs_plain is not None]
        plain_time = sum(record.wall_seconds * record.speedup_vs_plain for record in comparable)
        this_time = sum(record.wall_seconds for record in comparable)
        acceptance = [record.acceptance_rate for record in group if record.acceptance_rate is not None]
        tokens = sum(record.generated_tokens for record in group)
        passes = [record.main_passes for record in group]
        rows.append({
            "mode": mode,
            "setting": setting,
            "prompts": len(group),
            "generated_tokens": tokens,
            "wall_seconds": sum(record.wall_seconds for record in group),
            "tokens_per_second": tokens / sum(record.wall_seconds for record in group),
            "comparable_prompts": len(comparable),
            "speedup_vs_plain": plain_time / this_time if comparable and this_time > 0 else None,
            "identical_prompts": sum(bool(record.identical_to_plain) for record in group),
            "mean_acceptance_rate": statistics.mean(acceptance) if acceptance else None,
            "tokens_per_pass": tokens / sum(passes) if all(passes) else None,
        })
    return rows


def format_table(records: Sequence[GenerationRecord]) -> str:
    """A fixed-width text table of records: mode, setting, task, prompt, time, tokens, tokens/s, speed-up, ..."""
    header = ("mode", "setting", "task", "prompt", "time s", "tokens", "tok/s", "speed-up", "accept",
              "tok/pass", "identical")
    rows = [header]
    for record in records:
        rows.append((
            record.mode,
            record.setting,
            record.task,
            record.prompt_id,
            f"{record.wall_seconds:.3f}",
            str(record.generated_tokens),
            f"{record.tokens_per_second:.1f}",
            f"{record.speedup_vs_plain:.2f}x" if record.speedup_vs_plain is not None else "-",
            f"{record.acceptance_rate:.2f}" if record.acceptance_rate is not None else "-",
            f"{record.tokens_per_pass:.2f}" if record.tokens_per_pass is not None else "-",
            "-" if record.identical_to_plain is None else ("yes" if record.identical_to_plain else
                                                           f"no (@{record.first_difference})"),
        ))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
