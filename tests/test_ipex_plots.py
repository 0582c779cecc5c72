"""utils.display.ipex_plots: each figure draws the numbers it is given (checked by data, not by file size)."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import pytest
from figure_data import plotted_values

from utils.decoding.speedup_model import predicted_speedup
from utils.display import ipex_plots
from utils.selfspec import ipex_comparisons as compare
from utils.selfspec import ipex_self_speculation as ss
from utils.selfspec import step_cost_model

matplotlib.use("Agg")


def draws(figure, values) -> list:
    """The values the figure does not draw."""
    drawn = plotted_values(figure)
    return [value for value in values if not any(abs(value - seen) < 1e-6 for seen in drawn)]


def stats() -> ss.SpeculationStats:
    return ss.read_speculation_stats(SimpleNamespace(
        n_drafted=9, n_matched=5, draft_num=[3, 4, 2], accept_num=[4, 2, 2], draft_time=[0.03, 0.04, 0.02],
        verify_time=[0.05, 0.05, 0.06], first_token_time=0.2, n_token_generated=9))


def comparison(prompt: str, threshold: float, speculative_seconds: float) -> compare.Comparison:
    return compare.Comparison(prompt, {"th_stop_draft": threshold}, 3, 10, 10, 1.0, speculative_seconds,
                         acceptance_rate=threshold / 2, tokens_per_step=1 + threshold, drafted_per_step=3.0,
                         draft_ms_per_token=1.0, verify_ms_per_step=1.0, first_divergence=None)


def test_step_statistics_draw_drafted_accepted_and_times() -> None:
    figure = ipex_plots.plot_step_statistics(stats())
    assert not draws(figure, [3, 4, 2, 3, 1, 1, 30.0, 40.0, 20.0, 50.0, 60.0])


def test_sweep_draws_acceptance_tokens_per_pass_and_speedup_per_setting() -> None:
    comparisons = [comparison(prompt, threshold, seconds) for prompt, seconds in (("a", 0.5), ("b", 2.0))
                   for threshold in (0.4, 0.8)]
    figure = ipex_plots.plot_draft_settings(comparisons)
    expected = [c.acceptance_rate for c in comparisons] + [c.tokens_per_step for c in comparisons] + [2.0, 0.5]
    assert not draws(figure, expected)


def test_side_by_side_draws_every_systems_speedup_and_acceptance() -> None:
    rows = [{"backend": "IPEX-LLM", "draft": "INT4 copy", "prompt": "p", "speed-up (CPU time)": 1.25,
             "acceptance": 0.625},
            {"backend": "OpenVINO GenAI", "draft": "int4 copy", "prompt": "p", "speed-up (CPU time)": 0.875,
             "acceptance": 0.375}]
    assert not draws(ipex_plots.plot_side_by_side(rows), [1.25, 0.625, 0.875, 0.375])


def test_payoff_marks_the_measured_cost_ratios_on_the_prediction() -> None:
    fit = step_cost_model.fit_step_cost(0.05, 2.7e8, 2e10)
    figure = ipex_plots.plot_payoff(0.6, 3, {"IPEX-LLM": 0.7}, fit)
    assert not draws(figure, [0.7, predicted_speedup(0.6, 3, 0.7), step_cost_model.predicted_cost_ratio(7e9, fit)])
    with pytest.raises(AssertionError):  # the check itself can fail
        assert not draws(figure, [123.456])
