"""Tests for utils.decoding.generation_reports on hand-made records: summaries per mode and per task, the verdict
sentence, the step-time breakdown and the formula beside the measurement, and where two outputs part.

No model is loaded: records are built directly, the tokenizer decodes character codes, and the compiled model of
`divergence_margin` is a stand-in that hands back chosen logits.
"""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from utils.decoding.generation import GenerationRecord, compare_with_plain
from utils.decoding.generation_reports import (
    describe_divergence,
    divergence_margin,
    first_divergent_pair,
    formula_by_task,
    repeat_speedups,
    speculation_breakdown,
    speedup_by_task,
    speedup_verdict,
    summarise,
    verification_gap,
)
from utils.decoding.speedup_model import expected_tokens_per_pass


def record(mode: str = "plain", prompt_id: str = "p", *, tokens: list[int] | None = None, wall: float = 1.0,
           walls: list[float] | None = None, task: str = "chat", setting: str | None = None, **changes: Any
           ) -> GenerationRecord:
    """A synthetic record; `walls` are the repeat times (wall_seconds is then their first value unless given)."""
    tokens = [1, 2, 3, 4] if tokens is None else tokens
    walls = [wall] if walls is None else walls
    made = GenerationRecord(
        mode=mode, setting=setting or ("greedy" if mode == "plain" else "K=3"), prompt_id=prompt_id, task=task,
        device="CPU", precision="f32", backend="continuous_batching", input_tokens=10,
        generated_tokens=len(tokens), token_ids=tokens, text="", wall_seconds=wall,
        tokens_per_second=len(tokens) / wall, ttft_ms=None, tpot_ms=None, genai_tokens_per_second=None,
        main_passes=len(tokens), tokens_per_step=[1] * len(tokens), accepted_from_steps=0, wall_seconds_all=walls,
        num_assistant_tokens=None if mode == "plain" else 3)
    return replace(made, **changes)


def main_metrics(verify_ms: float, passes: int = 5, prefill_ms: float = 20.0) -> dict:
    """The main model's per-model metrics whose verification passes take `verify_ms` each."""
    return {"passes": passes, "ttft_ms": prefill_ms, "inference_ms": prefill_ms + verify_ms * (passes - 1)}


def draft_metrics(step_ms: float, decode_passes: int = 8) -> dict:
    """The draft model's per-model metrics whose steps after the prompt pass take `step_ms` each."""
    return {"passes": decode_passes + 1, "decode_passes": decode_passes, "decode_ms": step_ms * decode_passes,
            "inference_ms": 999.0}


def speculative(prompt_id: str, steps: list[int], *, verify_ms: float, draft_ms: float, task: str = "chat",
                **changes: Any) -> GenerationRecord:
    """A fixed-K (K=3) speculative record with per-model metrics and the given steps."""
    tokens = list(range(sum(steps)))
    return record("speculative", prompt_id, tokens=tokens, task=task, tokens_per_step=steps,
                  main_passes=len(steps), main_model_metrics=main_metrics(verify_ms),
                  draft_model_metrics=draft_metrics(draft_ms), **changes)


class CharacterTokenizer:
    """Token id = a character code."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(token) for token in ids)


def ids(text: str) -> list[int]:
    return [ord(character) for character in text]


# --------------------------------------------------------------------------- summarise and repeat_speedups


def test_summary_speedup_is_the_median_of_the_per_repeat_ratios_of_totals() -> None:
    records = compare_with_plain([
        record("plain", "a", wall=2.0, walls=[2.0, 2.0]), record("plain", "b", wall=4.0, walls=[4.0, 4.0]),
        record("speculative", "a", wall=1.0, walls=[1.0, 1.0]), record("speculative", "b", wall=1.0, walls=[1.0, 3.0]),
    ])
    (speculative_row,) = [row for row in summarise(records) if row["mode"] == "speculative"]
    # repeat 1: (2 + 4) / (1 + 1) = 3; repeat 2: (2 + 4) / (1 + 3) = 1.5
    assert speculative_row["speedup_vs_plain"] == pytest.approx((3.0 + 1.5) / 2)
    assert speculative_row["wall_seconds"] == pytest.approx(2.0)
    assert speculative_row["tokens_per_second"] == pytest.approx(8 / 2.0)


def test_summary_without_repeat_times_uses_the_ratio_of_total_times() -> None:
    records = compare_with_plain([
        record("plain", "a", wall=2.0, walls=[]), record("plain", "b", wall=6.0, walls=[]),
        record("speculative", "a", wall=1.0, walls=[]), record("speculative", "b", wall=3.0, walls=[])])
    rows = {row["mode"]: row for row in summarise(records)}
    assert rows["speculative"]["speedup_vs_plain"] == pytest.approx((2.0 + 6.0) / (1.0 + 3.0))
    assert repeat_speedups([r for r in records if r.mode == "plain"],
                           [r for r in records if r.mode == "speculative"]) == []


def test_summary_has_no_speedup_when_no_prompt_is_comparable() -> None:
    records = compare_with_plain([record("plain", "a"), record("speculative", "a", tokens=[1, 2, 3])])
    rows = {row["mode"]: row for row in summarise(records)}
    assert rows["speculative"]["comparable_prompts"] == 0 and rows["speculative"]["speedup_vs_plain"] is None
    assert rows["speculative"]["identical_prompts"] == 0


def test_summary_rows_are_per_stack_mode_and_setting() -> None:
    records = compare_with_plain([
        record("plain", "a", wall=2.0), record("speculative", "a", wall=1.0),
        record("speculative", "a", wall=0.5, setting="K=5"),
        record("plain", "a", wall=4.0, backend="transformers"), record("speculative", "a", wall=1.0,
                                                                       backend="transformers")])
    keys = [(row["stack"], row["mode"], row["setting"]) for row in summarise(records)]
    assert keys == [("openvino_genai", "plain", "greedy"), ("openvino_genai", "speculative", "K=3"),
                    ("openvino_genai", "speculative", "K=5"), ("transformers", "plain", "greedy"),
                    ("transformers", "speculative", "K=3")]
    speedups = {key: row["speedup_vs_plain"] for key, row in zip(keys, summarise(records), strict=True)}
    assert speedups[("openvino_genai", "speculative", "K=5")] == pytest.approx(4.0)
    assert speedups[("transformers", "speculative", "K=3")] == pytest.approx(4.0)  # against its own stack's plain


def test_summary_leaves_out_impossible_counters_and_incomplete_step_lists() -> None:
    records = compare_with_plain([
        record("plain", "a"), record("plain", "b"),
        record("speculative", "a", accepted_tokens=3, draft_tokens=6, tokens_per_step=[1, 3]),
        record("speculative", "b", accepted_tokens=2, draft_tokens=0, tokens_per_step=None)])  # GenAI's odd counters
    (row,) = [row for row in summarise(records) if row["mode"] == "speculative"]
    assert row["acceptance_rate"] == pytest.approx(3 / 6)  # the 2-of-0 record is left out, not a crash
    assert row["tokens_per_pass"] is None  # one record has no steps: no pooled figure over part of the prompts


def test_repeat_speedups_skip_candidates_without_a_comparable_plain_run() -> None:
    plain = [record("plain", "a", walls=[2.0, 4.0])]
    candidates = compare_with_plain([
        record("speculative", "a", walls=[1.0, 1.0]),
        record("speculative", "b", walls=[9.0, 9.0]),  # no plain run of b
    ], plain)
    assert repeat_speedups(plain, candidates) == pytest.approx([2.0, 4.0])
    assert repeat_speedups(plain, [replace(candidates[0], speedup_vs_plain=None)]) == []


# --------------------------------------------------------------------------- per task, and the verdict


def test_speedup_by_task_gives_the_median_and_range_over_repeats_per_setting_and_task() -> None:
    records = compare_with_plain([
        record("plain", "c1", task="chat", walls=[2.0, 2.0, 2.0]),
        record("plain", "k1", task="code", walls=[3.0, 3.0, 3.0]),
        record("speculative", "c1", task="chat", walls=[1.0, 2.0, 4.0]),
        record("speculative", "k1", task="code", walls=[1.0, 1.5, 2.0], tokens=[1, 2, 3, 9],
               tokens_per_step=[1, 3, 3, 2]),
    ])
    rows = {row["task"]: row for row in speedup_by_task(records)}
    assert set(rows) == {"chat", "code"}  # plain has no row of its own
    assert rows["chat"]["speed-up (median)"] == pytest.approx(1.0)
    assert (rows["chat"]["slowest repeat"], rows["chat"]["fastest repeat"]) == pytest.approx((0.5, 2.0))
    assert rows["code"]["speed-up (median)"] == pytest.approx(2.0) and rows["code"]["repeats"] == 3
    assert rows["code"]["tokens per main pass"] == pytest.approx(3.0)
    assert rows["code"]["identical to plain"] == "0/1" and rows["chat"]["identical to plain"] == "1/1"


def test_the_verdict_sentence_sorts_tasks_by_what_every_repeat_says() -> None:
    def row(setting: str, task: str, low: float, median: float, high: float) -> dict:
        return {"setting": setting, "task": task, "speed-up (median)": median, "slowest repeat": low,
                "fastest repeat": high}

    rows = [row("K=3", "chat", 1.1, 1.2, 1.3), row("K=3", "code", 0.8, 0.85, 0.9), row("K=3", "rag", 1.05, 1.5, 2.0),
            row("K=5", "chat", 0.9, 1.0, 1.1)]
    assert speedup_verdict(rows) == (
        "In this run, K=3: faster than plain in every repeat on chat 1.20x [1.10x-1.30x], rag 1.50x [1.05x-2.00x]; "
        "slower than plain in every repeat on code 0.85x [0.80x-0.90x]. "
        "K=5: no clear difference (the repeats straddle 1.00x) on chat 1.00x [0.90x-1.10x].")


def test_the_verdict_follows_speedup_by_task() -> None:
    records = compare_with_plain([
        record("plain", "c1", task="chat", walls=[2.0, 2.0]),
        record("speculative", "c1", task="chat", walls=[1.0, 1.25], setting="K=2"),
    ])
    assert speedup_verdict(speedup_by_task(records)) == \
        "In this run, K=2: faster than plain in every repeat on chat 1.80x [1.60x-2.00x]."


# --------------------------------------------------------------------------- step times and the formula

# Plain: 20 ms per token. Speculative, K=3: verification passes of 25 ms, draft steps of 5 ms, and steps whose
# complete verification passes ([4, 4, 1]) yield 3 tokens each.
PLAIN_MS, VERIFY_MS, DRAFT_MS = 20.0, 25.0, 5.0
STEPS = [1, 4, 4, 1, 2]


def breakdown_records() -> list[GenerationRecord]:
    tokens = list(range(sum(STEPS)))
    return compare_with_plain([
        record("plain", "p", tokens=tokens, wall=2.0, tpot_ms=PLAIN_MS),
        speculative("p", STEPS, verify_ms=VERIFY_MS, draft_ms=DRAFT_MS, wall=1.0, accepted_tokens=7, draft_tokens=9,
                    acceptance_rate=7 / 9),
        speculative("p", STEPS, verify_ms=VERIFY_MS, draft_ms=DRAFT_MS, setting="threshold=0.4",
                    num_assistant_tokens=None),
        speculative("q", STEPS, verify_ms=VERIFY_MS, draft_ms=DRAFT_MS),  # no plain run of q
    ])


def test_breakdown_derives_c_verification_cost_and_both_predictions_from_the_step_times() -> None:
    rows = speculation_breakdown(breakdown_records())
    assert [(row["prompt"], row["setting"]) for row in rows] == [("p", "K=3"), ("p", "threshold=0.4"), ("q", "K=3")]
    fixed = rows[0]
    assert (fixed["plain ms/token"], fixed["main ms/pass"], fixed["draft ms/pass"]) == pytest.approx(
        (PLAIN_MS, VERIFY_MS, DRAFT_MS))
    assert fixed["cost ratio c"] == pytest.approx(5 / 20) and fixed["verify / plain"] == pytest.approx(25 / 20)
    assert expected_tokens_per_pass(fixed["per-token acceptance a"], 3) == pytest.approx(3.0)
    assert fixed["predicted (Leviathan)"] == pytest.approx(3.0 / (3 * 0.25 + 1))
    assert fixed["predicted (step times)"] == pytest.approx(3.0 * 20 / (3 * 5 + 25))
    assert fixed["measured speed-up"] == pytest.approx(2.0)
    assert (fixed["main passes"], fixed["draft passes"], fixed["drafted"], fixed["accepted"]) == (5, 9, 9, 7)


def test_breakdown_without_k_or_plain_step_has_no_prediction() -> None:
    _, threshold, no_plain = speculation_breakdown(breakdown_records())
    assert threshold["per-token acceptance a"] is None and threshold["predicted (Leviathan)"] is None
    assert threshold["cost ratio c"] == pytest.approx(0.25)
    assert no_plain["plain ms/token"] is None and no_plain["cost ratio c"] is None
    assert no_plain["verify / plain"] is None and no_plain["predicted (step times)"] is None
    assert no_plain["per-token acceptance a"] is not None  # still explained by its own steps


def test_breakdown_skips_records_without_usable_metrics() -> None:
    base = speculative("p", STEPS, verify_ms=VERIFY_MS, draft_ms=DRAFT_MS)
    records = [record("plain", "p", tpot_ms=PLAIN_MS),
               replace(base, main_passes=0),
               replace(base, main_model_metrics=main_metrics(VERIFY_MS, passes=1)),  # no verification pass
               replace(base, draft_model_metrics={"passes": 1, "decode_passes": 0, "decode_ms": 0.0,
                                                  "inference_ms": 3.0})]  # no draft step after the prompt
    assert speculation_breakdown(records) == []


def test_verification_gap_keeps_the_rows_with_a_step_time_prediction() -> None:
    (row,) = verification_gap(breakdown_records())
    assert list(row) == ["prompt", "setting", "plain ms/token", "main ms/pass", "verify / plain",
                         "predicted (Leviathan)", "predicted (step times)", "measured speed-up"]
    assert (row["prompt"], row["setting"]) == ("p", "K=3")
    assert row["predicted (step times)"] == pytest.approx(1.5)


def test_formula_by_task_pools_a_tasks_prompts_and_prices_the_draft() -> None:
    steps_p, steps_q = [1, 4, 4, 1, 2], [1, 2, 2, 3]
    records = compare_with_plain([
        record("plain", "p", tokens=list(range(12)), wall=2.0, walls=[2.0, 2.0], tpot_ms=20.0),
        record("plain", "q", tokens=list(range(8)), wall=2.0, walls=[2.0, 2.0], tpot_ms=20.0),
        speculative("p", steps_p, verify_ms=25.0, draft_ms=5.0, wall=1.0, walls=[1.0, 1.5]),
        speculative("q", steps_q, verify_ms=35.0, draft_ms=7.0, wall=1.0, walls=[1.0, 2.5],
                    token_ids=[0, 1, 2, 3, 4, 5, 6, 99]),
        speculative("p", steps_p, verify_ms=25.0, draft_ms=5.0, setting="threshold=0.4", num_assistant_tokens=None),
    ])
    (row,) = formula_by_task(records, target_speedup=1.5)
    tokens_per_pass = (4 + 4 + 1 + 2 + 2) / 5  # both prompts' complete verification passes
    draft_ms, verify_ms, plain_ms = 6.0, 30.0, 20.0  # medians over the two prompts
    measured = (4.0 / 2.0 + 4.0 / 4.0) / 2  # repeats: (2 + 2) / (1 + 1) and (2 + 2) / (1.5 + 2.5)
    assert (row["setting"], row["task"], row["prompts"], row["identical"]) == ("K=3", "chat", 2, "1/2")
    assert row["tokens per main pass"] == pytest.approx(tokens_per_pass)
    assert expected_tokens_per_pass(row["per-token acceptance a"], 3) == pytest.approx(tokens_per_pass)
    assert row["cost ratio c"] == pytest.approx(draft_ms / plain_ms) == row["draft / plain"]
    assert row["verify / plain"] == pytest.approx(verify_ms / plain_ms)
    assert row["measured speed-up"] == pytest.approx(measured)
    assert row["predicted (Leviathan)"] == pytest.approx(tokens_per_pass / (3 * draft_ms / plain_ms + 1))
    step_times = tokens_per_pass * plain_ms / (3 * draft_ms + verify_ms)
    assert row["predicted (step times)"] == pytest.approx(step_times)
    assert row["predicted, free draft"] == pytest.approx(tokens_per_pass * plain_ms / verify_ms)
    assert row["measured / step times"] == pytest.approx(measured / step_times)
    budget_ms = (tokens_per_pass * plain_ms / 1.5 - verify_ms) / 3
    assert row["draft / plain for 1.5x"] == pytest.approx(budget_ms / plain_ms)


def test_formula_by_task_says_when_not_even_a_free_draft_reaches_the_target() -> None:
    records = compare_with_plain([
        record("plain", "p", tokens=list(range(12)), tpot_ms=20.0),
        speculative("p", STEPS, verify_ms=25.0, draft_ms=5.0)])
    (row,) = formula_by_task(records, target_speedup=3.0)  # 3 tokens x 20 ms / 3 = 20 ms < one 25 ms verification
    assert row["draft / plain for 3x"] is None


# --------------------------------------------------------------------------- where outputs part


def test_first_divergent_pair_finds_the_plain_run_of_the_same_prompt_and_stack() -> None:
    records = compare_with_plain([
        record("plain", "a", tokens=ids("abcd")), record("plain", "b", tokens=ids("wxyz")),
        record("plain", "b", tokens=ids("wxyq"), backend="transformers"),
        record("speculative", "a", tokens=ids("abcd")),
        record("speculative", "b", tokens=ids("wxyz"), backend="transformers")])
    pair = first_divergent_pair(records)
    assert pair is not None
    plain, other = pair
    assert (plain.prompt_id, plain.stack, plain.token_ids) == ("b", "transformers", ids("wxyq"))
    assert (other.mode, other.stack, other.first_difference) == ("speculative", "transformers", 3)
    assert first_divergent_pair(records[:4]) is None


def test_describe_divergence_shows_the_shared_lead_in_and_both_continuations() -> None:
    plain = record("plain", "story", tokens=ids("the cat sat on the mat"))
    other = record("speculative", "story", tokens=ids("the cat sat in the hat"))
    text = describe_divergence(plain, other, CharacterTokenizer(), context_tokens=4)
    assert text.splitlines() == ["story: first difference at generated token 12",
                                 "  shared   ...'sat '",
                                 "  plain        -> 'on t'",
                                 "  speculative  -> 'in t'"]
    assert describe_divergence(plain, plain, CharacterTokenizer()) == "plain (greedy) is identical to plain on story."


def test_describe_divergence_at_the_start_has_an_empty_lead_in() -> None:
    text = describe_divergence(record("plain", tokens=ids("xy")), record("prompt_lookup", tokens=ids("zy")),
                               CharacterTokenizer())
    assert "first difference at generated token 0" in text and "shared   ...''" in text
    assert "prompt_lookup -> 'zy'" in text


class LogitsModel:
    """A compiled model stand-in: remembers what it was fed and returns `logits` for the last position."""

    def __init__(self, last_logits: list[float]) -> None:
        self.last_logits = last_logits
        self.fed: dict[str, np.ndarray] = {}

    def create_infer_request(self) -> LogitsModel:
        return self

    def infer(self, inputs: dict[str, np.ndarray]) -> None:
        self.fed = inputs

    def get_tensor(self, name: str) -> SimpleNamespace:
        assert name == "logits"
        length = self.fed["input_ids"].shape[1]
        logits = np.zeros((1, length, len(self.last_logits)), dtype=np.float32)
        logits[0, -1] = self.last_logits
        return SimpleNamespace(data=logits)


def test_divergence_margin_is_top_one_minus_top_two_after_the_shared_tokens() -> None:
    model = LogitsModel([0.5, 3.25, -1.0, 3.0, 2.0])
    margin = divergence_margin(model, [7, 8, 9], [10, 11, 12, 13], position=2)
    assert margin == pytest.approx(0.25)
    assert model.fed["input_ids"].tolist() == [[7, 8, 9, 10, 11]]
    assert model.fed["position_ids"].tolist() == [[0, 1, 2, 3, 4]]
    assert model.fed["attention_mask"].shape == (1, 5)


def test_divergence_margin_takes_genai_tokenized_inputs() -> None:
    model = LogitsModel([1.0, 1.0, 0.0])  # an exact tie
    prompt = SimpleNamespace(input_ids=SimpleNamespace(data=np.array([[4, 5]])))
    assert divergence_margin(model, prompt, [6, 7], position=1) == 0.0  # type: ignore[arg-type]  # GenAI's inputs
    assert model.fed["input_ids"].tolist() == [[4, 5, 6]]


def test_the_verdict_says_so_when_no_row_can_be_judged() -> None:
    assert speedup_verdict([]) == "No speculative run to judge in these rows."
    row = {"setting": "K=3", "task": "code", "speed-up (median)": None, "slowest repeat": None, "fastest repeat": None}
    assert speedup_verdict([row]) == "In this run, K=3: no comparable prompt (token counts differ)."
