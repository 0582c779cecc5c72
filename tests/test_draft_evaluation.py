"""Tests for utils.training.draft_evaluation: verdicts (no model), then measurements on the offline pair."""
from __future__ import annotations

from pathlib import Path

import pytest

from utils.training import draft_evaluation as dev
from utils.training import draft_export as dx


def test_verdicts_follow_the_one_rule_over_repeats_and_say_when_the_formula_misses() -> None:
    theory = [{"K": 1, "a_K": 0.03, "with_verification_cost": 0.85},
              {"K": 2, "a_K": 0.25, "with_verification_cost": 0.97},
              {"K": 3, "a_K": 0.25, "with_verification_cost": 1.0}]
    rows = [{"K": 3, "speedup": 1.01, "repeat_speedups": [0.98, 1.01, 1.04]},  # measured in another order: paired by K
            {"K": 1, "speedup": 1.12, "repeat_speedups": [1.10, 1.12, 1.15]},
            {"K": 2, "speedup": 0.95, "repeat_speedups": [0.93, 0.95, 0.99]}]
    first, second, third = dev.speedup_verdicts(theory, rows)
    assert "1.12x [1.10x-1.15x] (faster)" in first and "0.85x" in first
    assert "the repeats agree (1.10x-1.15x), so the formula misses" in first and "timing noise" not in first
    assert "(slower)" in second and "misses" not in second and "noise" not in second
    assert "(no clear difference)" in third and "misses" not in third and "noise" not in third


def test_a_gap_is_blamed_on_noise_only_when_the_repeats_spread_as_widely() -> None:
    theory = [{"K": 2, "a_K": 0.5, "with_verification_cost": 1.0}]
    spread = [{"K": 2, "speedup": 1.25, "repeat_speedups": [0.95, 1.25, 1.4]}]   # straddles the prediction
    (sentence,) = dev.speedup_verdicts(theory, spread)
    assert "likely timing noise: raise REPEATS" in sentence and "misses" not in sentence


def test_trimmed_draft_runs_in_openvino_genai_and_keeps_the_output(offline_pair, tmp_path: Path) -> None:
    """The main model with its output layer trimmed is a valid draft: GenAI loads it, output stays identical."""
    from utils.decoding.generation import DecodingSettings, run_prompt
    from utils.decoding.pipelines import load_pipeline

    prompt = "Write a Python function that adds two numbers."
    plain = load_pipeline("plain", offline_pair.main, precision="f32")
    reference = run_prompt(plain, prompt, DecodingSettings("plain", max_new_tokens=24))
    keep = sorted(set(range(2000)) | set(reference.token_ids))  # the answer's tokens and the 2,000 commonest ids
    trimmed = dx.trim_output_layer(offline_pair.main, tmp_path / "trimmed-main", keep, {"test": 1})
    rows, records = dev.measure_speculation(offline_pair.main, trimmed, [prompt], [2], max_new_tokens=24, repeats=1)
    speculative = next(record for record in records if record.mode == "speculative")
    assert speculative.token_ids == reference.token_ids
    assert rows[0]["identical_prompts"] == rows[0]["prompts"] == 1
    # a draft that is the main model itself on these tokens is nearly always right
    assert rows[0]["per_token_acceptance"] > 0.8


def test_step_times_of_several_drafts_are_measured_together(offline_pair) -> None:
    main_steps, draft_steps = dev.measure_draft_step_times(
        offline_pair.main, {"int4": offline_pair.draft, "int8": offline_pair.int8}, token_counts=[2], repeats=2,
        context_tokens=16)
    assert [step.tokens for step in main_steps] == [1, 2]
    assert list(draft_steps) == ["int4", "int8"]
    assert all(len(step.samples_ms) == 2 and step.median_ms > 0 for step in [*main_steps, *draft_steps.values()])
    assert draft_steps["int4"].model == offline_pair.draft.name



def test_measure_speculation_refuses_bad_draft_lengths(tmp_path: Path) -> None:
    from utils.training.scaffold import TrainingError

    for lengths in ([], [0], [True], [2.0]):
        with pytest.raises(TrainingError, match="integers >= 1"):
            dev.measure_speculation(tmp_path, tmp_path, [], lengths)
