"""The playground's widgets driven as a learner would: set values, call the click handlers, read what they show.

Bad settings, a prompt too long for the context and the bounded cache are tested with fake folders and a
loader that counts (no model); the generation tests run the real offline pair (SmolLM2-135M, a few tokens).
"""
from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from utils.decoding import decoding_metrics
from utils.decoding.pipelines import PRECISIONS, SpeculationSetupError, load_pipeline
from utils.decoding.step_streamer import ACCEPTED_COLOUR, MAIN_COLOUR
from utils.display import playground_choice as choice_module
from utils.display.device_picker import available_devices, default_device, device_picker
from utils.display.playground import LiveCounters, RaceRun, build_playground, replay_events
from utils.display.playground_choice import (
    K_RANGE,
    MAX_NEW_TOKENS_RANGE,
    THRESHOLD_MAX,
    PipelineCache,
    PlaygroundChoice,
    PlaygroundPipeline,
    PromptTokens,
    check_prompt,
    load_playground_tokenizer,
)
from utils.input_checks import InputError, context_length
from utils.models.model_catalogue import PAIRS, ModelPair

MAX_NEW_TOKENS = 12


def visible_text(markup: str) -> str:
    """The text of an HTML fragment, tags removed and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def counter_value(markup: str, name: str) -> str:
    match = re.search(rf'class="specdec-{name}">([^<]*)<', markup)
    assert match, f"no counter {name} in {markup}"
    return match.group(1)


def values_shown(widget) -> list[str]:
    """Every value the widget takes from now on (a widget tells its observers of each change)."""
    shown: list[str] = []
    widget.observe(lambda change: shown.append(change["new"]), names="value")
    return shown


# --------------------------------------------------------------------------- no model needed


def test_counters_follow_the_steps() -> None:
    counters = LiveCounters(k=3)
    counters.add_step([5], 0.1)  # prefill: the main model's first token
    counters.add_step([1, 2, 3, 4], 0.2)  # all 3 drafts accepted + the main's own
    counters.add_step([7], 0.3)  # first draft rejected: only the main's token
    counters.add_step([8, 9], 0.4)  # the latest pass: left out until another follows (utils.decoding.decoding_metrics)
    assert (counters.tokens, counters.passes, counters.accepted, counters.passes_saved) == (8, 4, 3, 4)
    assert counters.tokens_per_second == pytest.approx(8 / 0.4)
    assert counters.tokens_per_pass == pytest.approx((4 + 1) / 2)  # complete verification passes: [4], [1]
    assert counters.acceptance == pytest.approx(3 / (3 * 2))
    counters.acceptance_reported = 0.25
    assert counters.acceptance == 0.25
    shown = counters.as_html("speculative K=3")
    assert counter_value(shown, "main-passes-saved") == "4" and counter_value(shown, "tokens-per-main-pass") == "2.50"
    assert counter_value(shown, "tokens-per-second") == f"{8 / 0.4:.1f}" and counter_value(shown, "acceptance") == "0.25"
    assert 'data-state="generating…"' in shown


def test_plain_counters_have_no_acceptance() -> None:
    counters = LiveCounters(k=None)
    counters.add_step([1], 0.1)
    counters.add_step([2], 0.2)
    assert counters.acceptance is None and counters.passes_saved == 0
    assert counter_value(counters.as_html(), "acceptance") == "-"


def test_replay_merges_two_runs_in_time_order() -> None:
    first = RaceRun(record=None, steps=[[1], [2], [3]], step_times=[0.1, 0.2, 0.3])
    second = RaceRun(record=None, steps=[[9, 9], [8]], step_times=[0.15, 0.25])
    events = replay_events([first, second])
    assert [(moment, index) for moment, index, _ in events] == [(0.1, 0), (0.15, 1), (0.2, 0), (0.25, 1), (0.3, 0)]
    assert events[1][2] == [9, 9]


def test_choice_settings_and_impossible_combinations() -> None:
    assert PlaygroundChoice("hi", mode="speculative", k=5).settings().num_assistant_tokens == 5
    dynamic = PlaygroundChoice("hi", mode="speculative", threshold=0.4).settings()
    assert dynamic.assistant_confidence_threshold == 0.4 and dynamic.num_assistant_tokens is None
    assert PlaygroundChoice("hi", mode="plain", k=5, threshold=0.4).settings().num_assistant_tokens is None
    with pytest.raises(SpeculationSetupError, match="Prompt lookup has no draft probabilities"):
        PlaygroundChoice("hi", mode="prompt_lookup", threshold=0.4).settings()
    with pytest.raises(ValueError, match="prompt is empty"):
        check_prompt("   \n")


def test_device_picker_defaults_to_a_device_that_exists() -> None:
    assert default_device("NPU-that-is-not-here", ["CPU", "GPU"]) == "CPU"
    assert default_device("GPU", ["CPU", "GPU"]) == "GPU"
    with pytest.raises(RuntimeError, match="no device"):
        default_device("CPU", [])
    picker = device_picker("no-such-device")
    assert picker.value == "CPU" and list(picker.options) == available_devices()


def test_empty_prompt_is_a_message_in_the_widget() -> None:
    loader = FailingLoader()
    playground = build_playground(device_picker(), cache=PipelineCache(loader))
    playground.controls["prompt"].value = "  "
    playground.on_generate_click()
    playground.wait()
    assert "prompt is empty" in playground.message.value and "Traceback" not in playground.message.value
    assert playground.last_record is None and loader.calls == []
    assert not playground.controls["generate"].disabled  # usable again


def test_a_pair_not_prepared_is_a_message(tmp_models_dir: Path) -> None:
    playground = build_playground(device_picker())
    playground.on_generate_click()
    playground.wait()
    assert "ModelFolderError" in playground.last_error
    assert str(tmp_models_dir) in visible_text(playground.message.value)


def test_impossible_settings_are_a_message() -> None:
    playground = build_playground(device_picker())
    playground.controls["mode"].value = "prompt lookup"
    playground.controls["threshold"].value = 0.5
    playground.on_generate_click()
    playground.wait()
    assert "Prompt lookup has no draft probabilities" in playground.message.value
    playground.controls["mode"].value = "plain"
    playground.on_race_click()
    playground.wait()
    assert "The race compares plain decoding with speculation" in playground.message.value


# --------------------------------------------------------------------------- settings out of range, never clamped

# (keyword of build_playground, bad value, what the message must say)
OUT_OF_RANGE = [
    ("k", K_RANGE[0] - 1, f"K must be from {K_RANGE[0]} to {K_RANGE[1]}"),
    ("k", K_RANGE[1] + 90, f"K must be from {K_RANGE[0]} to {K_RANGE[1]}"),
    ("k", 2.5, f"K must be an integer, got 2.5. Choose a whole number from {K_RANGE[0]} to {K_RANGE[1]}"),
    ("threshold", THRESHOLD_MAX + 0.55, f"threshold must be a number from 0 to {THRESHOLD_MAX}"),
    ("threshold", -0.2, f"threshold must be a number from 0 to {THRESHOLD_MAX}"),
    ("threshold", "0.4", f"threshold must be a number from 0 to {THRESHOLD_MAX}"),
    ("max_new_tokens", 0, f"max_new_tokens must be from {MAX_NEW_TOKENS_RANGE[0]} to {MAX_NEW_TOKENS_RANGE[1]}"),
    ("max_new_tokens", MAX_NEW_TOKENS_RANGE[1] + 1, f"max_new_tokens must be from {MAX_NEW_TOKENS_RANGE[0]} to"),
    ("pair", "no-such-pair", "pair 'no-such-pair' is not a known model pair: choose one of 'offline'"),
]


class FailingLoader:
    """A pipeline loader that records each call and fails: a test that reaches it has loaded too early."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, mode, main_dir, device, **options):
        self.calls.append((mode, Path(main_dir), device))
        raise RuntimeError(f"the test loader was asked for a {mode} pipeline")


@pytest.mark.parametrize(("name", "value", "message"), OUT_OF_RANGE)
def test_build_playground_refuses_out_of_range_settings_before_any_widget(
        name: str, value, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # making a widget would now raise ImportError
    loader = FailingLoader()
    with pytest.raises(InputError, match=re.escape(message)) as raised:
        build_playground(object(), cache=PipelineCache(loader), **{name: value})
    assert "\n" not in str(raised.value) and ("choose" in str(raised.value).lower())
    assert loader.calls == []


@pytest.mark.parametrize(("name", "value", "message"), [
    ("mode", "speculative", "mode must be one of 'plain', 'draft model', 'prompt lookup' (the Mode buttons)"),
    ("precision", "fp64", f"precision must be one of {', '.join(map(repr, PRECISIONS))}")])
def test_build_playground_refuses_unknown_options(name: str, value: str, message: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(InputError, match=re.escape(message)):
        build_playground(object(), **{name: value})


def test_the_sliders_are_built_from_the_checked_ranges() -> None:
    playground = build_playground(device_picker(), k=K_RANGE[1], threshold=THRESHOLD_MAX,
                                  max_new_tokens=MAX_NEW_TOKENS_RANGE[0])
    controls = playground.controls
    assert (controls["k"].min, controls["k"].max) == K_RANGE
    assert (controls["threshold"].min, controls["threshold"].max) == (0.0, THRESHOLD_MAX)
    assert (controls["max_new_tokens"].min, controls["max_new_tokens"].max) == MAX_NEW_TOKENS_RANGE
    assert tuple(controls["precision"].options) == PRECISIONS
    choice = playground.choice()  # the edges of the ranges are accepted as given
    assert (choice.k, choice.threshold, choice.max_new_tokens) == (K_RANGE[1], THRESHOLD_MAX, MAX_NEW_TOKENS_RANGE[0])
    assert choice.settings().assistant_confidence_threshold == THRESHOLD_MAX


def test_an_out_of_range_choice_is_a_message_and_loads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    loader = FailingLoader()
    playground = build_playground(device_picker(), cache=PipelineCache(loader))
    bad = PlaygroundChoice(playground.choice().prompt, k=0)
    monkeypatch.setattr(playground, "choice", lambda: bad)
    for click in (playground.on_generate_click, playground.on_race_click):
        click()
        playground.wait()
        assert playground.last_error.startswith("SpeculationSetupError: num_assistant_tokens (K) must be an integer")
        assert "num_assistant_tokens (K) must be" in visible_text(playground.message.value)
    assert loader.calls == []


# --------------------------------------------------------------------------- a prompt too long, before any load


class FakeTokenizer:
    """One token per word; no chat template."""

    chat_template = ""

    def encode(self, text: str) -> SimpleNamespace:
        return SimpleNamespace(input_ids=SimpleNamespace(get_shape=lambda: [1, len(text.split())]))


@pytest.fixture
def short_context_pair(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> ModelPair:
    """The fake pair as pair "fake", its main model with a 64-token context."""
    (fake_pair.main.path / "config.json").write_text(json.dumps({"max_position_embeddings": 64}))
    monkeypatch.setitem(PAIRS, "fake", fake_pair)
    return fake_pair


@pytest.mark.parametrize("click", ["on_generate_click", "on_race_click"])
def test_a_prompt_too_long_is_refused_before_any_pipeline_loads(short_context_pair: ModelPair, click: str) -> None:
    loader, tokenizers = FailingLoader(), []
    playground = build_playground(device_picker(), pair="fake", max_new_tokens=MAX_NEW_TOKENS_RANGE[0],
                                  cache=PipelineCache(loader))
    playground.prompt_tokens = PromptTokens(lambda folder: tokenizers.append(folder) or FakeTokenizer())
    words = 64 - MAX_NEW_TOKENS_RANGE[0]
    playground.controls["prompt"].value = "word " * (words + 1)
    getattr(playground, click)()
    playground.wait()
    assert playground.last_error.startswith(f"InputError: The prompt has {words + 1} tokens")
    assert "exceeds the 64-token context of fake-main" in visible_text(playground.message.value)
    assert loader.calls == [] and tokenizers == [short_context_pair.main.path]
    playground.controls["prompt"].value = "word " * words  # fits exactly: the click goes on to load a pipeline
    getattr(playground, click)()
    playground.wait()
    assert "the test loader was asked for" in playground.last_error and len(loader.calls) == 1
    assert len(tokenizers) == 1  # the tokenizer is loaded once per main folder


def test_a_50000_character_prompt_is_refused_by_the_tokenizer_alone(offline_pair) -> None:
    """Refused in seconds: counted with the tokenizer (loaded once), never by loading a pipeline."""
    tokenizer = load_playground_tokenizer(offline_pair.main)
    tokenizers: list[Path] = []
    loader = FailingLoader()
    playground = build_playground(device_picker(), cache=PipelineCache(loader))
    playground.prompt_tokens = PromptTokens(lambda folder: tokenizers.append(folder) or tokenizer)
    prompt = ("The sky is blue because air scatters short wavelengths more than long ones. " * 700)[:50_000]
    playground.controls["prompt"].value = prompt
    playground.on_generate_click()
    playground.wait()
    context = context_length(offline_pair.main)
    tokens = PromptTokens(lambda folder: tokenizer).count(offline_pair.main, prompt)
    assert tokens + playground.choice().max_new_tokens > context
    assert f"The prompt has {tokens} tokens" in visible_text(playground.message.value)
    assert f"exceeds the {context}-token context" in playground.last_error
    assert loader.calls == [] and tokenizers == [offline_pair.main]


# --------------------------------------------------------------------------- the bounded cache


def test_the_cache_warms_up_each_pipeline_once_and_names_what_it_frees(fake_pair: ModelPair,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    warmups, loads = [], []
    monkeypatch.setattr(choice_module, "run_prompt", lambda loaded, prompt, settings: warmups.append(loaded))
    cache = PipelineCache(lambda mode, main_dir, device, **options: loads.append(mode) or f"{mode} pipeline", keep=2)
    main, draft = fake_pair.main.path, fake_pair.draft.path
    plain, speculative, lookup = (PlaygroundPipeline(mode, main, draft_dir, "CPU", "f32") for mode, draft_dir in
                                  (("plain", None), ("speculative", draft), ("prompt_lookup", None)))
    assert cache.get(plain) == "plain pipeline" and cache.get(speculative) == "speculative pipeline"
    assert cache.get(plain) == "plain pipeline" and cache.evictions == []
    assert cache.get(lookup) == "prompt_lookup pipeline"
    assert cache.evictions == [
        "Freed the speculative (fake-main + draft fake-draft, CPU, f32) pipeline to make room for the prompt_lookup "
        "(fake-main, CPU, f32) pipeline (at most 2 kept in memory)."]
    assert len(loads) == 3 and warmups == [f"{m} pipeline" for m in loads]
    cache.get(speculative)  # loaded again (and warmed up again) after its eviction
    assert loads[-1] == "speculative" and len(warmups) == 4 and "prompt_lookup (fake-main" in cache.evictions[-1]


# --------------------------------------------------------------------------- the real offline pair


class CountingLoader:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, mode, main_dir, device, **options):
        self.calls.append((mode, device, options.get("precision")))
        return load_pipeline(mode, main_dir, device, **options)


@pytest.fixture(scope="module")
def loader() -> CountingLoader:
    return CountingLoader()


@pytest.fixture(scope="module")
def shared_cache(offline_pair, loader: CountingLoader) -> PipelineCache:
    return PipelineCache(loader)


def make_playground(cache: PipelineCache):
    playground = build_playground(device_picker(), max_new_tokens=MAX_NEW_TOKENS, cache=cache)
    playground.replay_speed = 50.0  # replay the race quickly; its timing was measured before
    return playground


def test_generate_streams_coloured_steps_and_counters(shared_cache: PipelineCache) -> None:
    playground = make_playground(shared_cache)
    playground.controls["k"].value = 2
    assert playground.choice().device == playground.device.value == "CPU"
    counter_history = values_shown(playground.counters)
    thread = playground.on_generate_click()
    assert thread is not None
    playground.wait()
    record, counters = playground.last_record, playground.counters.value
    assert playground.last_error is None, playground.last_error
    assert record.mode == "speculative" and record.setting == "K=2" and record.generated_tokens == MAX_NEW_TOKENS
    # one counters update per step, then the final one
    assert len(counter_history) == len(record.tokens_per_step) + 1 and counter_history[-1] == counters
    assert counter_value(counters, "main-passes") == str(len(record.tokens_per_step))
    assert counter_value(counters, "tokens") == str(record.generated_tokens)
    assert counter_value(counters, "acceptance") == f"{record.acceptance_rate:.2f}"
    assert counter_value(counter_history[0], "tokens") == str(record.tokens_per_step[0])
    assert 'data-state="finished"' in counters
    assert visible_text(playground.text.value) == record.text
    assert playground.text.value.count(f"background:{MAIN_COLOUR}") >= 1
    if decoding_metrics.accepted_tokens(record.tokens_per_step):
        assert f"background:{ACCEPTED_COLOUR}" in playground.text.value


def test_second_click_while_generating_is_refused_and_pipelines_are_reused(shared_cache: PipelineCache,
                                                                          loader: CountingLoader) -> None:
    playground = make_playground(shared_cache)
    playground.controls["max_new_tokens"].value = 20
    messages = values_shown(playground.message)
    playground.on_generate_click()
    assert playground.controls["generate"].disabled
    assert playground.on_generate_click() is None and playground.on_race_click() is None  # both refused
    assert any("Still generating" in message for message in messages)
    playground.wait()
    assert playground.last_record.generated_tokens <= 20 and playground.last_error is None
    loads = len(loader.calls)
    playground.controls["k"].value = 4  # a generation setting, not a pipeline setting: no new load
    playground.on_generate_click()
    playground.wait()
    assert len(loader.calls) == loads and playground.last_record.setting == "K=4"
    playground.controls["mode"].value = "plain"
    playground.on_generate_click()
    playground.wait()
    assert ("plain", "CPU", "f32") in loader.calls and len(set(loader.calls)) == len(loader.calls)  # each once
    assert counter_value(playground.counters.value, "main-passes-saved") == "0"
    assert playground.last_record.mode == "plain"


def test_race_replays_both_texts_and_reports_the_ratio(shared_cache: PipelineCache) -> None:
    playground = make_playground(shared_cache)
    playground.on_race_click()
    playground.wait()
    assert playground.last_error is None, playground.last_error
    race = playground.last_race
    assert race.plain.record.mode == "plain" and race.speculative.record.mode == "speculative"
    assert visible_text(playground.race_plain.value) == race.plain.record.text
    assert visible_text(playground.race_speculative.value) == race.speculative.record.text
    assert race.identical, "under f32 the speculative text must equal the plain text"
    assert race.speedup == pytest.approx(race.plain.record.wall_seconds / race.speculative.record.wall_seconds)
    assert f"{race.speedup:.2f}x" in playground.race_result.value and "identical" in playground.race_result.value
    assert len(race.speculative.step_times) == len(race.speculative.steps)
    assert race.speculative.step_times == sorted(race.speculative.step_times)


def test_the_playground_shows_which_pipeline_it_freed(offline_pair) -> None:
    playground = build_playground(device_picker(), mode="prompt lookup", max_new_tokens=MAX_NEW_TOKENS,
                                  cache=PipelineCache(CountingLoader(), keep=1))
    messages = values_shown(playground.message)
    playground.on_generate_click()
    playground.wait()
    assert playground.last_error is None, playground.last_error
    playground.controls["mode"].value = "plain"
    playground.on_generate_click()
    playground.wait()
    assert playground.last_error is None, playground.last_error
    freed = [visible_text(message) for message in messages if "Freed the" in message]
    assert freed == [f"Freed the prompt_lookup ({offline_pair.main.name}, CPU, f32) pipeline to make room for the "
                     f"plain ({offline_pair.main.name}, CPU, f32) pipeline (at most 1 kept in memory)."]
    assert freed[0] == visible_text(playground.message.value)
