"""Pick the number of draft tokens K (or a confidence threshold) for a pair, within a time budget.

Measure a probe K, then the most promising values: neighbours of good ones (local search) and Ks whose
prediction (from the estimated acceptance, calibrated at the nearest measured K) is within `prune_margin`
of the best. Thresholds get only the local search. Notebook 05 wires `autotune` to real measurements.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from utils.decoding.decoding_metrics import FASTER, per_token_acceptance, verdict
from utils.decoding.speedup_model import MeasuredStepTimes

K_KNOB = "num_assistant_tokens"
THRESHOLD_KNOB = "assistant_confidence_threshold"
KNOBS = (K_KNOB, THRESHOLD_KNOB)


@dataclass(frozen=True)
class Trial:
    """One measured setting: speed-up over plain, tokens per pass (K only; gives the acceptance), duration."""

    value: Any
    speedup: float
    tokens_per_pass: float | None = None
    seconds: float = 0.0


@dataclass
class TuneResult:
    """What the tuner measured, predicted, pruned and picked."""

    knob: str
    candidates: list
    best_value: Any
    best_speedup: float
    trials: list[Trial]
    predictions: dict = field(default_factory=dict)  # value -> calibrated prediction when the search ended
    acceptance: float | None = None  # per-token acceptance estimated from the trials (K only)
    budget_seconds: float = 0.0
    spent_seconds: float = 0.0
    stopped_because: str = ""

    @property
    def measured_values(self) -> list:
        return [trial.value for trial in self.trials]

    @property
    def pruned(self) -> list:
        """Candidates never measured (pruned by the model or local search, or cut by the budget)."""
        measured = set(self.measured_values)
        return [value for value in self.candidates if value not in measured]


def _check_candidates(knob: str, candidates: Sequence) -> list:
    if knob not in KNOBS:
        raise ValueError(f"knob must be one of {KNOBS}, got '{knob}'.")
    values = sorted(set(candidates))
    if not values:
        raise ValueError("The tuner needs at least one candidate value.")
    if knob == K_KNOB and any(isinstance(value, bool) or not isinstance(value, int) or value < 1 for value in values):
        raise ValueError(f"K candidates must be integers >= 1, got {list(candidates)}.")
    if knob == THRESHOLD_KNOB and any(not 0.0 < float(value) < 1.0 for value in values):
        raise ValueError(f"Threshold candidates must lie strictly between 0 and 1, got {list(candidates)}.")
    return values


def estimate_acceptance(trials: Sequence[Trial]) -> float | None:
    """Per-token acceptance explaining the trials' tokens per pass (mean over trials, K only)."""
    estimates = []
    for trial in trials:
        if trial.tokens_per_pass is None:
            continue
        estimates.append(per_token_acceptance(trial.tokens_per_pass, int(trial.value)))
    return sum(estimates) / len(estimates) if estimates else None


def calibrated_predictions(candidates: Sequence[int], trials: Sequence[Trial],
                           cost_model: MeasuredStepTimes) -> tuple[dict, float | None]:
    """Prediction for every candidate K, scaled by measured/predicted at the nearest measured K."""
    acceptance = estimate_acceptance(trials)
    if acceptance is None:
        return {}, None
    raw = {k: cost_model.predicted_speedup(acceptance, k) for k in candidates}
    ratios = {trial.value: trial.speedup / raw[trial.value] for trial in trials if raw.get(trial.value)}
    predictions = {}
    for k in candidates:
        nearest = min(ratios, key=lambda measured: (abs(measured - k), measured))
        predictions[k] = raw[k] * ratios[nearest]
    return predictions, acceptance


def autotune(
    measure: Callable[[Any], Trial],
    candidates: Sequence,
    *,
    knob: str = K_KNOB,
    cost_model: MeasuredStepTimes | None = None,
    start: Any = None,
    budget_seconds: float = 120.0,
    prune_margin: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
    on_trial: Callable[[Trial], None] | None = None,
) -> TuneResult:
    """Search `candidates` for the best measured speed-up (see the module docstring).

    A trial after the first runs only if the mean trial time so far fits in the remaining budget.
    """
    values = _check_candidates(knob, candidates)
    if budget_seconds <= 0:
        raise ValueError(f"budget_seconds must be > 0, got {budget_seconds}.")
    if start is None:
        start = 3 if knob == K_KNOB and 3 in values else values[len(values) // 2]
    if start not in values:
        raise ValueError(f"start value {start} is not among the candidates {values}.")
    use_model = knob == K_KNOB and cost_model is not None
    began = clock()
    trials: list[Trial] = []
    measured: dict[Any, Trial] = {}

    def run(value: Any) -> None:
        trial = measure(value)
        trials.append(trial)
        measured[value] = trial
        if on_trial is not None:
            on_trial(trial)

    run(start)
    predictions: dict = {}
    acceptance = None
    stopped = "every promising value was measured"
    while True:
        best = max(trials, key=lambda trial: trial.speedup)
        if use_model and cost_model is not None:  # use_model implies a cost model; this tells mypy
            predictions, acceptance = calibrated_predictions(values, trials, cost_model)
        index = values.index(best.value)
        # Local search around the start and around every measured value close to the best.
        centres = [start] + [trial.value for trial in trials if trial.speedup >= best.speedup * (1.0 - prune_margin)]
        neighbours = [values[i] for centre in centres for i in (values.index(centre) - 1, values.index(centre) + 1)
                      if 0 <= i < len(values) and values[i] not in measured]
        promising = [value for value, predicted in predictions.items()
                     if value not in measured and predicted >= best.speedup * (1.0 - prune_margin)]
        options = list(dict.fromkeys(neighbours + promising))
        if not options:
            break
        spent = clock() - began
        timed = [trial.seconds for trial in trials if trial.seconds > 0]
        per_trial = sum(timed) / len(timed) if len(timed) == len(trials) else spent / len(trials)
        if spent + per_trial > budget_seconds:
            stopped = "time budget"
            break
        # Most promising first; without a model, the neighbour on the side that improved first.
        options.sort(key=lambda value: (-predictions.get(value, best.speedup), abs(values.index(value) - index), value))
        run(options[0])
    best = max(trials, key=lambda trial: (trial.speedup, -values.index(trial.value)))
    return TuneResult(knob=knob, candidates=values, best_value=best.value, best_speedup=best.speedup,
                      trials=trials, predictions=predictions, acceptance=acceptance, budget_seconds=budget_seconds,
                      spent_seconds=clock() - began, stopped_because=stopped)


def within_tolerance(pick_speedup: float, best_speedup: float, tolerance: float = 0.05) -> bool:
    """True if the pick's speed-up is at least (1 - tolerance) of the best one."""
    return pick_speedup >= (1.0 - tolerance) * best_speedup


# --------------------------------------------------------------------------- theory and recommendations


def spread_text(row: dict) -> str:
    """Format a sweep row's spread over repeats (e.g. 1.05x-1.21x (3 repeats)), or "one repeat"."""
    if row.get("repeats", 0) < 2 or row.get("slowest_repeat") is None:
        return "one repeat"
    return f"{row['slowest_repeat']:.2f}x-{row['fastest_repeat']:.2f}x ({row['repeats']} repeats)"


def load_spread(plain: dict, speculative: dict) -> dict:
    """Spread over repeats of a `measure_concurrency` level's throughput ratio (repeat i of both ran side by side)."""
    pairs = list(zip(plain.get("wall_seconds_all", []), speculative.get("wall_seconds_all", []), strict=False))
    samples = [(speculative["generated_tokens"] / spec_wall) / (plain["generated_tokens"] / plain_wall)
               for plain_wall, spec_wall in pairs if plain_wall > 0 and spec_wall > 0]
    if not samples:
        return {"repeats": 0, "median_repeat": None, "slowest_repeat": None, "fastest_repeat": None}
    return {"repeats": len(samples), "median_repeat": statistics.median(samples), "slowest_repeat": min(samples),
            "fastest_repeat": max(samples)}


def _verdict(speedup: float | None, slowest: float | None, fastest: float | None) -> str:
    """`decoding_metrics.verdict` of a row's slowest and fastest repeats (or its one run)."""
    if speedup is None:
        return "not comparable"
    return verdict([slowest, fastest] if slowest is not None and fastest is not None else [speedup])


def _recommended(setting: str, row_verdict: str, identical: Any) -> str:
    """The setting if the verdict is faster and outputs were identical, else plain."""
    return setting if row_verdict == FASTER and bool(identical) else "plain"


def _value_text(knob: str, value: Any) -> str:
    if knob == K_KNOB:
        return f"K={value}"
    if knob == THRESHOLD_KNOB:
        return f"threshold={value:g}"
    return str(value)


def recommendation_rows(
    k_sweep: Any,
    threshold_sweep: Any = None,
    draft_sweep: Any = None,
    concurrency: Sequence[dict] | None = None,
) -> list[dict]:
    """Recommendations from measured sweeps only: per task type, prompt length, draft and load.

    A setting is recommended only if the verdict over its repeats is "faster" and outputs were identical.
    """
    rows = []
    scopes = [("task", "task"), ("prompt length", "length"), ("all prompts", None)]
    for scope, by in scopes:
        best_k = k_sweep.best(by)
        best_threshold = threshold_sweep.best(by) if threshold_sweep is not None else {}
        for group in sorted(best_k):
            candidates = [best_k[group]] + ([best_threshold[group]] if group in best_threshold else [])
            winner = max(candidates, key=lambda row: row["speedup"])
            winner_verdict = _verdict(winner["speedup"], winner["slowest_repeat"], winner["fastest_repeat"])
            rows.append({
                "scope": f"{scope}: {group}" if by else scope,
                "best K": f"K={best_k[group]['value']} ({best_k[group]['speedup']:.2f}x)",
                "best threshold": (f"{best_threshold[group]['value']:g} ({best_threshold[group]['speedup']:.2f}x)"
                                   if group in best_threshold else "-"),
                "recommended": _recommended(_value_text(winner["knob"], winner["value"]), winner_verdict,
                                            winner["identical"]),
                "speed-up": winner["speedup"],
                "spread over repeats": spread_text(winner),
                "outputs identical": winner["identical"],
                "verdict": winner_verdict,
            })
    if draft_sweep is not None:
        for _, best in draft_sweep.best(None).items():
            best_verdict = _verdict(best["speedup"], best["slowest_repeat"], best["fastest_repeat"])
            rows.append({"scope": "draft model and precision", "best K": "-", "best threshold": "-",
                         "recommended": _recommended(str(best["value"]), best_verdict, best["identical"]),
                         "speed-up": best["speedup"], "spread over repeats": spread_text(best),
                         "outputs identical": best["identical"], "verdict": best_verdict})
    if concurrency:
        by_level = {(row["concurrency"], row["mode"]): row for row in concurrency}
        for level in sorted({row["concurrency"] for row in concurrency}):
            speculative = by_level[(level, "speculative")]
            spread = load_spread(by_level[(level, "plain")], speculative)
            ratio = spread["median_repeat"] if spread["repeats"] else speculative["throughput_vs_plain"]
            load_verdict = _verdict(ratio, spread["slowest_repeat"], spread["fastest_repeat"])
            rows.append({"scope": f"load: {level} request(s) at once", "best K": "-", "best threshold": "-",
                         "recommended": _recommended("speculative", load_verdict, speculative["identical_to_plain"]),
                         "speed-up": ratio, "spread over repeats": spread_text(spread),
                         "outputs identical": speculative["identical_to_plain"], "verdict": load_verdict})
    return rows
