"""Tests of utils.decoding.speedup_model against hand-computed values of Leviathan et al.'s formulas."""
from __future__ import annotations

import math

import pytest

from utils.decoding.speedup_model import (
    acceptance_from_tokens_per_pass,
    acceptance_needed,
    break_even_acceptance,
    draft_step_budget,
    expected_tokens_per_pass,
    predicted_speedup,
    predicted_speedup_with_step_times,
)


def test_expected_tokens_per_pass_matches_the_geometric_series() -> None:
    # (1 - 0.8^5) / (1 - 0.8) = 1 + 0.8 + 0.64 + 0.512 + 0.4096
    assert expected_tokens_per_pass(0.8, 4) == pytest.approx(3.3616)
    assert expected_tokens_per_pass(0.0, 5) == 1.0
    assert expected_tokens_per_pass(1.0, 5) == 6.0
    assert expected_tokens_per_pass(0.5, 0) == 1.0


def test_predicted_speedup_divides_by_the_draft_cost() -> None:
    assert predicted_speedup(0.8, 4, 0.1) == pytest.approx(3.3616 / 1.4)
    assert predicted_speedup(0.8, 4, 0.0) == pytest.approx(3.3616)
    # A useless draft (never accepted) costs k*c on top of every token.
    assert predicted_speedup(0.0, 3, 0.5) == pytest.approx(1 / 2.5)


def test_step_time_version_reduces_to_leviathan_when_verification_is_flat() -> None:
    assert predicted_speedup_with_step_times(0.7, 3, 5.0, 20.0, 20.0) == pytest.approx(predicted_speedup(0.7, 3, 0.25))
    # A verification step twice as slow as a plain step lowers the speed-up.
    slower = predicted_speedup_with_step_times(0.7, 3, 5.0, 20.0, 40.0)
    assert slower == pytest.approx(expected_tokens_per_pass(0.7, 3) * 20.0 / (15.0 + 40.0))
    assert slower < predicted_speedup(0.7, 3, 0.25)
    with pytest.raises(ValueError):
        predicted_speedup_with_step_times(0.7, 3, 5.0, 0.0, 20.0)


@pytest.mark.parametrize("acceptance", [0.05, 0.3, 0.62, 0.9, 0.99])
@pytest.mark.parametrize("k", [1, 3, 7])
def test_acceptance_round_trips_through_tokens_per_pass(acceptance: float, k: int) -> None:
    tokens = expected_tokens_per_pass(acceptance, k)
    assert acceptance_from_tokens_per_pass(tokens, k) == pytest.approx(acceptance, abs=1e-6)


def test_acceptance_bounds_and_rounding() -> None:
    assert acceptance_from_tokens_per_pass(1.0, 3) == pytest.approx(0.0, abs=1e-6)
    assert acceptance_from_tokens_per_pass(4.0, 3) == pytest.approx(1.0, abs=1e-6)
    assert acceptance_from_tokens_per_pass(4.0 + 1e-12, 3) == pytest.approx(1.0, abs=1e-6)  # rounding is clamped
    with pytest.raises(ValueError):
        acceptance_from_tokens_per_pass(4.5, 3)
    with pytest.raises(ValueError):
        acceptance_from_tokens_per_pass(0.5, 3)
    with pytest.raises(ValueError):
        acceptance_from_tokens_per_pass(1.0, 0)


def test_break_even_acceptance_gives_a_speedup_of_one() -> None:
    a = break_even_acceptance(4, 0.2)
    assert 0.0 < a < 1.0
    assert predicted_speedup(a, 4, 0.2) == pytest.approx(1.0, abs=1e-9)
    assert predicted_speedup(a - 0.01, 4, 0.2) < 1.0
    # A draft slower than the main model never pays off, not even if every token is accepted.
    assert math.isnan(break_even_acceptance(4, 1.5))


def test_invalid_inputs_raise() -> None:
    with pytest.raises(ValueError):
        expected_tokens_per_pass(1.2, 3)
    with pytest.raises(ValueError):
        expected_tokens_per_pass(0.5, -1)
    with pytest.raises(ValueError):
        predicted_speedup(0.5, 3, -0.1)


def test_draft_step_budget_is_the_draft_step_that_reaches_the_target() -> None:
    # a = 0.8, K = 4: 3.3616 tokens per pass; plain step 10, verification 15: 1.5x needs a pass of 22.41 at most
    budget = draft_step_budget(0.8, 4, 10.0, 15.0, 1.5)
    assert budget == pytest.approx((3.3616 * 10.0 / 1.5 - 15.0) / 4)
    assert predicted_speedup_with_step_times(0.8, 4, budget, 10.0, 15.0) == pytest.approx(1.5)
    assert predicted_speedup_with_step_times(0.8, 4, budget * 1.1, 10.0, 15.0) < 1.5  # any dearer draft falls short
    # beyond the free-draft ceiling (3.3616 * 10 / 15 = 2.24x) no draft is cheap enough
    assert draft_step_budget(0.8, 4, 10.0, 15.0, 2.3) is None
    with pytest.raises(ValueError, match="target"):
        draft_step_budget(0.8, 4, 10.0, 15.0, 0.0)
    with pytest.raises(ValueError, match="draft length"):
        draft_step_budget(0.8, 0, 10.0, 15.0, 1.5)


@pytest.mark.parametrize("target", [0.9, 1.3, 1.5, 2.0])
def test_acceptance_needed_is_where_the_step_time_prediction_reaches_the_target(target: float) -> None:
    k, draft, plain, verify = 3, 6.0, 50.0, 58.0
    needed = acceptance_needed(target, k, draft, plain, verify)
    assert needed is not None and 0.0 < needed < 1.0
    assert predicted_speedup_with_step_times(needed, k, draft, plain, verify) == pytest.approx(target, rel=1e-6)
    assert predicted_speedup_with_step_times(needed - 0.01, k, draft, plain, verify) < target


def test_acceptance_needed_at_the_ends() -> None:
    # a free draft and a verification as cheap as a plain step: 0.5x needs nothing accepted
    assert acceptance_needed(0.5, 3, 0.0, 50.0, 50.0) == 0.0
    # 4 tokens per pass at most, and a dear draft: 3x is out of reach for any acceptance
    assert acceptance_needed(3.0, 3, 20.0, 50.0, 60.0) is None
    with pytest.raises(ValueError):
        acceptance_needed(1.5, 0, 1.0, 50.0, 50.0)
