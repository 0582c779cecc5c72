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

Bad input raises a ValueError that says what to do, before any model is
loaded: `SpeculationSetupError` for settings (see `DecodingSettings`), and
`utils.model_check`'s errors for model folders (see `check_draft_folder`).

Heavy imports (openvino_genai) happen inside functions.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from utils import decoding_metrics
from utils.input_checks import (as_integer, as_probability, check_device, check_prompt_fits, check_text,
                                context_length)
from utils.prompts import Prompt, as_prompt
from utils.step_streamer import StepRecorder
from utils.text_compare import first_divergence

MODES = ("plain", "speculative", "prompt_lookup")
PRECISIONS = ("default", "f32")
INFERENCE_PRECISIONS = ("default", "f32", "bf16", "f16")  # what `device_properties` accepts (sweeps compare them)
BACKENDS = ("continuous_batching", "stateful")
DEFAULT_NUM_ASSISTANT_TOKENS = 3  # on this project's CPU, verifying K <= 3 costs about one plain step
DEFAULT_MAX_NGRAM_SIZE = 3
# The scheduler's token budget per step. OpenVINO GenAI's own default (256) split the prompts of concurrent requests
# and then changed speculative output (2026.4, notebook 05); 4096 did not, and cost a single request nothing measurable.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 4096


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
        # NumPy integers (np.int64(3) from a sweep grid) become plain ints; strings, floats and booleans are refused.
        integers = {"max_new_tokens": 1, "num_beams": 1, "top_k": 0, "rng_seed": None,
                    "num_assistant_tokens": 1, "max_ngram_size": 1}
        for name, minimum in integers.items():
            if getattr(self, name) is not None:
                label = "num_assistant_tokens (K)" if name == "num_assistant_tokens" else name
                advice = ("It is how many tokens the draft proposes per step; for no speculation at all use "
                          "mode='plain'." if name == "num_assistant_tokens" else "")
                object.__setattr__(self, name, as_integer(getattr(self, name), label, minimum=minimum,
                                                          advice=advice, error=SpeculationSetupError))
        if self.assistant_confidence_threshold is not None:
            object.__setattr__(self, "assistant_confidence_threshold", as_probability(
                self.assistant_confidence_threshold, "assistant_confidence_threshold", error=SpeculationSetupError))
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
        if threshold is not None:
            if mode == "prompt_lookup":
                raise SpeculationSetupError(
                    "Prompt lookup has no draft probabilities, so assistant_confidence_threshold does not apply. "
                    "Use num_assistant_tokens (and max_ngram_size) instead.")
        if self.max_ngram_size is not None:
            if mode != "prompt_lookup":
                raise SpeculationSetupError("max_ngram_size only applies to mode='prompt_lookup'. Remove it.")
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
            # OpenVINO GenAI 2026.4 stops drafting when a draft token's log-probability is exactly 0, and under
            # greedy decoding it only computes log-probabilities when asked: without this line the draft stops
            # after one token at every threshold (measured in notebook 02). Token choices do not change.
            config.logprobs = max(int(config.logprobs or 0), 1)
        if self.max_ngram_size is not None:
            config.max_ngram_size = self.max_ngram_size
        return config


# --------------------------------------------------------------------------- model folders


def check_main_folder(main_dir: Path | str) -> Path:
    """The main model's location, checked: an OpenVINO folder, or a .gguf file (plain/prompt lookup only)."""
    from utils.model_check import check_model_folder

    path = Path(main_dir).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return path
    return check_model_folder(path, "main model")


def check_draft_folder(draft_dir: Path | str, main_dir: Path | str | None = None) -> Path:
    """The draft model folder, checked before loading anything.

    Raises (all are ValueErrors whose message says what to do):
    `SpeculationSetupError` for a GGUF file (OpenVINO GenAI cannot use one as a
    draft); `utils.model_check.ModelFolderError` for a missing or incomplete
    folder; `utils.model_check.TokenizerMismatchError` when `main_dir` is given
    and the draft tokenizes text differently from the main model.
    """
    from utils.model_check import check_model_folder, check_pair

    path = Path(draft_dir).expanduser()
    if path.suffix.lower() == ".gguf" or (path.is_file() and path.read_bytes()[:4] == b"GGUF"):
        raise SpeculationSetupError(
            f"{path} is a GGUF file. OpenVINO GenAI loads GGUF files as a main model only, not as a draft. Export "
            "the draft to an OpenVINO folder (`optimum-cli export openvino --model <hf folder> --weight-format int4 "
            "<folder>`) and pass that folder.")
    if main_dir is None:
        return check_model_folder(path, "draft model")
    check_pair(main_dir, path)
    return path


# --------------------------------------------------------------------------- pipelines


def device_properties(precision: str | None, threads: int | None = None) -> dict[str, Any]:
    """OpenVINO properties: "f32" (or "bf16", "f16") forces that inference precision, "default"/None keeps the device's.

    threads: CPU inference threads (INFERENCE_NUM_THREADS); None uses all cores.
    One thread gives steadier timings on a small machine that others share.
    """
    properties: dict[str, Any] = {}
    if precision in INFERENCE_PRECISIONS and precision != "default":
        properties["INFERENCE_PRECISION_HINT"] = precision
    elif precision not in (None, "default"):
        raise SpeculationSetupError(f"precision must be one of {INFERENCE_PRECISIONS} or None, got '{precision}'.")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise SpeculationSetupError(f"threads must be an integer >= 1 or None (all cores), got {threads!r}.")
        properties["INFERENCE_NUM_THREADS"] = threads
    return properties


def make_scheduler_config(cache_size_gb: int = 0, max_num_batched_tokens: int | None = None) -> Any:
    """A `SchedulerConfig` for the continuous-batching backend.

    cache_size_gb: size of the paged KV cache in GB, allocated up front;
    0 (default) lets the cache grow with demand (dynamic allocation).
    max_num_batched_tokens: tokens the scheduler may process in one step
    (None = DEFAULT_MAX_NUM_BATCHED_TOKENS, 4096; OpenVINO GenAI's own default
    is 256). Prompts that do not fit are split across steps; with a draft
    model and several requests at once that split changed the output in
    OpenVINO GenAI 2026.4 (notebook 05, section 6). Pass 256 to see it.
    """
    import openvino_genai

    cache_size_gb = as_integer(cache_size_gb, "cache_size_gb", minimum=0, advice="0 lets the cache grow with demand.",
                               error=SpeculationSetupError)
    if max_num_batched_tokens is None:
        max_num_batched_tokens = DEFAULT_MAX_NUM_BATCHED_TOKENS
    config = openvino_genai.SchedulerConfig()
    config.cache_size = cache_size_gb
    config.max_num_batched_tokens = as_integer(max_num_batched_tokens, "max_num_batched_tokens", minimum=1,
                                               advice="Or None for the default.", error=SpeculationSetupError)
    return config


def check_single_thread_precision(device: str, draft_device: str | None, precision: str | None,
                               threads: int | None) -> None:
    """OpenVINO 2026.4's CPU plugin dies with SIGFPE compiling these models in bf16 on one thread: refuse first."""
    if threads != 1 or precision == "f32" or not any(name.startswith("CPU") for name in (device, draft_device or "")):
        return
    import openvino as ov

    if "bf16" in str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")).replace("bfloat16", "bf16"):
        raise SpeculationSetupError(
            "threads=1 with the CPU's default bf16 precision crashes OpenVINO 2026.4 (the process dies with a "
            "floating point exception while compiling). Use precision='f32' with threads=1, or threads=None / >= 2.")


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
    threads: int | None = None,
    max_num_batched_tokens: int | None = None,
    draft_precision: str | None = None,
) -> LoadedPipeline:
    """Build the pipeline for one decoding mode. Inputs are checked before any model is loaded.

    plain:          LLMPipeline(main, device, scheduler_config=..., **props)
    speculative:    LLMPipeline(main, device, scheduler_config=..., draft_model=draft_model(draft, device, **props), **props)
    prompt_lookup:  LLMPipeline(main, device, scheduler_config=..., prompt_lookup=True, **props)

    `props` comes from `device_properties(precision, threads)` and is applied to
    main and draft alike, unless `draft_precision` gives the draft another one
    (None = the main model's). ``backend="stateful"`` (plain only) omits the scheduler config;
    `cache_size_gb` and `max_num_batched_tokens` go into it (`make_scheduler_config`).
    """
    if mode not in MODES:
        raise SpeculationSetupError(f"Unknown mode '{mode}'. Use one of: {', '.join(MODES)}.")
    if backend not in BACKENDS:
        raise SpeculationSetupError(f"backend must be one of {BACKENDS}, got '{backend}'.")
    if backend == "stateful" and mode != "plain":
        raise SpeculationSetupError(
            f"{mode} decoding always runs on OpenVINO GenAI's continuous-batching backend; backend='stateful' "
            "is for plain decoding only.")
    device = check_device(device, error=SpeculationSetupError)
    if draft_device is not None:
        draft_device = check_device(draft_device, name="draft_device", error=SpeculationSetupError)
    if threads is not None:
        threads = as_integer(threads, "threads", minimum=1, advice="Use None for all cores.",
                             error=SpeculationSetupError)
    properties = device_properties(precision, threads)
    draft_properties = properties if draft_precision is None else device_properties(draft_precision, threads)
    check_single_thread_precision(device, draft_device, precision, threads)
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
        arguments["scheduler_config"] = make_scheduler_config(cache_size_gb, max_num_batched_tokens)
    if mode == "speculative":
        arguments["draft_model"] = openvino_genai.draft_model(str(draft_path), draft_device or device,
                                                              **draft_properties)
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
    accepted_tokens, draft_tokens (proposed), main_model_metrics and
    draft_model_metrics: GenAI's `extended_perf_metrics` (None for plain and
    prompt lookup, where GenAI reports none); acceptance_rate = accepted_tokens /
    draft_tokens. accepted_from_steps: accepted tokens counted from the steps
    (works for prompt lookup too). Every quantity is defined once, in
    `utils.decoding_metrics`.
    The comparison fields are filled by `compare_with_plain`.
    """

    mode: str
    setting: str
    prompt_id: str
    task: str
    device: str
    precision: str
    backend: str  # "continuous_batching" / "stateful" (OpenVINO GenAI) or "transformers"
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
    num_assistant_tokens: int | None = None  # K of the setting (None for plain and for a confidence threshold)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def tokens_per_pass(self) -> float | None:
        """Mean tokens per verification pass (`utils.decoding_metrics.tokens_per_main_pass`)."""
        return decoding_metrics.tokens_per_main_pass(self.tokens_per_step) if self.tokens_per_step else None


def encode_prompt(tokenizer: Any, text: str, apply_chat_template: bool = True) -> Any:
    """Token ids for a user message, wrapped in the chat template as `LLMPipeline.generate(str)` would.

    Models without a chat template get the raw text (with the tokenizer's special tokens).
    """
    if apply_chat_template and getattr(tokenizer, "chat_template", ""):
        templated = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        return tokenizer.encode(templated, add_special_tokens=False)
    return tokenizer.encode(text)


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

    streamer: None or a `utils.step_streamer.StepRecorder` (e.g. with echo=True
    to print text as it arrives). A recorder is always attached: it is where
    `tokens_per_step` comes from (one Python call per step; GenAI's raw batch
    sizes do not add up to the tokens under sampling).
    """
    if settings.mode != loaded.mode:
        raise SpeculationSetupError(
            f"Settings are for mode '{settings.mode}' but the pipeline was built for '{loaded.mode}'. "
            "Load a pipeline with the same mode (load_pipeline(settings.mode, ...)).")
    prompt = as_prompt(prompt)
    check_text(prompt.text, error=SpeculationSetupError)
    tokenizer = loaded.pipeline.get_tokenizer()
    inputs = encode_prompt(tokenizer, prompt.text, settings.apply_chat_template)
    check_prompt_fits(int(inputs.input_ids.get_shape()[-1]), settings.max_new_tokens, context_length(loaded.main_dir),
                      loaded.main_dir.name, error=SpeculationSetupError)
    config = settings.generation_config(loaded.pipeline.get_generation_config())
    if streamer is not None and not isinstance(streamer, StepRecorder):
        raise TypeError("run_prompt takes a utils.step_streamer.StepRecorder as streamer (or None).")
    recorder = streamer if streamer is not None else StepRecorder()
    started = time.perf_counter()
    result = loaded.pipeline.generate(inputs, config, recorder.as_genai_streamer())
    wall = time.perf_counter() - started
    token_ids = [int(token) for token in result.tokens[0]]
    metrics = result.perf_metrics
    main_passes = len(metrics.raw_metrics.m_batch_sizes) or None
    steps = [len(step) for step in recorder.steps]
    steps_valid = sum(steps) == len(token_ids)
    extended = result.extended_perf_metrics
    acceptance = accepted = drafted = None
    main_metrics = draft_metrics = None
    if extended is not None:
        accepted = int(extended.get_num_accepted_tokens())
        drafted = int(extended.get_num_draft_tokens())
        acceptance = decoding_metrics.acceptance_rate(accepted, drafted)
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
        backend=loaded.backend,
        input_tokens=int(metrics.get_num_input_tokens()),
        generated_tokens=generated,
        token_ids=token_ids,
        text=tokenizer.decode(token_ids, skip_special_tokens=True),
        wall_seconds=wall,
        tokens_per_second=generated / wall if wall > 0 else 0.0,
        ttft_ms=float(metrics.get_ttft().mean),
        tpot_ms=float(metrics.get_tpot().mean),
        genai_tokens_per_second=float(metrics.get_throughput().mean),
        main_passes=main_passes,
        tokens_per_step=steps if steps_valid else None,
        accepted_from_steps=decoding_metrics.accepted_tokens(steps) if steps_valid and steps else None,
        acceptance_rate=acceptance,
        accepted_tokens=accepted,
        draft_tokens=drafted,
        main_model_metrics=main_metrics,
        draft_model_metrics=draft_metrics,
        wall_seconds_all=[wall],
        num_assistant_tokens=settings.num_assistant_tokens,
    )


# --------------------------------------------------------------------------- many prompts


Candidate = tuple[LoadedPipeline, DecodingSettings]
Runner = Callable[[Prompt], GenerationRecord]


def measure_runners(
    runners: Sequence[Runner],
    prompts: Sequence[Prompt | str],
    *,
    warmup: int = 1,
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
    show_progress: bool = True,
) -> list[GenerationRecord]:
    """Time several runners (functions prompt -> GenerationRecord) on the same prompts, interleaved.

    warmup: untimed runs of every runner on the first prompt before timing
    (model compilation, cache allocation). repeats: timed runs per prompt and
    runner, alternating runners prompt by prompt; each record is the run with
    the median wall time (its TTFT, TPOT and metrics), with all wall times in
    `wall_seconds_all`. Records come back grouped by runner, then prompt.
    Without a `progress` callback a tqdm bar counts the runs (a widget in
    JupyterLab, text on stderr elsewhere); show_progress=False hides it.
    """
    if repeats < 1:
        raise SpeculationSetupError(f"repeats must be >= 1, got {repeats}.")
    if warmup < 0:
        raise SpeculationSetupError(f"warmup must be >= 0, got {warmup}.")
    if not prompts:
        raise SpeculationSetupError("No prompts to measure.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    from tqdm.auto import tqdm

    bar = tqdm(total=len(runners) * (warmup + repeats * len(prompt_list)), desc="measuring", unit="run",
               disable=not show_progress or progress is not None)
    for runner in runners:
        for _ in range(warmup):
            bar.set_postfix_str("warm-up")
            runner(prompt_list[0])
            bar.update()
    runs: dict[tuple[int, int], list[GenerationRecord]] = {}
    for repeat in range(repeats):
        for prompt_index, prompt in enumerate(prompt_list):
            for runner_index, runner in enumerate(runners):
                record = runner(prompt)
                if progress:
                    progress(f"repeat {repeat + 1}/{repeats}: {record.mode} {record.setting} on {prompt.id}: "
                             f"{record.generated_tokens} tokens in {record.wall_seconds:.2f} s")
                bar.set_postfix_str(f"repeat {repeat + 1}/{repeats}, {record.mode} {record.setting}")
                bar.update()
                runs.setdefault((runner_index, prompt_index), []).append(record)
    bar.close()
    return [median_of_runs(runs[(runner_index, prompt_index)])
            for runner_index in range(len(runners)) for prompt_index in range(len(prompt_list))]


def measure_side_by_side(
    candidates: Sequence[Candidate],
    prompts: Sequence[Prompt | str],
    *,
    warmup: int = 1,
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
    show_progress: bool = True,
) -> list[GenerationRecord]:
    """Time several (pipeline, settings) candidates on the same prompts: see `measure_runners`.

    Records come back grouped by candidate, then prompt, in the given order.
    """
    for loaded, settings in candidates:
        if settings.mode != loaded.mode:
            raise SpeculationSetupError(
                f"A candidate pairs settings for '{settings.mode}' with a '{loaded.mode}' pipeline.")
    runners = [lambda prompt, loaded=loaded, settings=settings: run_prompt(loaded, prompt, settings)
               for loaded, settings in candidates]
    return measure_runners(runners, prompts, warmup=warmup, repeats=repeats, progress=progress,
                           show_progress=show_progress)


def median_of_runs(runs: Sequence[GenerationRecord]) -> GenerationRecord:
    """The run with the median wall time, annotated with all wall times and output stability.

    With an even number of runs the lower middle run is kept; wall_seconds is the true median.
    """
    ordered = sorted(runs, key=lambda record: record.wall_seconds)
    chosen = ordered[(len(ordered) - 1) // 2]
    walls = [record.wall_seconds for record in runs]
    median_wall = statistics.median(walls)
    return replace(
        chosen,
        repeats=len(runs),
        wall_seconds=median_wall,
        tokens_per_second=chosen.generated_tokens / median_wall if median_wall > 0 else 0.0,
        wall_seconds_all=walls,
        outputs_stable=all(record.token_ids == runs[0].token_ids for record in runs),
    )


def compare_with_plain(
    records: Sequence[GenerationRecord],
    plain_records: Sequence[GenerationRecord] | None = None,
) -> list[GenerationRecord]:
    """Copies of `records` with speed-up and identity to plain decoding filled in.

    Plain references are matched by stack (OpenVINO GenAI or transformers) and
    prompt id, taken from `plain_records`, or from the plain records inside
    `records`. The speed-up (plain wall time / this wall time) is reported only
    when both ran on the same device, backend and precision and generated the
    same number of tokens; `comparison_note` says why not otherwise.
    `identical_to_plain` is True when the token ids are equal, and
    `first_difference` gives the first differing position otherwise.
    """
    references = [record for record in (plain_records if plain_records is not None else records)
                  if record.mode == "plain"]
    by_prompt: dict[tuple[str, str], GenerationRecord] = {}
    for record in references:
        by_prompt.setdefault((_stack(record), record.prompt_id), record)
    compared = []
    for record in records:
        plain = by_prompt.get((_stack(record), record.prompt_id))
        if plain is None:
            compared.append(replace(record, comparison_note="no plain run of this prompt to compare with"))
            continue
        divergence = first_divergence(plain.token_ids, record.token_ids)
        notes = []
        if plain.precision != record.precision:
            notes.append(f"precision differs (plain {plain.precision}, this {record.precision})")
        if plain.device != record.device:
            notes.append(f"device differs (plain {plain.device}, this {record.device})")
        if plain.backend != record.backend:
            notes.append(f"backend differs (plain {plain.backend}, this {record.backend})")
        if plain.generated_tokens != record.generated_tokens:
            notes.append(f"token counts differ (plain {plain.generated_tokens}, this {record.generated_tokens}): "
                         "no speed-up reported")
        comparable = not notes and record.wall_seconds > 0
        speedup = plain.wall_seconds / record.wall_seconds if comparable else None
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


def _stack(record: GenerationRecord) -> str:
    return "transformers" if record.backend == "transformers" else "openvino_genai"


def summarise(records: Sequence[GenerationRecord]) -> list[dict]:
    """One row per (mode, setting): totals over prompts and the speed-up over comparable prompts only.

    The speed-up is total plain time / total time over the prompts whose token
    counts matched plain (None if there are none). acceptance_rate and
    tokens_per_pass pool all prompts (`utils.decoding_metrics`). Needs compared records.
    """
    groups: dict[tuple[str, str, str], list[GenerationRecord]] = {}
    for record in records:
        groups.setdefault((_stack(record), record.mode, record.setting), []).append(record)
    rows = []
    for (stack, mode, setting), group in groups.items():
        comparable = [record for record in group if record.speedup_vs_plain is not None]
        plain_time = sum(record.wall_seconds * record.speedup_vs_plain for record in comparable)
        this_time = sum(record.wall_seconds for record in comparable)
        counted = [record for record in group if record.draft_tokens is not None]
        tokens = sum(record.generated_tokens for record in group)
        steps = [record.tokens_per_step for record in group]
        rows.append({
            "stack": stack,
            "mode": mode,
            "setting": setting,
            "prompts": len(group),
            "generated_tokens": tokens,
            "wall_seconds": sum(record.wall_seconds for record in group),
            "tokens_per_second": tokens / sum(record.wall_seconds for record in group),
            "comparable_prompts": len(comparable),
            "speedup_vs_plain": plain_time / this_time if comparable and this_time > 0 else None,
            "identical_prompts": sum(bool(record.identical_to_plain) for record in group),
            "acceptance_rate": decoding_metrics.acceptance_rate(
                sum(record.accepted_tokens for record in counted), sum(record.draft_tokens for record in counted))
            if counted else None,
            "tokens_per_pass": decoding_metrics.pooled_tokens_per_main_pass(steps) if all(steps) else None,
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


def speculation_breakdown(records: Sequence[GenerationRecord]) -> list[dict]:
    """Per speculative record: passes, acceptance, per-pass costs of draft and main, and Leviathan's prediction.

    cost ratio c = draft time per pass / main time per pass (from GenAI's
    per-model inference durations of this run; `utils.decoding_metrics.cost_ratio`).
    With a fixed K, the per-token acceptance `a` that explains the measured
    tokens per main pass is recovered, and `predicted_speedup(a, K, c)` is shown
    next to the measured speed-up; the formula assumes a verification pass
    costs as much as a plain step.
    """
    from utils.speedup_model import predicted_speedup

    rows = []
    for record in records:
        if record.main_model_metrics is None or record.draft_model_metrics is None or not record.main_passes:
            continue
        main_ms = record.main_model_metrics["inference_ms"] / max(record.main_model_metrics["passes"], 1)
        draft_ms = record.draft_model_metrics["inference_ms"] / max(record.draft_model_metrics["passes"], 1)
        cost_ratio = decoding_metrics.cost_ratio(draft_ms, main_ms) if main_ms > 0 else None
        k = record.num_assistant_tokens
        predicted = per_token_acceptance = None
        if k and cost_ratio is not None and record.tokens_per_pass is not None:
            per_token_acceptance = decoding_metrics.per_token_acceptance(record.tokens_per_pass, k)
            predicted = predicted_speedup(per_token_acceptance, k, cost_ratio)
        rows.append({
            "prompt": record.prompt_id,
            "setting": record.setting,
            "tokens": record.generated_tokens,
            "main passes": record.main_passes,
            "draft passes": record.draft_model_metrics["passes"],
            "drafted": record.draft_tokens,
            "accepted": record.accepted_tokens,
            "acceptance": record.acceptance_rate,
            "main ms/pass": main_ms,
            "draft ms/pass": draft_ms,
            "c": cost_ratio,
            "a (from tok/pass)": per_token_acceptance,
            "predicted speed-up": predicted,
            "measured speed-up": record.speedup_vs_plain,
        })
    return rows


def first_divergent_pair(records: Sequence[GenerationRecord]) -> tuple[GenerationRecord, GenerationRecord] | None:
    """(plain record, other record) for the first compared record that differs from plain, or None."""
    for record in records:
        if record.mode != "plain" and record.identical_to_plain is False:
            for plain in records:
                if plain.mode == "plain" and plain.prompt_id == record.prompt_id and _stack(plain) == _stack(record):
                    return plain, record
    return None


def describe_divergence(plain: GenerationRecord, other: GenerationRecord, tokenizer: Any, context_tokens: int = 12
                        ) -> str:
    """Text around the first token where `other` leaves `plain`: the shared lead-in, then both continuations."""
    position = first_divergence(plain.token_ids, other.token_ids)
    if position is None:
        return f"{other.mode} ({other.setting}) is identical to plain on {plain.prompt_id}."

    def text(ids: Sequence[int]) -> str:
        return tokenizer.decode(list(ids), skip_special_tokens=True)

    start = max(0, position - context_tokens)
    shared = text(plain.token_ids[start:position])
    return (f"{plain.prompt_id}: first difference at generated token {position}\n"
            f"  shared   ...{shared!r}\n"
            f"  plain        -> {text(plain.token_ids[position:position + context_tokens])!r}\n"
            f"  {other.mode:<12} -> {text(other.token_ids[position:position + context_tokens])!r}")


def prompt_lookup_candidates(context: Sequence, max_ngram_size: int, num_candidates: int) -> list:
    """What prompt lookup would propose next: the items that followed the latest earlier match of the context's tail.

    Tries the longest tail first (max_ngram_size items, then fewer); returns []
    when no tail occurs earlier. Works on any sequence (token ids, or words for
    a readable demo). A teaching model of the idea, not GenAI's code.
    """
    if max_ngram_size < 1 or num_candidates < 1:
        raise SpeculationSetupError("max_ngram_size and num_candidates must be >= 1.")
    items = list(context)
    for size in range(min(max_ngram_size, len(items) - 1), 0, -1):
        tail = items[-size:]
        for start in range(len(items) - size - 1, -1, -1):  # latest earlier occurrence first
            if items[start:start + size] == tail:
                follow = items[start + size:start + size + num_candidates]
                if follow:
                    return follow
    return []
