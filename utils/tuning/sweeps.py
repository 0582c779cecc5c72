"""Sweeps over speculative-decoding settings: points, grids, the runner and its results.

`run_sweep` measures each `SweepPoint` against plain decoding, interleaved (each speed-up is a ratio of runs
taken side by side), all in this process: nothing measured earlier is reused.
"""
from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from utils.decoding import decoding_metrics
from utils.decoding.generation import DecodingSettings, GenerationRecord, compare_with_plain, measure_side_by_side
from utils.decoding.generation_reports import repeat_speedups
from utils.decoding.pipelines import check_draft_folder, check_main_folder
from utils.decoding.prompts import Prompt, as_prompt, select_prompts
from utils.models.model_catalogue import ModelPair
from utils.tuning.pipeline_pool import PipelinePool, PipelineSpec

_DEFAULT_PIPELINE = PipelineSpec()  # frozen, so one shared default is safe

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


def k_points(ks: Iterable[int], max_new_tokens: int = 32,
             pipeline: PipelineSpec = _DEFAULT_PIPELINE) -> list[SweepPoint]:
    """One point per number of draft tokens K (`num_assistant_tokens`)."""
    return [SweepPoint("num_assistant_tokens", int(k),
                       DecodingSettings("speculative", num_assistant_tokens=int(k), max_new_tokens=max_new_tokens),
                       pipeline) for k in ks]


def threshold_points(thresholds: Iterable[float], max_new_tokens: int = 32,
                     pipeline: PipelineSpec = _DEFAULT_PIPELINE) -> list[SweepPoint]:
    """One point per `assistant_confidence_threshold` (dynamic draft length)."""
    return [SweepPoint("assistant_confidence_threshold", float(threshold),
                       DecodingSettings("speculative", assistant_confidence_threshold=float(threshold),
                                        max_new_tokens=max_new_tokens), pipeline) for threshold in thresholds]


def prompt_lookup_points(ks: Iterable[int], max_ngram_size: int = 3, max_new_tokens: int = 32) -> list[SweepPoint]:
    """One point per number of candidate tokens K for prompt lookup (n-grams of the prompt, no draft)."""
    return [SweepPoint("prompt_lookup", int(k),
                       DecodingSettings("prompt_lookup", num_assistant_tokens=int(k), max_ngram_size=max_ngram_size,
                                        max_new_tokens=max_new_tokens), PipelineSpec("prompt_lookup"))
            for k in ks]


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
    """Sizes of every sweep in notebook 05: `SMALL_GRID` (default), `FULL_GRID`, or `QUICK_GRID` (test runs)."""

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
    concurrencies=(1, 2, 4), max_new_tokens=32, repeats=3, step_repeats=5, long_prompts=2,
    tuner_budget_seconds=120)
QUICK_GRID = TuningGrid(
    ks=(1, 2, 4), thresholds=(0.5,), drafts=(("int4", "f32"), ("int8", "f32")),
    concurrencies=(1, 2), max_new_tokens=24, repeats=1, step_repeats=3, long_prompts=1, tuner_budget_seconds=60)
FULL_GRID = TuningGrid(
    ks=tuple(range(1, 11)), thresholds=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    drafts=tuple((variant, precision) for variant in ("int4", "int8", "fp16") for precision in ("f32", "bf16")),
    concurrencies=(1, 2, 4, 8), max_new_tokens=64, repeats=3, step_repeats=11, long_prompts=3,
    tuner_budget_seconds=300)


# --------------------------------------------------------------------------- results


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
    """Speed-up, acceptance and tokens per pass pooled over one group of candidate records.

    speedup: total plain / total time over prompts whose token counts matched plain (None if none did).
    """
    comparable = [record for record in records if record.speedup_vs_plain is not None]
    plain_seconds = sum(record.plain_wall_seconds or 0.0 for record in comparable)
    seconds = sum(record.wall_seconds for record in comparable)
    counted = [(record.accepted_tokens, record.draft_tokens) for record in records  # GenAI's counters, when sane
               if record.accepted_tokens is not None and record.draft_tokens is not None
               and 0 <= record.accepted_tokens <= record.draft_tokens]
    acceptance = decoding_metrics.acceptance_rate(sum(accepted for accepted, _ in counted),
                                                  sum(drafted for _, drafted in counted)) if counted else None
    runs = [record.tokens_per_step for record in records if record.tokens_per_step]
    steps = [step for run in runs for step in decoding_metrics.verification_steps(run)]
    tokens_per_pass = decoding_metrics.pooled_tokens_per_main_pass(runs)
    per_token = decoding_metrics.per_token_acceptance(tokens_per_pass, draft_length) if draft_length else None
    main_ms = [ms for ms in (decoding_metrics.verification_pass_ms(record.main_model_metrics)
                             for record in records if record.main_model_metrics) if ms is not None]
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
        "identical_prompts": sum(bool(record.identical_to_plain) for record in records),
        "identical": all(bool(record.identical_to_plain) for record in records),
    }


@dataclass
class PointResult:
    """One measured sweep point: its compared records (plain references and the candidate)."""

    point: SweepPoint
    records: list[GenerationRecord]

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

        "speedup" is the median per-repeat speed-up; prompt_ids restricts rows to those prompts.
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
                samples = repeat_speedups(result.plain_records, members)
                summary = summarise_records(members, k if result.point.settings.assistant_confidence_threshold is None
                                            else None)
                if samples and summary["speedup"] is not None:
                    summary["speedup"] = statistics.median(samples)
                rows.append({
                    "knob": result.point.knob,
                    "value": result.point.value,
                    "group": group,
                    "pipeline": result.point.pipeline.label,
                    **summary,
                    "repeats": len(samples),
                    "slowest_repeat": min(samples, default=None),
                    "fastest_repeat": max(samples, default=None),
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


def progress_bar(total: int, description: str, enabled: bool):
    """A tqdm bar over `total` steps, or None if not `enabled`."""
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
    """Measure points sharing one plain reference in ONE interleaved run, plain timed once.

    Each repeat runs plain then every point, prompt by prompt, so all meet the same background load.
    """
    if not points:
        return []
    reference, plain_settings = points[0].pipeline.plain_reference, plain_settings_for(points[0].settings)
    if any(point.pipeline.plain_reference != reference or plain_settings_for(point.settings) != plain_settings
           for point in points):
        raise ValueError("measure_points needs points with the same plain reference and token budget; group them "
                         "first (run_sweep does).")
    pipelines = {pool.canonical(point.pipeline) for point in points} | {reference}
    if len(pipelines) > pool.keep:
        raise ValueError(f"These points need {len(pipelines)} pipelines at once but the pool keeps {pool.keep}; "
                         "split them (run_sweep does) or use PipelinePool(..., keep=...).")
    plain = pool.get(reference)
    candidates = [(plain, plain_settings)] + [(pool.get(point.pipeline), point.settings) for point in points]
    records = measure_side_by_side(candidates, prompts, warmup=warmup, repeats=repeats, progress=progress)
    count = len(prompts)
    plain_records = records[:count]
    return [compare_with_plain(plain_records + records[count * (index + 1):count * (index + 2)])
            for index in range(len(points))]


def group_points(points: Sequence[SweepPoint], indices: Sequence[int], keep: int) -> list[list[int]]:
    """Split point indices into runs `measure_points` can time together within `keep` pipelines (no reload mid-run)."""
    by_reference: dict[tuple, list[int]] = {}
    for index in indices:
        point = points[index]
        by_reference.setdefault((point.pipeline.plain_reference, plain_settings_for(point.settings)), []).append(index)
    groups: list[list[int]] = []
    room = max(keep - 1, 1)  # pipelines besides the plain one
    for members in by_reference.values():
        by_pipeline: dict[PipelineSpec, list[int]] = {}
        for index in members:
            by_pipeline.setdefault(points[index].pipeline, []).append(index)
        pipelines = list(by_pipeline)
        for start in range(0, len(pipelines), room):
            groups.append([index for spec in pipelines[start:start + room] for index in by_pipeline[spec]])
    return groups


def run_sweep(
    pair: ModelPair,
    points: Sequence[SweepPoint],
    prompts: Sequence[Prompt | str],
    *,
    name: str = "sweep",
    device: str = "CPU",
    warmup: int = 1,
    repeats: int = 2,
    pool: PipelinePool | None = None,
    progress: bool = True,
) -> SweepResult:
    """Measure every point against plain decoding, in groups `measure_points` can time side by side."""
    if not points:
        raise ValueError("A sweep needs at least one point.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    if not prompt_list:
        raise ValueError("A sweep needs at least one prompt.")
    check_pair_ready(pair, points)
    pool = pool if pool is not None else PipelinePool(pair, device)
    results: list[PointResult | None] = [None] * len(points)
    bar = progress_bar(len(points), f"{name} (points)", progress)
    for members in group_points(points, range(len(points)), pool.keep):
        runs = (1 + len(members)) * len(prompt_list) * repeats
        done = 0

        def report(runs: int, message: str) -> None:
            nonlocal done
            done += 1
            if bar is not None:
                bar.set_postfix_str(f"run {done}/{runs}: {message.split(': ', 1)[-1][:50]}")

        if bar is not None:
            bar.set_postfix_str(f"loading and warming up {points[members[0]].pipeline.label}")
        measured = measure_points(pool, [points[index] for index in members], prompt_list, warmup=warmup,
                                  repeats=repeats, progress=functools.partial(report, runs))
        for index, records in zip(members, measured, strict=True):
            results[index] = PointResult(points[index], records)
        if bar is not None:
            bar.update(len(members))
    if bar is not None:
        bar.close()
    return SweepResult(name, pair.name, device, [result for result in results if result is not None], prompt_list)
