"""Tests for utils.display.training_plots: notebook 06's figures draw the numbers they are given (checked by the
lines' and points' data, not by pixels), on a made-up training history and made-up measurements.
"""
from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import matplotlib
import pytest

from utils.decoding.speedup_model import break_even_acceptance, predicted_speedup
from utils.display import training_plots

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def line_data(axis) -> list[tuple[str, list[float], list[float]]]:
    return [(line.get_label(), [float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()])
            for line in axis.get_lines()]


def history(steps: int = 50) -> SimpleNamespace:
    loss = [10.0 / (step + 1) for step in range(steps)]
    return SimpleNamespace(steps=list(range(1, steps + 1)), loss=loss, training_seconds=150.0, tokens_seen=123456,
                           evaluations=[{"step": 10, "agreement": 0.3}, {"step": 50, "agreement": 0.62}])


@pytest.mark.parametrize("window, expected", [
    (2, [1.0, 1.5, 2.5, 3.5, 4.5]),
    (3, [1.0, 1.5, 2.0, 3.0, 4.0]),
    (1, [1.0, 2.0, 3.0, 4.0, 5.0]),
    (10, [1.0, 1.5, 2.0, 2.5, 3.0]),  # a window longer than the run: the mean so far
])
def test_the_smoothing_is_a_trailing_mean_over_what_exists_so_far(window: int, expected: list[float]) -> None:
    assert training_plots._smooth([1.0, 2.0, 3.0, 4.0, 5.0], window) == pytest.approx(expected)


def test_the_training_figure_draws_the_loss_its_mean_and_the_agreement() -> None:
    run = history(50)
    figure = training_plots.plot_training(run)
    loss_axis, agreement_axis = figure.axes
    (raw_label, raw_x, raw_y), (mean_label, mean_x, mean_y) = line_data(loss_axis)
    assert (raw_label, raw_x, raw_y) == ("per step", [float(step) for step in run.steps], pytest.approx(run.loss))
    assert mean_label == "mean of 2 steps" and mean_x == raw_x  # 50 steps // 25
    assert mean_y[1:] == pytest.approx([(a + b) / 2 for a, b in zip(run.loss, run.loss[1:], strict=False)])
    assert loss_axis.get_title() == "Training loss (2.5 min, 123,456 tokens seen)"
    ((_, steps, agreements),) = line_data(agreement_axis)
    assert steps == [10.0, 50.0] and agreements == pytest.approx([0.3, 0.62])
    assert agreement_axis.get_ylim() == pytest.approx((0.0, 0.67))


def test_a_short_run_on_given_axes_has_no_smoothing_and_a_half_height_axis() -> None:
    figure, axes = plt.subplots(1, 2)
    run = history(5)
    run.evaluations = [{"step": 5, "agreement": 0.1}]
    assert training_plots.plot_training(run, axes) is figure
    loss_axis, agreement_axis = axes
    (_, _, raw_y), (mean_label, _, mean_y) = line_data(loss_axis)
    assert mean_label == "mean of 1 steps" and mean_y == pytest.approx(raw_y)
    assert agreement_axis.get_ylim()[1] == pytest.approx(0.5)


def test_the_formula_is_drawn_per_k_with_its_break_even_and_the_measured_points() -> None:
    measured: list[dict] = [{"K": 2, "per_token_acceptance": 0.55, "speedup": 1.1},
                {"K": 4, "per_token_acceptance": 0.6, "speedup": 1.3},
                {"K": 4, "per_token_acceptance": None, "speedup": 1.2},  # no acceptance: not drawn
                {"K": 5, "per_token_acceptance": 0.5, "speedup": 0.9}]  # a K not drawn
    figure = training_plots.plot_speedup_vs_acceptance(0.2, [2, 4], measured, {"bigger main": 0.05})
    (axis,) = figure.axes
    curves = {label: (x, y) for label, x, y in line_data(axis)}
    label = f"K=2, c=0.20 (break-even a={break_even_acceptance(2, 0.2):.2f})"
    assert label in curves
    grid, speedups = curves[label]
    assert grid[0] == 0.0 and grid[-1] == 1.0 and len(grid) == 201
    assert speedups[100] == pytest.approx(predicted_speedup(0.5, 2, 0.2))
    reference_grid, reference = curves["K=4, c=0.05: bigger main"]  # the reference uses the largest K
    assert reference[-1] == pytest.approx(predicted_speedup(1.0, 4, 0.05))
    points = [tuple(float(value) for value in offsets) for collection in axis.collections
              for offsets in collection.get_offsets()]
    assert points == [(0.55, 1.1), (0.6, 1.3)]
    assert axis.get_ylim()[1] == pytest.approx(max(2.5, predicted_speedup(0.9, 4, 0.2)))


def test_a_cheap_draft_raises_the_top_of_the_axis() -> None:
    figure = training_plots.plot_speedup_vs_acceptance(0.01, [8])
    assert predicted_speedup(0.9, 8, 0.01) > 2.5
    assert figure.axes[0].get_ylim()[1] == pytest.approx(predicted_speedup(0.9, 8, 0.01))
    assert len(figure.axes[0].collections) == 0  # nothing measured
