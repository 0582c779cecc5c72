"""Tests for utils.display.playground_choice without widgets or a model: each setting checked at the edges of its
slider, the decoding settings a choice turns into, the folders it needs, counting a prompt's tokens before loading,
and the pipeline cache's key and warm-up.

(tests/test_playground.py drives the same code through the widgets; these tests call it directly.) Folders are
`fake_pair`'s placeholders registered as pair "fake"; tokenizers and loaders are stand-ins that record their calls.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from utils.decoding.generation import DecodingSettings
from utils.decoding.pipelines import SpeculationSetupError
from utils.display import playground_choice as choice_module
from utils.display.playground_choice import (
    MAX_NEW_TOKENS_RANGE,
    THRESHOLD_MAX,
    WARMUP_TOKENS,
    PipelineCache,
    PlaygroundChoice,
    PlaygroundPipeline,
    PromptTokens,
    check_integer_setting,
    check_prompt,
    check_threshold,
)
from utils.input_checks import InputError
from utils.models.model_catalogue import PAIRS, ModelPair
from utils.models.model_check import ModelFolderError


@pytest.fixture
def registered_pair(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> ModelPair:
    """The fake pair, known to the catalogue as "fake"."""
    monkeypatch.setitem(PAIRS, "fake", fake_pair)
    return fake_pair


# --------------------------------------------------------------------------- single settings


def test_an_integer_setting_accepts_its_sliders_edges_and_numpy_integers() -> None:
    assert check_integer_setting(2, "K", (2, 9), "K", "k=3") == 2
    assert check_integer_setting(np.int64(9), "K", (2, 9), "K", "k=3") == 9
    assert type(check_integer_setting(np.int64(9), "K", (2, 9), "K", "k=3")) is int


@pytest.mark.parametrize("value, message", [
    (1, "K must be from 2 to 9 (the K slider's range), got 1: choose e.g. k=3."),
    (10, "K must be from 2 to 9 (the K slider's range), got 10: choose e.g. k=3."),
    (True, "K must be an integer, got True. Choose a whole number from 2 to 9 (the K slider's range), e.g. k=3."),
    ("3", "K must be an integer, got the string '3'."),
])
def test_an_integer_setting_outside_its_slider_is_one_line_that_says_what_to_choose(value: Any, message: str) -> None:
    with pytest.raises(InputError) as raised:
        check_integer_setting(value, "K", (2, 9), "K", "k=3")
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


@pytest.mark.parametrize("value, expected", [(0, 0.0), (THRESHOLD_MAX, THRESHOLD_MAX), (np.float32(0.5), 0.5),
                                             (np.int64(0), 0.0)])
def test_a_threshold_from_zero_to_the_sliders_maximum_is_a_float(value: Any, expected: float) -> None:
    threshold = check_threshold(value)
    assert threshold == pytest.approx(expected) and isinstance(threshold, float)


@pytest.mark.parametrize("value", [True, None, b"0.4", float("nan"), -0.01, 1.0, [0.4]])
def test_a_threshold_that_is_not_a_number_in_range_is_refused(value: Any) -> None:
    with pytest.raises(InputError, match=f"threshold must be a number from 0 to {THRESHOLD_MAX}.*got"):
        check_threshold(value)


def test_a_prompt_is_stripped_and_must_be_encodable() -> None:
    assert check_prompt("  Why is the sky blue?\n") == "Why is the sky blue?"
    with pytest.raises(ValueError, match="prompt is empty"):
        check_prompt("")
    with pytest.raises(InputError, match="unpaired surrogate character U\\+D83D at position 3"):
        check_prompt("Hi \ud83d there")


# --------------------------------------------------------------------------- a whole choice


@pytest.mark.parametrize("setting, message", [
    ({"mode": "draft model"}, "Unknown mode 'draft model'"),  # a widget label is not a mode
    ({"k": 0}, "num_assistant_tokens \\(K\\) must be an integer >= 1"),
    ({"threshold": 1.5}, "assistant_confidence_threshold must lie strictly between 0 and 1"),
    ({"mode": "plain", "max_new_tokens": 0}, "max_new_tokens must be an integer >= 1")])
def test_a_bad_setting_in_code_is_refused_by_the_decoding_settings(setting: dict, message: str) -> None:
    with pytest.raises(SpeculationSetupError, match=message):
        PlaygroundChoice("hi", **setting).settings()


def test_a_choice_turns_into_the_settings_its_mode_needs() -> None:
    speculative = PlaygroundChoice("hi", mode="speculative", k=7, max_new_tokens=16).settings()
    assert (speculative.mode, speculative.label, speculative.max_new_tokens) == ("speculative", "K=7", 16)
    lookup = PlaygroundChoice("hi", mode="prompt_lookup", k=2).settings()
    assert (lookup.num_assistant_tokens, lookup.max_ngram_size, lookup.label) == (2, 3, "K=2, ngram=3")
    dynamic = PlaygroundChoice("hi", mode="speculative", k=7, threshold=0.3).settings()
    assert dynamic.label == "threshold=0.3"  # a threshold replaces K
    plain = PlaygroundChoice("hi", mode="plain", max_new_tokens=MAX_NEW_TOKENS_RANGE[1]).settings()
    assert plain == DecodingSettings("plain", max_new_tokens=MAX_NEW_TOKENS_RANGE[1])


def test_a_choice_needs_the_draft_folder_only_for_speculation(registered_pair: ModelPair) -> None:
    main, draft = registered_pair.main.path, registered_pair.draft.path
    assert PlaygroundChoice("hi", pair="fake", mode="speculative").folders() == (main, draft)
    assert PlaygroundChoice("hi", pair="fake", mode="prompt_lookup").folders() == (main, None)
    other = PlaygroundChoice("hi", pair="fake", draft_variant="int8").folders()
    assert other == (main, registered_pair.alternative_drafts["int8"].path)
    with pytest.raises(KeyError, match="no draft variant 'int2'"):
        PlaygroundChoice("hi", pair="fake", draft_variant="int2").folders()


def test_a_missing_draft_folder_is_named_only_when_the_mode_needs_it(registered_pair: ModelPair) -> None:
    for item in registered_pair.draft.path.iterdir():
        item.unlink()
    registered_pair.draft.path.rmdir()
    assert PlaygroundChoice("hi", pair="fake", mode="plain").folders()[1] is None
    with pytest.raises(ModelFolderError, match="The draft model folder .*fake-draft does not exist"):
        PlaygroundChoice("hi", pair="fake", mode="speculative").folders()


# --------------------------------------------------------------------------- counting a prompt's tokens


class WordTokenizer:
    """One token per word; with a chat template, the template's words count too."""

    def __init__(self, chat_template: str = "") -> None:
        self.chat_template = chat_template
        self.encoded: list[tuple[str, bool]] = []

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool) -> str:
        assert add_generation_prompt
        return f"user: {messages[0]['content']} assistant:"

    def encode(self, text: str, add_special_tokens: bool = True) -> SimpleNamespace:
        self.encoded.append((text, add_special_tokens))
        return SimpleNamespace(input_ids=SimpleNamespace(get_shape=lambda: [1, len(text.split())]))


def set_context(folder: Path, tokens: int | None) -> None:
    (folder / "config.json").write_text(json.dumps({} if tokens is None else {"max_position_embeddings": tokens}))


def test_prompt_tokens_count_the_chat_template_and_load_each_tokenizer_once(registered_pair: ModelPair) -> None:
    loaded: list[Path] = []
    tokenizer = WordTokenizer(chat_template="{{ messages }}")

    def load(folder: Path) -> WordTokenizer:
        loaded.append(folder)
        return tokenizer

    counter = PromptTokens(load)
    main = registered_pair.main.path
    assert counter.count(main, "why is the sky blue") == 5 + 2  # "user:" and "assistant:"
    assert counter.count(main, "why is the sky blue", apply_chat_template=False) == 5
    assert loaded == [main]
    assert tokenizer.encoded == [("user: why is the sky blue assistant:", False), ("why is the sky blue", True)]


def test_a_prompt_is_checked_against_the_main_models_context(registered_pair: ModelPair) -> None:
    main = registered_pair.main.path
    set_context(main, 10)
    counter = PromptTokens(lambda folder: WordTokenizer())
    fits = DecodingSettings("plain", max_new_tokens=4, apply_chat_template=False)
    counter.check_fits(main, "one two three four five six", fits)  # 6 + 4 = 10: fits exactly
    with pytest.raises(InputError, match="The prompt has 7 tokens and max_new_tokens is 4: 7 \\+ 4 exceeds the "
                                         "10-token context of fake-main. Shorten the prompt to at most 6 tokens"):
        counter.check_fits(main, "one two three four five six seven", fits)


def test_without_a_known_context_no_tokenizer_is_loaded(registered_pair: ModelPair) -> None:
    set_context(registered_pair.main.path, None)

    def refuse(folder: Path) -> Any:
        raise AssertionError("the tokenizer was loaded although there is no context length to check against")

    PromptTokens(refuse).check_fits(registered_pair.main.path, "word " * 100_000, DecodingSettings())


# --------------------------------------------------------------------------- the pipeline cache


def test_the_pipeline_key_names_its_models_device_and_precision() -> None:
    assert PlaygroundPipeline("speculative", Path("/m/main-fp16"), Path("/m/draft-int4"), "CPU", "f32").label == \
        "speculative (main-fp16 + draft draft-int4, CPU, f32)"
    assert PlaygroundPipeline("plain", Path("/m/main-fp16"), None, "GPU", "default").label == \
        "plain (main-fp16, GPU, default)"


def test_the_cache_loads_a_choice_with_its_folders_and_warms_it_up_once(registered_pair: ModelPair,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    warmups: list[tuple[Any, str, DecodingSettings]] = []
    monkeypatch.setattr(choice_module, "run_prompt",
                        lambda loaded, prompt, settings: warmups.append((loaded, prompt, settings)))
    calls: list[tuple] = []

    def loader(mode: str, main_dir: Path, device: str, **options: Any) -> Any:
        calls.append((mode, main_dir, device, options))
        return f"{mode} pipeline"

    cache = PipelineCache(loader)
    choice = PlaygroundChoice("hi", pair="fake", mode="speculative", device="CPU", precision="default")
    assert cache.for_choice(choice) == "speculative pipeline"
    assert cache.for_choice(choice) == "speculative pipeline"  # the same key: no second load
    assert cache.for_choice(choice, mode="plain") == "plain pipeline"  # the race's reference, without the draft
    main, draft = registered_pair.main.path, registered_pair.draft.path
    assert calls == [("speculative", main, "CPU", {"draft_dir": draft, "precision": "default"}),
                     ("plain", main, "CPU", {"draft_dir": None, "precision": "default"})]
    assert [(loaded, prompt, settings) for loaded, prompt, settings in warmups] == [
        ("speculative pipeline", "Hello", DecodingSettings("speculative", max_new_tokens=WARMUP_TOKENS)),
        ("plain pipeline", "Hello", DecodingSettings("plain", max_new_tokens=WARMUP_TOKENS))]
    assert cache.evictions == []

