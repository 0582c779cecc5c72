"""Tests of utils.decoding.step_timing: the arithmetic on step times, and (with the offline models) the timed pass."""
from __future__ import annotations

import pytest

from utils.decoding import step_timing as vc
from utils.models.model_catalogue import get_pair


def steps(times_by_tokens: dict[int, float]) -> list[vc.StepTime]:
    return [vc.StepTime("m", tokens, 64, ms, [ms]) for tokens, ms in times_by_tokens.items()]


def test_lookup_interpolates_between_measured_counts_and_clamps_outside() -> None:
    lookup = vc.step_time_lookup(steps({1: 10.0, 3: 20.0, 5: 60.0}))
    assert lookup(1) == 10.0
    assert lookup(2) == pytest.approx(15.0)
    assert lookup(4) == pytest.approx(40.0)
    assert lookup(0) == 10.0
    assert lookup(9) == 60.0
    with pytest.raises(ValueError):
        vc.step_time_lookup([])


def test_relative_cost_and_jump() -> None:
    measured = steps({1: 20.0, 2: 21.0, 3: 22.0, 4: 24.0, 5: 45.0, 6: 50.0})
    relative = vc.relative_step_cost(measured)
    assert relative[1] == 1.0
    assert relative[5] == pytest.approx(2.25)
    assert vc.find_cost_jump(measured) == 4  # 5 tokens in = the pass that verifies K=4
    assert vc.find_cost_jump(measured, factor=3.0) is None
    with pytest.raises(ValueError, match="one-token"):
        vc.relative_step_cost(steps({2: 1.0}))


def test_step_time_knows_its_draft_length() -> None:
    assert vc.StepTime("m", 5, 64, 1.0).draft_length == 4


def test_forward_inputs_continue_after_the_cache() -> None:
    inputs = vc._forward_inputs(3, 2, list(range(100, 110)))
    assert inputs["input_ids"].tolist() == [[103, 104]]
    assert inputs["position_ids"].tolist() == [[3, 4]]
    assert inputs["attention_mask"].shape == (1, 5)
    assert inputs["beam_idx"].tolist() == [0]


def test_bad_arguments_raise_before_loading(tmp_path) -> None:
    with pytest.raises(ValueError, match=">= 1"):
        vc.measure_pair_step_times(tmp_path, tmp_path, token_counts=[0, 1])
    with pytest.raises(ValueError, match="repeats"):
        vc.measure_pair_step_times(tmp_path, tmp_path, repeats=0)
    with pytest.raises(ValueError, match="does not exist"):
        vc.measure_pair_step_times(tmp_path / "missing", tmp_path, repeats=1)


DRAFT = get_pair("offline").draft


def test_the_timed_pass_computes_what_a_full_pass_computes(offline_pair) -> None:
    """A step over n tokens after a prefilled cache gives the same logits as one pass over everything."""
    import numpy as np

    exact = {"KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}  # else u8 cache, int8 activations
    compiled = vc.compile_stateful_model(DRAFT.path, "CPU", "f32", exact)
    tokens = list(range(200, 220))
    request = compiled.create_infer_request()
    request.infer(vc._forward_inputs(0, 20, tokens))
    full = request.get_tensor("logits").data[0, -4:].copy()
    request.reset_state()
    request.infer(vc._forward_inputs(0, 16, tokens))
    request.infer(vc._forward_inputs(16, 4, tokens))
    step = request.get_tensor("logits").data[0].copy()
    assert step.shape == full.shape
    assert np.allclose(step, full, atol=1e-3)
    assert (step.argmax(-1) == full.argmax(-1)).all()


def test_step_times_are_one_median_per_count(offline_pair) -> None:
    measured, _ = vc.measure_pair_step_times(DRAFT.path, DRAFT.path, token_counts=[3, 1, 3], context_tokens=8,
                                             repeats=3, warmup=0)
    assert [step.tokens for step in measured] == [1, 3]
    for step in measured:
        assert len(step.samples_ms) == 3
        assert step.median_ms == sorted(step.samples_ms)[1]
        assert step.median_ms > 0
        assert step.model == DRAFT.folder_name


def test_pair_step_times_are_measured_together(offline_pair) -> None:
    main_steps, draft_step = vc.measure_pair_step_times(DRAFT.path, DRAFT.path, token_counts=[2, 1], context_tokens=8,
                                                        repeats=2, warmup=0)
    assert [step.tokens for step in main_steps] == [1, 2]
    assert draft_step.tokens == 1 and len(draft_step.samples_ms) == 2
    assert draft_step.median_ms > 0 and main_steps[0].median_ms > 0
