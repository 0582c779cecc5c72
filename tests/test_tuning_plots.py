"""utils.display.tuning_plots: each of notebook 05's figures draws the numbers it is given (checked by data, not file size)."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from fake_sweeps import fake_sweep
from figure_data import plotted_values

from utils.decoding.speedup_model import MeasuredStepTimes, theory_rows
from utils.display import tuning_plots
from utils.result_files import save_figure
from utils.tuning.sweeps import k_points

matplotlib.use("Agg")


def draws(figure, values) -> list:
    """The values the figure does not draw."""
    drawn = plotted_values(figure)
    return [value for value in values if not any(abs(value - seen) < 1e-6 for seen in drawn)]


def lines(axis) -> dict[str, tuple[list, list]]:
    """Each labelled line of an axis: label -> (x values, y values)."""
    return {line.get_label(): ([float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()])
            for line in axis.get_lines() if not line.get_label().startswith("_")}


def length_speedup(point, prompt) -> float:
    """Long prompts gain less than short ones, so the two groups draw different curves."""
    k = point.settings.num_assistant_tokens
    return 1 + (0.05 if prompt.length == "long" else 0.15) * k


def test_sweep_draws_speedup_and_acceptance_per_group() -> None:
    result = fake_sweep(k_points([1, 2, 4]), length_speedup)
    figure = tuning_plots.plot_sweep(result, by="length")
    left, right = figure.axes
    assert lines(left)["long"] == ([1, 2, 4], pytest.approx([1.05, 1.1, 1.2]))
    assert lines(left)["short"] == ([1, 2, 4], pytest.approx([1.15, 1.3, 1.6]))
    assert lines(left)["plain decoding (1.0x)"][1] == [1.0, 1.0]
    assert lines(right)["short"] == ([1, 2, 4], pytest.approx([0.8, 0.7, 0.5]))  # (9 - K) / 10
    assert not draws(figure, [row["speedup"] for row in result.rows(by="length")])
    assert draws(figure, [1.123456])  # the check itself can fail


def test_theory_draws_measurement_and_every_prediction() -> None:
    k_rows = fake_sweep(k_points([1, 2, 4])).rows()
    theory = theory_rows(k_rows, MeasuredStepTimes(2.0, lambda n: 10.0 + n))
    figure = tuning_plots.plot_theory(theory)
    left = figure.axes[0]
    for key, label in (("measured", "measured speed-up"), ("leviathan", "predicted (Leviathan)"),
                       ("leviathan_pooled_a", "predicted (Leviathan), one a for all K"),
                       ("with_verification_cost", "predicted (step times)")):
        assert lines(left)[label] == ([1, 2, 4], pytest.approx([row[key] for row in theory]))
    assert lines(left)["measured speed-up"][1] == pytest.approx([1.1, 1.2, 1.4])


def test_a_figure_is_saved_where_figures_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_FIGURES_DIR", str(tmp_path / "figures"))
    figure = tuning_plots.plot_sweep(fake_sweep(k_points([1, 2])), by=None)
    assert save_figure(figure, "05-sweep").resolve() == tmp_path.resolve() / "figures" / "05-sweep.png"
    assert (tmp_path / "figures" / "05-sweep.png").stat().st_size > 0
