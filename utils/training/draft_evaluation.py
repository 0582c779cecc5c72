"""Stage 4 of notebook 06's draft, measured next to its main: `measure_draft_step_times` (cost ratio c),
`measure_speculation` (speed-up and acceptance a per K), `speedup_verdicts` (the speed-ups beside the formula).
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from utils.training.scaffold import TrainingError


def measure_draft_step_times(main_dir: Path, drafts: dict[str, Path], device: str = "CPU",
                             token_counts: Sequence[int] = (1,), context_tokens: int = 128, repeats: int = 15,
                             precision: str = "f32") -> tuple[list[Any], dict[str, Any]]:
    """Main-model step times for `token_counts` and each draft's one-token step: (main StepTimes, {name: StepTime}).
    All are timed in the same interleaved rounds, so the drafts' cost ratios see the same background load."""
    from utils.decoding.step_timing import StepTimer, step_times_from_samples, time_interleaved

    counts = sorted(set(int(count) for count in token_counts) | {1})
    main = StepTimer(main_dir, device, precision, context_tokens, max(counts))
    timers = [(main, counts)] + [(StepTimer(folder, device, precision, context_tokens, 1), [1])
                                 for folder in drafts.values()]
    samples = time_interleaved(timers, repeats, warmup=2, progress=None)
    draft_steps = {name: step_times_from_samples(timer, timer_samples)[0]
                   for name, (timer, _), timer_samples in zip(drafts, timers[1:], samples[1:], strict=True)}
    return step_times_from_samples(main, samples[0]), draft_steps


def speedup_verdicts(theory: Sequence[dict], rows: Sequence[dict], noise: float = 0.15) -> list[str]:
    """One sentence per K: the measured speed-up, its verdict, and whether the formula backs it.
    A median more than `noise` off the prediction (`theory_rows`' rows) is blamed on timing noise only when the
    repeats spread that widely themselves or straddle the prediction; repeats that agree mean the formula misses."""
    from utils.decoding.decoding_metrics import speedup_text, verdict

    measured_by_k = {row["K"]: row for row in rows}
    sentences = []
    for row in theory:
        measured = measured_by_k[row["K"]]
        samples, predicted = measured["repeat_speedups"], row["with_verification_cost"]
        sentence = (f"K={row['K']}: {speedup_text(samples)} ({verdict(samples)}); the formula predicts "
                    f"{predicted:.2f}x from a = {row['a_K']:.2f} and the measured step times")
        if samples and abs(measured["speedup"] / predicted - 1) > noise:
            low, high = min(samples), max(samples)
            if low <= predicted <= high or high - low > noise * measured["speedup"]:
                sentence += (" - the repeats spread this widely themselves, so the gap is likely timing noise: raise "
                             "REPEATS or measure on a quiet machine before trusting the measured figure")
            else:
                sentence += (f" - the repeats agree ({low:.2f}x-{high:.2f}x), so the formula misses here: the step "
                             "times it uses were timed apart from these generations")
        sentences.append(sentence + ".")
    return sentences


def measure_speculation(main_dir: Path, draft_dir: Path, prompts: Sequence[Any], draft_lengths: Sequence[int],
                        device: str = "CPU", max_new_tokens: int = 64, repeats: int = 2, precision: str = "f32",
                        progress: Callable[[str], None] | None = None) -> tuple[list[dict], list]:
    """Plain vs speculative decoding for each K, interleaved: (rows per K in `theory_rows`' shape, records).
    Speed-ups count only prompts whose token counts matched plain. Raises TrainingError unless each K is an int >= 1."""
    from utils.decoding.decoding_metrics import per_token_acceptance as per_token_acceptance_for
    from utils.decoding.generation import DecodingSettings, compare_with_plain, measure_side_by_side
    from utils.decoding.generation_reports import repeat_speedups, summarise
    from utils.decoding.pipelines import load_pipeline

    if not draft_lengths or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in draft_lengths):
        raise TrainingError(f"Draft lengths K must be integers >= 1, got {list(draft_lengths)}.")
    plain = load_pipeline("plain", main_dir, device, precision=precision)
    speculative = load_pipeline("speculative", main_dir, device, draft_dir=draft_dir, precision=precision)
    candidates = [(plain, DecodingSettings("plain", max_new_tokens=max_new_tokens))]
    candidates += [(speculative, DecodingSettings("speculative", num_assistant_tokens=k,
                                                  max_new_tokens=max_new_tokens)) for k in draft_lengths]
    records = compare_with_plain(measure_side_by_side(candidates, prompts, warmup=1, repeats=repeats,
                                                      progress=progress))
    summary = {row["setting"]: row for row in summarise(records)}
    plain_records = [record for record in records if record.mode == "plain"]
    rows = []
    for k in draft_lengths:
        label = f"K={k}"
        group = [record for record in records if record.mode == "speculative" and record.setting == label]
        samples = repeat_speedups(plain_records, group)
        rows.append({
            "value": k, "K": k, "speedup": statistics.median(samples) if samples else None,
            "repeat_speedups": samples,
            "per_token_acceptance": per_token_acceptance_for(summary[label]["tokens_per_pass"], k),
            "genai_acceptance_rate": summary[label]["acceptance_rate"],
            "tokens_per_pass": summary[label]["tokens_per_pass"],
            "identical_prompts": summary[label]["identical_prompts"], "prompts": len(group),
            "comparable_prompts": summary[label]["comparable_prompts"],
        })
    return rows, records
