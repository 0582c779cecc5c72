"""Tests for utils.decoding.generation and utils.decoding.step_streamer: settings validation, bad input, honest comparison, records.

The model tests use the offline pair with few new tokens; they check behaviour
(identical outputs under f32, self-consistent records), never speed.
"""
from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path

import pytest

from utils.decoding.generation import (
    DecodingSettings,
    GenerationRecord,
    compare_with_plain,
    measure_runners,
    measure_side_by_side,
    median_of_runs,
    run_prompt,
)
from utils.decoding.generation_reports import format_table, summarise
from utils.decoding.pipelines import (
    DEFAULT_MAX_NGRAM_SIZE,
    DEFAULT_NUM_ASSISTANT_TOKENS,
    SpeculationSetupError,
    check_draft_folder,
    device_properties,
    load_pipeline,
    main_model_properties,
)
from utils.decoding.prompts import Prompt, get_prompt
from utils.decoding.step_streamer import StepRecorder, step_segments, steps_to_html
from utils.models.model_check import ModelFolderError, TokenizerMismatchError

NEW_TOKENS = 24


def make_record(mode: str = "plain", prompt_id: str = "p", tokens: list[int] | None = None, wall: float = 1.0,
                **changes) -> GenerationRecord:
    """A synthetic record, for testing the comparison logic without a model."""
    tokens = [1, 2, 3, 4] if tokens is None else tokens
    record = GenerationRecord(
        mode=mode, setting="greedy" if mode == "plain" else "K=3", prompt_id=prompt_id, task="chat", device="CPU",
        precision="f32", backend="continuous_batching", input_tokens=10, generated_tokens=len(tokens),
        token_ids=tokens, text="", wall_seconds=wall, tokens_per_second=len(tokens) / wall, ttft_ms=None,
        tpot_ms=None, genai_tokens_per_second=None, main_passes=len(tokens), tokens_per_step=[1] * len(tokens),
        accepted_from_steps=0, wall_seconds_all=[wall])
    return replace(record, **changes)


# --- DecodingSettings ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3"])
def test_k_must_be_a_positive_integer(k) -> None:
    with pytest.raises(SpeculationSetupError, match="num_assistant_tokens"):
        DecodingSettings("speculative", num_assistant_tokens=k)


def test_k_and_threshold_together_are_refused() -> None:
    with pytest.raises(SpeculationSetupError, match="either num_assistant_tokens .* not both"):
        DecodingSettings("speculative", num_assistant_tokens=3, assistant_confidence_threshold=0.4)


@pytest.mark.parametrize("threshold", [0.0, 1.0, -0.2, 1.5])
def test_threshold_must_lie_between_zero_and_one(threshold: float) -> None:
    with pytest.raises(SpeculationSetupError, match="strictly between 0 and 1"):
        DecodingSettings("speculative", assistant_confidence_threshold=threshold)


@pytest.mark.parametrize("mode", ["speculative", "prompt_lookup"])
def test_beam_search_with_a_draft_is_refused(mode: str) -> None:
    with pytest.raises(SpeculationSetupError, match="Beam search"):
        DecodingSettings(mode, num_beams=4)
    assert DecodingSettings("plain", num_beams=4).label == "beam"  # beam search alone is fine


def test_plain_refuses_speculation_knobs() -> None:
    with pytest.raises(SpeculationSetupError, match="Plain decoding has no draft"):
        DecodingSettings("plain", num_assistant_tokens=3)
    with pytest.raises(SpeculationSetupError, match="max_ngram_size"):
        DecodingSettings("plain", max_ngram_size=2)


def test_prompt_lookup_refuses_threshold_and_ngram_needs_lookup() -> None:
    with pytest.raises(SpeculationSetupError, match="Prompt lookup"):
        DecodingSettings("prompt_lookup", assistant_confidence_threshold=0.5)
    with pytest.raises(SpeculationSetupError, match="only applies to mode='prompt_lookup'"):
        DecodingSettings("speculative", max_ngram_size=3)
    with pytest.raises(SpeculationSetupError, match="max_ngram_size must be"):
        DecodingSettings("prompt_lookup", max_ngram_size=0)


@pytest.mark.parametrize("changes, message", [
    ({"mode": "medusa"}, "Unknown mode"),
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"num_beams": 0}, "num_beams"),
    ({"do_sample": True, "num_beams": 2}, "not both"),
    ({"do_sample": True, "temperature": 0.0}, "temperature"),
])
def test_other_bad_settings(changes: dict, message: str) -> None:
    with pytest.raises(SpeculationSetupError, match=message):
        DecodingSettings(**changes)


def test_defaults_are_resolved_and_labelled() -> None:
    assert DecodingSettings().label == "greedy"
    speculative = DecodingSettings("speculative")
    assert speculative.num_assistant_tokens == DEFAULT_NUM_ASSISTANT_TOKENS
    assert speculative.label == f"K={DEFAULT_NUM_ASSISTANT_TOKENS}"
    dynamic = DecodingSettings("speculative", assistant_confidence_threshold=0.4)
    assert dynamic.num_assistant_tokens is None and dynamic.label == "threshold=0.4"
    lookup = DecodingSettings("prompt_lookup", num_assistant_tokens=5)
    assert lookup.max_ngram_size == DEFAULT_MAX_NGRAM_SIZE and lookup.label == f"K=5, ngram={DEFAULT_MAX_NGRAM_SIZE}"
    assert DecodingSettings("speculative", do_sample=True).label.endswith("sampling")


def test_generation_config_carries_the_settings() -> None:
    config = DecodingSettings("speculative", num_assistant_tokens=4, max_new_tokens=17, do_sample=True,
                              temperature=0.5, rng_seed=7).generation_config()
    assert (config.num_assistant_tokens, config.max_new_tokens, config.do_sample) == (4, 17, True)
    assert config.temperature == pytest.approx(0.5) and config.rng_seed == 7
    dynamic = DecodingSettings("speculative", assistant_confidence_threshold=0.3).generation_config()
    assert dynamic.assistant_confidence_threshold == pytest.approx(0.3, rel=1e-6) and not dynamic.num_assistant_tokens
    lookup = DecodingSettings("prompt_lookup", max_ngram_size=2).generation_config()
    assert lookup.max_ngram_size == 2 and lookup.num_assistant_tokens == DEFAULT_NUM_ASSISTANT_TOKENS


def test_device_properties() -> None:
    assert device_properties(None) == {} and device_properties("default") == {}
    assert device_properties("f32") == {"INFERENCE_PRECISION_HINT": "f32"}
    # the main model under f32 computes exactly: no on-the-fly int8 activations and no u8/f16 KV cache, whose
    # rounding depends on the pass width (a verification pass over K+1 tokens against a plain step over one)
    assert main_model_properties("f32", 2) == {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 2,
                                               "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0, "KV_CACHE_PRECISION": "f32"}
    assert main_model_properties("default") == {} and main_model_properties("bf16") == device_properties("bf16")
    # exact=False gives the fast path back (dynamic quantisation) but keeps the f32 KV cache
    assert main_model_properties("f32", exact=False) == {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}
    assert main_model_properties("default", exact=False) == {}
    assert device_properties("f32", threads=1) == {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}
    assert device_properties("bf16") == {"INFERENCE_PRECISION_HINT": "bf16"}  # sweeps compare draft precisions
    with pytest.raises(SpeculationSetupError, match="precision"):
        device_properties("bf16x")
    with pytest.raises(SpeculationSetupError, match="threads"):
        device_properties("f32", threads=0)


def test_the_main_model_alone_gets_the_exact_properties(offline_pair, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_pipeline hands the main model exact f32 (or, with exact_main=False, its fast path) and the draft neither."""
    import openvino_genai

    built = {}
    monkeypatch.setattr(openvino_genai, "draft_model", lambda path, device, **properties: ("draft", properties))
    monkeypatch.setattr(openvino_genai, "LLMPipeline",
                        lambda path, device, **arguments: built.setdefault(len(built), arguments))
    load_pipeline("speculative", offline_pair.main, draft_dir=offline_pair.draft, precision="f32")
    load_pipeline("speculative", offline_pair.main, draft_dir=offline_pair.draft, precision="f32", exact_main=False)
    exact, fast = built[0], built[1]
    assert exact["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == 0 and exact["KV_CACHE_PRECISION"] == "f32"
    assert "DYNAMIC_QUANTIZATION_GROUP_SIZE" not in fast and fast["KV_CACHE_PRECISION"] == "f32"
    for arguments in (exact, fast):
        assert arguments["INFERENCE_PRECISION_HINT"] == "f32"
        assert arguments["draft_model"] == ("draft", {"INFERENCE_PRECISION_HINT": "f32"})  # the draft: fast path


# --- bad model folders, caught before loading ------------------------------------------------------------------------



def test_gguf_draft_is_refused(tmp_path: Path, offline_pair, no_model_loading) -> None:
    gguf = tmp_path / "draft.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 16)
    disguised = tmp_path / "draft-model"
    disguised.write_bytes(b"GGUF" + b"\0" * 16)
    for path in (gguf, disguised):
        with pytest.raises(SpeculationSetupError, match="GGUF file.*optimum-cli export openvino"):
            check_draft_folder(path, offline_pair.main)
        with pytest.raises(SpeculationSetupError, match="GGUF"):
            load_pipeline("speculative", offline_pair.main, draft_dir=path)


def test_missing_draft_folder_is_refused(tmp_path: Path, offline_pair, no_model_loading) -> None:
    with pytest.raises(ModelFolderError, match="does not exist"):
        load_pipeline("speculative", offline_pair.main, draft_dir=tmp_path / "no-such-draft")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelFolderError, match="incomplete"):
        check_draft_folder(empty)


def test_mismatched_tokenizer_is_refused(tmp_path: Path, offline_pair, no_model_loading) -> None:
    import openvino_genai  # the tokenizer check itself may load tokenizers, just not models

    from utils.models.tokenizer_mismatch_demo import make_mismatched_draft
    del openvino_genai
    mismatched = make_mismatched_draft(offline_pair.draft, tmp_path / "int4-mismatched")
    with pytest.raises(TokenizerMismatchError, match="same model family"):
        load_pipeline("speculative", offline_pair.main, draft_dir=mismatched)
    assert check_draft_folder(offline_pair.draft, offline_pair.main) == offline_pair.draft


def test_pipeline_arguments_are_checked_before_loading(tmp_path: Path, offline_pair, no_model_loading) -> None:
    with pytest.raises(SpeculationSetupError, match="needs draft_dir"):
        load_pipeline("speculative", offline_pair.main)
    with pytest.raises(SpeculationSetupError, match="only used by mode='speculative'"):
        load_pipeline("plain", offline_pair.main, draft_dir=offline_pair.draft)
    with pytest.raises(SpeculationSetupError, match="stateful"):
        load_pipeline("prompt_lookup", offline_pair.main, backend="stateful")
    with pytest.raises(SpeculationSetupError, match="precision"):
        load_pipeline("plain", offline_pair.main, precision="half")
    import openvino as ov

    if "bf" in str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")):  # the crash needs a bf16 CPU
        with pytest.raises(SpeculationSetupError, match="floating point exception"):
            load_pipeline("plain", offline_pair.main, precision="default", threads=1)
    with pytest.raises(ModelFolderError, match="does not exist"):
        load_pipeline("plain", tmp_path / "no-main")
    fake_gguf = tmp_path / "main.gguf"
    fake_gguf.write_bytes(b"GGUF")
    with pytest.raises(SpeculationSetupError, match="GGUF main model cannot be combined with a draft"):
        load_pipeline("speculative", fake_gguf, draft_dir=offline_pair.draft)


# --- comparison logic on synthetic records ------------------------------------------------------------------------

def test_speedup_only_for_equal_token_counts() -> None:
    plain = make_record("plain", tokens=[1, 2, 3, 4], wall=2.0)
    same = make_record("speculative", tokens=[1, 2, 3, 4], wall=1.0)
    longer = make_record("speculative", tokens=[1, 2, 3, 4, 5], wall=1.0)
    differs = make_record("speculative", tokens=[1, 2, 9, 4], wall=0.5)
    compared = compare_with_plain([plain, same, longer, differs])
    assert compared[0].speedup_vs_plain == pytest.approx(1.0) and compared[0].identical_to_plain
    assert compared[1].speedup_vs_plain == pytest.approx(2.0) and compared[1].identical_to_plain
    assert compared[2].speedup_vs_plain is None and "token counts differ" in compared[2].comparison_note
    assert compared[2].identical_to_plain is False and compared[2].first_difference == 4
    assert compared[3].speedup_vs_plain == pytest.approx(4.0)  # same count, different text: reported, not identical
    assert compared[3].identical_to_plain is False and compared[3].first_difference == 2
    assert compared[1] is not same and same.speedup_vs_plain is None  # inputs are not modified


def test_a_prompts_speedup_is_the_median_of_its_per_repeat_ratios_not_a_ratio_of_medians() -> None:
    plain = make_record("plain", wall=2.0, wall_seconds_all=[1.0, 2.0, 3.0])
    speculative = make_record("speculative", wall=1.5, wall_seconds_all=[2.0, 1.0, 1.5])
    compared = compare_with_plain([plain, speculative])[1]
    assert compared.speedup_vs_plain == pytest.approx(2.0)  # repeats: 0.5, 2.0, 2.0 (medians would give 1.33)
    assert compared.plain_wall_seconds == 2.0


def test_the_first_plain_run_of_a_prompt_is_the_reference_everywhere() -> None:
    from utils.decoding.generation_reports import repeat_speedups

    first, second = make_record("plain", wall=2.0, wall_seconds_all=[2.0]), make_record("plain", wall=4.0, wall_seconds_all=[4.0])
    speculative = compare_with_plain([first, second, make_record("speculative", wall=1.0, wall_seconds_all=[1.0])])[2]
    assert speculative.speedup_vs_plain == pytest.approx(2.0)
    assert repeat_speedups([first, second], [speculative]) == pytest.approx([2.0])


def test_no_speedup_across_precisions_backends_or_stacks() -> None:
    plain = make_record("plain", wall=2.0)
    other_precision = make_record("speculative", precision="default")
    stateful_plain = make_record("plain", prompt_id="q", backend="stateful")
    cb_speculative = make_record("speculative", prompt_id="q")
    transformers_run = make_record("speculative", prompt_id="p", backend="transformers")
    compared = compare_with_plain([plain, other_precision, stateful_plain, cb_speculative, transformers_run])
    assert compared[1].speedup_vs_plain is None and "precision differs" in compared[1].comparison_note
    assert compared[3].speedup_vs_plain is None and "backend differs" in compared[3].comparison_note
    assert compared[4].speedup_vs_plain is None and "no plain run" in compared[4].comparison_note


def test_separate_plain_records_can_be_given() -> None:
    compared = compare_with_plain([make_record("prompt_lookup", wall=0.5)], [make_record("plain", wall=1.0)])
    assert compared[0].speedup_vs_plain == pytest.approx(2.0)


def test_median_of_runs() -> None:
    runs = [make_record(wall=wall) for wall in (3.0, 1.0, 2.0)]
    median = median_of_runs(runs)
    assert median.wall_seconds == 2.0 and median.repeats == 3 and median.wall_seconds_all == [3.0, 1.0, 2.0]
    assert median.tokens_per_second == pytest.approx(4 / 2.0) and median.outputs_stable
    unstable = median_of_runs([make_record(tokens=[1, 2]), make_record(tokens=[1, 3])])
    assert not unstable.outputs_stable


def test_summarise_counts_only_comparable_prompts() -> None:
    records = compare_with_plain([
        make_record("plain", "a", wall=2.0), make_record("plain", "b", tokens=[1, 2], wall=5.0),
        make_record("speculative", "a", wall=1.0, tokens_per_step=[1, 2, 1], accepted_tokens=1, draft_tokens=3),
        make_record("speculative", "b", tokens=[1, 2, 3], wall=1.0, tokens_per_step=[1, 1, 1], accepted_tokens=0,
                    draft_tokens=5)])
    rows = {row["mode"]: row for row in summarise(records)}
    assert rows["speculative"]["comparable_prompts"] == 1
    assert rows["speculative"]["speedup_vs_plain"] == pytest.approx(2.0)  # prompt b (different count) left out
    assert rows["speculative"]["acceptance_rate"] == pytest.approx(1 / 8)  # pooled, not the mean of 1/3 and 0
    assert rows["speculative"]["tokens_per_pass"] == pytest.approx((2 + 1) / 2)  # prefill and last passes left out
    assert rows["plain"]["tokens_per_pass"] == 1.0
    assert rows["speculative"]["identical_prompts"] == 1


def test_format_table() -> None:
    table = format_table(compare_with_plain([make_record("plain", wall=2.0),
                                             make_record("speculative", tokens=[1, 2, 7, 4], wall=1.0)]))
    header, _rule, plain_row, speculative_row = table.splitlines()
    for column in ("mode", "setting", "task", "seconds", "tokens", "tokens/s", "speed-up", "acceptance rate", "identical"):
        assert column in header
    assert "2.00x" in speculative_row and "no (@2)" in speculative_row and plain_row.rstrip().endswith("yes")
    assert "stack" not in header  # one stack: no stack column


def test_format_table_names_the_stack_when_records_come_from_two() -> None:
    records = compare_with_plain([make_record("plain"), make_record("plain", backend="transformers", wall=2.0)])
    header, _rule, openvino_row, transformers_row = format_table(records).splitlines()
    assert header.split()[:2] == ["stack", "mode"]
    assert openvino_row.split()[:2] == ["openvino_genai", "plain"]
    assert transformers_row.split()[:2] == ["transformers", "plain"]


def test_measure_runners_warms_up_interleaves_and_validates() -> None:
    calls: list[tuple[str, str]] = []

    def runner(name: str):
        def run(prompt: Prompt) -> GenerationRecord:
            calls.append((name, prompt.id))
            return make_record(prompt_id=prompt.id, wall=float(len(calls)))
        return run

    prompts = [get_prompt("chat-sky"), get_prompt("code-fibonacci")]
    records = measure_runners([runner("a"), runner("b")], prompts, warmup=1, repeats=2)
    assert calls[:2] == [("a", "chat-sky"), ("b", "chat-sky")]  # warm-up on the first prompt
    assert calls[2:6] == [("a", "chat-sky"), ("b", "chat-sky"), ("a", "code-fibonacci"), ("b", "code-fibonacci")]
    assert [record.prompt_id for record in records] == ["chat-sky", "code-fibonacci"] * 2
    assert all(record.repeats == 2 for record in records)
    for bad in ({"repeats": 0}, {"warmup": -1}):
        with pytest.raises(SpeculationSetupError):
            measure_runners([runner("a")], prompts, **bad)
    with pytest.raises(SpeculationSetupError, match="No prompts"):
        measure_runners([runner("a")], [])


# --- step streamer without a model ----------------------------------------------------------------------------------

class CharacterTokenizer:
    """Token id = a character code; enough to test decoding logic."""

    def decode(self, ids, skip_special_tokens=True) -> str:
        return "".join(chr(token) for token in ids)


def test_step_recorder_and_segments() -> None:
    written: list[str] = []
    recorder = StepRecorder(CharacterTokenizer(), echo=True, write=written.append)
    recorder.add(ord("a"))
    recorder.add([ord("b"), ord("c"), ord("<")])
    recorder.add([])
    recorder.end()
    assert recorder.steps == [[97], [98, 99, 60]] and recorder.token_ids == [97, 98, 99, 60]
    assert "".join(written) == "abc<\n" and recorder.text == "abc<"
    segments = step_segments(CharacterTokenizer().decode, recorder.steps)
    assert segments == [("a", "main", 1), ("b", "accepted", 2), ("c", "accepted", 2), ("<", "main", 2)]
    page = steps_to_html(CharacterTokenizer(), recorder.steps, title="demo")
    assert html.escape("<") in page and "<<" not in page
    assert "4 tokens in 2 main-model passes, 2 accepted" in page
    with pytest.raises(ValueError, match="needs the tokenizer"):
        StepRecorder(echo=True)


# --- the real offline pair ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def f32_pipelines(offline_pair):
    """Plain, speculative (int4 draft) and prompt-lookup pipelines under f32, one thread."""
    return {mode: load_pipeline(mode, offline_pair.main, "CPU", precision="f32", threads=1,
                                draft_dir=offline_pair.draft if mode == "speculative" else None)
            for mode in ("plain", "speculative", "prompt_lookup")}


def check_record_is_consistent(record: GenerationRecord) -> None:
    assert record.generated_tokens == len(record.token_ids) > 0
    assert record.tokens_per_step is not None and sum(record.tokens_per_step) == record.generated_tokens
    assert record.main_passes == len(record.tokens_per_step)
    # draft tokens kept in the complete verification passes (the prefill and the last pass left out)
    assert record.accepted_from_steps == sum(step - 1 for step in record.tokens_per_step[1:-1])
    if record.accepted_tokens is not None:  # OpenVINO GenAI's own counter agrees
        assert record.accepted_from_steps == record.accepted_tokens
    assert record.tokens_per_second == pytest.approx(record.generated_tokens / record.wall_seconds)
    assert record.input_tokens > 0 and record.ttft_ms > 0


def test_f32_speculation_is_lossless_and_records_are_consistent(f32_pipelines) -> None:
    prompt = get_prompt("ground-dates")
    plain = run_prompt(f32_pipelines["plain"], prompt, DecodingSettings(max_new_tokens=NEW_TOKENS))
    speculative = run_prompt(f32_pipelines["speculative"], prompt,
                             DecodingSettings("speculative", num_assistant_tokens=3, max_new_tokens=NEW_TOKENS))
    lookup = run_prompt(f32_pipelines["prompt_lookup"], prompt,
                        DecodingSettings("prompt_lookup", max_new_tokens=NEW_TOKENS))
    for record in (plain, speculative, lookup):
        check_record_is_consistent(record)
    assert speculative.token_ids == plain.token_ids and lookup.token_ids == plain.token_ids
    assert speculative.text == plain.text
    assert set(plain.tokens_per_step) == {1} and plain.acceptance_rate is None
    assert max(speculative.tokens_per_step) <= 3 + 1
    assert 0.0 <= speculative.acceptance_rate <= 1.0
    assert 0 <= speculative.accepted_tokens <= speculative.draft_tokens
    assert speculative.main_model_metrics["generated_tokens"] == speculative.generated_tokens
    assert speculative.draft_model_metrics["passes"] > 0
    assert lookup.acceptance_rate is None and lookup.draft_model_metrics is None  # GenAI reports none for lookup
    compared = compare_with_plain([plain, speculative, lookup])
    assert all(record.identical_to_plain for record in compared)
    assert all(record.speedup_vs_plain is not None for record in compared)


def test_step_recorder_sees_the_verification_steps(f32_pipelines) -> None:
    loaded = f32_pipelines["speculative"]
    recorder = StepRecorder(loaded.tokenizer)
    record = run_prompt(loaded, get_prompt("code-fibonacci"),
                        DecodingSettings("speculative", max_new_tokens=NEW_TOKENS), streamer=recorder)
    assert recorder.token_ids == record.token_ids
    assert [len(step) for step in recorder.steps] == record.tokens_per_step
    assert recorder.text == record.text
    page = steps_to_html(loaded.tokenizer, recorder.steps)
    assert f"{record.generated_tokens} tokens in {record.main_passes} main-model passes" in page


def test_dynamic_speculation_and_sampling_run(f32_pipelines) -> None:
    loaded = f32_pipelines["speculative"]
    dynamic = run_prompt(loaded, "Why is the sky blue?",
                         DecodingSettings("speculative", assistant_confidence_threshold=0.4, max_new_tokens=16))
    check_record_is_consistent(dynamic)
    assert dynamic.setting == "threshold=0.4"
    sampled = run_prompt(loaded, "Name three colours.", DecodingSettings(
        "speculative", do_sample=True, temperature=0.8, rng_seed=5, max_new_tokens=16))
    check_record_is_consistent(sampled)  # GenAI's raw batch sizes do not add up here; the recorder's steps do
    assert sampled.setting.endswith("sampling")


def test_plain_sampling_follows_the_seed(f32_pipelines) -> None:
    def sample(seed: int) -> list[int]:
        settings = DecodingSettings(do_sample=True, temperature=1.5, rng_seed=seed, max_new_tokens=16)
        return run_prompt(f32_pipelines["plain"], "Write a short poem about rain.", settings).token_ids

    assert sample(5) == sample(5)
    assert sample(5) != sample(6)


def test_settings_must_match_the_pipeline(f32_pipelines) -> None:
    with pytest.raises(SpeculationSetupError, match="pipeline was built for 'plain'"):
        run_prompt(f32_pipelines["plain"], "Hi", DecodingSettings("speculative"))
    with pytest.raises(SpeculationSetupError, match="candidate pairs settings"):
        measure_side_by_side([(f32_pipelines["plain"], DecodingSettings("prompt_lookup"))], ["Hi"])
    with pytest.raises(TypeError, match="StepRecorder"):
        run_prompt(f32_pipelines["plain"], "Hi", DecodingSettings(max_new_tokens=2), streamer=print)


def test_measure_side_by_side_on_models(f32_pipelines) -> None:
    candidates = [(f32_pipelines["plain"], DecodingSettings(max_new_tokens=8)),
                  (f32_pipelines["prompt_lookup"], DecodingSettings("prompt_lookup", max_new_tokens=8))]
    records = compare_with_plain(measure_side_by_side(candidates, ["Hello!"], warmup=0, repeats=2))
    assert [record.mode for record in records] == ["plain", "prompt_lookup"]
    assert all(record.repeats == 2 and len(record.wall_seconds_all) == 2 and record.outputs_stable
               for record in records)
    assert records[1].identical_to_plain


# --- helpers for the notebooks ------------------------------------------------------------------------------------

def test_threshold_settings_ask_for_logprobs() -> None:
    # Without log-probabilities GenAI 2026.4 stops drafting after one token at any threshold (see notebook 02).
    assert DecodingSettings("speculative", assistant_confidence_threshold=0.5).generation_config().logprobs >= 1
    assert not DecodingSettings("speculative", num_assistant_tokens=3).generation_config().logprobs


def test_threshold_makes_the_draft_propose_runs(f32_pipelines) -> None:
    loaded = f32_pipelines["speculative"]
    record = run_prompt(loaded, get_prompt("code-fibonacci"),
                        DecodingSettings("speculative", assistant_confidence_threshold=0.3, max_new_tokens=NEW_TOKENS))
    assert max(record.tokens_per_step) > 2, record.tokens_per_step  # more than one draft token in some step
    assert record.num_assistant_tokens is None


def test_divergence_helpers() -> None:
    from utils.decoding.generation_reports import describe_divergence, first_divergent_pair

    records = compare_with_plain([make_record("plain", tokens=[72, 105, 33]),
                                  make_record("speculative", tokens=[72, 105, 63])])
    plain, other = first_divergent_pair(records)
    assert (plain.mode, other.mode) == ("plain", "speculative")
    text = describe_divergence(plain, other, CharacterTokenizer())
    assert "token 2" in text and "'Hi'" in text and "'!'" in text and "'?'" in text
    assert first_divergent_pair(compare_with_plain([make_record("plain"), make_record("speculative")])) is None


def test_speculation_breakdown_predicts_from_measured_numbers() -> None:
    from utils.decoding.generation_reports import speculation_breakdown
    from utils.decoding.speedup_model import predicted_speedup

    main = {"inference_ms": 190.0, "ttft_ms": 100.0, "passes": 10}  # a 100 ms prefill, then 9 passes of 10 ms
    draft = {"inference_ms": 60.0, "passes": 30}
    record = make_record("speculative", tokens=list(range(20)), main_passes=10, num_assistant_tokens=3,
                         main_model_metrics=main, draft_model_metrics=draft, acceptance_rate=0.5)
    rows = speculation_breakdown([make_record("plain", tpot_ms=8.0), record])
    assert len(rows) == 1
    row = rows[0]
    # c = one draft step (2 ms) / one plain step of the same run (8 ms); V(K) = one pass (10 ms) / one plain step
    assert row["cost ratio c"] == pytest.approx(0.25) and row["main ms/pass"] == pytest.approx(10.0)
    assert row["verify / plain"] == pytest.approx(10.0 / 8.0)
    assert row["predicted (Leviathan)"] == pytest.approx(predicted_speedup(row["per-token acceptance a"], 3, 0.25))
    assert speculation_breakdown([record])[0]["cost ratio c"] is None  # no plain run: no plain step
    assert 0 < row["per-token acceptance a"] < 1


def test_verification_gap_puts_the_measured_pass_times_into_the_formula() -> None:
    from utils.decoding.generation_reports import verification_gap
    from utils.decoding.speedup_model import predicted_speedup, predicted_speedup_with_step_times

    main = {"inference_ms": 500.0, "ttft_ms": 300.0, "passes": 11}  # a long prefill, then 20 ms per pass
    draft = {"inference_ms": 60.0, "passes": 30}  # 2 ms per draft step
    speculative = make_record("speculative", tokens=list(range(20)), main_passes=10, num_assistant_tokens=3,
                              main_model_metrics=main, draft_model_metrics=draft, speedup_vs_plain=1.1)
    plain = make_record("plain", tpot_ms=10.0)  # a plain step: half a verification pass
    other_prompt = make_record("plain", prompt_id="q", tpot_ms=99.0)
    (row,) = verification_gap([other_prompt, plain, speculative])
    assert row["plain ms/token"] == 10.0 and row["main ms/pass"] == pytest.approx(20.0)
    assert row["verify / plain"] == pytest.approx(2.0)
    acceptance = _acceptance(speculative)
    with_step_times = row["predicted (step times)"]
    assert with_step_times == pytest.approx(predicted_speedup_with_step_times(acceptance, 3, 2.0, 10.0, 20.0))
    assert row["predicted (Leviathan)"] == pytest.approx(predicted_speedup(acceptance, 3, 0.2))  # c = 2 ms / 10 ms
    assert row["measured speed-up"] == 1.1
    assert verification_gap([speculative]) == []  # no plain run of the prompt: no plain step to compare with


def test_formula_by_task_pools_a_task_and_leaves_out_what_it_cannot_predict() -> None:
    from utils.decoding.generation_reports import formula_by_task
    from utils.decoding.speedup_model import predicted_speedup, predicted_speedup_with_step_times

    def speculative(prompt_id: str, task: str, draft_ms: float, verify_ms: float, wall: float, **changes):
        # 12 tokens in 4 passes of 3 tokens (the first pass is the prefill's single token in tokens_per_step)
        return make_record("speculative", prompt_id=prompt_id, task=task, tokens=list(range(12)), wall=wall,
                           main_passes=4, num_assistant_tokens=3, tokens_per_step=[1, 3, 3, 3, 2],
                           main_model_metrics={"inference_ms": 500 + verify_ms * 4, "ttft_ms": 500.0, "passes": 5},
                           draft_model_metrics={"inference_ms": draft_ms * 9, "passes": 9}, **changes)

    plains = [make_record("plain", prompt_id=p, task=t, tpot_ms=ms, wall=2.0)
              for p, t, ms in (("a", "code", 10.0), ("b", "code", 30.0), ("c", "chat", 10.0))]
    code_a = speculative("a", "code", 2.0, 20.0, 1.0, speedup_vs_plain=2.0, plain_wall_seconds=2.0, identical_to_plain=True)
    code_b = speculative("b", "code", 4.0, 40.0, 4.0, speedup_vs_plain=0.5, plain_wall_seconds=2.0,
                        identical_to_plain=False)
    chat = speculative("c", "chat", 2.0, 20.0, 2.0, speedup_vs_plain=None, identical_to_plain=True)
    threshold = replace(code_a, num_assistant_tokens=None, setting="threshold=0.5")
    orphan = speculative("z", "code", 2.0, 20.0, 1.0)  # no plain run of its prompt
    rows = formula_by_task(plains + [code_a, code_b, chat, threshold, orphan])
    assert [(row["setting"], row["task"]) for row in rows] == [("K=3", "code"), ("K=3", "chat")]
    code, chat_row = rows
    assert code["prompts"] == 2 and code["identical"] == "1/2"
    assert code["tokens per main pass"] == 3.0  # the prefill step and the last (truncated) pass are not verification passes
    acceptance = code["per-token acceptance a"]
    assert code["cost ratio c"] == pytest.approx(3.0 / 20.0)  # median draft step / median plain step
    assert code["verify / plain"] == pytest.approx(30.0 / 20.0)  # median pass / median plain step
    assert code["measured speed-up"] == pytest.approx((2.0 + 2.0) / (1.0 + 4.0))  # summed plain / summed times
    assert code["predicted (Leviathan)"] == pytest.approx(predicted_speedup(acceptance, 3, 0.15))
    assert code["predicted (step times)"] == pytest.approx(
        predicted_speedup_with_step_times(acceptance, 3, 3.0, 20.0, 30.0))
    # the ceiling a free draft would reach: the verification pass alone against the plain steps it replaces
    assert code["predicted, free draft"] == pytest.approx(code["tokens per main pass"] * 20.0 / 30.0)
    assert code["predicted, free draft"] > code["predicted (step times)"]
    assert code["measured / Leviathan"] == pytest.approx(code["measured speed-up"] / code["predicted (Leviathan)"])
    assert code["measured / step times"] == pytest.approx(code["measured speed-up"] / code["predicted (step times)"])
    assert chat_row["measured speed-up"] is None and chat_row["measured / Leviathan"] is None  # not comparable
    # the draft's budget: its step over the median plain step, and the dearest step that still reaches 1.5x
    assert code["draft / plain"] == pytest.approx(3.0 / 20.0)
    budget = code["draft / plain for 1.5x"]
    assert budget == pytest.approx((code["tokens per main pass"] / 1.5 - code["verify / plain"]) / 3)
    assert predicted_speedup_with_step_times(acceptance, 3, budget * 20.0, 20.0, 30.0) == pytest.approx(1.5)
    # a target beyond what a free draft reaches has no budget; the column is named after the target
    (beyond, _) = formula_by_task(plains + [code_a, code_b, chat], target_speedup=code["predicted, free draft"] + 0.1)
    assert beyond["draft / plain for " + f"{code['predicted, free draft'] + 0.1:g}x"] is None


def _acceptance(record) -> float:
    from utils.decoding.decoding_metrics import per_token_acceptance

    return per_token_acceptance(record.tokens_per_pass, record.num_assistant_tokens)


def test_scheduler_config_budget() -> None:
    from utils.decoding.pipelines import make_scheduler_config

    default = make_scheduler_config()
    assert default.cache_size == 0
    budget = make_scheduler_config(2, max_num_batched_tokens=4096)
    assert budget.cache_size == 2 and budget.max_num_batched_tokens == 4096
    assert make_scheduler_config(max_num_batched_tokens=None).max_num_batched_tokens == default.max_num_batched_tokens
    for bad in (0, -5, 1.5, True, "4096"):
        with pytest.raises(SpeculationSetupError, match="max_num_batched_tokens"):
            make_scheduler_config(max_num_batched_tokens=bad)


def test_per_model_metrics_find_the_draft_prompt_pass() -> None:
    """GenAI gives the draft no time to first token: its prompt pass is the first pass with a duration."""
    from types import SimpleNamespace

    from utils.decoding.decoding_metrics import draft_step_ms, per_model_metrics

    def mean(value: float):
        return lambda: SimpleNamespace(mean=value)

    # as GenAI 2026.4 reports a draft on a 274-token prompt: a zero placeholder, the prefill, then the steps (µs)
    raw = SimpleNamespace(m_durations=[0.0, 667_000.0, 36_000.0, 25_000.0, 23_000.0], m_batch_sizes=[2, 2, 1, 1, 1])
    draft = SimpleNamespace(raw_metrics=raw, get_num_generated_tokens=lambda: 7, get_ttft=mean(0.01),
                            get_tpot=mean(25.0), get_throughput=mean(40.0), get_inference_duration=mean(760.0))
    metrics = per_model_metrics(draft)
    assert metrics["passes"] == 5 and metrics["prompt_pass_ms"] == pytest.approx(667.0)
    assert metrics["decode_passes"] == 3 and metrics["decode_ms"] == pytest.approx(84.0)
    assert draft_step_ms(metrics) == pytest.approx(28.0)  # not 760 / 5 = 152 ms


def test_speedup_by_task_pairs_repeats_and_the_verdict_reads_the_spread() -> None:
    from types import SimpleNamespace

    from utils.decoding.generation_reports import speedup_by_task, speedup_verdict

    def record(mode: str, prompt: str, task: str, walls: list[float]):
        return SimpleNamespace(mode=mode, stack="openvino_genai", prompt_id=prompt, task=task, setting=mode,
                               wall_seconds_all=walls, speedup_vs_plain=None if mode == "plain" else 1.0,
                               tokens_per_step=[5, 4, 4, 2] if mode != "plain" else None, identical_to_plain=True)

    records = [record("plain", "c1", "code", [2.0, 2.0, 2.0]), record("plain", "c2", "code", [2.0, 2.0, 2.0]),
               record("plain", "t1", "chat", [1.0, 1.0, 1.0]),
               record("K=4", "c1", "code", [1.0, 1.5, 1.0]), record("K=4", "c2", "code", [1.0, 1.5, 3.0]),
               record("K=4", "t1", "chat", [0.9, 1.1, 1.0])]
    rows = {row["task"]: row for row in speedup_by_task(records)}
    assert rows["code"]["repeats"] == 3 and rows["code"]["prompts"] == 2
    assert rows["code"]["speed-up (median)"] == pytest.approx(4 / 3)  # samples 2.0, 4/3, 1.0
    assert rows["code"]["slowest repeat"] == pytest.approx(1.0) and rows["code"]["fastest repeat"] == pytest.approx(2.0)
    assert rows["code"]["tokens per main pass"] == pytest.approx(4.0) and rows["code"]["identical to plain"] == "2/2"
    verdict = speedup_verdict(list(rows.values()))
    assert "no clear difference" in verdict and "code 1.33x [1.00x-2.00x]" in verdict and "chat" in verdict
    rows["chat"].update({"slowest repeat": 1.05, "fastest repeat": 1.2, "speed-up (median)": 1.1})
    assert "faster than plain in every repeat on chat 1.10x" in speedup_verdict(list(rows.values()))


def test_repeat_speedups_skip_unmatched_runs_and_the_direction_needs_every_repeat() -> None:
    from types import SimpleNamespace

    from utils.decoding.decoding_metrics import verdict
    from utils.decoding.generation_reports import repeat_speedups

    def record(prompt: str, walls: list[float], stack: str = "openvino_genai", matched: bool = True):
        return SimpleNamespace(stack=stack, prompt_id=prompt, wall_seconds_all=walls,
                               speedup_vs_plain=1.0 if matched else None)

    plain = [record("a", [2.0, 2.0]), record("b", [1.0, 1.0, 1.0])]
    candidates = [record("a", [1.0, 4.0]), record("b", [1.0, 1.0, 1.0]),
                  record("b", [9.0, 9.0], stack="transformers"),      # plain never ran b on that stack
                  record("a", [9.0, 9.0], matched=False)]             # its token count differed from plain's
    assert repeat_speedups(plain, candidates) == pytest.approx([3.0 / 2.0, 3.0 / 5.0])  # the fewest repeats: 2
    assert repeat_speedups(plain, []) == []
    assert verdict([1.01, 1.5]) == "faster" and verdict([0.5, 0.99]) == "slower"
    assert verdict([0.9, 1.1]) == verdict([1.0, 1.2]) == verdict([]) == "no clear difference"


def test_the_spread_plot_draws_one_bar_and_one_range_per_task_and_setting() -> None:
    import matplotlib

    matplotlib.use("agg")
    from utils.display.speculation_figures import plot_speedup_spread

    rows = [{"setting": "K=4", "task": task, "repeats": 3, "speed-up (median)": median, "slowest repeat": low,
             "fastest repeat": high, "identical to plain": "2/2"}
            for task, median, low, high in (("code", 1.3, 1.2, 1.4), ("chat", 0.9, 0.8, 1.05))]
    axis = plot_speedup_spread(rows, "t").axes[0]
    heights = sorted(round(bar.get_height(), 2) for bar in axis.patches)
    assert heights == [0.9, 1.3]
    assert len(axis.containers) == 4  # two bar containers and two error bars
    assert axis.get_ylim()[1] >= 1.4 * 1.15 - 1e-9
    with pytest.raises(ValueError):
        plot_speedup_spread([])


def test_the_coloured_steps_figure_draws_every_character_in_its_colour() -> None:
    import matplotlib

    matplotlib.use("agg")
    from utils.decoding.step_streamer import ACCEPTED_COLOUR, MAIN_COLOUR
    from utils.display.speculation_figures import plot_steps

    class Letters:  # token i is the letter chr(97 + i); token 26 is a newline
        @staticmethod
        def decode(ids, skip_special_tokens=True):
            return "".join("\n" if i == 26 else chr(97 + i) for i in ids)

    steps = [[0, 1, 2], [3], [26, 4, 5]]
    axis = plot_steps(Letters(), steps, "t", width_chars=2).axes[0]
    from matplotlib.colors import to_rgba

    drawn = [(text.get_text(), text.get_bbox_patch().get_facecolor(), text.get_position()) for text in axis.texts]
    assert [chunk for chunk, _, _ in drawn] == list("abcdef")
    assert [colour for _, colour, _ in drawn] == [to_rgba(c) for c in (ACCEPTED_COLOUR, ACCEPTED_COLOUR, MAIN_COLOUR,
                                                                          MAIN_COLOUR, ACCEPTED_COLOUR, MAIN_COLOUR)]
    assert [position for _, _, position in drawn] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]  # 2 a row
    assert "7 tokens in 3 main-model passes, 4 accepted" in axis.get_title(loc="left")


def test_summarise_leaves_out_counters_genai_reported_inconsistently() -> None:
    records = compare_with_plain([
        make_record("plain", "a", wall=2.0), make_record("plain", "b", wall=2.0),
        make_record("speculative", "a", wall=1.0, tokens_per_step=[1, 2, 1], accepted_tokens=1, draft_tokens=4),
        make_record("speculative", "b", wall=1.0, tokens_per_step=[1, 2, 1], accepted_tokens=2, draft_tokens=0)])
    rows = {row["mode"]: row for row in summarise(records)}
    assert rows["speculative"]["acceptance_rate"] == pytest.approx(1 / 4)  # prompt b's 2-of-0 is not counted


def test_divergence_margin_is_the_main_models_top_two_logit_gap_after_the_shared_tokens() -> None:
    from types import SimpleNamespace

    import numpy as np

    from utils.decoding.generation_reports import divergence_margin

    seen = {}

    class Request:
        def infer(self, inputs: dict) -> None:
            seen.update(inputs)

        def get_tensor(self, name: str) -> SimpleNamespace:
            assert name == "logits"
            return SimpleNamespace(data=np.array([[[0.0, 0.0, 0.0], [1.0, 3.5, 3.25]]], dtype=np.float32))

    compiled = SimpleNamespace(create_infer_request=Request)
    assert divergence_margin(compiled, [7, 8], [9, 10, 11], position=1) == pytest.approx(0.25)
    assert seen["input_ids"].tolist() == [[7, 8, 9]] and seen["position_ids"].tolist() == [[0, 1, 2]]
