"""Tests of utils.tuning.autotune on synthetic speed-up curves: deterministic, no models, no timing."""
from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from utils.decoding.speedup_model import MeasuredStepTimes, expected_tokens_per_pass, predicted_speedup
from utils.tuning.autotune import (
    K_KNOB,
    THRESHOLD_KNOB,
    Trial,
    autotune,
    calibrated_predictions,
)

CANDIDATES = list(range(1, 11))


class SyntheticWorld:
    """A pair whose true speed-up departs from the tuner's model in the ways real runs do.

    Acceptance falls with the position in the draft, verification costs more
    above some K (a jump) and grows slowly, and every step pays a fixed overhead.
    """

    def __init__(self, first_acceptance: float, decay: float, cost_ratio: float, jump_at: int, jump: float,
                 slope: float, overhead: float) -> None:
        self.first_acceptance, self.decay, self.cost_ratio = first_acceptance, decay, cost_ratio
        self.jump_at, self.jump, self.slope, self.overhead = jump_at, jump, slope, overhead

    @classmethod
    def random(cls, rng: random.Random) -> SyntheticWorld:
        return cls(rng.uniform(0.1, 0.95), rng.uniform(0.0, 0.06), rng.uniform(0.05, 0.7),
                   rng.choice([3, 4, 5, 6, 100]), rng.uniform(1.0, 3.0), rng.uniform(0.0, 0.08), rng.uniform(0.0, 0.3))

    def main_step(self, tokens: int) -> float:
        return 1.0 + self.slope * (tokens - 1) + (self.jump - 1.0 if tokens - 1 >= self.jump_at else 0.0)

    def tokens_per_pass(self, k: int) -> float:
        expected, survive = 1.0, 1.0
        for position in range(k):
            survive *= max(self.first_acceptance - self.decay * position, 0.0)
            expected += survive
        return expected

    def speedup(self, k: int) -> float:
        return self.tokens_per_pass(k) / (k * self.cost_ratio + self.main_step(k + 1) + self.overhead)

    def measure(self, clock: FakeClock | None = None, seconds: float = 10.0) -> Callable[[int], Trial]:
        def measure(k: int) -> Trial:
            if clock is not None:
                clock.now += seconds
            return Trial(k, self.speedup(k), self.tokens_per_pass(k), seconds)
        return measure

    def full_sweep_best(self, candidates=CANDIDATES) -> float:
        return max(self.speedup(k) for k in candidates)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def leviathan_model(cost_ratio: float) -> MeasuredStepTimes:
    """Leviathan's model: verification costs one main step whatever K."""
    return MeasuredStepTimes(draft_step_ms=cost_ratio, main_step_ms=lambda tokens: 1.0)


def worlds(seed: int, count: int) -> list[SyntheticWorld]:
    rng = random.Random(seed)
    return [SyntheticWorld.random(rng) for _ in range(count)]


@pytest.mark.parametrize("model_kind", ["measured steps", "leviathan only", "no model"])
def test_pick_is_within_five_percent_of_the_full_sweep_on_many_synthetic_pairs(model_kind: str) -> None:
    trials_used = []
    for world in worlds(seed=2024, count=400):
        cost_model = {"measured steps": MeasuredStepTimes(world.cost_ratio, world.main_step),
                      "leviathan only": leviathan_model(world.cost_ratio),
                      "no model": None}[model_kind]
        result = autotune(world.measure(), CANDIDATES, cost_model=cost_model, budget_seconds=1e9)
        assert result.best_speedup == world.speedup(result.best_value)
        assert result.best_speedup >= 0.95 * world.full_sweep_best(), (
            f"picked K={result.best_value} ({result.best_speedup:.3f}x) but the sweep's best is "
            f"{world.full_sweep_best():.3f}x; measured {result.measured_values}")
        trials_used.append(len(result.trials))
    # It must also be cheaper than the full sweep it replaces.
    assert sum(trials_used) / len(trials_used) < 0.6 * len(CANDIDATES)


def test_the_model_prunes_hopeless_values() -> None:
    world = SyntheticWorld(0.3, 0.0, 0.4, jump_at=4, jump=2.0, slope=0.0, overhead=0.0)
    result = autotune(world.measure(), CANDIDATES, cost_model=MeasuredStepTimes(0.4, world.main_step),
                      budget_seconds=1e9)
    assert result.best_value == max(CANDIDATES, key=world.speedup)
    assert len(result.pruned) >= 5
    assert all(world.speedup(k) < result.best_speedup for k in result.pruned)
    assert result.acceptance == pytest.approx(0.3, abs=1e-6)


def test_exact_model_predicts_the_truth() -> None:
    world = SyntheticWorld(0.7, 0.0, 0.2, jump_at=4, jump=1.8, slope=0.02, overhead=0.0)
    model = MeasuredStepTimes(0.2, world.main_step)
    trials = [world.measure()(3)]
    predictions, acceptance = calibrated_predictions(CANDIDATES, trials, model)
    assert acceptance == pytest.approx(0.7, abs=1e-6)
    for k in CANDIDATES:
        assert predictions[k] == pytest.approx(world.speedup(k), rel=1e-6)


def test_calibration_absorbs_a_fixed_overhead() -> None:
    # Overhead lowers every speed-up by about the same factor: the calibrated prediction tracks it.
    world = SyntheticWorld(0.7, 0.0, 0.2, jump_at=100, jump=1.0, slope=0.0, overhead=0.2)
    predictions, _ = calibrated_predictions(CANDIDATES, [world.measure()(3)], leviathan_model(0.2))
    assert predictions[3] == pytest.approx(world.speedup(3))
    assert predictions[4] == pytest.approx(world.speedup(4), rel=0.05)
    assert predictions[4] < predicted_speedup(0.7, 4, 0.2)


def test_budget_stops_the_search_and_keeps_the_best_so_far() -> None:
    clock = FakeClock()
    world = SyntheticWorld(0.9, 0.0, 0.05, jump_at=100, jump=1.0, slope=0.0, overhead=0.0)  # best K is the largest
    result = autotune(world.measure(clock, seconds=10.0), CANDIDATES, cost_model=None, budget_seconds=25.0,
                      clock=clock)
    assert len(result.trials) == 2  # 10 s + 10 s spent; a third trial would end at 30 s > 25 s
    assert result.stopped_because == "time budget"
    assert result.best_speedup == max(trial.speedup for trial in result.trials)
    assert result.spent_seconds == pytest.approx(20.0)


def test_first_trial_always_runs_even_when_the_budget_is_tiny() -> None:
    clock = FakeClock()
    world = SyntheticWorld(0.5, 0.0, 0.2, jump_at=100, jump=1.0, slope=0.0, overhead=0.0)
    result = autotune(world.measure(clock, seconds=10.0), CANDIDATES, budget_seconds=1.0, clock=clock)
    assert result.measured_values == [3]
    assert result.stopped_because == "time budget"


def test_threshold_search_finds_the_peak_of_a_single_hump() -> None:
    thresholds = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    curve = {t: 1.2 - 3.0 * (t - 0.7) ** 2 for t in thresholds}
    result = autotune(lambda t: Trial(t, curve[t]), thresholds, knob=THRESHOLD_KNOB, budget_seconds=1e9)
    assert result.best_value == 0.7
    assert result.predictions == {}
    assert len(result.trials) < len(thresholds)


def test_when_speculation_never_pays_the_result_says_so() -> None:
    world = SyntheticWorld(0.05, 0.0, 0.6, jump_at=100, jump=1.0, slope=0.0, overhead=0.0)
    result = autotune(world.measure(), CANDIDATES, cost_model=leviathan_model(0.6), budget_seconds=1e9)
    assert result.best_value == 1
    assert result.best_speedup <= 1.0


def test_acceptance_inverts_tokens_per_pass() -> None:
    trials = [Trial(k, 1.0, expected_tokens_per_pass(0.6, k)) for k in (2, 5)]
    assert calibrated_predictions(CANDIDATES, trials, leviathan_model(0.2))[1] == pytest.approx(0.6, abs=1e-6)
    assert calibrated_predictions(CANDIDATES, [Trial(4, 1.0)], leviathan_model(0.2)) == ({}, None)


@pytest.mark.parametrize("kwargs, message", [
    ({"knob": "temperature"}, "knob"),
    ({"candidates": []}, "at least one candidate"),
    ({"candidates": [0, 1, 2]}, "integers >= 1"),
    ({"knob": THRESHOLD_KNOB, "candidates": [0.5, 1.0]}, "strictly between"),
    ({"budget_seconds": 0}, "budget"),
])
def test_bad_arguments_raise_before_measuring(kwargs: dict, message: str) -> None:
    def measure(value):
        raise AssertionError("must not measure")

    arguments = {"candidates": CANDIDATES, "knob": K_KNOB, "budget_seconds": 10.0, **kwargs}
    candidates = arguments.pop("candidates")
    with pytest.raises(ValueError, match=message):
        autotune(measure, candidates, **arguments)


def test_cost_ratio_is_draft_step_over_one_token_main_step() -> None:
    model = MeasuredStepTimes(draft_step_ms=5.0, main_step_ms=lambda tokens: 20.0 * tokens)
    assert model.cost_ratio == 0.25
    assert model.verify_over_plain_step(3) == 4.0  # 4 tokens cost 4x one token here
