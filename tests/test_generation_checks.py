"""Input checks of utils.decoding.generation (settings, pipelines, prompts) and the scheduler budget under load.

Bad input fails with one line before any model runs; 8 concurrent speculative requests equal plain decoding
with the project's default scheduler budget (the trap of notebook 05 with OpenVINO GenAI's own 256).
"""
from __future__ import annotations

import numpy as np
import pytest

from utils.decoding.generation import DecodingSettings, run_prompt
from utils.decoding.pipelines import (
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    LoadedPipeline,
    SpeculationSetupError,
    load_pipeline,
    make_scheduler_config,
)
from utils.decoding.prompts import select_prompts

# --- settings ---------------------------------------------------------------------------------------------------


def test_numpy_integers_are_integers() -> None:
    settings = DecodingSettings("speculative", num_assistant_tokens=np.int64(3), max_new_tokens=np.int32(16))
    assert settings.num_assistant_tokens == 3 and type(settings.num_assistant_tokens) is int
    assert type(settings.max_new_tokens) is int and settings.label == "K=3"
    lookup = DecodingSettings("prompt_lookup", max_ngram_size=np.int64(2))
    assert type(lookup.max_ngram_size) is int and lookup.generation_config().max_ngram_size == 2


def test_a_threshold_given_as_a_string_is_refused_with_what_to_write() -> None:
    with pytest.raises(SpeculationSetupError) as error:
        DecodingSettings("speculative", assistant_confidence_threshold="0.4")
    assert "not the string '0.4'" in str(error.value) and "\n" not in str(error.value)
    assert DecodingSettings("speculative", assistant_confidence_threshold=np.float64(0.4)).label == "threshold=0.4"


@pytest.mark.parametrize("k", [0, np.int64(0), -1])
def test_k_below_one_is_refused(k) -> None:
    """OpenVINO GenAI 2026.4 ignores num_assistant_tokens=0 and drafts anyway: the settings refuse it."""
    with pytest.raises(SpeculationSetupError, match=r"num_assistant_tokens \(K\) must be an integer >= 1"):
        DecodingSettings("speculative", num_assistant_tokens=k)


@pytest.mark.parametrize("changes", [{"top_k": -1}, {"rng_seed": "42"}, {"num_beams": 2.0}, {"max_new_tokens": True}])
def test_other_integers_are_checked(changes: dict) -> None:
    with pytest.raises(SpeculationSetupError, match=next(iter(changes))):
        DecodingSettings(**changes)


# --- pipelines: device and threads, before loading ---------------------------------------------------------------




def test_a_device_this_machine_lacks_is_refused_with_the_list(offline_pair, no_model_loading) -> None:
    from utils.input_checks import available_devices

    missing = next(name for name in ("NPU", "GPU", "FPGA") if not any(d.startswith(name) for d in available_devices()))
    with pytest.raises(SpeculationSetupError, match=f"no {missing} device.*Use one of: .*CPU"):
        load_pipeline("plain", offline_pair.main, missing)
    with pytest.raises(SpeculationSetupError, match="draft_device"):
        load_pipeline("speculative", offline_pair.main, "CPU", draft_dir=offline_pair.draft, draft_device=missing)


@pytest.mark.parametrize("threads", [0, -2, 1.5, "2"])
def test_threads_below_one_are_refused(offline_pair, no_model_loading, threads) -> None:
    with pytest.raises(SpeculationSetupError, match="threads must be an integer >= 1"):
        load_pipeline("plain", offline_pair.main, threads=threads)


# --- real pipelines --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain_f32(offline_pair) -> LoadedPipeline:
    # lower-case device and a NumPy thread count: both accepted
    return load_pipeline("plain", offline_pair.main, "cpu", precision="f32", threads=np.int64(2))


class RefusesToGenerate:
    """A pipeline stand-in that tokenizes like the real one but fails if asked to generate."""

    def __init__(self, real) -> None:
        self.real = real

    def get_tokenizer(self):
        return self.real.get_tokenizer()

    def get_generation_config(self):
        return self.real.get_generation_config()

    def generate(self, *_args, **_kwargs):
        raise AssertionError("generation started before the bad prompt was reported")


def test_lower_case_device_is_canonical(plain_f32: LoadedPipeline) -> None:
    assert plain_f32.device == "CPU"


def test_bad_prompts_are_refused_before_generating(plain_f32: LoadedPipeline) -> None:
    from dataclasses import replace

    guarded = replace(plain_f32, pipeline=RefusesToGenerate(plain_f32.pipeline))
    settings = DecodingSettings("plain", max_new_tokens=64)
    with pytest.raises(SpeculationSetupError, match="unpaired surrogate character U\\+D83D"):
        run_prompt(guarded, "Why is the sky blue? \ud83d", settings)
    too_long = "The library opens at nine. " * 1500  # about 9,000 tokens: more than SmolLM2's 8,192
    with pytest.raises(SpeculationSetupError) as error:
        run_prompt(guarded, too_long, settings)
    assert "8192-token context" in str(error.value) and "Shorten the prompt" in str(error.value)
    with pytest.raises(SpeculationSetupError, match="leaves no room"):
        run_prompt(guarded, "Hi", DecodingSettings("plain", max_new_tokens=8192))


def test_a_prompt_that_fits_runs(plain_f32: LoadedPipeline) -> None:
    record = run_prompt(plain_f32, "Why is the sky blue?", DecodingSettings("plain", max_new_tokens=np.int64(8)))
    assert 0 < record.generated_tokens <= 8 and record.device == "CPU"


# --- under load: the scheduler's token budget ---------------------------------------------------------------------


def test_the_default_budget_is_the_safe_one() -> None:
    import openvino_genai

    genai_own = openvino_genai.SchedulerConfig().max_num_batched_tokens
    assert genai_own == 256  # GenAI's own, which broke exactness (notebook 05 and make_scheduler_config quote it)
    assert make_scheduler_config().max_num_batched_tokens == DEFAULT_MAX_NUM_BATCHED_TOKENS > genai_own
    assert make_scheduler_config(max_num_batched_tokens=256).max_num_batched_tokens == 256


def test_eight_concurrent_speculative_requests_equal_plain_decoding(offline_pair, plain_f32: LoadedPipeline) -> None:
    """The four short prompts twice (about 940 prompt tokens) at once, as notebook 05; f32, greedy, K=3."""
    speculative = load_pipeline("speculative", offline_pair.main, "CPU", draft_dir=offline_pair.draft, precision="f32")
    prompts = [prompt.text for prompt in select_prompts(length="short", per_task=1)]
    texts = [prompts[index % len(prompts)] for index in range(8)]
    plain_settings = DecodingSettings("plain", max_new_tokens=24)
    spec_settings = DecodingSettings("speculative", num_assistant_tokens=3, max_new_tokens=24)

    def generate(loaded: LoadedPipeline, batch: list[str], settings: DecodingSettings) -> list[str]:
        return list(loaded.pipeline.generate(batch, settings.generation_config(
            loaded.pipeline.get_generation_config())).texts)

    alone = {text: generate(plain_f32, [text], plain_settings)[0] for text in prompts}
    batch = generate(speculative, texts, spec_settings)
    assert len(batch) == 8
    differing = [index for index, (got, text) in enumerate(zip(batch, texts, strict=True)) if got != alone[text]]
    assert differing == [], f"requests {differing} differ from plain decoding of the same prompt alone"
