"""One definition of every quantity measured about speculative decoding; every notebook and module uses these.

The input is a run's **steps**: how many tokens each main-model pass yielded,
in order, the prefill pass first. OpenVINO GenAI hands its streamer exactly one
call per main-model pass (`utils.decoding.step_streamer.StepRecorder.steps`, the same
list as the main model's ``raw_metrics.m_batch_sizes`` under greedy decoding).
The prefill pass yields one token; every later pass (a *verification* pass)
yields the draft tokens the main model kept plus one token of its own, except
the **last** pass, which ``max_new_tokens`` or the end-of-sequence token may cut
short (then it may hold only accepted draft tokens). A *complete* verification
pass is one that is neither the prefill nor the last pass. IPEX-LLM lists the
verification passes only (``accept_num``): `ipex_llm_steps` adds the prefill
pass. Definitions:

* **main passes** P = len(steps), prefill and last pass included (OpenVINO
  GenAI: ``len(main_model_metrics.raw_metrics.m_batch_sizes)``).
* **accepted tokens** = sum of (tokens - 1) over the complete verification
  passes. This is what OpenVINO GenAI 2026.4 reports as
  ``extended_perf_metrics.get_num_accepted_tokens()`` (measured: it leaves the
  last pass out too; `tests/test_decoding_metrics.py` checks it on the offline
  pair). IPEX-LLM's ``n_matched`` also counts the last pass.
* **tokens per main pass** = mean tokens of the complete verification passes,
  i.e. 1 + accepted tokens / complete passes: what Leviathan's
  (1 - a^(K+1)) / (1 - a) predicts. The prefill pass (one token whatever the
  draft) and the cut-short last pass would bias it low.
* **acceptance rate** = accepted / drafted: the fraction of proposed draft
  tokens the main model kept, pooled over the run (not a mean of per-pass
  rates). OpenVINO GenAI: get_num_accepted_tokens() / get_num_draft_tokens();
  IPEX-LLM: n_matched / n_drafted.
* **per-token acceptance a** (Leviathan's): the a whose expected tokens per
  pass at draft length K equals the measured tokens per main pass.
* **cost ratio c** = time of one draft step / time of one main-model step,
  both over one new token (Leviathan's c). A draft step is one of the draft's
  passes after the one that read the prompt (`per_model_metrics`).
* **verification cost** = time of one main-model pass over K + 1 tokens / time
  of one main-model pass over 1 token (1.0 is what Leviathan's formula assumes).
* **speed-up** (of a task) = total plain time / total speculative time over the task's prompts, one sample per
  repeat of an interleaved run (`speedup_per_repeat`), shown as the median and the [min-max] range of those samples.
* **verdict** (`verdict`), the one rule of the course: "faster" when every repeat's speed-up is > 1, "slower" when
  every repeat's is < 1, otherwise "no clear difference".
* **lossless** (a summary row of several prompts): its speed-up was measured on
  every prompt (same token count as plain) and every output equalled plain,
  token for token; `fastest_lossless` picks among such rows.
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
    """Leviathan's per-token acceptance a that explains `tokens_per_pass` at draft length K.

    tokens_per_pass is clamped into [1, K + 1] first (a truncated last pass or a
    dynamic K can push the mean slightly outside). None in, None out.
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
    """The speed-up of a task, one sample per repeat: total plain time / total speculative time over its prompts.

    Both arguments hold, per prompt, the wall time of each repeat (repeat i of both ran side by side); repeats
    missing for some prompt are left out.
    """
    if len(plain_seconds) != len(speculative_seconds):
        raise ValueError(f"Need the same prompts on both sides, got {len(plain_seconds)} and {len(speculative_seconds)}.")
    repeats = min((len(times) for times in (*plain_seconds, *speculative_seconds)), default=0)
    return [sum(times[i] for times in plain_seconds) / sum(times[i] for times in speculative_seconds)
            for i in range(repeats)]


FASTER, SLOWER, NO_CLEAR_DIFFERENCE = "faster", "slower", "no clear difference"


def verdict(repeat_speedups: Sequence[float | None]) -> str:
    """The one verdict rule: "faster" when every repeat's speed-up is > 1, "slower" when every one is < 1,
    otherwise (or without repeats) "no clear difference"."""
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
    """One model's share of a speculative run, from GenAI's `extended_perf_metrics`.

    Besides GenAI's totals, the passes after the one that read the prompt ("decode_passes", their summed time
    "decode_ms"): GenAI 2026.4 reports no time to first token for the draft model (it is ~0), so its prompt pass
    is found as the first pass with a duration (`raw_metrics.m_durations`, in microseconds) and left out.
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
    """Mean time of one main-model verification pass of a speculative run, from GenAI's per-model metrics.

    The main model's inference time without its first pass (the prompt's prefill, whose duration GenAI reports as
    that model's time to first token) over the remaining passes: a long prompt's prefill would otherwise count as
    verification. None with fewer than two passes.
    """
    if main_metrics["passes"] < 2:
        return None
    return (main_metrics["inference_ms"] - main_metrics["ttft_ms"]) / (main_metrics["passes"] - 1)


def draft_step_ms(draft_metrics: dict) -> float | None:
    """Mean time of one draft-model step of a speculative run: its passes after the one that read the prompt.

    A long prompt's prefill would otherwise count as drafting (as `verification_pass_ms` leaves out the main
    model's). Records made before "decode_ms" was kept fall back to GenAI's inference time over all passes,
    prefill included.
    """
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
    """True if a summary row's speed-up was measured on all its prompts and every output matched plain.

    The row needs "prompts", "comparable_prompts" and "identical_prompts" (counts) and `speedup_key`
    (`utils.tuning.sweeps.summarise_records` and `utils.decoding.generation_reports.summarise` both give them).
    """
    return row.get(speedup_key) is not None and row["prompts"] == row["comparable_prompts"] == row["identical_prompts"]


def fastest_lossless(rows: Sequence[dict], speedup_key: str = "speedup", *, above: float | None = None) -> dict | None:
    """The lossless row (`is_lossless`) with the highest speed-up; None if there is none.

    above: also None unless that speed-up is higher than this (a margin over plain decoding, e.g. 1.05).
    """
    best = max((row for row in rows if is_lossless(row, speedup_key)), key=lambda row: row[speedup_key], default=None)
    if best is None or (above is not None and best[speedup_key] <= above):
        return None
    return best


def ipex_llm_steps(accept_num: Sequence[int], generated_tokens: int) -> list[int]:
    """IPEX-LLM's per-verification-pass ``accept_num`` as steps: the prefill pass added, the last cut to n tokens.

    IPEX-LLM counts the tokens a pass produced before ``max_new_tokens`` or the
    end-of-sequence token cut them; the steps here add up to `generated_tokens`.
    """
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
