"""What one model pass costs as a function of how many tokens it processes (`measure_pair_step_times`).

The theory assumes a main pass over K+1 tokens costs a one-token step; on a CPU that holds only while the pass is
bound by overhead and weight reads, so the useful K ends at the cost jump. The stateful IR is timed after an untimed
prefilled context; GenAI's paged-attention pipeline differs a little in absolute times, not in the curve's shape.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from utils.decoding.decoding_metrics import verification_cost
from utils.decoding.measurement import interleaved_runs
from utils.decoding.pipelines import check_main_folder, main_model_properties

DEFAULT_TOKEN_COUNTS = tuple(range(1, 12))  # K = 0..10 proposals, plus the token they follow


@dataclass(frozen=True)
class StepTime:
    """Median time of one forward pass over `tokens` new tokens after `context_tokens` of context."""

    model: str
    tokens: int
    context_tokens: int
    median_ms: float
    samples_ms: list[float] = field(default_factory=list)

    @property
    def draft_length(self) -> int:
        """The K this step verifies when used as the main model's verification step (tokens = K + 1)."""
        return self.tokens - 1

    def as_dict(self) -> dict:
        return asdict(self)


def _check_token_counts(token_counts: Iterable[int]) -> list[int]:
    counts = sorted(set(int(count) for count in token_counts))
    if not counts or counts[0] < 1:
        raise ValueError(f"token_counts must be integers >= 1, got {list(token_counts)}.")
    return counts


def compile_stateful_model(model_dir: Path | str, device: str = "CPU", precision: str | None = "f32",
                           extra_properties: dict[str, str] | None = None) -> Any:
    """Compile the folder's openvino_model.xml for `device`; "f32" gets the exact `main_model_properties`."""
    import openvino as ov

    folder = check_main_folder(model_dir)
    if folder.suffix.lower() == ".gguf":
        raise ValueError(f"{folder} is a GGUF file; time an OpenVINO export of the model instead.")
    core = ov.Core()
    properties = {**main_model_properties(precision), **(extra_properties or {})}
    return core.compile_model(str(folder / "openvino_model.xml"), device, properties)


def _forward_inputs(start: int, count: int, token_ids: Sequence[int]) -> dict:
    """Inputs for one forward pass over token_ids[start:start+count] after `start` cached positions."""
    import numpy as np

    ids = np.asarray([token_ids[start:start + count]], dtype=np.int64)
    return {
        "input_ids": ids,
        "attention_mask": np.ones((1, start + count), dtype=np.int64),
        "position_ids": np.arange(start, start + count, dtype=np.int64)[None, :],
        "beam_idx": np.zeros((1,), dtype=np.int32),
    }


class StepTimer:
    """One compiled model and a way to time a forward pass over n tokens after a fixed, prefilled context."""

    def __init__(self, model_dir: Path | str, device: str, precision: str | None, context_tokens: int,
                 max_tokens: int) -> None:
        import numpy as np

        self.name = Path(model_dir).name
        self.context_tokens = context_tokens
        self.request = compile_stateful_model(model_dir, device, precision).create_infer_request()
        rng = np.random.default_rng(0)
        self.token_ids = rng.integers(100, 40000, size=context_tokens + max_tokens).tolist()

    def sample_ms(self, count: int) -> float:
        self.request.reset_state()
        self.request.infer(_forward_inputs(0, self.context_tokens, self.token_ids))
        started = time.perf_counter()
        self.request.infer(_forward_inputs(self.context_tokens, count, self.token_ids))
        return (time.perf_counter() - started) * 1000.0


def time_interleaved(timers: Sequence[tuple[StepTimer, list[int]]], repeats: int, warmup: int,
                     progress: object | None = None) -> list[dict[int, list[float]]]:
    """Samples (ms) per timer and token count via `interleaved_runs`; any `progress` but None shows a bar."""
    jobs = [(index, timer, count) for index, (timer, counts) in enumerate(timers) for count in counts]
    runners = [lambda _item, timer=timer, count=count: timer.sample_ms(count) for _, timer, count in jobs]
    measured = interleaved_runs(runners, [None], warmup=warmup, repeats=repeats, show_progress=progress is not None,
                                desc="timing steps")
    samples: list[dict[int, list[float]]] = [{} for _ in timers]
    for (index, _, count), (per_item,) in zip(jobs, measured, strict=True):
        samples[index][count] = [run.result for run in per_item.runs]  # the pass's own time, not the prefill's
    return samples


def step_times_from_samples(timer: StepTimer, samples: dict[int, list[float]]) -> list[StepTime]:
    """One StepTime (the median and all samples) per token count that `time_interleaved` sampled for `timer`."""
    return [StepTime(timer.name, count, timer.context_tokens, statistics.median(values), values)
            for count, values in sorted(samples.items())]


def _check_timing_arguments(context_tokens: int, repeats: int) -> None:
    if context_tokens < 1:
        raise ValueError(f"context_tokens must be >= 1, got {context_tokens}.")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}.")


def measure_pair_step_times(
    main_dir: Path | str,
    draft_dir: Path | str,
    device: str = "CPU",
    *,
    token_counts: Iterable[int] = DEFAULT_TOKEN_COUNTS,
    context_tokens: int = 128,
    repeats: int = 7,
    main_precision: str | None = "f32",
    draft_precision: str | None = "f32",
    warmup: int = 2,
    progress: object | None = None,
) -> tuple[list[StepTime], StepTime]:
    """Main-model step times for `token_counts` and the draft's one-token step, measured interleaved.

    Interleaving exposes both models to the same background load, keeping their ratio c meaningful on a busy machine.
    """
    counts = _check_token_counts(token_counts)
    _check_timing_arguments(context_tokens, repeats)
    main = StepTimer(main_dir, device, main_precision, context_tokens, max(counts))
    draft = StepTimer(draft_dir, device, draft_precision, context_tokens, 1)
    main_samples, draft_samples = time_interleaved([(main, counts), (draft, [1])], repeats, warmup, progress)
    return step_times_from_samples(main, main_samples), step_times_from_samples(draft, draft_samples)[0]


def step_time_lookup(step_times: Sequence[StepTime]) -> Callable[[int], float]:
    """A function tokens -> median ms, interpolating linearly between measured counts (clamped at the ends)."""
    points = sorted((step.tokens, step.median_ms) for step in step_times)
    if not points:
        raise ValueError("No step times to look up.")

    def lookup(tokens: int) -> float:
        if tokens <= points[0][0]:
            return points[0][1]
        if tokens >= points[-1][0]:
            return points[-1][1]
        # consecutive pairs: points[1:] is one shorter by design
        for (low_tokens, low_ms), (high_tokens, high_ms) in zip(points, points[1:], strict=False):
            if low_tokens <= tokens <= high_tokens:
                weight = (tokens - low_tokens) / (high_tokens - low_tokens)
                return low_ms + weight * (high_ms - low_ms)
        raise AssertionError("unreachable")

    return lookup


def relative_step_cost(step_times: Sequence[StepTime]) -> dict[int, float]:
    """Each token count's median time over the one-token step's (`verification_cost`; 1.0 = free extra tokens)."""
    by_tokens = {step.tokens: step.median_ms for step in step_times}
    if 1 not in by_tokens:
        raise ValueError("Relative costs need the one-token step (tokens=1) among the measurements.")
    return {tokens: verification_cost(ms, by_tokens[1]) for tokens, ms in sorted(by_tokens.items())}


def find_cost_jump(step_times: Sequence[StepTime], factor: float = 1.5) -> int | None:
    """Smallest K (= tokens - 1) whose verification step costs more than `factor` times the one-token step."""
    for tokens, relative in relative_step_cost(step_times).items():
        if relative > factor:
            return tokens - 1
    return None
