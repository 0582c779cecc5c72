"""Sweeps over speculative-decoding settings, measured with `utils.generation` and cached on disk.

A sweep is a list of `SweepPoint`s: one setting each (K, a confidence
threshold, a draft variant, ...), with the pipeline it needs. `run_sweep`
measures every point against plain decoding on the same prompts, interleaved
(`utils.generation.measure_side_by_side`), so each speed-up is a ratio of runs
taken side by side, and stores each finished point as one JSON file under
``build_dir()/sweep-cache``. The cache key holds everything that could change
the result: pair, model folders (and their build markers), device, pipeline
and decoding settings, prompts, warm-up/repeats and the OpenVINO package
versions. A re-run loads finished points without loading any model;
``clear_cache=True`` measures again.

    pair = get_pair("offline")
    result = run_sweep(pair, k_points([1, 2, 3, 4]), sweep_prompts(), name="K")
    result.rows(by="task")      # speed-up, acceptance, tokens per pass per K and task type

Finished points are stored by `utils.result_cache.ResultCache` (also used by
`utils.autotune`). Also here, because they are sweeps too: `measure_concurrency` (several requests
at once through the continuous-batching pipeline), `measure_memory` (peak RSS
of a pipeline in a child process, for scheduler cache settings) and cached
wrappers around `utils.verification_cost`.

Heavy imports (openvino_genai) happen inside functions.
"""
from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from utils import decoding_metrics
from utils.pipelines import (LoadedPipeline, SpeculationSetupError, check_draft_folder, check_main_folder,
                             device_properties, load_pipeline, make_scheduler_config)
from utils.generation import DecodingSettings, GenerationRecord, compare_with_plain, measure_side_by_side
from utils.model_catalogue import ModelPair, ModelSpec
from utils.peak_memory import measure_in_fresh_process
from utils.prompts import Prompt, as_prompt, select_prompts
from utils.result_cache import ResultCache, model_fingerprint, package_versions
from utils.result_cache import make_cache as make_cache  # notebook 05 calls sweeps.make_cache

# --------------------------------------------------------------------------- pipelines


@dataclass(frozen=True)
class PipelineSpec:
    """Which pipeline a sweep point runs on.

    mode: "plain", "speculative" or "prompt_lookup".
    draft_variant: name of one of the pair's drafts (`ModelPair.draft_variant`), None = its default draft.
    main_precision / draft_precision: inference precision of each model ("f32", "bf16", "f16",
        "default"); draft_precision None = same as the main. Only the main model's precision
        decides the output: a lower-precision draft only changes how often it is accepted.
    cache_size_gb: the scheduler's KV-cache size, 0 = grow with demand.
    max_num_batched_tokens: the scheduler's token budget per step, None = OpenVINO GenAI's default.
    """

    mode: str = "speculative"
    draft_variant: str | None = None
    main_precision: str = "f32"
    draft_precision: str | None = None
    cache_size_gb: int = 0
    max_num_batched_tokens: int | None = None

    def __post_init__(self) -> None:
        device_properties(self.main_precision)
        device_properties(self.draft_precision)
        if self.mode != "speculative" and (self.draft_variant is not None or self.draft_precision is not None):
            raise SpeculationSetupError(f"A {self.mode} pipeline has no draft: leave draft_variant/draft_precision None.")

    @property
    def plain_reference(self) -> PipelineSpec:
        """The plain pipeline this one is compared with: same main precision, same scheduler cache."""
        return PipelineSpec("plain", main_precision=self.main_precision, cache_size_gb=self.cache_size_gb,
                            max_num_batched_tokens=self.max_num_batched_tokens)

    def draft_spec(self, pair: ModelPair) -> ModelSpec | None:
        return pair.draft_variant(self.draft_variant) if self.mode == "speculative" else None

    @property
    def label(self) -> str:
        if self.mode != "speculative":
            return f"{self.mode} (main {self.main_precision})"
        draft = f"{self.draft_variant} draft" if self.draft_variant else "default draft"
        return f"{draft} @ {self.draft_precision or self.main_precision}, main @ {self.main_precision}"


def request_token_probabilities(loaded: LoadedPipeline) -> LoadedPipeline:
    """Make the pipeline's default generation config compute token probabilities (logprobs=1).

    Measured with OpenVINO GenAI 2026.4: under greedy decoding with the default
    logprobs=0 the sampler does not compute the draft's token probabilities,
    so `assistant_confidence_threshold` has no effect and the draft proposes
    exactly one token per step for any threshold (the run equals K=1). With
    logprobs >= 1 the threshold works. Every pipeline of a sweep gets the same
    setting, so plain and speculative runs pay the same (small) cost.
    """
    config = loaded.pipeline.get_generation_config()
    config.logprobs = max(int(config.logprobs), 1)
    eos = loaded.pipeline.get_tokenizer().get_eos_token_id()
    if eos >= 0:
        config.set_eos_token_id(eos)  # set_generation_config rejects the unset (-1) end-of-sequence id
    loaded.pipeline.set_generation_config(config)
    return loaded


def load_spec_pipeline(pair: ModelPair, spec: PipelineSpec, device: str = "CPU") -> LoadedPipeline:
    """Build the pipeline `spec` describes (`utils.pipelines.load_pipeline`), with token probabilities on."""
    draft = spec.draft_spec(pair)
    return request_token_probabilities(load_pipeline(
        spec.mode, pair.main.path, device, draft_dir=draft.path if draft else None,
        precision=spec.main_precision, cache_size_gb=spec.cache_size_gb,
        max_num_batched_tokens=spec.max_num_batched_tokens, draft_precision=spec.draft_precision))


class PipelinePool:
    """Loads pipelines on first use and keeps at most `keep` of them (plain references are kept first).

    A sweep over draft variants would otherwise hold one compiled copy of the
    main model per variant in memory.
    """

    def __init__(self, pair: ModelPair, device: str = "CPU", keep: int = 2) -> None:
        self.pair = pair
        self.device = device
        self.keep = keep
        self._loaded: dict[PipelineSpec, LoadedPipeline] = {}

    def canonical(self, spec: PipelineSpec) -> PipelineSpec:
        """The same pipeline spelled one way: the pair's default draft as None, a draft precision equal to the main's as None."""
        if spec.mode != "speculative":
            return spec
        variant = spec.draft_variant
        if variant is not None and self.pair.draft_variant(variant) == self.pair.draft:
            variant = None
        precision = None if spec.draft_precision == spec.main_precision else spec.draft_precision
        return replace(spec, draft_variant=variant, draft_precision=precision)

    def get(self, spec: PipelineSpec) -> LoadedPipeline:
        spec = self.canonical(spec)
        if spec not in self._loaded:
            while len(self._loaded) >= self.keep:
                evict = next((s for s in self._loaded if s.mode != "plain"), next(iter(self._loaded)))
                del self._loaded[evict]
            self._loaded[spec] = load_spec_pipeline(self.pair, spec, self.device)
        return self._loaded[spec]

    def release(self) -> None:
        self._loaded.clear()


# --------------------------------------------------------------------------- sweep points


@dataclass(frozen=True)
class SweepPoint:
    """One setting of a sweep: the swept knob's value, the decoding settings and the pipeline."""

    knob: str
    value: Any
    settings: DecodingSettings
    pipeline: PipelineSpec = PipelineSpec()

    @property
    def label(self) -> str:
        return f"{self.knob}={self.value}"


def k_points(ks: Iterable[int], max_new_tokens: int = 32, pipeline: PipelineSpec = PipelineSpec()) -> list[SweepPoint]:
    """One point per number of draft tokens K (`num_assistant_tokens`)."""
    return [SweepPoint("num_assistant_tokens", int(k),
                       DecodingSettings("speculative", num_assistant_tokens=int(k), max_new_tokens=max_new_tokens),
                       pipeline) for k in ks]


def threshold_points(thresholds: Iterable[float], max_new_tokens: int = 32,
                     pipeline: PipelineSpec = PipelineSpec()) -> list[SweepPoint]:
    """One point per `assistant_confidence_threshold` (dynamic draft length)."""
    return [SweepPoint("assistant_confidence_threshold", float(threshold),
                       DecodingSettings("speculative", assistant_confidence_threshold=float(threshold),
                                        max_new_tokens=max_new_tokens), pipeline) for threshold in thresholds]


def draft_points(variants: Iterable[tuple[str | None, str]], k: int = 3, max_new_tokens: int = 32,
                 main_precision: str = "f32") -> list[SweepPoint]:
    """One point per (draft weight variant, draft inference precision), main model fixed at `main_precision`."""
    points = []
    for variant, draft_precision in variants:
        spec = PipelineSpec("speculative", draft_variant=variant, main_precision=main_precision,
                            draft_precision=draft_precision)
        points.append(SweepPoint("draft", f"{variant or 'default'} @ {draft_precision}",
                                 DecodingSettings("speculative", num_assistant_tokens=k, max_new_tokens=max_new_tokens),
                                 spec))
    return points


def draft_sizes_mb(pair: ModelPair, drafts: Iterable[tuple[str | None, str]]) -> dict[str, float]:
    """Size on disk of each draft's weights, keyed like the values of `draft_points`."""
    sizes = {}
    for variant, draft_precision in drafts:
        weights = pair.draft_variant(variant).path / "openvino_model.bin"
        if weights.is_file():
            sizes[f"{variant or 'default'} @ {draft_precision}"] = weights.stat().st_size / 1e6
    return sizes


def sweep_prompts(per_task: int = 1, long_prompts: int = 2) -> list[Prompt]:
    """Short prompts (`per_task` of each task type) followed by `long_prompts` long (>= 256 tokens) ones."""
    prompts = select_prompts(length="short", per_task=per_task)
    if long_prompts:
        prompts += select_prompts(length="long")[:long_prompts]
    return prompts


@dataclass(frozen=True)
class TuningGrid:
    """Sizes of every sweep in notebook 05: `SMALL_GRID` (the default, quick) or `FULL_GRID`."""

    ks: tuple[int, ...]
    thresholds: tuple[float, ...]
    drafts: tuple[tuple[str | None, str], ...]  # (draft variant, draft inference precision)
    concurrencies: tuple[int, ...]
    max_new_tokens: int
    repeats: int
    step_repeats: int
    long_prompts: int
    tuner_budget_seconds: float


SMALL_GRID = TuningGrid(
    ks=(1, 2, 3, 4, 6), thresholds=(0.2, 0.5, 0.8),
    drafts=(("int4", "f32"), ("int4", "bf16"), ("int8", "f32"), ("fp16", "f32")),
    concurrencies=(1, 2, 4), max_new_tokens=32, repeats=1, step_repeats=5, long_prompts=2,
    tuner_budget_seconds=120)
FULL_GRID = TuningGrid(
    ks=tuple(range(1, 11)), thresholds=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    drafts=tuple((variant, precision) for variant in ("int4", "int8", "fp16") for precision in ("f32", "bf16")),
    concurrencies=(1, 2, 4, 8), max_new_tokens=64, repeats=3, step_repeats=11, long_prompts=3,
    tuner_budget_seconds=300)


# --------------------------------------------------------------------------- results


def _record_from_dict(data: dict) -> GenerationRecord:
    names = {f.name for f in fields(GenerationRecord)}
    return GenerationRecord(**{key: value for key, value in data.items() if key in names})


def _records_or_none(stored: Any) -> list[GenerationRecord] | None:
    """Records from a cache entry, or None if there is none or it was written by an incompatible version."""
    if stored is None:
        return None
    try:
        return [_record_from_dict(data) for data in stored]
    except (TypeError, AttributeError):
        return None


def _group_of(record: GenerationRecord, by: str | None, lengths: dict[str, str]) -> str:
    if by is None:
        return "all"
    if by == "task":
        return record.task
    if by == "length":
        return lengths.get(record.prompt_id, "short")
    if by == "prompt":
        return record.prompt_id
    raise ValueError(f"by must be None, 'task', 'length' or 'prompt', got '{by}'.")


def summarise_records(records: Sequence[GenerationRecord], draft_length: int | None = None) -> dict:
    """Speed-up, acceptance and tokens per pass over compared candidate records (one group).

    speedup: total plain time / total time over the prompts whose token counts
    matched plain (None if none did). acceptance_rate, tokens_per_pass and
    per_token_acceptance (Leviathan's a that explains tokens_per_pass at K) are
    `utils.decoding_metrics`' definitions, pooled over the records.
    """
    comparable = [record for record in records if record.speedup_vs_plain is not None]
    plain_seconds = sum(record.wall_seconds * record.speedup_vs_plain for record in comparable)
    seconds = sum(record.wall_seconds for record in comparable)
    counted = [record for record in records if record.draft_tokens is not None]
    acceptance = decoding_metrics.acceptance_rate(sum(record.accepted_tokens for record in counted),
                                                  sum(record.draft_tokens for record in counted)) if counted else None
    runs = [record.tokens_per_step for record in records if record.tokens_per_step]
    steps = [step for run in runs for step in decoding_metrics.verification_steps(run)]
    tokens_per_pass = decoding_metrics.pooled_tokens_per_main_pass(runs)
    per_token = decoding_metrics.per_token_acceptance(tokens_per_pass, draft_length) if draft_length else None
    main_ms = [record.main_model_metrics["inference_ms"] / record.main_model_metrics["passes"]
               for record in records if record.main_model_metrics and record.main_model_metrics.get("passes")]
    return {
        "prompts": len(records),
        "comparable_prompts": len(comparable),
        "speedup": plain_seconds / seconds if comparable and seconds > 0 else None,
        "plain_seconds": plain_seconds,
        "seconds": seconds,
        "generated_tokens": sum(record.generated_tokens for record in records),
        "acceptance_rate": acceptance,
        "tokens_per_pass": tokens_per_pass,
        "max_tokens_per_pass": max(steps) if steps else None,
        "per_token_acceptance": per_token,
        "main_pass_ms": statistics.mean(main_ms) if main_ms else None,
        "identical": all(bool(record.identical_to_plain) for record in records),
    }


@dataclass
class PointResult:
    """One measured sweep point: its compared records (plain references and the candidate)."""

    point: SweepPoint
    records: list[GenerationRecord]
    from_cache: bool = False

    @property
    def candidate_records(self) -> list[GenerationRecord]:
        return [record for record in self.records if record.mode == self.point.settings.mode]

    @property
    def plain_records(self) -> list[GenerationRecord]:
        return [record for record in self.records if record.mode == "plain"]


@dataclass
class SweepResult:
    """All points of one sweep, with summaries grouped by task type, prompt length or prompt."""

    name: str
    pair: str
    device: str
    points: list[PointResult]
    prompts: list[Prompt] = field(default_factory=list)

    @property
    def knob(self) -> str:
        return self.points[0].point.knob if self.points else ""

    def rows(self, by: str | None = None, prompt_ids: Sequence[str] | None = None) -> list[dict]:
        """One row per (point, group); by = None (all prompts), 'task', 'length' or 'prompt'.

        prompt_ids restricts the summary to those prompts (e.g. the auto-tuner's sample).
        """
        lengths = {prompt.id: prompt.length for prompt in self.prompts}
        rows = []
        for result in self.points:
            records = [record for record in result.candidate_records
                       if prompt_ids is None or record.prompt_id in prompt_ids]
            groups: dict[str, list[GenerationRecord]] = {}
            for record in records:
                groups.setdefault(_group_of(record, by, lengths), []).append(record)
            k = result.point.settings.num_assistant_tokens
            for group, members in groups.items():
                rows.append({
                    "knob": result.point.knob,
                    "value": result.point.value,
                    "group": group,
                    "pipeline": result.point.pipeline.label,
                    **summarise_records(members, k if result.point.settings.assistant_confidence_threshold is None
                                        else None),
                    "from_cache": result.from_cache,
                })
        return rows

    def best(self, by: str | None = None, prompt_ids: Sequence[str] | None = None) -> dict[str, dict]:
        """For each group, the row with the highest speed-up."""
        best: dict[str, dict] = {}
        for row in self.rows(by, prompt_ids):
            if row["speedup"] is None:
                continue
            if row["group"] not in best or row["speedup"] > best[row["group"]]["speedup"]:
                best[row["group"]] = row
        return best

    def speedup_by_value(self, prompt_ids: Sequence[str] | None = None) -> dict[Any, float]:
        """Speed-up over all (or the given) prompts for each swept value."""
        return {row["value"]: row["speedup"] for row in self.rows(None, prompt_ids) if row["speedup"] is not None}


def _prompt_key(prompts: Sequence[Prompt]) -> list[list[str]]:
    return [[prompt.id, hashlib.sha256(prompt.text.encode()).hexdigest()[:12]] for prompt in prompts]


def point_cache_key(pair: ModelPair, device: str, point: SweepPoint, prompts: Sequence[Prompt],
                    warmup: int, repeats: int) -> dict:
    """Everything that could change a point's measurement."""
    draft = point.pipeline.draft_spec(pair)
    return {
        "kind": "point",
        "pair": pair.name,
        "main": [pair.main.folder_name, model_fingerprint(pair.main.path)],
        "draft": [draft.folder_name, model_fingerprint(draft.path)] if draft else None,
        "device": device,
        "pipeline": asdict(point.pipeline),
        "settings": asdict(point.settings),
        "prompts": _prompt_key(prompts),
        "warmup": warmup,
        "repeats": repeats,
        "versions": package_versions(),
    }


def _progress_bar(total: int, description: str, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=description, leave=True)


def check_pair_ready(pair: ModelPair, points: Sequence[SweepPoint] = ()) -> None:
    """Raise (before any long work) if a model folder a sweep needs is missing."""
    check_main_folder(pair.main.path)
    for point in points:
        draft = point.pipeline.draft_spec(pair)
        if draft is not None:
            check_draft_folder(draft.path)


def plain_settings_for(settings: DecodingSettings) -> DecodingSettings:
    """Plain-decoding settings comparable with `settings`: same token budget, sampling and chat template."""
    return DecodingSettings("plain", max_new_tokens=settings.max_new_tokens, ignore_eos=settings.ignore_eos,
                            apply_chat_template=settings.apply_chat_template, do_sample=settings.do_sample,
                            temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k,
                            rng_seed=settings.rng_seed)


def measure_points(pool: PipelinePool, points: Sequence[SweepPoint], prompts: Sequence[Prompt], *, warmup: int = 1,
                   repeats: int = 2, progress: Callable[[str], None] | None = None) -> list[list[GenerationRecord]]:
    """Measure points that share one pipeline and plain reference in ONE interleaved run, plain timed once.

    Every repeat runs, prompt by prompt, plain decoding and then each point, so
    all of them meet the same background load. Returns, per point, the plain
    records followed by the point's records, compared with plain.
    """
    if not points:
        return []
    pipeline, plain_settings = points[0].pipeline, plain_settings_for(points[0].settings)
    if any(point.pipeline != pipeline or plain_settings_for(point.settings) != plain_settings for point in points):
        raise ValueError("measure_points needs points with the same pipeline and token budget; group them first.")
    plain = pool.get(pipeline.plain_reference)
    candidate = pool.get(pipeline)
    candidates = [(plain, plain_settings)] + [(candidate, point.settings) for point in points]
    records = measure_side_by_side(candidates, prompts, warmup=warmup, repeats=repeats, progress=progress)
    count = len(prompts)
    plain_records = records[:count]
    return [compare_with_plain(plain_records + records[count * (index + 1):count * (index + 2)])
            for index in range(len(points))]


def measure_point(pool: PipelinePool, point: SweepPoint, prompts: Sequence[Prompt], *, warmup: int = 1,
                  repeats: int = 2) -> list[GenerationRecord]:
    """Measure one point and plain decoding side by side (interleaved) and compare them."""
    return measure_points(pool, [point], prompts, warmup=warmup, repeats=repeats)[0]


def run_sweep(
    pair: ModelPair,
    points: Sequence[SweepPoint],
    prompts: Sequence[Prompt | str],
    *,
    name: str = "sweep",
    device: str = "CPU",
    warmup: int = 1,
    repeats: int = 2,
    cache: ResultCache | None = None,
    pool: PipelinePool | None = None,
    progress: bool = True,
) -> SweepResult:
    """Measure every point against plain decoding, reusing finished points from `cache`.

    Models are loaded only if some point is not cached. Missing points that run
    on the same pipeline are measured together (`measure_points`: plain decoding
    timed once, everything interleaved); each point is then cached on its own.
    progress: a tqdm bar over the points (cached ones count at once), with the
    current run as its postfix.
    """
    if not points:
        raise ValueError("A sweep needs at least one point.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    if not prompt_list:
        raise ValueError("A sweep needs at least one prompt.")
    check_pair_ready(pair, points)
    cache = cache if cache is not None else ResultCache()
    pool = pool if pool is not None else PipelinePool(pair, device)
    keys = [point_cache_key(pair, device, point, prompt_list, warmup, repeats) for point in points]
    results: list[PointResult | None] = []
    groups: dict[tuple, list[int]] = {}
    for index, (point, key) in enumerate(zip(points, keys)):
        cached_records = _records_or_none(cache.get(key))
        results.append(PointResult(point, cached_records, from_cache=True) if cached_records is not None else None)
        if cached_records is None:
            groups.setdefault((point.pipeline, plain_settings_for(point.settings)), []).append(index)
    bar = _progress_bar(len(points), f"{name} (points)", progress)
    if bar is not None:
        bar.update(len(points) - sum(len(members) for members in groups.values()))  # read from the cache
    for members in groups.values():
        runs = (1 + len(members)) * len(prompt_list) * repeats
        done = 0

        def report(message: str) -> None:
            nonlocal done
            done += 1
            if bar is not None:
                bar.set_postfix_str(f"run {done}/{runs}: {message.split(': ', 1)[-1][:50]}")

        if bar is not None:
            bar.set_postfix_str(f"loading and warming up {points[members[0]].pipeline.label}")
        measured = measure_points(pool, [points[index] for index in members], prompt_list, warmup=warmup,
                                  repeats=repeats, progress=report)
        for index, records in zip(members, measured):
            cache.put(keys[index], [record.as_dict() for record in records])
            results[index] = PointResult(points[index], records)
        if bar is not None:
            bar.update(len(members))
    if bar is not None:
        bar.close()
    return SweepResult(name, pair.name, device, [result for result in results if result is not None], prompt_list)


# --------------------------------------------------------------------------- several requests at once


def _generate_batch(loaded: LoadedPipeline, texts: list[str], settings: DecodingSettings) -> tuple[float, int, list[str]]:
    config = settings.generation_config(loaded.pipeline.get_generation_config())
    started = time.perf_counter()
    result = loaded.pipeline.generate(texts, config)
    wall = time.perf_counter() - started
    return wall, int(result.perf_metrics.get_num_generated_tokens()), list(result.texts)


def measure_concurrency(
    pair: ModelPair,
    concurrencies: Iterable[int],
    prompts: Sequence[Prompt | str],
    settings: DecodingSettings,
    *,
    device: str = "CPU",
    pipeline: PipelineSpec = PipelineSpec(),
    repeats: int = 2,
    cache: ResultCache | None = None,
    pool: PipelinePool | None = None,
    progress: bool = True,
) -> list[dict]:
    """Send n requests at once (n in `concurrencies`) to plain and speculative pipelines.

    The continuous-batching backend schedules the n requests together; each
    call returns when all are done, so `latency_seconds` is the time a user of
    the batch waits and `tokens_per_second` is the server's throughput. Prompts
    are cycled to make n requests. Plain and speculative alternate on every
    repeat; medians are kept. Returns one row per (n, mode).
    """
    if settings.mode != "speculative":
        raise SpeculationSetupError("measure_concurrency compares speculative settings against plain decoding.")
    levels = sorted(set(int(level) for level in concurrencies))
    if not levels or levels[0] < 1:
        raise ValueError(f"concurrencies must be integers >= 1, got {list(concurrencies)}.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    check_pair_ready(pair, [SweepPoint("concurrency", 0, settings, pipeline)])
    cache = cache if cache is not None else ResultCache()
    pool = pool if pool is not None else PipelinePool(pair, device)
    plain_settings = plain_settings_for(settings)
    bar = _progress_bar(len(levels), "concurrent requests", progress)
    rows: list[dict] = []
    for level in levels:
        batch = [prompt_list[index % len(prompt_list)] for index in range(level)]
        key = {**point_cache_key(pair, device, SweepPoint("concurrency", level, settings, pipeline), batch, 1, repeats),
               "kind": "concurrency"}

        def measure() -> list[dict]:
            plain = pool.get(pipeline.plain_reference)
            speculative = pool.get(pipeline)
            texts = [prompt.text for prompt in batch]
            candidates = (("plain", plain, plain_settings), ("speculative", speculative, settings))
            for _, loaded, mode_settings in candidates:  # warm-up at this batch size
                _generate_batch(loaded, texts, mode_settings)
            walls: dict[str, list[float]] = {"plain": [], "speculative": []}
            outputs: dict[str, tuple[int, list[str]]] = {}
            for _ in range(repeats):
                for mode, loaded, mode_settings in candidates:
                    wall, tokens, generated = _generate_batch(loaded, texts, mode_settings)
                    walls[mode].append(wall)
                    outputs[mode] = (tokens, generated)
            measured = []
            for mode in ("plain", "speculative"):
                tokens, generated = outputs[mode]
                median_wall = statistics.median(walls[mode])
                measured.append({
                    "concurrency": level, "mode": mode, "latency_seconds": median_wall,
                    "generated_tokens": tokens, "tokens_per_second": tokens / median_wall,
                    "wall_seconds_all": walls[mode],
                    "identical_to_plain": generated == outputs["plain"][1],
                })
            return measured

        if bar is not None:
            bar.set_postfix_str(f"{level} at once")
        level_rows, from_cache = cache.get_or_compute(key, measure)
        rows += [{**row, "from_cache": from_cache} for row in level_rows]
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    plain_rate = {row["concurrency"]: row["tokens_per_second"] for row in rows if row["mode"] == "plain"}
    plain_latency = {row["concurrency"]: row["latency_seconds"] for row in rows if row["mode"] == "plain"}
    for row in rows:
        row["throughput_vs_plain"] = row["tokens_per_second"] / plain_rate[row["concurrency"]]
        row["latency_speedup"] = plain_latency[row["concurrency"]] / row["latency_seconds"]
    return rows


def batch_exactness(
    pair: ModelPair,
    prompts: Sequence[Prompt | str],
    requests: int,
    settings: DecodingSettings,
    *,
    token_budgets: Sequence[int | None] = (None, 4096),
    device: str = "CPU",
    progress: bool = True,
) -> list[dict]:
    """Is a batch of `requests` speculative requests still token-for-token plain greedy decoding?

    The reference is plain decoding of each prompt alone. For each scheduler
    token budget (`max_num_batched_tokens`, None = GenAI's default) a plain and
    a speculative pipeline each generate the whole batch at once (prompts
    cycled). Returns one row per budget with how many requests match the
    reference, the indices of those that do not and the first characters where
    the first of them departs. Measured with OpenVINO GenAI 2026.4 at f32: with
    the default budget of 256 tokens, 2 of 8 speculative requests differed from
    the first token on; with 4096, none did.
    """
    if settings.mode != "speculative":
        raise SpeculationSetupError("batch_exactness checks speculative settings against plain decoding.")
    if isinstance(requests, bool) or not isinstance(requests, int) or requests < 1:
        raise ValueError(f"requests must be an integer >= 1, got {requests!r}.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    if not prompt_list:
        raise ValueError("Give at least one prompt.")
    if not token_budgets:
        raise ValueError("Give at least one token budget (None = the scheduler's default).")
    default_budget = make_scheduler_config().max_num_batched_tokens
    check_pair_ready(pair, [SweepPoint("requests", requests, settings, PipelineSpec())])
    plain_settings = plain_settings_for(settings)
    texts = [prompt_list[index % len(prompt_list)].text for index in range(requests)]
    bar = _progress_bar(1 + 2 * len(token_budgets), "batch exactness", progress)

    def step(description: str) -> None:
        if bar is not None:
            bar.set_postfix_str(description)
            bar.update(1)

    reference: list[str] = []
    rows = []
    for budget in token_budgets:
        spec = PipelineSpec(max_num_batched_tokens=budget)
        plain = load_spec_pipeline(pair, spec.plain_reference, device)
        if not reference:  # plain decoding of each prompt alone, once
            alone = {text: _generate_batch(plain, [text], plain_settings)[2][0] for text in dict.fromkeys(texts)}
            reference = [alone[text] for text in texts]
            step("plain, one request at a time")
        plain_batch = _generate_batch(plain, texts, plain_settings)[2]
        del plain
        step(f"plain batch, budget {budget or 'default'}")
        speculative_batch = _generate_batch(load_spec_pipeline(pair, spec, device), texts, settings)[2]
        step(f"speculative batch, budget {budget or 'default'}")
        differing = [index for index, (got, want) in enumerate(zip(speculative_batch, reference)) if got != want]
        first = differing[0] if differing else None
        rows.append({
            "max_num_batched_tokens": budget if budget is not None else f"default ({default_budget})",
            "requests": requests,
            "plain batch = alone": sum(got == want for got, want in zip(plain_batch, reference)),
            "speculative batch = alone": requests - len(differing),
            "differing requests": differing,
            "alone (start)": reference[first][:40] if first is not None else "",
            "speculative (start)": speculative_batch[first][:40] if first is not None else "",
        })
    if bar is not None:
        bar.close()
    return rows


# --------------------------------------------------------------------------- memory


def load_and_generate(pair: str, spec: dict, device: str, settings: dict, texts: list[str]) -> dict:
    """Load one pipeline and generate for all `texts` at once: the work `measure_memory` runs in a fresh process.

    Returns resident memory after loading (and its virtual size) and after generating, in MB.
    """
    from utils.model_catalogue import get_pair
    from utils.peak_memory import current_rss_bytes

    loaded = load_spec_pipeline(get_pair(pair), PipelineSpec(**spec), device)
    after_load = current_rss_bytes()
    import psutil

    virtual_after_load = psutil.Process().memory_info().vms
    config = DecodingSettings(**settings).generation_config(loaded.pipeline.get_generation_config())
    loaded.pipeline.generate(texts, config)
    return {"rss_after_load_mb": after_load / 1e6, "virtual_mb": virtual_after_load / 1e6,
            "rss_after_generate_mb": current_rss_bytes() / 1e6}


def measure_memory(
    pair: ModelPair,
    specs: Sequence[PipelineSpec],
    prompts: Sequence[Prompt | str],
    settings_by_mode: dict[str, DecodingSettings],
    *,
    device: str = "CPU",
    cache: ResultCache | None = None,
    progress: bool = True,
    timeout_seconds: float = 600,
) -> list[dict]:
    """Peak resident memory of each pipeline, each in a fresh Python process (peak RSS only grows).

    The child (`utils.peak_memory.measure_in_fresh_process` running
    `load_and_generate`) loads the pipeline, generates for all `prompts` at once
    with the settings for its mode, and reports RSS after loading, after
    generating and its peak (VmHWM). Rows also carry the models' weight sizes on disk.
    """
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    check_pair_ready(pair, [SweepPoint("memory", 0, settings_by_mode[spec.mode], spec) for spec in specs])
    cache = cache if cache is not None else ResultCache()
    bar = _progress_bar(len(specs), "memory", progress)
    rows = []
    for spec in specs:
        settings = settings_by_mode[spec.mode]
        key = {**point_cache_key(pair, device, SweepPoint("memory", spec.label, settings, spec), prompt_list, 0, 1),
               "kind": "memory"}
        arguments = {"pair": pair.name, "spec": asdict(spec), "device": device, "settings": asdict(settings),
                     "texts": [prompt.text for prompt in prompt_list]}

        def probe() -> dict:
            return measure_in_fresh_process("utils.sweeps:load_and_generate", arguments, timeout=timeout_seconds)

        if bar is not None:
            bar.set_postfix_str(spec.label)
        measured, from_cache = cache.get_or_compute(key, probe)
        draft = spec.draft_spec(pair)
        weights = (pair.main.path / "openvino_model.bin").stat().st_size
        draft_weights = (draft.path / "openvino_model.bin").stat().st_size if draft else 0
        rows.append({"pipeline": spec.label, "mode": spec.mode,
                     "cache_size_gb": spec.cache_size_gb or "dynamic",
                     "main_weights_mb": weights / 1e6, "draft_weights_mb": draft_weights / 1e6,
                     **measured, "from_cache": from_cache})
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return rows


# --------------------------------------------------------------------------- cached step times


def cached_pair_step_times(pair: ModelPair, device: str = "CPU", *, draft_variant: str | None = None,
                           token_counts: Iterable[int] = range(1, 12), context_tokens: int = 64, repeats: int = 5,
                           main_precision: str = "f32", draft_precision: str | None = None,
                           cache: ResultCache | None = None) -> tuple[list, Any, bool]:
    """`verification_cost.measure_pair_step_times` for a pair, cached like sweep points.

    Returns (main step times per token count, the draft's one-token step, from_cache).
    """
    from utils.verification_cost import StepTime, measure_pair_step_times

    counts = sorted(set(int(count) for count in token_counts))
    draft = pair.draft_variant(draft_variant)
    draft_precision = draft_precision or main_precision
    cache = cache if cache is not None else ResultCache()
    key = {"kind": "steps", "main": [pair.main.folder_name, model_fingerprint(pair.main.path)],
           "draft": [draft.folder_name, model_fingerprint(draft.path)], "device": device, "tokens": counts,
           "context": context_tokens, "repeats": repeats, "precisions": [main_precision, draft_precision],
           "versions": package_versions()}

    def measure() -> dict:
        main_steps, draft_step = measure_pair_step_times(
            pair.main.path, draft.path, device, token_counts=counts, context_tokens=context_tokens, repeats=repeats,
            main_precision=main_precision, draft_precision=draft_precision)
        return {"main": [step.as_dict() for step in main_steps], "draft": draft_step.as_dict()}

    stored, from_cache = cache.get_or_compute(key, measure)
    return [StepTime(**data) for data in stored["main"]], StepTime(**stored["draft"]), from_cache
