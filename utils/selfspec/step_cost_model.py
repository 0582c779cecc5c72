"""Why a decode step costs what it costs: weight streaming plus a fixed overhead, and what that predicts for c.

A decode step reads (almost) every weight once. Model it as

    step seconds = overhead + weight bytes / memory bandwidth

with the bandwidth measured on this machine (`memory_bandwidth`: copying a large array) and the overhead taken
from the main model's measured step (`fit_step_cost`). The same overhead and bandwidth then predict the step of
an INT4 copy and of bigger models (`predicted_cost_ratio`). An estimate that shows a trend, not a measurement:
an INT4 kernel also spends time unpacking its weights, so at small sizes the real draft costs more than predicted.

Notebook 04 uses it to extrapolate IPEX-LLM's self-speculation from SmolLM2-135M to 1B and 7B models. An earlier
version fitted the line through the main and draft steps; when those are nearly equal (c close to 1, as at 135M)
that fit is dominated by noise and can even have a negative slope, so the bandwidth is now measured directly.
"""
from __future__ import annotations

import statistics
import time

BYTES_PER_WEIGHT = {"bf16": 2.0, "fp16": 2.0, "sym_int4": 0.5625}  # int4: 4 bits + one fp16 scale per 32 weights


class StepCostError(ValueError):
    """Inputs the step-cost model cannot use; the message says which."""


def memory_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes per second this machine streams: median over `repeats` copies of a `megabytes` array (read + write).

    The array is far larger than any CPU cache, so the copy runs at main-memory speed, as a decode step reading
    its weights does. One thread: a rough, conservative figure.
    """
    import numpy as np

    if megabytes < 64 or repeats < 1:
        raise StepCostError("memory_bandwidth needs megabytes >= 64 (larger than the caches) and repeats >= 1.")
    source = np.ones(megabytes * 2**20, dtype=np.uint8)
    target = np.empty_like(source)
    np.copyto(target, source)  # warm-up: pages touched
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        np.copyto(target, source)
        seconds.append(time.perf_counter() - started)
    return 2 * source.nbytes / statistics.median(seconds)


def fit_step_cost(main_seconds: float, main_bytes: float, bytes_per_second: float) -> dict[str, float]:
    """Split the main model's measured step into weight streaming at `bytes_per_second` and the rest (overhead).

    Returns {"overhead_seconds", "bytes_per_second"}; the overhead is never negative (a step faster than the
    measured bandwidth allows is all streaming).
    """
    if main_seconds <= 0 or main_bytes <= 0 or bytes_per_second <= 0:
        raise StepCostError(f"fit_step_cost needs positive values, got main_seconds={main_seconds}, "
                            f"main_bytes={main_bytes}, bytes_per_second={bytes_per_second}.")
    overhead = max(0.0, main_seconds - main_bytes / bytes_per_second)
    return {"overhead_seconds": overhead, "bytes_per_second": float(bytes_per_second)}


def predicted_step_seconds(parameters: float, fit: dict[str, float], weight_format: str) -> float:
    """Step time of a model with `parameters` weights stored as `weight_format`, from `fit_step_cost`."""
    if weight_format not in BYTES_PER_WEIGHT:
        raise StepCostError(f"Unknown weight format {weight_format!r}; known: {sorted(BYTES_PER_WEIGHT)}.")
    return fit["overhead_seconds"] + parameters * BYTES_PER_WEIGHT[weight_format] / fit["bytes_per_second"]


def predicted_cost_ratio(parameters: float, fit: dict[str, float], main_format: str = "bf16",
                         draft_format: str = "sym_int4") -> float:
    """Draft/main step-time ratio c of a self-draft (`draft_format` copy of a `main_format` model)."""
    return (predicted_step_seconds(parameters, fit, draft_format)
            / predicted_step_seconds(parameters, fit, main_format))
