"""Pick the number of draft tokens K (or a confidence threshold) for a pair, within a time budget.

Measure a probe K, then the most promising values: neighbours of good ones (local search) and Ks whose
prediction (from the estimated acceptance, calibrated at the nearest measured K) is within `prune_margin`
of the best. Thresholds get only the local search. Notebook 05 wires `autotune` to real measurements.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from utils.decoding.decoding_metrics import per_token_acceptance
from utils.decoding.speedup_model import MeasuredStepTimes

K_KNOB = "num_assistant_tokens"
THRESHOLD_KNOB = "assistant_confidence_threshold"


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

    candidates: list
    best_value: Any
    best_speedup: float
    trials: list[Trial]
    predictions: dict = field(default_factory=dict)  # value -> calibrated prediction when the search ended
    acceptance: float | None = None  # per-token acceptance estimated from the trials (K only)
    spent_seconds: float = 0.0
    stopped_because: str = ""

    @property
    def measured_values(self) -> list:
        return [trial.value for trial in self.trials]

    @property
    def pruned(self) -> list:
        """Candidates never measured (pruned by the model or local search, or cut by the budget)."""
        return [value for value in self.candidates if value not in self.measured_values]


def _check_candidates(knob: str, candidates: Sequence) -> list:
    values = sorted(set(candidates))
    if knob not in (K_KNOB, THRESHOLD_KNOB) or not values:
        raise ValueError(f"Give at least one candidate of knob {K_KNOB} or {THRESHOLD_KNOB} (got {knob}).")
    if knob == K_KNOB and any(isinstance(value, bool) or not isinstance(value, int) or value < 1 for value in values):
        raise ValueError(f"K candidates must be integers >= 1, got {list(candidates)}.")
    if knob == THRESHOLD_KNOB and any(not 0.0 < float(value) < 1.0 for value in values):
        raise ValueError(f"Threshold candidates must lie strictly between 0 and 1, got {list(candidates)}.")
    return values


def calibrated_predictions(candidates: Sequence[int], trials: Sequence[Trial],
                           cost_model: MeasuredStepTimes) -> tuple[dict, float | None]:
    """Prediction for every candidate K, scaled by measured/predicted at the nearest measured K, and the per-token
    acceptance (mean over trials) that explains the trials' tokens per pass."""
    estimates = [per_token_acceptance(trial.tokens_per_pass, int(trial.value)) for trial in trials
                 if trial.tokens_per_pass is not None]
    if not estimates:
        return {}, None
    acceptance = sum(estimates) / len(estimates)
    raw = {k: cost_model.predicted_speedup(acceptance, k) for k in candidates}
    ratios = {trial.value: trial.speedup / raw[trial.value] for trial in trials if raw.get(trial.value)}
    return {k: raw[k] * ratios[min(ratios, key=lambda measured: (abs(measured - k), measured))]
            for k in candidates}, acceptance


def autotune(measure: Callable[[Any], Trial], candidates: Sequence, *, knob: str = K_KNOB,
             cost_model: MeasuredStepTimes | None = None, budget_seconds: float = 120.0, prune_margin: float = 0.05,
             clock: Callable[[], float] = time.monotonic) -> TuneResult:
    """Search `candidates` for the best measured speed-up (see the module docstring), starting at K=3 (or the middle).

    A trial after the first runs only if the mean trial time so far fits in the remaining budget.
    """
    values = _check_candidates(knob, candidates)
    if budget_seconds <= 0:
        raise ValueError(f"budget_seconds must be > 0, got {budget_seconds}.")
    start = 3 if knob == K_KNOB and 3 in values else values[len(values) // 2]
    began = clock()
    trials = [measure(start)]
    predictions: dict = {}
    acceptance = None
    stopped = "every promising value was measured"
    while True:
        best = max(trials, key=lambda trial: trial.speedup)
        measured = {trial.value for trial in trials}
        if knob == K_KNOB and cost_model is not None:
            predictions, acceptance = calibrated_predictions(values, trials, cost_model)
        # Local search around the start and around every measured value close to the best.
        centres = [values.index(start)] + [values.index(trial.value) for trial in trials
                                           if trial.speedup >= best.speedup * (1.0 - prune_margin)]
        neighbours = [values[i] for centre in centres for i in (centre - 1, centre + 1)
                      if 0 <= i < len(values) and values[i] not in measured]
        promising = [value for value, predicted in predictions.items()
                     if value not in measured and predicted >= best.speedup * (1.0 - prune_margin)]
        options = list(dict.fromkeys(neighbours + promising))
        if not options:
            break
        spent = clock() - began
        per_trial = (sum(trial.seconds for trial in trials) if all(trial.seconds > 0 for trial in trials)
                     else spent) / len(trials)
        if spent + per_trial > budget_seconds:
            stopped = "time budget"
            break
        # Most promising first; without a model, the neighbour on the side that improved first.
        index = values.index(best.value)
        options.sort(key=lambda value: (-predictions.get(value, best.speedup), abs(values.index(value) - index), value))
        trials.append(measure(options[0]))
    best = max(trials, key=lambda trial: (trial.speedup, -values.index(trial.value)))
    return TuneResult(values, best.value, best.speedup, trials, predictions, acceptance, clock() - began, stopped)
