"""Sweeps over speculative-decoding settings: points, the runner and its results.

`run_sweep` measures each `SweepPoint` against plain decoding with `utils.decoding.generation`'s loop, interleaved
(each speed-up is a ratio of runs taken side by side), all in this process: nothing measured earlier is reused.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from utils.decoding import decoding_metrics
from utils.decoding.generation import DecodingSettings, GenerationRecord, compare_with_plain, measure_side_by_side
from utils.decoding.generation_reports import repeat_speedups
from utils.decoding.pipelines import check_draft_folder, check_main_folder
from utils.decoding.prompts import Prompt, as_prompt
from utils.models.model_catalogue import ModelPair
from utils.tuning.pipeline_pool import PipelinePool, PipelineSpec

_DEFAULT_PIPELINE = PipelineSpec()  # frozen, so one shared default is safe


@dataclass(frozen=True)
class SweepPoint:
    """One setting of a sweep: the swept knob's value, the decoding settings and the pipeline."""

    knob: str
    value: Any
    settings: DecodingSettings
    pipeline: PipelineSpec = PipelineSpec()


def k_points(ks: Iterable[int], max_new_tokens: int = 32,
             pipeline: PipelineSpec = _DEFAULT_PIPELINE) -> list[SweepPoint]:
    """One point per number of draft tokens K (`num_assistant_tokens`)."""
    return [SweepPoint("num_assistant_tokens", int(k),
                       DecodingSettings("speculative", num_assistant_tokens=int(k), max_new_tokens=max_new_tokens),
                       pipeline) for k in ks]


def threshold_points(thresholds: Iterable[float], max_new_tokens: int = 32) -> list[SweepPoint]:
    """One point per `assistant_confidence_threshold` (dynamic draft length)."""
    return [SweepPoint("assistant_confidence_threshold", float(threshold),
                       DecodingSettings("speculative", assistant_confidence_threshold=float(threshold),
                                        max_new_tokens=max_new_tokens)) for threshold in thresholds]


def prompt_lookup_points(ks: Iterable[int], max_new_tokens: int = 32) -> list[SweepPoint]:
    """One point per number of candidate tokens K for prompt lookup (n-grams of the prompt, no draft)."""
    return [SweepPoint("prompt_lookup", int(k),
                       DecodingSettings("prompt_lookup", num_assistant_tokens=int(k), max_new_tokens=max_new_tokens),
                       PipelineSpec("prompt_lookup")) for k in ks]


def draft_points(variants: Iterable[tuple[str | None, str]], k: int = 3, max_new_tokens: int = 32) -> list[SweepPoint]:
    """One point per (draft weight variant, draft inference precision), the main model at f32."""
    return [SweepPoint("draft", f"{variant or 'default'} @ {precision}",
                       DecodingSettings("speculative", num_assistant_tokens=k, max_new_tokens=max_new_tokens),
                       PipelineSpec("speculative", draft_variant=variant, draft_precision=precision))
            for variant, precision in variants]


# --------------------------------------------------------------------------- results


def summarise_records(records: Sequence[GenerationRecord], draft_length: int | None = None) -> dict:
    """Speed-up, acceptance and tokens per pass pooled over one group of candidate records.

    speedup: total plain / total time over prompts whose token counts matched plain (None if none did).
    """
    comparable = [record for record in records if record.speedup_vs_plain is not None]
    seconds = sum(record.wall_seconds for record in comparable)
    counted = [(record.accepted_tokens, record.draft_tokens) for record in records  # GenAI's counters, when sane
               if record.accepted_tokens is not None and record.draft_tokens is not None
               and 0 <= record.accepted_tokens <= record.draft_tokens]
    runs = [record.tokens_per_step for record in records if record.tokens_per_step]
    steps = [step for run in runs for step in decoding_metrics.verification_steps(run)]
    tokens_per_pass = decoding_metrics.pooled_tokens_per_main_pass(runs)
    return {
        "prompts": len(records),
        "comparable_prompts": len(comparable),
        "speedup": sum(record.plain_wall_seconds or 0.0 for record in comparable) / seconds
        if comparable and seconds > 0 else None,
        "acceptance_rate": decoding_metrics.acceptance_rate(sum(accepted for accepted, _ in counted),
                                                            sum(drafted for _, drafted in counted)) if counted else None,
        "tokens_per_pass": tokens_per_pass,
        "max_tokens_per_pass": max(steps) if steps else None,
        "per_token_acceptance": decoding_metrics.per_token_acceptance(tokens_per_pass, draft_length)
        if draft_length else None,
        "identical_prompts": sum(bool(record.identical_to_plain) for record in records),
        "identical": all(bool(record.identical_to_plain) for record in records),
    }


@dataclass
class PointResult:
    """One measured sweep point: its compared records (plain references and the candidate)."""

    point: SweepPoint
    records: list[GenerationRecord]


@dataclass
class SweepResult:
    """All points of one sweep, with summaries grouped by task type or prompt length."""

    name: str
    pair: str
    device: str
    points: list[PointResult]
    prompts: list[Prompt] = field(default_factory=list)

    @property
    def knob(self) -> str:
        return self.points[0].point.knob if self.points else ""

    def rows(self, by: str | None = None, prompt_ids: Sequence[str] | None = None) -> list[dict]:
        """One row per (point, group); by = None (all prompts), 'task' or 'length'.

        "speedup" is the median of "repeat_speedups"; prompt_ids restricts rows to those prompts.
        """
        if by not in (None, "task", "length"):
            raise ValueError(f"by must be None, 'task' or 'length', got '{by}'.")
        lengths = {prompt.id: prompt.length for prompt in self.prompts}
        rows = []
        for result in self.points:
            settings = result.point.settings
            groups: dict[str, list[GenerationRecord]] = {}
            for record in result.records:
                if record.mode == settings.mode and (prompt_ids is None or record.prompt_id in prompt_ids):
                    group = "all" if by is None else record.task if by == "task" else lengths.get(record.prompt_id, "short")
                    groups.setdefault(group, []).append(record)
            plain = [record for record in result.records if record.mode == "plain"]
            for group, members in groups.items():
                samples = repeat_speedups(plain, members)
                summary = summarise_records(members, None if settings.assistant_confidence_threshold is not None
                                            else settings.num_assistant_tokens)
                if samples and summary["speedup"] is not None:
                    summary["speedup"] = statistics.median(samples)
                rows.append({"knob": result.point.knob, "value": result.point.value, "group": group,
                             "pipeline": result.point.pipeline.label, **summary, "repeat_speedups": samples,
                             "repeats": len(samples), "slowest_repeat": min(samples, default=None),
                             "fastest_repeat": max(samples, default=None)})
        return rows

    def best(self, by: str | None = None, prompt_ids: Sequence[str] | None = None) -> dict[str, dict]:
        """For each group, the row with the highest speed-up."""
        best: dict[str, dict] = {}
        for row in self.rows(by, prompt_ids):
            if row["speedup"] is not None and (row["group"] not in best or row["speedup"] > best[row["group"]]["speedup"]):
                best[row["group"]] = row
        return best

    def speedup_by_value(self, prompt_ids: Sequence[str] | None = None) -> dict[Any, float]:
        """Speed-up over all (or the given) prompts for each swept value."""
        return {row["value"]: row["speedup"] for row in self.rows(None, prompt_ids) if row["speedup"] is not None}


# --------------------------------------------------------------------------- the runner


def plain_settings_for(settings: DecodingSettings) -> DecodingSettings:
    """Plain-decoding settings comparable with `settings`: same token budget, sampling and chat template."""
    return DecodingSettings("plain", max_new_tokens=settings.max_new_tokens, ignore_eos=settings.ignore_eos,
                            apply_chat_template=settings.apply_chat_template, do_sample=settings.do_sample,
                            temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k,
                            rng_seed=settings.rng_seed)


def measure_points(pool: PipelinePool, points: Sequence[SweepPoint], prompts: Sequence[Prompt], *, warmup: int = 1,
                   repeats: int = 2, progress: bool = True) -> list[list[GenerationRecord]]:
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
    if len({pool.canonical(point.pipeline) for point in points} | {reference}) > pool.keep:
        raise ValueError(f"These points need more pipelines at once than the pool keeps ({pool.keep}); "
                         "split them (run_sweep does) or use PipelinePool(..., keep=...).")
    candidates = [(pool.get(reference), plain_settings)] + [(pool.get(point.pipeline), point.settings)
                                                           for point in points]
    records = measure_side_by_side(candidates, prompts, warmup=warmup, repeats=repeats, show_progress=progress)
    count = len(prompts)
    return [compare_with_plain(records[:count] + records[count * (index + 1):count * (index + 2)])
            for index in range(len(points))]


def group_points(points: Sequence[SweepPoint], keep: int) -> list[list[int]]:
    """Split point indices into runs `measure_points` can time together within `keep` pipelines (no reload mid-run)."""
    by_reference: dict[tuple, dict[PipelineSpec, list[int]]] = {}
    for index, point in enumerate(points):
        reference = (point.pipeline.plain_reference, plain_settings_for(point.settings))
        by_reference.setdefault(reference, {}).setdefault(point.pipeline, []).append(index)
    room = max(keep - 1, 1)  # pipelines besides the plain one
    return [[index for spec in list(by_pipeline)[start:start + room] for index in by_pipeline[spec]]
            for by_pipeline in by_reference.values() for start in range(0, len(by_pipeline), room)]


def run_sweep(pair: ModelPair, points: Sequence[SweepPoint], prompts: Sequence[Prompt | str], *, name: str = "sweep",
              device: str = "CPU", warmup: int = 1, repeats: int = 2, pool: PipelinePool | None = None,
              progress: bool = True) -> SweepResult:
    """Measure every point against plain decoding, in groups `measure_points` can time side by side."""
    if not points:
        raise ValueError("A sweep needs at least one point.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    if not prompt_list:
        raise ValueError("A sweep needs at least one prompt.")
    check_main_folder(pair.main.path)  # before any long work
    for point in points:
        draft = point.pipeline.draft_spec(pair)
        if draft is not None:
            check_draft_folder(draft.path)
    pool = pool if pool is not None else PipelinePool(pair, device)
    results: dict[int, PointResult] = {}
    for members in group_points(points, pool.keep):
        measured = measure_points(pool, [points[index] for index in members], prompt_list, warmup=warmup,
                                  repeats=repeats, progress=progress)
        results.update({index: PointResult(points[index], records) for index, records in zip(members, measured, strict=True)})
    return SweepResult(name, pair.name, device, [results[index] for index in range(len(points))], prompt_list)
