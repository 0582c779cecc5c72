"""The one measurement loop of the course (`interleaved_runs`): warm-up, interleaved repeats, medians, CPU time.

A runner is any function of one item (a prompt, its token ids, ...). On every repeat the runners take turns item by
item, so a noisy neighbour slows all of them alike; speed-ups are then computed per repeat.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")


@dataclass(frozen=True)
class TimedRun:
    """What one runner returned for one item on one repeat, with its wall and (this process's) CPU time."""

    result: Any
    wall_seconds: float
    cpu_seconds: float


@dataclass(frozen=True)
class Measured(Generic[Item]):
    """All timed runs of one runner on one item."""

    item: Item
    runs: list[TimedRun]

    @property
    def median_wall_seconds(self) -> float:
        return statistics.median(run.wall_seconds for run in self.runs)


def timed(runner: Callable[[Item], Any], item: Item) -> TimedRun:
    """Runs `runner(item)` once and times it with `time.perf_counter` and `time.process_time`."""
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    result = runner(item)
    return TimedRun(result, time.perf_counter() - wall_start, time.process_time() - cpu_start)


def interleaved_runs(
    runners: Sequence[Callable[[Item], Any]],
    items: Sequence[Item],
    *,
    warmup: int = 1,
    repeats: int = 3,
    warmup_items: Sequence[Item] | None = None,
    on_run: Callable[[int, int, int, TimedRun], None] | None = None,
    show_progress: bool = True,
    desc: str = "measuring",
) -> list[list[Measured[Item]]]:
    """Times every runner on every item, `repeats` times, interleaved; returns [runner][item].

    warmup: untimed runs of each runner on each of `warmup_items` (default: the first item) before any timing.
    on_run(repeat, item_index, runner_index, run) is called after each timed run.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}.")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}.")
    if not runners or not items:
        raise ValueError("Nothing to measure: give at least one runner and one item.")
    warm = list(items[:1] if warmup_items is None else warmup_items)
    from tqdm.auto import tqdm

    bar = tqdm(total=len(runners) * (warmup * len(warm) + repeats * len(items)), desc=desc, unit="run",
               disable=not show_progress)
    for runner in runners:
        for _ in range(warmup):
            for item in warm:
                bar.set_postfix_str("warm-up")
                runner(item)
                bar.update()
    runs: list[list[list[TimedRun]]] = [[[] for _ in items] for _ in runners]
    for repeat in range(repeats):
        for item_index, item in enumerate(items):
            for runner_index, runner in enumerate(runners):
                run = timed(runner, item)
                runs[runner_index][item_index].append(run)
                if on_run is not None:
                    on_run(repeat, item_index, runner_index, run)
                bar.set_postfix_str(f"repeat {repeat + 1}/{repeats}")
                bar.update()
    bar.close()
    return [[Measured(item, runs[r][i]) for i, item in enumerate(items)] for r in range(len(runners))]


def median_run(runs: Sequence[TimedRun]) -> TimedRun:
    """The run with the median wall time (the lower middle one of an even count)."""
    if not runs:
        raise ValueError("No runs to summarise.")
    ordered = sorted(runs, key=lambda run: run.wall_seconds)
    return ordered[(len(ordered) - 1) // 2]
