"""Theory of speculative decoding (Leviathan et al., arXiv:2211.17192).

With per-token acceptance a, draft length k and cost ratio c (draft step / main step), a main pass yields
(1 - a^(k+1)) / (1 - a) tokens and the speed-up is that / (k c + 1), if verifying k+1 tokens costs one plain step;
`predicted_speedup_with_step_times` uses the measured verification time instead.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


def _check(acceptance: float, draft_length: int) -> None:
    if not 0.0 <= acceptance <= 1.0:
        raise ValueError(f"acceptance must lie in [0, 1], got {acceptance}")
    if draft_length < 0:
        raise ValueError(f"draft length must be >= 0, got {draft_length}")


def expected_tokens_per_pass(acceptance: float, draft_length: int) -> float:
    """Mean number of tokens one main-model pass yields (accepted drafts + its own)."""
    _check(acceptance, draft_length)
    if acceptance == 1.0:
        return float(draft_length + 1)
    return (1.0 - acceptance ** (draft_length + 1)) / (1.0 - acceptance)


def predicted_speedup(acceptance: float, draft_length: int, cost_ratio: float) -> float:
    """Expected wall-time speed-up of speculative over plain decoding."""
    if cost_ratio < 0:
        raise ValueError(f"cost ratio must be >= 0, got {cost_ratio}")
    return expected_tokens_per_pass(acceptance, draft_length) / (draft_length * cost_ratio + 1.0)


def predicted_speedup_with_step_times(
    acceptance: float, draft_length: int, draft_step: float, plain_step: float, verify_step: float,
) -> float:
    """Expected speed-up from step times in one unit; verify_step is a main pass over draft_length + 1 tokens."""
    if min(draft_step, plain_step, verify_step) < 0 or plain_step == 0 or verify_step == 0:
        raise ValueError("step times must be >= 0, and the main model's steps > 0")
    tokens = expected_tokens_per_pass(acceptance, draft_length)
    return tokens * plain_step / (draft_length * draft_step + verify_step)


def draft_step_budget(
    acceptance: float, draft_length: int, plain_step: float, verify_step: float, target_speedup: float,
) -> float | None:
    """The dearest draft step (main steps' unit) reaching `target_speedup`; None if even a free draft falls short."""
    if target_speedup <= 0:
        raise ValueError(f"target speed-up must be > 0, got {target_speedup}")
    if draft_length < 1:
        raise ValueError(f"draft length must be >= 1, got {draft_length}")
    if min(plain_step, verify_step) <= 0:
        raise ValueError("the main model's step times must be > 0")
    budget = (expected_tokens_per_pass(acceptance, draft_length) * plain_step / target_speedup - verify_step) \
        / draft_length
    return budget if budget >= 0 else None


def acceptance_from_tokens_per_pass(tokens_per_pass: float, draft_length: int, tol: float = 1e-9) -> float:
    """Invert `expected_tokens_per_pass` by bisection; values a rounding error outside [1, K + 1] are clamped."""
    if draft_length < 1:
        raise ValueError(f"draft length must be >= 1 to estimate acceptance, got {draft_length}")
    if not 1.0 - 1e-9 <= tokens_per_pass <= draft_length + 1 + 1e-9:
        raise ValueError(f"tokens per pass must lie in [1, {draft_length + 1}], got {tokens_per_pass}")
    tokens_per_pass = min(max(tokens_per_pass, 1.0), draft_length + 1.0)
    low, high = 0.0, 1.0
    while high - low > tol:
        mid = (low + high) / 2
        if expected_tokens_per_pass(mid, draft_length) < tokens_per_pass:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def break_even_acceptance(draft_length: int, cost_ratio: float) -> float:
    """Smallest acceptance at which speculation is no slower than plain decoding."""
    low, high = 0.0, 1.0
    if predicted_speedup(1.0, draft_length, cost_ratio) < 1.0:
        return float("nan")
    for _ in range(60):
        mid = (low + high) / 2
        if predicted_speedup(mid, draft_length, cost_ratio) < 1.0:
            low = mid
        else:
            high = mid
    return high


def acceptance_needed(
    target_speedup: float, draft_length: int, draft_step: float, plain_step: float, verify_step: float,
) -> float | None:
    """The per-token acceptance at which `predicted_speedup_with_step_times` reaches `target_speedup`.

    0.0 if no accepted token is needed; None if not even an always-right draft would do.
    """
    if target_speedup <= 0:
        raise ValueError(f"target speed-up must be > 0, got {target_speedup}")
    if draft_length < 1:
        raise ValueError(f"draft length must be >= 1, got {draft_length}")
    if min(draft_step, plain_step, verify_step) < 0 or plain_step == 0 or verify_step == 0:
        raise ValueError("step times must be >= 0, and the main model's steps > 0")
    tokens = target_speedup * (draft_length * draft_step + verify_step) / plain_step
    if tokens > draft_length + 1:
        return None
    if tokens <= 1.0:
        return 0.0
    return acceptance_from_tokens_per_pass(tokens, draft_length)


@dataclass(frozen=True)
class MeasuredStepTimes:
    """Measured step times: the draft's one-token step and main_step_ms(n), a main pass over n tokens (plain: n=1)."""

    draft_step_ms: float
    main_step_ms: Callable[[int], float]

    @property
    def cost_ratio(self) -> float:
        """Leviathan's c: draft step / the main model's one-token step."""
        return self.draft_step_ms / self.main_step_ms(1)

    def verify_over_plain_step(self, k: int) -> float:
        """V(K): main pass over K + 1 tokens / one-token step."""
        return self.main_step_ms(k + 1) / self.main_step_ms(1)

    def predicted_speedup(self, acceptance: float, k: int) -> float:
        """Expected tokens per pass x plain step time / (K draft steps + one main step over K+1 tokens)."""
        return predicted_speedup_with_step_times(acceptance, k, self.draft_step_ms, self.main_step_ms(1),
                                                 self.main_step_ms(k + 1))


def theory_rows(k_rows: Sequence[dict], cost_model: MeasuredStepTimes) -> list[dict]:
    """Measured speed-up per K beside the theory's predictions from that K's own acceptance a_K.

    k_rows: `SweepResult.rows()` of one K sweep. "with_verification_cost" also charges verifying K+1 tokens;
    "leviathan_pooled_a" uses the mean a_K for every K, as the formula assumes one a.
    """
    usable = [row for row in k_rows if row.get("per_token_acceptance") is not None and row.get("speedup")]
    if not usable:
        return []
    pooled = sum(row["per_token_acceptance"] for row in usable) / len(usable)
    rows = []
    for row in sorted(usable, key=lambda row: row["value"]):
        k, acceptance = int(row["value"]), row["per_token_acceptance"]
        leviathan = predicted_speedup_with_step_times(acceptance, k, cost_model.cost_ratio, 1.0, 1.0)
        with_verification = cost_model.predicted_speedup(acceptance, k)
        rows.append({
            "K": k,
            "measured": row["speedup"],
            "a_K": acceptance,
            "leviathan": leviathan,
            "leviathan_pooled_a": predicted_speedup_with_step_times(pooled, k, cost_model.cost_ratio, 1.0, 1.0),
            "with_verification_cost": with_verification,
            "verify_over_plain_step": cost_model.verify_over_plain_step(k),
            "leviathan_error": leviathan / row["speedup"] - 1.0,
            "with_verification_error": with_verification / row["speedup"] - 1.0,
        })
    return rows
