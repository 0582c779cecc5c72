"""Choose, per task type, how to decode (plain, a draft with K or a threshold, or prompt lookup), then check it.

Plain is kept unless a lossless candidate beats it by more than `SWITCH_MARGIN`; the choice is then
re-measured on held-out prompts. These are the tuner's rules, not the course's "faster" (`decoding_metrics.verdict`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from utils.decoding import decoding_metrics
from utils.decoding.prompts import TASKS, Prompt, select_prompts
from utils.models.model_catalogue import ModelPair
from utils.tuning.pipeline_pool import PipelinePool, PipelineSpec
from utils.tuning.sweeps import SweepPoint, SweepResult, k_points, prompt_lookup_points, run_sweep, threshold_points

SWITCH_MARGIN = 0.05       # a candidate must beat plain by more than this on the tuning prompts to be chosen
HELD_OUT_TOLERANCE = 0.03  # the promise: the choice is never more than 3% slower than plain on held-out prompts


@dataclass(frozen=True)
class TaskSplit:
    """One task type's built-in short prompts: one the tuner measures, one its choice is checked on."""

    task: str
    tune: Prompt
    held_out: Prompt


def split_prompts(tasks: Sequence[str], length: str | None = "short") -> list[TaskSplit]:
    """Split each task's built-in prompts (of `length`) into a tuning and a held-out prompt."""
    splits = []
    for task in tasks:
        if task not in TASKS:
            raise ValueError(f"Unknown task '{task}'. Use one of: {', '.join(TASKS)}.")
        prompts = select_prompts([task], length)
        if len(prompts) < 2:
            raise ValueError(f"Task '{task}' has {len(prompts)} built-in {length or 'any-length'} prompt(s); one to "
                             "tune on and one held out need 2. Use length=None.")
        splits.append(TaskSplit(task, prompts[0], prompts[1]))
    return splits


def candidate_points(ks: Sequence[int] = (2, 4), thresholds: Sequence[float] = (), lookup_ks: Sequence[int] = (3,),
                     max_new_tokens: int = 32, draft_variants: Sequence[str] = ()) -> list[SweepPoint]:
    """The settings the tuner may choose instead of plain: the draft with K or a threshold, each of `draft_variants`
    (names in the pair's `alternative_drafts`) with K, prompt lookup with K."""
    variant_points = [replace(point, settings=replace(point.settings, name=f"{variant} K={point.value}"))
                      for variant in draft_variants
                      for point in k_points(ks, max_new_tokens, PipelineSpec(draft_variant=variant))]
    points = (k_points(ks, max_new_tokens) + threshold_points(thresholds, max_new_tokens) + variant_points
              + prompt_lookup_points(lookup_ks, max_new_tokens))
    if not points:
        raise ValueError("Give at least one candidate (ks, thresholds or lookup_ks): plain alone needs no tuner.")
    return points


def describe(point: SweepPoint | None) -> str:
    """'plain', 'draft K=4', 'draft threshold=0.5', '<draft variant> K=4' or 'prompt lookup K=3'."""
    if point is None:
        return "plain"
    if point.settings.mode == "prompt_lookup":
        return f"prompt lookup K={point.settings.num_assistant_tokens}"
    if point.settings.assistant_confidence_threshold is not None:
        return f"draft threshold={point.settings.assistant_confidence_threshold:g}"
    return f"{point.pipeline.draft_variant or 'draft'} K={point.settings.num_assistant_tokens}"


@dataclass
class TaskChoice:
    """What the tuner chose for one task type, what it measured, and the check on held-out prompts."""

    task: str
    tune_prompt: str
    held_out_prompt: str
    candidates: dict[str, float | None]   # description -> speed-up on the tuning prompt
    label: str                           # `describe(choice)`: "plain", "draft K=4", ...
    tune_speedup: float                  # 1.0 for plain
    held_out_speedup: float | None       # 1.0 for plain (not measured); None if not comparable
    held_out_identical: bool = True
    held_out_measured: bool = False
    choice: SweepPoint | None = None     # None = plain decoding (not stored by `as_dict`)

    def as_dict(self) -> dict:
        return {name: value for name, value in asdict(self).items() if name != "choice"}

    def never_worse(self, tolerance: float = HELD_OUT_TOLERANCE) -> bool:
        """True if the choice, on held-out prompts, is at most `tolerance` slower than plain and lossless."""
        return (self.held_out_speedup is not None and self.held_out_speedup >= 1.0 - tolerance
                and self.held_out_identical)


@dataclass
class TaskTuning:
    """The tuner's measurements on the tuning prompts (a sweep) and its choice per task."""

    sweep: SweepResult
    choices: list[TaskChoice]


def tune_tasks(pair: ModelPair, splits: Sequence[TaskSplit], points: Sequence[SweepPoint], *, device: str = "CPU",
               repeats: int = 1, held_out_repeats: int = 2, margin: float = SWITCH_MARGIN,
               progress: bool = True) -> TaskTuning:
    """Measure `points` on each task's tuning prompt, keep the fastest lossless one if it beats plain by more than
    `margin` (else plain), then re-measure each choice on the held-out prompts of the tasks that chose it."""
    if not splits:
        raise ValueError("No task to tune: give at least one TaskSplit (split_prompts).")
    pool = PipelinePool(pair, device, keep=3)  # plain, draft and prompt lookup stay loaded (and warm)
    tuned = run_sweep(pair, points, [split.tune for split in splits], name="tuner: candidates", device=device,
                      repeats=repeats, pool=pool, progress=progress)
    by_value = {(point.knob, point.value, point.pipeline.label): point for point in points}  # two drafts share a K
    choices = []
    for split in splits:
        rows = [row for row in tuned.rows(by="task") if row["group"] == split.task]
        best = decoding_metrics.fastest_lossless(rows, "speedup", above=1.0 + margin)
        point = by_value[(best["knob"], best["value"], best["pipeline"])] if best is not None else None
        choices.append(TaskChoice(
            split.task, split.tune.id, split.held_out.id,
            {describe(by_value[(row["knob"], row["value"], row["pipeline"])]): row["speedup"] for row in rows},
            describe(point),
            best["speedup"] if best is not None else 1.0, 1.0 if point is None else None, choice=point))
    for point in dict.fromkeys(choice.choice for choice in choices if choice.choice is not None):
        chosen_by = {choice.task: choice for choice in choices if choice.choice == point}
        checked = run_sweep(pair, [point], [split.held_out for split in splits if split.task in chosen_by],
                            name=f"tuner: held-out check of {describe(point)}", device=device,
                            repeats=held_out_repeats, pool=pool, progress=progress)
        for row in checked.rows(by="task"):
            chosen = chosen_by[row["group"]]
            chosen.held_out_speedup, chosen.held_out_identical = row["speedup"], bool(row["identical"])
            chosen.held_out_measured = True
    return TaskTuning(tuned, choices)


def choice_rows(choices: Sequence[TaskChoice], tolerance: float = HELD_OUT_TOLERANCE) -> list[dict]:
    """One row per task: the candidates' speed-ups, the choice, and its held-out check."""
    return [{"task": choice.task, "tuned on": choice.tune_prompt,
             "candidates (speed-up)": ", ".join(f"{name} {speedup:.2f}x" if speedup is not None else f"{name} -"
                                                for name, speedup in choice.candidates.items()),
             "chosen": choice.label, "speed-up tuned": choice.tune_speedup, "held out": choice.held_out_prompt,
             "speed-up held out": choice.held_out_speedup, "held out measured": choice.held_out_measured,
             "identical": choice.held_out_identical, f"at most {tolerance:.0%} slower": choice.never_worse(tolerance)}
            for choice in choices]


def summary_line(choices: Sequence[TaskChoice], tolerance: float = HELD_OUT_TOLERANCE) -> str:
    """One sentence: the worst held-out ratio (not comparable counts as worst) and whether every choice kept the
    promise."""
    worst = min(choices, key=lambda choice: -1.0 if choice.held_out_speedup is None else choice.held_out_speedup)
    kept = all(choice.never_worse(tolerance) for choice in choices)
    ratio = "not comparable" if worst.held_out_speedup is None else f"{worst.held_out_speedup:.2f}x"
    return (f"worst held-out task: {worst.task} ({worst.label}, {ratio} of plain speed); "
            f"every choice at most {tolerance:.0%} slower than plain and lossless: {'yes' if kept else 'no'}")
