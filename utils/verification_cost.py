"""What one model step costs as a function of how many tokens it processes.

Speculative decoding replaces K+1 one-token steps of the main model by K cheap
draft steps plus ONE main-model step over K+1 tokens (the last accepted token
and the K proposals). The theory (utils.speedup_model) assumes that this
verification step costs as much as a one-token step. On a CPU that holds only
while the step stays bound by per-step overheads and weight reads; beyond some
number of tokens the matrix products start to cost, and the useful K is
bounded by that jump.

`measure_step_times` times the model's own forward pass directly with the
OpenVINO runtime (the stateful IR that `optimum-cli` exports): reset the KV
state, prefill a fixed context (not timed), then time one forward pass over
``n`` new tokens. The continuous-batching pipeline that OpenVINO GenAI uses for
speculative decoding runs a paged-attention version of the same model, so its
absolute times differ a little; the *shape* of the curve is what matters.

Heavy imports (openvino, numpy) happen inside functions.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from utils.generation import check_main_folder, device_properties

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


def compile_stateful_model(model_dir: Path | str, device: str = "CPU", precision: str | None = "f32") -> Any:
    """Compile the folder's openvino_model.xml for `device` with the project's precision properties."""
    import openvino as ov

    folder = check_main_folder(model_dir)
    if folder.suffix.lower() == ".gguf":
        raise ValueError(f"{folder} is a GGUF file; time an OpenVINO export of the model instead.")
    core = ov.Core()
    return core.compile_model(str(folder / "openvino_model.xml"), device, device_properties(precision))


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


def measure_step_times(
    model_dir: Path | str,
    device: str = "CPU",
    *,
    token_counts: Iterable[int] = DEFAULT_TOKEN_COUNTS,
    context_tokens: int = 128,
    repeats: int = 7,
    precision: str | None = "f32",
    warmup: int = 2,
    progress: Callable[[Iterable], Iterable] | None = None,
) -> list[StepTime]:
    """Median wall time of one forward pass over n new tokens, for each n in `token_counts`.

    Every sample starts from a fresh KV state prefilled with `context_tokens`
    tokens (not timed). Token counts are visited in a different rotation on
    each repeat so that a busy neighbour process slows all of them alike.
    `progress` may wrap the repeat loop (e.g. ``tqdm.auto.tqdm``).
    """
    import numpy as np

    counts = _check_token_counts(token_counts)
    if context_tokens < 1:
        raise ValueError(f"context_tokens must be >= 1, got {context_tokens}.")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}.")
    compiled = compile_stateful_model(model_dir, device, precision)
    request = compiled.create_infer_request()
    rng = np.random.default_rng(0)
    token_ids = rng.integers(100, 40000, size=context_tokens + max(counts)).tolist()

    def one_sample(count: int) -> float:
        request.reset_state()
        request.infer(_forward_inputs(0, context_tokens, token_ids))
        started = time.perf_counter()
        request.infer(_forward_inputs(context_tokens, count, token_ids))
        return (time.perf_counter() - started) * 1000.0

    for _ in range(warmup):
        for count in counts:
            one_sample(count)
    samples: dict[int, list[float]] = {count: [] for count in counts}
    rounds: Iterable[int] = range(repeats)
    if progress is not None:
        rounds = progress(rounds)
    for repeat in rounds:
        shift = repeat % len(counts)
        for count in counts[shift:] + counts[:shift]:
            samples[count].append(one_sample(count))
    name = Path(model_dir).name
    return [StepTime(name, count, context_tokens, statistics.median(samples[count]), samples[count])
            for count in counts]


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
        for (low_tokens, low_ms), (high_tokens, high_ms) in zip(points, points[1:]):
            if low_tokens <= tokens <= high_tokens:
                weight = (tokens - low_tokens) / (high_tokens - low_tokens)
                return low_ms + weight * (high_ms - low_ms)
        raise AssertionError("unreachable")

    return lookup


def relative_step_cost(step_times: Sequence[StepTime]) -> dict[int, float]:
    """Each token count's median time divided by the one-token step's: 1.0 means 'free' extra tokens."""
    by_tokens = {step.tokens: step.median_ms for step in step_times}
    if 1 not in by_tokens:
        raise ValueError("Relative costs need the one-token step (tokens=1) among the measurements.")
    return {tokens: ms / by_tokens[1] for tokens, ms in sorted(by_tokens.items())}


def find_cost_jump(step_times: Sequence[StepTime], factor: float = 1.5) -> int | None:
    """Smallest K (= tokens - 1) whose verification step costs more than `factor` times the one-token step."""
    for tokens, relative in relative_step_cost(step_times).items():
        if relative > factor:
            return tokens - 1
    return None


@dataclass(frozen=True)
class CostRatio:
    """Cost ratio c of Leviathan et al.: draft step time / main step time, both one-token steps."""

    draft_step_ms: float
    main_step_ms: float

    @property
    def value(self) -> float:
        return self.draft_step_ms / self.main_step_ms


def measure_cost_ratio(
    main_dir: Path | str,
    draft_dir: Path | str,
    device: str = "CPU",
    *,
    context_tokens: int = 128,
    repeats: int = 9,
    main_precision: str | None = "f32",
    draft_precision: str | None = "f32",
) -> CostRatio:
    """Time one-token steps of the draft and of the main model the same way and return their ratio."""
    main = measure_step_times(main_dir, device, token_counts=[1], context_tokens=context_tokens,
                              repeats=repeats, precision=main_precision)[0]
    draft = measure_step_times(draft_dir, device, token_counts=[1], context_tokens=context_tokens,
                               repeats=repeats, precision=draft_precision)[0]
    return CostRatio(draft_step_ms=draft.median_ms, main_step_ms=main.median_ms)
