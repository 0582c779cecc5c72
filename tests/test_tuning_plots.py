"""utils.display.tuning_plots: each of notebook 05's figures draws the numbers it is given (checked by data, not file size)."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from fake_sweeps import fake_sweep
from figure_data import plotted_values

from utils.decoding.step_timing import StepTime
from utils.display import tuning_plots
from utils.result_files import save_figure
from utils.tuning.autotune import MeasuredStepTimes, Trial, TuneResult, theory_rows
from utils.tuning.sweeps import draft_points, k_points

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


def test_drafts_draw_speedup_and_acceptance_bars_with_sizes() -> None:
    variants = [("int4", "f32"), ("int8", "bf16")]
    speedups = {"int4 @ f32": 1.37, "int8 @ bf16": 0.83}
    result = fake_sweep(draft_points(variants, k=2), lambda point, prompt: speedups[point.value])
    figure = tuning_plots.plot_drafts(result, {"int4 @ f32": 12.0, "int8 @ bf16": 34.0})
    left, right = figure.axes
    assert [patch.get_height() for patch in left.patches] == pytest.approx([1.37, 0.83])
    assert [patch.get_height() for patch in right.patches] == pytest.approx([0.7, 0.7])
    assert [tick.get_text() for tick in left.get_xticklabels()] == ["int4 @ f32\n12 MB", "int8 @ bf16\n34 MB"]


def test_concurrency_draws_throughput_and_its_ratio() -> None:
    rates = {(1, "plain"): 10.0, (1, "speculative"): 13.0, (4, "plain"): 32.0, (4, "speculative"): 24.0}
    rows = [{"concurrency": n, "mode": mode, "tokens_per_second": rate, "throughput_vs_plain": rate / rates[n, "plain"]}
            for (n, mode), rate in rates.items()]
    figure = tuning_plots.plot_concurrency(rows)
    left, right = figure.axes
    assert lines(left)["plain"] == ([1, 4], [10.0, 32.0])
    assert lines(left)["speculative"] == ([1, 4], [13.0, 24.0])
    assert lines(right)["speculative vs plain (batch time and throughput)"] == ([1, 4], pytest.approx([1.3, 0.75]))


def test_step_times_draw_medians_samples_and_reference_lines() -> None:
    steps = [StepTime("main", n, 64, 10.0 + n, [9.5 + n, 10.0 + n, 10.5 + n]) for n in range(1, 6)]
    figure = tuning_plots.plot_step_times(steps, StepTime("draft", 1, 64, 2.5, [2.5]), jump_factor=1.5)
    [axis] = figure.axes
    assert lines(axis)["main model (main)"] == ([0, 1, 2, 3, 4], [11.0, 12.0, 13.0, 14.0, 15.0])
    assert lines(axis)["plain step (1 token)"][1] == [11.0, 11.0]
    assert lines(axis)["1.5x plain step"][1] == [16.5, 16.5]
    assert lines(axis)["one draft step (draft)"][1] == [2.5, 2.5]
    assert not draws(figure, [sample for step in steps for sample in step.samples_ms])


def test_memory_draws_rss_after_loading_and_peak_per_pipeline() -> None:
    rows = [{"pipeline": "plain", "cache_size_gb": "dynamic", "rss_after_load_mb": 123.0, "peak_rss_mb": 456.0},
            {"pipeline": "speculative", "cache_size_gb": 1, "rss_after_load_mb": 234.0, "peak_rss_mb": 567.0}]
    [axis] = tuning_plots.plot_memory(rows).axes
    assert sorted(patch.get_width() for patch in axis.patches) == [123.0, 234.0, 456.0, 567.0]
    assert [tick.get_text() for tick in axis.get_yticklabels()] == ["plain\ncache: dynamic", "speculative\ncache: 1 GB"]


def test_theory_draws_measurement_and_every_prediction() -> None:
    k_rows = fake_sweep(k_points([1, 2, 4])).rows()
    theory = theory_rows(k_rows, MeasuredStepTimes(2.0, lambda n: 10.0 + n))
    figure = tuning_plots.plot_theory(theory)
    left = figure.axes[0]
    for key, label in (("measured", "measured"), ("leviathan", "Leviathan, a_K and c"),
                       ("leviathan_pooled_a", "Leviathan, one a for all K"),
                       ("with_verification_cost", "with measured verification cost")):
        assert lines(left)[label] == ([1, 2, 4], pytest.approx([row[key] for row in theory]))
    assert lines(left)["measured"][1] == pytest.approx([1.1, 1.2, 1.4])


def test_autotune_draws_the_sweep_the_trials_and_the_pick() -> None:
    sweep = {1: 1.1, 2: 1.25, 4: 1.45, 6: 1.3}
    tuned = TuneResult("num_assistant_tokens", [1, 2, 4, 6], best_value=4, best_speedup=1.47,
                       trials=[Trial(2, 1.27, 3.0), Trial(4, 1.47, 4.5)])
    figure = tuning_plots.plot_autotune(sweep, tuned)
    [axis] = figure.axes
    assert lines(axis)["full sweep (every value measured)"] == ([1, 2, 4, 6], [1.1, 1.25, 1.45, 1.3])
    trials, pick = [collection.get_offsets().tolist() for collection in axis.collections[-2:]]
    assert trials == [[2.0, 1.27], [4.0, 1.47]]
    assert pick == [[4.0, 1.45]]  # the tuner's pick, where the full sweep measured it


def test_a_figure_is_saved_where_figures_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_FIGURES_DIR", str(tmp_path / "figures"))
    figure = tuning_plots.plot_sweep(fake_sweep(k_points([1, 2])), by=None)
    assert save_figure(figure, "05-sweep").resolve() == tmp_path.resolve() / "figures" / "05-sweep.png"
    assert (tmp_path / "figures" / "05-sweep.png").stat().st_size > 0


def test_task_choices_draw_every_candidate_the_choice_and_the_held_out_check() -> None:
    from utils.tuning.sweeps import prompt_lookup_points
    from utils.tuning.task_tuner import TaskChoice

    lookup = prompt_lookup_points([3])[0]
    choices = [TaskChoice("code", ["a"], ["b"], {"draft K=2": 1.1, "prompt lookup K=3": 1.3}, "prompt lookup K=3",
                          1.3, 0.95, True, True, lookup),
               TaskChoice("chat", ["c"], ["d"], {"draft K=2": 0.8, "prompt lookup K=3": 0.9}, "plain", 1.0, 1.0)]
    [axis] = tuning_plots.plot_task_choices(choices).axes
    bars = [bar for container in axis.containers for bar in container]
    assert [round(bar.get_height(), 3) for bar in bars] == [1.1, 1.3, 0.8, 0.9]
    edged = [round(bar.get_height(), 3) for bar in bars if bar.get_linewidth() == 2]
    assert edged == [1.3]  # only the chosen candidate has the black edge (chat chose plain: no bar)
    held_out = [point for collection in axis.collections for point in collection.get_offsets().tolist()]
    assert [round(y, 3) for _, y in held_out] == [0.95, 1.0]
    assert [text.get_text() for text in axis.texts] == ["prompt lookup K=3", "plain"]
