"""Each quantity's one definition, pinned on hand-made step lists."""
from __future__ import annotations

import pytest

from utils.decoding import decoding_metrics as dm
from utils.decoding.speedup_model import expected_tokens_per_pass

# prefill pass (1 token), then verification passes: 3 accepted + own, 0 + own, 2 + own, last cut to 2 tokens
STEPS = [1, 4, 1, 3, 2]


def test_main_passes_count_the_prefill_pass() -> None:
    assert dm.main_passes(STEPS) == 5


def test_accepted_tokens_count_the_complete_verification_passes() -> None:
    assert dm.accepted_tokens(STEPS) == 3 + 0 + 2  # the cut-short last pass is left out, as GenAI does
    assert dm.accepted_tokens([1, 1, 1]) == 0  # plain decoding accepts nothing


def test_tokens_per_main_pass_leaves_out_the_prefill_and_the_last_pass() -> None:
    assert dm.verification_steps(STEPS) == [4, 1, 3]
    assert dm.tokens_per_main_pass(STEPS) == pytest.approx(8 / 3)
    assert dm.tokens_per_main_pass(STEPS) == pytest.approx(1 + dm.accepted_tokens(STEPS) / 3)
    assert dm.tokens_per_main_pass([1, 1, 1, 1]) == 1.0
    assert dm.tokens_per_main_pass([1, 4]) is None  # no complete verification pass


def test_pooled_tokens_per_main_pass_weights_every_pass_alike() -> None:
    assert dm.pooled_tokens_per_main_pass([[1, 4, 2, 3], [1, 1, 1]]) == pytest.approx((4 + 2 + 1) / 3)
    assert dm.pooled_tokens_per_main_pass([[1]]) is None


def test_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one token"):
        dm.tokens_per_main_pass([1, 0, 2])


def test_acceptance_rate_is_pooled_accepted_over_drafted() -> None:
    assert dm.acceptance_rate(6, 12) == 0.5
    assert dm.acceptance_rate(0, 0) is None
    with pytest.raises(ValueError):
        dm.acceptance_rate(5, 4)


def test_per_token_acceptance_inverts_leviathans_tokens_per_pass() -> None:
    tokens = expected_tokens_per_pass(0.7, 4)
    assert dm.per_token_acceptance(tokens, 4) == pytest.approx(0.7, abs=1e-6)
    assert dm.per_token_acceptance(6.5, 4) == pytest.approx(1.0, abs=1e-6)  # clamped to K + 1
    assert dm.per_token_acceptance(0.9, 4) == pytest.approx(0.0, abs=1e-6)  # clamped to 1
    assert dm.per_token_acceptance(None, 4) is None


def test_cost_ratio_and_verification_cost_are_step_time_ratios() -> None:
    assert dm.cost_ratio(5.0, 20.0) == 0.25
    assert dm.verification_cost(30.0, 20.0) == 1.5
    with pytest.raises(ValueError):
        dm.cost_ratio(1.0, 0.0)
    with pytest.raises(ValueError):
        dm.verification_cost(1.0, 0.0)


def test_ipex_llm_steps_add_the_prefill_pass_and_cut_the_last_pass() -> None:
    # IPEX-LLM: accept_num per verification pass; max_new_tokens=8 cut the last pass (4 -> 2 tokens)
    steps = dm.ipex_llm_steps([3, 2, 4], generated_tokens=8)
    assert steps == [1, 3, 2, 2]
    assert dm.accepted_tokens(steps) == 2 + 1  # n_matched would say 2 + 1 + 3 = 6, counting the last pass
    assert dm.ipex_llm_steps([3, 2], generated_tokens=6) == [1, 3, 2]


# --------------------------------------------------------------------------- OpenVINO GenAI's own counters


@pytest.fixture(scope="module")
def int4_speculative(offline_pair):
    from utils.decoding.pipelines import load_pipeline

    return load_pipeline("speculative", offline_pair.main, "CPU", draft_dir=offline_pair.draft, precision="f32")


@pytest.mark.parametrize("settings", [
    {"num_assistant_tokens": 3, "max_new_tokens": 48},  # ends at max_new_tokens
    {"num_assistant_tokens": 5, "max_new_tokens": 200},  # ends at the end-of-sequence token
    {"assistant_confidence_threshold": 0.3, "max_new_tokens": 40},  # dynamic K
])
def test_the_definitions_agree_with_openvino_genais_counters(int4_speculative, settings: dict) -> None:
    from utils.decoding.generation import DecodingSettings, encode_prompt
    from utils.decoding.step_streamer import StepRecorder

    pipeline = int4_speculative.pipeline
    config = DecodingSettings("speculative", **settings).generation_config(pipeline.get_generation_config())
    recorder = StepRecorder()
    inputs = encode_prompt(pipeline.get_tokenizer(), "Explain in two sentences why the sky is blue.")
    result = pipeline.generate(inputs, config, recorder.as_genai_streamer())
    steps = [len(step) for step in recorder.steps]
    extended = result.extended_perf_metrics
    generated = len(result.tokens[0])
    assert sum(steps) == generated
    assert dm.main_passes(steps) == len(extended.main_model_metrics.raw_metrics.m_batch_sizes)
    assert dm.accepted_tokens(steps) == extended.get_num_accepted_tokens()
    drafted = extended.get_num_draft_tokens()
    assert dm.acceptance_rate(dm.accepted_tokens(steps), drafted) == pytest.approx(
        extended.get_draft_acceptance_rate(), abs=1e-6)
    assert 0 < dm.accepted_tokens(steps) < drafted  # the int4 draft is right sometimes, not always
    complete = len(dm.verification_steps(steps))
    assert dm.tokens_per_main_pass(steps) == pytest.approx(1 + extended.get_num_accepted_tokens() / complete)


def test_fastest_lossless_needs_every_prompt_measured_and_identical() -> None:
    def row(name, speedup, prompts=2, comparable=2, identical=2, key="speedup"):
        return {"name": name, key: speedup, "prompts": prompts, "comparable_prompts": comparable,
                "identical_prompts": identical}

    rows = [row("fast but lossy", 1.6, identical=1), row("one prompt not comparable", 1.5, comparable=1),
            row("not measured", None, comparable=0), row("slow", 0.9), row("best", 1.2)]
    assert dm.fastest_lossless(rows)["name"] == "best"
    assert not dm.is_lossless(rows[0]) and dm.is_lossless(rows[4])
    assert dm.fastest_lossless(rows, above=1.2) is None      # must beat the bar, not tie it
    assert dm.fastest_lossless(rows, above=1.19)["name"] == "best"
    assert dm.fastest_lossless(rows[:3]) is None
    other_key = [row("a", 1.1, key="speedup_vs_plain"), row("b", 1.3, key="speedup_vs_plain")]
    assert dm.fastest_lossless(other_key, "speedup_vs_plain")["name"] == "b"


def test_a_verification_pass_leaves_the_prefill_out() -> None:
    # GenAI's per-model metrics of a speculative run: a 900 ms prefill (its time to first token), then 10 passes
    metrics = {"inference_ms": 900.0 + 10 * 30.0, "ttft_ms": 900.0, "passes": 11}
    assert dm.verification_pass_ms(metrics) == pytest.approx(30.0)  # not 1200 / 11 = 109 ms
    assert dm.verification_pass_ms({"inference_ms": 900.0, "ttft_ms": 900.0, "passes": 1}) is None
    assert dm.draft_step_ms({"inference_ms": 60.0, "passes": 30}) == pytest.approx(2.0)
    assert dm.draft_step_ms({"inference_ms": 0.0, "passes": 0}) is None
    # with the passes after the prompt's kept, the draft's prefill does not count as drafting
    long_prompt = {"inference_ms": 1445.0, "passes": 26, "prompt_pass_ms": 667.0, "decode_passes": 24,
                   "decode_ms": 720.0}
    assert dm.draft_step_ms(long_prompt) == pytest.approx(30.0)
    assert dm.draft_step_ms({**long_prompt, "decode_passes": 0, "decode_ms": 0.0}) is None  # only the prompt pass


def test_the_speed_up_is_a_ratio_of_totals_per_repeat_and_one_rule_gives_the_verdict() -> None:
    from utils.decoding.decoding_metrics import speedup_per_repeat, speedup_text, verdict

    samples = speedup_per_repeat([[2.0, 2.0], [1.0, 3.0]], [[1.0, 2.0], [1.0, 2.0]])
    assert samples == pytest.approx([3.0 / 2.0, 5.0 / 4.0])
    assert verdict(samples) == "faster" and verdict([0.9, 0.99]) == "slower"
    assert verdict([0.9, 1.2]) == verdict([1.0]) == verdict([]) == "no clear difference"
    assert speedup_text([1.0, 1.5, 1.2]) == "1.20x [1.00x-1.50x]" and speedup_text([1.5]) == "1.50x"
