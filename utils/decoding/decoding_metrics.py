"""One definition of each quantity measured about speculative decoding; notebooks and modules all use these.

Input is a run's **steps**: tokens per main-model pass, prefill first (`StepRecorder.steps`, equal to GenAI's
``raw_metrics.m_batch_sizes`` under greedy). Accepted tokens and tokens per main pass count *complete* verification
passes only: not the prefill, nor the last pass, which ``max_new_tokens`` or EOS may cut short. Measured: GenAI
2026.4's ``get_num_accepted_tokens()`` also leaves the last pass out; IPEX-LLM's ``n_matched`` counts it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload


def _check_steps(steps: Sequence[int]) -> list[int]:
    counts = [int(step) for step in steps]
    if any(count < 1 for count in counts):
        raise ValueError(f"Every main-model pass yields at least one token; got steps {counts}.")
    return counts


def main_passes(steps: Sequence[int]) -> int:
    """Main-model passes, the prefill pass included."""
    return len(_check_steps(steps))


def verification_steps(steps: Sequence[int]) -> list[int]:
    """Tokens of each complete verification pass: the steps without the prefill pass and the last pass."""
    return _check_steps(steps)[1:-1]


def accepted_tokens(steps: Sequence[int]) -> int:
    """Draft tokens the main model kept in the complete verification passes."""
    return sum(count - 1 for count in verification_steps(steps))


def tokens_per_main_pass(steps: Sequence[int]) -> float | None:
    """Mean tokens per complete verification pass; None if the run had none."""
    verifying = verification_steps(steps)
    return sum(verifying) / len(verifying) if verifying else None


def pooled_tokens_per_main_pass(runs: Sequence[Sequence[int]]) -> float | None:
    """`tokens_per_main_pass` over several runs: all their verification passes pooled."""
    verifying = [step for steps in runs for step in verification_steps(steps)]
    return sum(verifying) / len(verifying) if verifying else None


def acceptance_rate(accepted: int, drafted: int) -> float | None:
    """Fraction of proposed draft tokens the main model kept (None when nothing was proposed)."""
    if accepted < 0 or drafted < 0 or accepted > drafted:
        raise ValueError(f"Need 0 <= accepted <= drafted, got accepted={accepted}, drafted={drafted}.")
    return accepted / drafted if drafted else None


@overload
def per_token_acceptance(tokens_per_pass: float, draft_length: int) -> float: ...
@overload
def per_token_acceptance(tokens_per_pass: None, draft_length: int) -> None: ...
@overload
def per_token_acceptance(tokens_per_pass: float | None, draft_length: int) -> float | None: ...
def per_token_acceptance(tokens_per_pass: float | None, draft_length: int) -> float | None:
    """Leviathan's per-token acceptance a that explains `tokens_per_pass` at draft length K (None in, None out).

    tokens_per_pass is clamped into [1, K + 1]: a truncated last pass or a dynamic K can push it slightly outside.
    """
    from utils.decoding.speedup_model import acceptance_from_tokens_per_pass

    if tokens_per_pass is None:
        return None
    return acceptance_from_tokens_per_pass(min(max(tokens_per_pass, 1.0), draft_length + 1.0), draft_length)


def cost_ratio(draft_step: float, main_step: float) -> float:
    """Leviathan's c: one draft step over one main-model step, both over one new token (same unit)."""
    if main_step <= 0 or draft_step < 0:
        raise ValueError(f"Step times must be >= 0 and the main step > 0, got draft {draft_step}, main {main_step}.")
    return draft_step / main_step


def speedup_per_repeat(plain_seconds: Sequence[Sequence[float]], speculative_seconds: Sequence[Sequence[float]]
                       ) -> list[float]:
    """Per repeat, total plain / total speculative wall time over a task's prompts (arguments: [prompt][repeat])."""
    if len(plain_seconds) != len(speculative_seconds):
        raise ValueError(f"Need the same prompts on both sides, got {len(plain_seconds)} and {len(speculative_seconds)}.")
    repeats = min((len(times) for times in (*plain_seconds, *speculative_seconds)), default=0)
    return [sum(times[i] for times in plain_seconds) / sum(times[i] for times in speculative_seconds)
            for i in range(repeats)]


FASTER, SLOWER, NO_CLEAR_DIFFERENCE = "faster", "slower", "no clear difference"


def verdict(repeat_speedups: Sequence[float | None]) -> str:
    """"faster" if every repeat's speed-up is > 1, "slower" if every one is < 1, else "no clear difference"."""
    samples = [sample for sample in repeat_speedups if sample is not None]
    if samples and min(samples) > 1.0:
        return FASTER
    if samples and max(samples) < 1.0:
        return SLOWER
    return NO_CLEAR_DIFFERENCE


def speedup_text(repeat_speedups: Sequence[float]) -> str:
    """"1.21x [1.05x-1.30x]": the median speed-up over repeats and their range (one repeat: no range)."""
    import statistics

    if not repeat_speedups:
        return "-"
    median = statistics.median(repeat_speedups)
    if len(repeat_speedups) < 2:
        return f"{median:.2f}x"
    return f"{median:.2f}x [{min(repeat_speedups):.2f}x-{max(repeat_speedups):.2f}x]"


def per_model_metrics(metrics: Any) -> dict:
    """One model's share of a speculative run, from GenAI's `extended_perf_metrics`, as a dict.

    "decode_passes"/"decode_ms" leave out the prompt pass: GenAI 2026.4 reports ~0 TTFT for the draft model, so
    that pass is taken as the first with a duration in `raw_metrics.m_durations` (microseconds).
    """
    raw = metrics.raw_metrics
    timed = [duration / 1000.0 for duration in raw.m_durations if duration > 0]
    return {
        "generated_tokens": int(metrics.get_num_generated_tokens()),
        "ttft_ms": float(metrics.get_ttft().mean),
        "tpot_ms": float(metrics.get_tpot().mean),
        "tokens_per_second": float(metrics.get_throughput().mean),
        "inference_ms": float(metrics.get_inference_duration().mean),
        "passes": len(raw.m_batch_sizes),
        "prompt_pass_ms": timed[0] if timed else None,
        "decode_passes": max(len(timed) - 1, 0),
        "decode_ms": sum(timed[1:]),
    }


def verification_pass_ms(main_metrics: dict) -> float | None:
    """Mean ms of one main-model verification pass, the prefill (GenAI's TTFT) left out; None with < 2 passes."""
    if main_metrics["passes"] < 2:
        return None
    return (main_metrics["inference_ms"] - main_metrics["ttft_ms"]) / (main_metrics["passes"] - 1)


def draft_step_ms(draft_metrics: dict) -> float | None:
    """Mean ms of one draft-model step, the prompt pass left out (old records without "decode_passes": all passes)."""
    if draft_metrics.get("decode_passes"):
        return draft_metrics["decode_ms"] / draft_metrics["decode_passes"]
    if "decode_passes" in draft_metrics:
        return None
    return draft_metrics["inference_ms"] / draft_metrics["passes"] if draft_metrics["passes"] else None


def verification_cost(verify_step: float, plain_step: float) -> float:
    """One main-model pass over K + 1 tokens relative to one over a single token (1.0 = free extra tokens)."""
    if plain_step <= 0 or verify_step < 0:
        raise ValueError(f"Step times must be >= 0 and the plain step > 0, got verify {verify_step}, "
                         f"plain {plain_step}.")
    return verify_step / plain_step


def is_lossless(row: dict, speedup_key: str = "speedup") -> bool:
    """True if a summary row's speed-up was measured on all its prompts and every output matched plain."""
    return row.get(speedup_key) is not None and row["prompts"] == row["comparable_prompts"] == row["identical_prompts"]


def fastest_lossless(rows: Sequence[dict], speedup_key: str = "speedup", *, above: float | None = None) -> dict | None:
    """The lossless row with the highest speed-up; None if none, or if that speed-up is not > `above`."""
    best = max((row for row in rows if is_lossless(row, speedup_key)), key=lambda row: row[speedup_key], default=None)
    if best is None or (above is not None and best[speedup_key] <= above):
        return None
    return best


def ipex_llm_steps(accept_num: Sequence[int], generated_tokens: int) -> list[int]:
    """IPEX-LLM's ``accept_num`` (uncut, no prefill) as steps: prefill added, truncated to sum to `generated_tokens`."""
    steps = [1, *(int(count) for count in accept_num)]
    if generated_tokens < 1:
        return []
    kept, total = [], 0
    for step in steps:
        if total >= generated_tokens:
            break
        kept.append(min(step, generated_tokens - total))
        total += kept[-1]
    return kept
