"""The playground's widgets driven as a learner would: set values, call the click handlers, read what they show.

The generation tests run the real offline pair (SmolLM2-135M, a few tokens).
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from utils.device_picker import available_devices, default_device, device_picker
from utils.pipelines import SpeculationSetupError, load_pipeline
from utils.formula_explorer import MeasuredPoint, build_formula_explorer, measured_points
from utils.playground import (LiveCounters, PipelineCache, PlaygroundChoice, TimedRun, build_playground, check_prompt,
                              replay_events)
from utils.speedup_model import break_even_acceptance, predicted_speedup
from utils.step_streamer import ACCEPTED_COLOUR, MAIN_COLOUR

MAX_NEW_TOKENS = 12


def visible_text(markup: str) -> str:
    """The text of an HTML fragment, tags removed and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def counter_value(markup: str, name: str) -> str:
    match = re.search(rf'class="specdec-{name}">([^<]*)<', markup)
    assert match, f"no counter {name} in {markup}"
    return match.group(1)


# --------------------------------------------------------------------------- no model needed


def test_counters_follow_the_steps() -> None:
    counters = LiveCounters(k=3)
    counters.add_step([5], 0.1)  # prefill: the main model's first token
    counters.add_step([1, 2, 3, 4], 0.2)  # all 3 drafts accepted + the main's own
    counters.add_step([7], 0.3)  # first draft rejected: only the main's token
    counters.add_step([8, 9], 0.4)  # the latest pass: left out until another follows (utils.decoding_metrics)
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
    first = TimedRun(record=None, steps=[[1], [2], [3]], step_times=[0.1, 0.2, 0.3])
    second = TimedRun(record=None, steps=[[9, 9], [8]], step_times=[0.15, 0.25])
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


def test_measured_points_keep_fixed_k_rows_with_a_speedup() -> None:
    rows = [{"setting": "K=2", "measured speed-up": 0.9, "a (from tok/pass)": 0.5, "c": 0.6},
            {"setting": "threshold=0.4", "measured speed-up": 0.8, "a (from tok/pass)": None, "c": 0.6},
            {"setting": "K=4", "measured speed-up": None, "a (from tok/pass)": 0.4, "c": 0.6}]
    assert measured_points(rows) == [MeasuredPoint(k=2, speedup=0.9, acceptance=0.5, cost_ratio=0.6)]


def test_formula_explorer_redraws_when_a_slider_moves() -> None:
    points = [MeasuredPoint(1, 0.9, 0.5, 0.6), MeasuredPoint(3, 0.8, 0.7, 0.5)]
    explorer = build_formula_explorer(points)
    assert explorer.acceptance.value == pytest.approx(0.6) and explorer.cost_ratio.value == pytest.approx(0.55)
    first_image, redraws = explorer.image.value, explorer.redraws
    assert first_image[:8] == b"\x89PNG\r\n\x1a\n"
    explorer.acceptance.value = 0.9
    explorer.cost_ratio.value = 0.1
    explorer.k.value = 5
    assert explorer.redraws == redraws + 3 and explorer.image.value != first_image
    assert explorer.last_curve == [(k, pytest.approx(predicted_speedup(0.9, k, 0.1))) for k in range(1, 11)]
    assert f"{predicted_speedup(0.9, 5, 0.1):.2f}x" in explorer.summary.value
    assert f"a ≥ {break_even_acceptance(5, 0.1):.2f}" in explorer.summary.value
    explorer.cost_ratio.value = 1.5  # a draft dearer than the main: never pays
    assert "never pays" in explorer.summary.value


def test_device_picker_defaults_to_a_device_that_exists() -> None:
    assert default_device("NPU-that-is-not-here", ["CPU", "GPU"]) == "CPU"
    assert default_device("GPU", ["CPU", "GPU"]) == "GPU"
    with pytest.raises(RuntimeError, match="no device"):
        default_device("CPU", [])
    picker = device_picker("no-such-device")
    assert picker.value == "CPU" and list(picker.options) == available_devices()


def test_empty_prompt_is_a_message_in_the_widget() -> None:
    playground = build_playground(device_picker())
    playground.controls["prompt"].value = "  "
    playground.on_generate_click()
    playground.wait()
    assert "prompt is empty" in playground.message.value and "Traceback" not in playground.message.value
    assert playground.last_record is None and playground.cache.loads == 0
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
    thread = playground.on_generate_click()
    assert thread is not None
    playground.wait()
    record, counters = playground.last_record, playground.last_counters
    assert playground.last_error is None, playground.last_error
    assert record.mode == "speculative" and record.setting == "K=2" and record.generated_tokens == MAX_NEW_TOKENS
    # one counters update per step, then the final one
    assert len(playground.counter_history) == counters.passes + 1 == len(record.tokens_per_step) + 1
    assert counters.tokens == record.generated_tokens and counters.finished
    assert counters.acceptance == record.acceptance_rate
    assert counter_value(playground.counters.value, "tokens") == str(record.generated_tokens)
    assert counter_value(playground.counter_history[0], "tokens") == str(record.tokens_per_step[0])
    assert 'data-state="finished"' in playground.counters.value
    assert visible_text(playground.text.value) == record.text
    assert playground.text.value.count(f"background:{MAIN_COLOUR}") >= 1
    if counters.accepted:
        assert f"background:{ACCEPTED_COLOUR}" in playground.text.value


def test_second_click_while_generating_is_refused_and_pipelines_are_reused(shared_cache: PipelineCache,
                                                                          loader: CountingLoader) -> None:
    playground = make_playground(shared_cache)
    playground.controls["max_new_tokens"].value = 20
    playground.on_generate_click()
    assert playground.controls["generate"].disabled
    assert playground.on_generate_click() is None and playground.on_race_click() is None
    assert playground.rejected_clicks == 2
    assert sum("Still generating" in message for message in playground.message_history) == 2
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
    assert playground.last_counters.passes_saved == 0 and playground.last_record.mode == "plain"


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
