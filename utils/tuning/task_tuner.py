"""Choose, per task type, how to decode (plain, a draft with K or a threshold, or prompt lookup), then check it.

Plain is kept unless a lossless candidate beats it by more than `SWITCH_MARGIN`; the choice is then
re-measured on held-out prompts. These are the tuner's rules, not the course's "faster" (`decoding_metrics.verdict`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from utils.decoding import decoding_metrics
from utils.decoding.prompts import TASKS, Prompt, select_prompts
from utils.tuning.sweeps import SweepPoint, SweepResult, k_points, prompt_lookup_points, run_sweep, threshold_points

SWITCH_MARGIN = 0.05       # a candidate must beat plain by more than this on the tuning prompts to be chosen
HELD_OUT_TOLERANCE = 0.03  # the promise: the choice is never more than 3% slower than plain on held-out prompts
PLAIN = "plain"


@dataclass(frozen=True)
class TaskSplit:
    """One task type's built-in prompts: those the tuner measures, and those its choice is checked on."""

    task: str
    tune: tuple[Prompt, ...]
    held_out: tuple[Prompt, ...]


def split_prompts(tasks: Sequence[str], tune_per_task: int = 1, held_out_per_task: int = 1,
                  length: str | None = "short") -> list[TaskSplit]:
    """Split each task's built-in prompts (of `length`) into tuning and held-out prompts, never overlapping."""
    splits = []
    for task in tasks:
        if task not in TASKS:
            raise ValueError(f"Unknown task '{task}'. Use one of: {', '.join(TASKS)}.")
        prompts = select_prompts([task], length)
        needed = tune_per_task + held_out_per_task
        if tune_per_task < 1 or held_out_per_task < 1 or len(prompts) < needed:
            raise ValueError(f"Task '{task}' has {len(prompts)} built-in {length or 'any-length'} prompt(s); "
                             f"{tune_per_task} to tune on and {held_out_per_task} held out need {needed} "
                             "(both at least 1). Use length=None or fewer prompts per task.")
        splits.append(TaskSplit(task, tuple(prompts[:tune_per_task]), tuple(prompts[tune_per_task:needed])))
    return splits


def candidate_points(ks: Sequence[int] = (2, 4), thresholds: Sequence[float] = (), lookup_ks: Sequence[int] = (3,),
                     max_new_tokens: int = 32) -> list[SweepPoint]:
    """The settings the tuner may choose instead of plain: draft with K or a threshold, prompt lookup with K."""
    points = (k_points(ks, max_new_tokens) + threshold_points(thresholds, max_new_tokens)
              + prompt_lookup_points(lookup_ks, max_new_tokens=max_new_tokens))
    if not points:
        raise ValueError("Give at least one candidate (ks, thresholds or lookup_ks): plain alone needs no tuner.")
    return points


def describe(point: SweepPoint | None) -> str:
    """'plain', 'draft K=4', 'draft threshold=0.5' or 'prompt lookup K=3'."""
    if point is None:
        return PLAIN
    settings = point.settings
    if settings.mode == "prompt_lookup":
        return f"prompt lookup K={settings.num_assistant_tokens}"
    if settings.assistant_confidence_threshold is not None:
        return f"draft threshold={settings.assistant_confidence_threshold:g}"
    return f"draft K={settings.num_assistant_tokens}"


def choose(rows: Sequence[dict], margin: float = SWITCH_MARGIN) -> dict | None:
    """The fastest lossless row of one task if it beats plain by more than `margin`; None = keep plain."""
    return decoding_metrics.fastest_lossless(rows, "speedup", above=1.0 + margin)


@dataclass
class TaskChoice:
    """What the tuner chose for one task type, what it measured, and the check on held-out prompts."""

    task: str
    tune_prompts: list[str]
    held_out_prompts: list[str]
    candidates: dict[str, float | None]   # description -> speed-up on the tuning prompts
    label: str                           # `describe(choice)`: "plain", "draft K=4", ...
    tune_speedup: float                  # 1.0 for plain
    held_out_speedup: float | None       # 1.0 for plain (not measured); None if not comparable
    held_out_identical: bool = True
    held_out_measured: bool = False
    choice: SweepPoint | None = None     # None = plain decoding (not stored by `as_dict`)

    def as_dict(self) -> dict:
        return {name: value for name, value in asdict(self).items() if name != "choice"}

    @classmethod
    def from_dict(cls, data: dict) -> TaskChoice:
        return cls(**{name: value for name, value in data.items() if name != "choice"})

    def never_worse(self, tolerance: float = HELD_OUT_TOLERANCE) -> bool:
        """True if the choice, on held-out prompts, is at most `tolerance` slower than plain and lossless."""
        return (self.held_out_speedup is not None and self.held_out_speedup >= 1.0 - tolerance
                and self.held_out_identical)


@dataclass
class TaskTuning:
    """The tuner's measurements on the tuning prompts (a sweep) and its choice per task."""

    sweep: SweepResult
    choices: list[TaskChoice]


def tune_tasks(pair, splits: Sequence[TaskSplit], points: Sequence[SweepPoint], *, device: str = "CPU",
               repeats: int = 1, held_out_repeats: int = 2, margin: float = SWITCH_MARGIN, pool=None,
               progress: bool = True) -> TaskTuning:
    """Measure `points` on each task's tuning prompts, choose per task (`choose`), re-measure on held-out prompts."""
    from utils.tuning.pipeline_pool import PipelinePool

    if not splits:
        raise ValueError("No task to tune: give at least one TaskSplit (split_prompts).")
    # plain, draft and prompt-lookup pipelines stay loaded (and warm) for the held-out check
    pool = pool if pool is not None else PipelinePool(pair, device, keep=3)
    tune_prompts = [prompt for split in splits for prompt in split.tune]
    tuned = run_sweep(pair, points, tune_prompts, name="tuner: candidates", device=device, repeats=repeats,
                      pool=pool, progress=progress)
    rows_by_task: dict[str, list[dict]] = {}
    for row in tuned.rows(by="task"):
        rows_by_task.setdefault(row["group"], []).append(row)
    by_label = {(point.knob, point.value): point for point in points}
    choices = []
    for split in splits:
        rows = rows_by_task.get(split.task, [])
        best = choose(rows, margin)
        point = by_label[(best["knob"], best["value"])] if best is not None else None
        choices.append(TaskChoice(
            task=split.task, tune_prompts=[p.id for p in split.tune], held_out_prompts=[p.id for p in split.held_out],
            candidates={describe(by_label[(row["knob"], row["value"])]): row["speedup"] for row in rows},
            label=describe(point), tune_speedup=best["speedup"] if best is not None else 1.0,
            held_out_speedup=1.0 if point is None else None, choice=point))
    # Held-out check: one sweep per distinct choice, on the held-out prompts of the tasks that chose it.
    for point in dict.fromkeys(choice.choice for choice in choices if choice.choice is not None):
        chosen_by = [choice for choice in choices if choice.choice == point]
        held_out = [prompt for split in splits for prompt in split.held_out
                    if split.task in {choice.task for choice in chosen_by}]
        checked = run_sweep(pair, [point], held_out, name=f"tuner: held-out check of {describe(point)}",
                            device=device, repeats=held_out_repeats, pool=pool, progress=progress)
        for row in checked.rows(by="task"):
            for choice in chosen_by:
                if choice.task == row["group"]:
                    choice.held_out_speedup = row["speedup"]
                    choice.held_out_identical = bool(row["identical"])
                    choice.held_out_measured = True
    return TaskTuning(tuned, choices)


def choice_rows(choices: Sequence[TaskChoice], tolerance: float = HELD_OUT_TOLERANCE) -> list[dict]:
    """One row per task: the candidates' speed-ups, the choice, and its held-out check."""
    rows = []
    for choice in choices:
        rows.append({
            "task": choice.task,
            "tuned on": ", ".join(choice.tune_prompts),
            "candidates (speed-up)": ", ".join(f"{name} {speedup:.2f}x" if speedup is not None else f"{name} -"
                                               for name, speedup in choice.candidates.items()),
            "chosen": choice.label,
            "speed-up tuned": choice.tune_speedup,
            "held out": ", ".join(choice.held_out_prompts),
            "speed-up held out": choice.held_out_speedup,
            "held out measured": choice.held_out_measured,
            "identical": choice.held_out_identical,
            f"at most {tolerance:.0%} slower": choice.never_worse(tolerance),
        })
    return rows


def worst_held_out(choices: Sequence[TaskChoice]) -> TaskChoice:
    """The task whose choice did worst against plain on held-out prompts (not comparable counts as worst)."""
    if not choices:
        raise ValueError("No choices.")
    return min(choices, key=lambda choice: -1.0 if choice.held_out_speedup is None else choice.held_out_speedup)


def summary_line(choices: Sequence[TaskChoice], tolerance: float = HELD_OUT_TOLERANCE) -> str:
    """One sentence: the worst held-out ratio and whether every choice kept the promise."""
    worst = worst_held_out(choices)
    kept = all(choice.never_worse(tolerance) for choice in choices)
    ratio = "not comparable" if worst.held_out_speedup is None else f"{worst.held_out_speedup:.2f}x"
    return (f"worst held-out task: {worst.task} ({worst.label}, {ratio} of plain speed); "
            f"every choice at most {tolerance:.0%} slower than plain and lossless: {'yes' if kept else 'no'}")
