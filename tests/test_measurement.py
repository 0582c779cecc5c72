"""The one measurement loop: warm-ups untimed, runners interleaved item by item, medians."""
from __future__ import annotations

import pytest

from utils.decoding.measurement import TimedRun, interleaved_runs, median_run


def test_runners_take_turns_item_by_item_after_untimed_warmups() -> None:
    calls: list[tuple[str, str]] = []

    def runner(name: str):
        return lambda item: calls.append((name, item)) or f"{name}:{item}"

    measured = interleaved_runs([runner("plain"), runner("spec")], ["p0", "p1"], warmup=1, repeats=2,
                                show_progress=False)
    assert calls[:2] == [("plain", "p0"), ("spec", "p0")]  # warm-ups
    assert calls[2:6] == [("plain", "p0"), ("spec", "p0"), ("plain", "p1"), ("spec", "p1")]
    assert len(calls) == 2 + 2 * 2 * 2
    assert [m.item for m in measured[1]] == ["p0", "p1"]
    assert [run.result for run in measured[1][1].runs] == ["spec:p1", "spec:p1"]


def test_median_run_keeps_the_lower_middle_of_an_even_count() -> None:
    runs = [TimedRun(name, wall, 0.0) for name, wall in [("a", 3.0), ("b", 1.0), ("c", 2.0), ("d", 4.0)]]
    assert median_run(runs).result == "c"


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"warmup": -1}])
def test_impossible_settings_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        interleaved_runs([lambda item: item], [1], show_progress=False, **kwargs)
