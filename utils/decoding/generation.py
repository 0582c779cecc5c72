"""Run plain, speculative and prompt-lookup decoding with OpenVINO GenAI and measure them fairly.

A fair comparison keeps backend (plain runs on continuous batching too), precision ("f32" also makes the main
model exact) and token count equal. Bad settings raise `SpeculationSetupError` (a ValueError) before loading.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from utils.decoding import decoding_metrics
from utils.decoding.measurement import TimedRun, interleaved_runs
from utils.decoding.pipelines import (
    DEFAULT_MAX_NGRAM_SIZE,
    DEFAULT_NUM_ASSISTANT_TOKENS,
    MODES,
    LoadedPipeline,
    SpeculationSetupError,
)
from utils.decoding.prompts import Prompt, as_prompt
from utils.decoding.step_streamer import StepRecorder
from utils.input_checks import as_integer, as_probability, check_prompt_fits, check_text, context_length
from utils.text_compare import first_divergence

# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class DecodingSettings:
    """How to decode: mode, speculation knobs and sampling; validated on creation (`SpeculationSetupError`).

    mode: "plain", "speculative" (draft model) or "prompt_lookup" (n-grams from the prompt). K (num_assistant_tokens)
    and assistant_confidence_threshold exclude each other; with neither, K = DEFAULT_NUM_ASSISTANT_TOKENS.
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
    name: str | None = None

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
        """Short description of the setting, e.g. 'K=3', 'threshold=0.4', 'K=3, ngram=3', 'greedy' (or its `name`)."""
        if self.name:
            return self.name
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

        `base` (updated in place) supplies model defaults such as EOS: pass `pipeline.get_generation_config()`,
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
            # GenAI 2026.4 stops drafting at a log-probability of exactly 0 and, under greedy, computes none unless
            # asked: without this the draft stops after one token at every threshold. Token choices do not change.
            config.logprobs = max(int(config.logprobs or 0), 1)
        if self.max_ngram_size is not None:
            config.max_ngram_size = self.max_ngram_size
        return config


# --------------------------------------------------------------------------- one prompt


@dataclass
class GenerationRecord:
    """What one generation (or the median of its repeats) produced and cost; quantities as in `decoding_metrics`.

    wall_seconds is timed around `generate`; ttft, tpot, draft/accepted counts and *_model_metrics are GenAI's own
    (None where it reports none, e.g. plain); accepted_from_steps works for prompt lookup too.
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
    speedup_vs_plain: float | None = None  # median over repeats of plain wall time / this wall time, repeat by repeat
    plain_wall_seconds: float | None = None  # the (median) wall time of the plain run it was compared with
    identical_to_plain: bool | None = None
    first_difference: int | None = None
    comparison_note: str = ""
    num_assistant_tokens: int | None = None  # K of the setting (None for plain and for a confidence threshold)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> GenerationRecord:
        """A record back from `as_dict` (e.g. a benchmark's --json); keys it does not know are ignored."""
        names = {item.name for item in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})

    @property
    def stack(self) -> str:
        """The library that produced the record: "transformers" or "openvino_genai" (speed-ups only within one)."""
        return "transformers" if self.backend == "transformers" else "openvino_genai"

    @property
    def tokens_per_pass(self) -> float | None:
        """Mean tokens per verification pass (`utils.decoding.decoding_metrics.tokens_per_main_pass`)."""
        return decoding_metrics.tokens_per_main_pass(self.tokens_per_step) if self.tokens_per_step else None


def encode_prompt(tokenizer: Any, text: str, apply_chat_template: bool = True) -> Any:
    """Token ids for a user message in the chat template, as `LLMPipeline.generate(str)` would (raw text if none)."""
    if apply_chat_template and getattr(tokenizer, "chat_template", None):
        templated = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        return tokenizer.encode(templated, add_special_tokens=False)
    return tokenizer.encode(text)


def run_prompt(
    loaded: LoadedPipeline,
    prompt: Prompt | str,
    settings: DecodingSettings,
    streamer: Any = None,
) -> GenerationRecord:
    """Generate once for one prompt and return its record (no warm-up, no repeats).

    streamer: None or a `StepRecorder` (e.g. echo=True). A recorder is always attached since `tokens_per_step` comes
    from it: GenAI's raw batch sizes do not add up to the tokens under sampling.
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
        raise TypeError("run_prompt takes a utils.decoding.step_streamer.StepRecorder as streamer (or None).")
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
        # GenAI's counters can disagree (2026.4 reported 2 accepted of 0 drafted on the Qwen2.5-Coder pair):
        # then no rate; the raw counters stay in the record.
        acceptance = decoding_metrics.acceptance_rate(accepted, drafted) if 0 <= accepted <= drafted else None
        main_metrics = decoding_metrics.per_model_metrics(extended.main_model_metrics)
        draft_metrics = decoding_metrics.per_model_metrics(extended.draft_model_metrics)
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
    """Time runners (prompt -> GenerationRecord) on the same prompts, interleaved; records by runner, then prompt.

    Each record is the median-wall-time run, with all wall times in `wall_seconds_all`.
    """
    if repeats < 1:
        raise SpeculationSetupError(f"repeats must be >= 1, got {repeats}.")
    if warmup < 0:
        raise SpeculationSetupError(f"warmup must be >= 0, got {warmup}.")
    if not prompts:
        raise SpeculationSetupError("No prompts to measure.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]

    def report(repeat: int, prompt_index: int, _runner_index: int, run: TimedRun) -> None:
        record = run.result
        assert progress is not None, "only called with a progress callback"
        progress(f"repeat {repeat + 1}/{repeats}: {record.mode} {record.setting} on {prompt_list[prompt_index].id}: "
                 f"{record.generated_tokens} tokens in {record.wall_seconds:.2f} s")

    measured = interleaved_runs(runners, prompt_list, warmup=warmup, repeats=repeats,
                                on_run=report if progress else None,
                                show_progress=show_progress and progress is None)
    return [median_of_runs([run.result for run in runner_runs.runs])
            for per_runner in measured for runner_runs in per_runner]


def measure_side_by_side(
    candidates: Sequence[Candidate],
    prompts: Sequence[Prompt | str],
    *,
    warmup: int = 1,
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
    show_progress: bool = True,
) -> list[GenerationRecord]:
    """Time (pipeline, settings) candidates on the same prompts (`measure_runners`); by candidate, then prompt."""
    for loaded, settings in candidates:
        if settings.mode != loaded.mode:
            raise SpeculationSetupError(
                f"A candidate pairs settings for '{settings.mode}' with a '{loaded.mode}' pipeline.")
    runners = [lambda prompt, loaded=loaded, settings=settings: run_prompt(loaded, prompt, settings)
               for loaded, settings in candidates]
    return measure_runners(runners, prompts, warmup=warmup, repeats=repeats, progress=progress,
                           show_progress=show_progress)


def median_of_runs(runs: Sequence[GenerationRecord]) -> GenerationRecord:
    """The (lower) middle run by wall time, with the true median wall time, all wall times and output stability."""
    if not runs:
        raise ValueError("No runs to summarise.")
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

    Plain references are matched by stack and prompt id (from `plain_records`, else the first plain run in `records`).
    The speed-up (median over repeats of plain / this wall time) is given only for the same device, backend, precision
    and token count; otherwise `comparison_note` says why.
    """
    references = [record for record in (plain_records if plain_records is not None else records)
                  if record.mode == "plain"]
    by_prompt: dict[tuple[str, str], GenerationRecord] = {}
    for record in references:
        by_prompt.setdefault((record.stack, record.prompt_id), record)
    compared = []
    for record in records:
        plain = by_prompt.get((record.stack, record.prompt_id))
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
        samples = decoding_metrics.speedup_per_repeat([plain.wall_seconds_all], [record.wall_seconds_all])
        speedup = None if not comparable else statistics.median(samples) if samples else \
            plain.wall_seconds / record.wall_seconds
        if not record.outputs_stable or not plain.outputs_stable:
            notes.append("repeats produced different outputs")
        compared.append(replace(
            record,
            speedup_vs_plain=speedup,
            plain_wall_seconds=plain.wall_seconds if comparable else None,
            identical_to_plain=divergence is None,
            first_difference=divergence,
            comparison_note="; ".join(notes),
        ))
    return compared
