"""The step-cost model of notebook 04: overhead + weight bytes / bandwidth, and the cost ratio c it predicts."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from utils.selfspec import step_cost_model as model


def test_fit_splits_a_step_into_streaming_and_overhead() -> None:
    fit = model.fit_step_cost(main_seconds=0.030, main_bytes=2e8, bytes_per_second=1e10)
    assert fit == {"overhead_seconds": pytest.approx(0.010), "bytes_per_second": 1e10}
    assert model.predicted_step_seconds(1e8, fit, "bf16") == pytest.approx(0.030)  # 1e8 weights x 2 bytes


def test_a_step_faster_than_the_bandwidth_allows_has_no_overhead() -> None:
    assert model.fit_step_cost(0.001, 2e8, 1e10)["overhead_seconds"] == 0.0


def test_cost_ratio_falls_from_near_one_towards_the_byte_ratio_as_models_grow() -> None:
    fit = {"overhead_seconds": 0.02, "bytes_per_second": 1e10}
    small, medium, huge = (model.predicted_cost_ratio(size, fit) for size in (1e8, 7e9, 1e12))
    assert small == pytest.approx((0.02 + 0.5625e8 / 1e10) / (0.02 + 2e8 / 1e10))  # overhead weighs in
    assert huge == pytest.approx(0.5625 / 2.0, rel=1e-3)
    assert small > medium > huge


@pytest.mark.parametrize("arguments", [(0.0, 2e8, 1e10), (0.03, -1, 1e10), (0.03, 2e8, 0)])
def test_impossible_inputs_get_a_clear_error(arguments) -> None:
    with pytest.raises(model.StepCostError, match="positive"):
        model.fit_step_cost(*arguments)
    with pytest.raises(model.StepCostError, match="Unknown weight format 'int3'"):
        model.predicted_step_seconds(1e9, {"overhead_seconds": 0.0, "bytes_per_second": 1.0}, "int3")


def test_memory_bandwidth_is_bytes_read_and_written_over_the_median_copy_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # the clock each timed copy reads: start and end of 3 copies taking 0.02 s, 0.01 s and 0.04 s
    readings = iter([0.0, 0.02, 1.0, 1.01, 2.0, 2.04])
    monkeypatch.setattr(model, "time", SimpleNamespace(perf_counter=lambda: next(readings)))
    bandwidth = model.memory_bandwidth(megabytes=64, repeats=3)
    assert bandwidth == pytest.approx(2 * 64 * 2**20 / 0.02)  # each copy reads and writes 64 MiB; the median copy
    assert next(readings, None) is None  # exactly the 3 copies asked for were timed
    for megabytes, repeats in ((1, 3), (64, 0)):  # an array the caches would hold; no copy at all
        with pytest.raises(model.StepCostError):
            model.memory_bandwidth(megabytes=megabytes, repeats=repeats)
