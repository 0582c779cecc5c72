"""Tests for utils.display.formula_explorer: which measured rows become points, the sliders' starting values, and
what the curve and the summary say for chosen a, K and c.

(tests/test_playground.py checks that moving a slider redraws.) The sliders are real ipywidgets; the image is drawn
with matplotlib's Figure (no display needed). Breakdown rows come from utils.decoding.generation_reports on
hand-made records, so the points are those a notebook would get.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from utils.decoding.generation import GenerationRecord, compare_with_plain
from utils.decoding.generation_reports import speculation_breakdown
from utils.decoding.speedup_model import break_even_acceptance, predicted_speedup
from utils.display.formula_explorer import MeasuredPoint, build_formula_explorer, measured_points


def breakdown_row(setting: str, speedup: float | None = 1.2, acceptance: float | None = 0.6,
                  cost_ratio: float | None = 0.3) -> dict:
    return {"setting": setting, "measured speed-up": speedup, "per-token acceptance a": acceptance,
            "cost ratio c": cost_ratio}


def test_the_k_is_read_from_settings_with_more_than_k() -> None:
    rows = [breakdown_row("K=4, sampling", 1.1, 0.7, 0.2), breakdown_row("K=12", 0.9, 0.3, 0.4)]
    assert measured_points(rows) == [MeasuredPoint(4, 1.1, 0.7, 0.2), MeasuredPoint(12, 0.9, 0.3, 0.4)]


def test_rows_without_a_fixed_k_speedup_or_acceptance_are_left_out() -> None:
    rows = [breakdown_row("threshold=0.4"), breakdown_row("K=3", speedup=None), breakdown_row("K=3", acceptance=None),
            breakdown_row("greedy"), breakdown_row("K=2")]
    assert measured_points(rows) == [MeasuredPoint(2, 1.2, 0.6, 0.3)]


def make_record(mode: str, tokens: int, wall: float, **changes) -> GenerationRecord:
    made = GenerationRecord(
        mode=mode, setting="greedy" if mode == "plain" else "K=3", prompt_id="p", task="chat", device="CPU",
        precision="f32", backend="continuous_batching", input_tokens=5, generated_tokens=tokens,
        token_ids=list(range(tokens)), text="", wall_seconds=wall, tokens_per_second=tokens / wall, ttft_ms=None,
        tpot_ms=None, genai_tokens_per_second=None, main_passes=tokens, tokens_per_step=[1] * tokens,
        accepted_from_steps=0, wall_seconds_all=[wall])
    return replace(made, **changes)


def test_points_from_a_speculation_breakdown_carry_its_measurement() -> None:
    steps = [1, 3, 3, 3, 2]  # K=3: complete verification passes of 3 tokens
    records = compare_with_plain([
        make_record("plain", 12, 3.0, tpot_ms=20.0),
        make_record("speculative", 12, 2.0, tokens_per_step=steps, main_passes=len(steps), num_assistant_tokens=3,
                    main_model_metrics={"passes": 5, "ttft_ms": 10.0, "inference_ms": 10.0 + 4 * 22.0},
                    draft_model_metrics={"passes": 7, "decode_passes": 6, "decode_ms": 6 * 4.0, "inference_ms": 1.0}),
    ])
    (point,) = measured_points(speculation_breakdown(records))
    assert (point.k, point.speedup, point.cost_ratio) == (3, pytest.approx(1.5), pytest.approx(4.0 / 20.0))
    assert predicted_speedup(point.acceptance, 3, 0.0) == pytest.approx(3.0)  # a explains 3 tokens per pass


def test_the_sliders_start_at_the_medians_of_the_points_and_the_summary_matches_the_formula() -> None:
    points = [MeasuredPoint(1, 0.9, 0.4, 0.2), MeasuredPoint(2, 1.1, 0.8, 0.6), MeasuredPoint(4, 1.3, 0.7, 0.3)]
    explorer = build_formula_explorer(points, pair="fake", k=4, max_k=6)
    assert (explorer.acceptance.value, explorer.cost_ratio.value, explorer.k.value) == (
        pytest.approx(0.7), pytest.approx(0.3), 4)
    assert [k for k, _ in explorer.last_curve] == [1, 2, 3, 4, 5, 6] and explorer.k.max == 6
    assert [speedup for _, speedup in explorer.last_curve] == pytest.approx(
        [predicted_speedup(0.7, k, 0.3) for k in range(1, 7)])
    summary = explorer.summary.value
    assert f"At K=4: expected speed-up <b>{predicted_speedup(0.7, 4, 0.3):.2f}x</b>" in summary
    assert f"with c=0.30 speculation pays from a ≥ {break_even_acceptance(4, 0.3):.2f}" in summary
    assert explorer.points_label == "measured here (fake pair)" and explorer.redraws == 1


def test_explicit_starting_values_win_over_the_points() -> None:
    explorer = build_formula_explorer([MeasuredPoint(3, 1.0, 0.5, 0.5)], pair="fake", acceptance=0.9, cost_ratio=0.05,
                                      k=2)
    assert (explorer.acceptance.value, explorer.cost_ratio.value) == (pytest.approx(0.9), pytest.approx(0.05))
    assert f"<b>{predicted_speedup(0.9, 2, 0.05):.2f}x</b>" in explorer.summary.value


def test_a_draft_that_cannot_pay_at_this_k_is_said_so() -> None:
    explorer = build_formula_explorer(pair="fake", acceptance=0.5, cost_ratio=1.2, k=3)
    assert predicted_speedup(1.0, 3, 1.2) < 1.0  # even a perfect draft is slower here
    assert "never pays at this K and c (even a = 1)" in explorer.summary.value
    explorer.cost_ratio.value = 0.5  # a cheaper draft pays from some acceptance on
    assert f"with c=0.50 speculation pays from a ≥ {break_even_acceptance(3, 0.5):.2f}" in explorer.summary.value


def test_the_image_shows_the_points() -> None:
    with_points = build_formula_explorer([MeasuredPoint(3, 1.4, 0.6, 0.5)], pair="fake")
    without = build_formula_explorer(pair="fake", acceptance=0.6, cost_ratio=0.5)
    assert with_points.last_curve == without.last_curve
    image, plain_curve = bytes(with_points.image.value), bytes(without.image.value)
    assert image[:4] == b"\x89PNG" and image != plain_curve


def test_a_row_without_a_cost_ratio_does_not_break_the_explorer() -> None:
    # speculation_breakdown gives no cost ratio when the plain record is not among its records
    points = measured_points([breakdown_row("K=2", cost_ratio=0.3), breakdown_row("K=3", cost_ratio=None)])
    assert [point.k for point in points] == [2]
    build_formula_explorer(points, pair="fake")
