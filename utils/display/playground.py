"""The speculative-decoding playground (notebook 07): turn K, watch the text stream coloured by verification step.

`build_playground(device_picker())` returns the widgets. Generation runs in a background thread; a click while
one runs is refused, and any failure is a one-line message, never a traceback.
"""
from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from utils.decoding import decoding_metrics
from utils.decoding.generation import DecodingSettings, GenerationRecord, run_prompt
from utils.decoding.pipelines import PRECISIONS, LoadedPipeline
from utils.decoding.step_streamer import ACCEPTED_COLOUR, MAIN_COLOUR, StepRecorder, StepSegmenter, segment_html
from utils.display.playground_choice import (
    DEFAULT_DRAFT_VARIANT,
    DEFAULT_PROMPT,
    K_RANGE,
    MAX_NEW_TOKENS_RANGE,
    MODE_LABELS,
    THRESHOLD_MAX,
    THRESHOLD_STEP,
    PipelineCache,
    PlaygroundChoice,
    PromptTokens,
    check_integer_setting,
    check_prompt,
    check_threshold,
)
from utils.input_checks import InputError
from utils.models.model_catalogue import PAIRS

TEXT_STYLE = "white-space:pre-wrap;font-family:monospace;line-height:1.6;min-height:3em"

# --------------------------------------------------------------------------- live counters


@dataclass
class LiveCounters:
    """Counters of one generation, updated at every step (a step = one main-model pass).

    Like every figure of the course, counts complete verification passes only (`decoding_metrics`).
    """

    k: int | None = None  # fixed K, for the acceptance estimate; None for plain or a threshold
    steps: list[int] = field(default_factory=list)  # tokens delivered by each main-model pass so far
    seconds: float = 0.0
    acceptance_reported: float | None = None  # OpenVINO GenAI's own figure, once generation is over
    finished: bool = False

    def add_step(self, step: Sequence[int], seconds: float) -> None:
        self.steps.append(len(step))
        self.seconds = seconds

    @property
    def tokens(self) -> int:
        return sum(self.steps)

    @property
    def passes(self) -> int:
        return decoding_metrics.main_passes(self.steps)

    @property
    def accepted(self) -> int:
        """Draft (or prompt) tokens kept in the complete verification passes so far."""
        return decoding_metrics.accepted_tokens(self.steps)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return decoding_metrics.tokens_per_main_pass(self.steps) or 1.0

    @property
    def passes_saved(self) -> int:
        """Main passes plain decoding would have needed (one per token) minus the passes made."""
        return self.tokens - self.passes

    @property
    def acceptance(self) -> float | None:
        """GenAI's acceptance when reported; else an estimate, accepted / (K per complete verification pass)."""
        if self.acceptance_reported is not None:
            return self.acceptance_reported
        verifying = decoding_metrics.verification_steps(self.steps)
        if not self.k or not verifying:
            return None
        return decoding_metrics.acceptance_rate(self.accepted, self.k * len(verifying))

    def as_html(self, label: str = "") -> str:
        acceptance = self.acceptance
        if acceptance is None:
            acceptance_text = "-"
        elif self.acceptance_reported is not None:
            acceptance_text = f"{acceptance:.2f}"
        else:
            acceptance_text = f"≈{acceptance:.2f}"
        state = "finished" if self.finished else "generating…"
        cells = [("tokens/s", "tokens-per-second", f"{self.tokens_per_second:.1f}"),
                 ("tokens per main pass", "tokens-per-main-pass", f"{self.tokens_per_pass:.2f}"),
                 ("acceptance", "acceptance", acceptance_text),
                 ("main passes saved", "main-passes-saved", f"{self.passes_saved}"),
                 ("tokens", "tokens", f"{self.tokens}"), ("main passes", "main-passes", f"{self.passes}")]
        body = "".join(f'<span style="margin-right:1.2em"><b>{name}</b> <span class="specdec-{slug}">{value}</span>'
                       "</span>" for name, slug, value in cells)
        return (f'<div class="specdec-counter-state" data-state="{state}">{html.escape(label)} · {state} · '
                f'{self.seconds:.2f} s</div><div>{body}</div>')


def legend_html() -> str:
    return (f'<span style="background:{ACCEPTED_COLOUR}">&nbsp;accepted draft token&nbsp;</span> '
            f'<span style="background:{MAIN_COLOUR}">&nbsp;main model\'s own token&nbsp;</span> '
            '(a thin line ends each main-model pass)')


class LiveText:
    """Coloured text that grows step by step inside an HTML widget."""

    def __init__(self, target: Any, decode: Callable[[list[int]], str]):
        self.target = target
        self.segmenter = StepSegmenter(decode)
        self.pieces: list[str] = []
        self.target.value = f'<div style="{TEXT_STYLE}"></div>'

    def add_step(self, step: Sequence[int]) -> None:
        self.pieces.extend(segment_html(*segment) for segment in self.segmenter.add_step(step))
        self.target.value = f'<div style="{TEXT_STYLE}">{"".join(self.pieces)}</div>'


# --------------------------------------------------------------------------- the race


@dataclass
class RaceRun:
    """A generation whose steps were stamped with their arrival time (seconds since generate started)."""

    record: GenerationRecord
    steps: list[list[int]]
    step_times: list[float]


def race_run(loaded: LoadedPipeline, prompt: str, settings: DecodingSettings) -> RaceRun:
    """Generate once, recording each step's arrival time; nothing is drawn meanwhile, so the timing stays clean."""
    step_times: list[float] = []
    started = [0.0]
    recorder = StepRecorder(on_step=lambda step: step_times.append(time.perf_counter() - started[0]))
    started[0] = time.perf_counter()
    record = run_prompt(loaded, prompt, settings, streamer=recorder)
    return RaceRun(record=record, steps=list(recorder.steps), step_times=step_times)


def replay_events(runs: Sequence[RaceRun]) -> list[tuple[float, int, list[int]]]:
    """(time, run index, step) for all runs, merged in time order, to replay them side by side."""
    events = [(moment, index, step) for index, run in enumerate(runs)
              for moment, step in zip(run.step_times, run.steps, strict=False)]
    return sorted(events, key=lambda event: (event[0], event[1]))


@dataclass
class RaceResult:
    plain: RaceRun
    speculative: RaceRun
    speedup: float | None  # plain wall time / speculative wall time; None when token counts differ
    identical: bool

    def as_html(self) -> str:
        plain, speculative = self.plain.record, self.speculative.record
        if self.speedup is None:
            ratio = (f"no speed-up: token counts differ ({plain.generated_tokens} plain, "
                     f"{speculative.generated_tokens} speculative)")
        else:
            ratio = f"<b>{self.speedup:.2f}x</b> (plain {plain.wall_seconds:.2f} s / {speculative.mode} " \
                    f"{speculative.setting} {speculative.wall_seconds:.2f} s, {plain.generated_tokens} tokens each)"
        same = "identical, token for token" if self.identical else (
            "DIFFERENT (expected under bf16 or sampling; under f32 only where the main's top two tokens nearly tie)")
        return (f'<div class="specdec-race-result">Measured ratio: {ratio}. Texts: {same}. '
                "One run each, one after the other, so no verdict: the next cell repeats the race interleaved."
                "</div>")


# --------------------------------------------------------------------------- the playground


@dataclass
class Playground:
    """Widgets, handlers and what the last generation recorded (see the module docstring)."""

    controls: dict[str, Any]
    device: Any  # the device picker (a Dropdown); its value is read at each click
    message: Any
    counters: Any
    text: Any
    race_plain: Any
    race_speculative: Any
    race_result: Any
    widget: Any  # the controls, the Generate button and the live view
    race_widget: Any  # the Race button and the two texts side by side (shares the controls above)
    cache: PipelineCache
    prompt_tokens: PromptTokens = field(default_factory=PromptTokens)  # the context check before any load
    replay_speed: float = 1.0  # 1 = replay the race at its measured pace
    last_record: GenerationRecord | None = None
    last_race: RaceResult | None = None
    last_error: str | None = None
    thread: threading.Thread | None = None
    _busy: threading.Lock = field(default_factory=threading.Lock)

    def choice(self) -> PlaygroundChoice:
        controls = self.controls
        return PlaygroundChoice(
            prompt=controls["prompt"].value, pair=controls["pair"].value, draft_variant=controls["draft"].value,
            mode=MODE_LABELS[controls["mode"].value], k=int(controls["k"].value),
            threshold=float(controls["threshold"].value), precision=controls["precision"].value,
            device=self.device.value, max_new_tokens=int(controls["max_new_tokens"].value))

    def on_generate_click(self, _button: Any = None) -> threading.Thread | None:
        """Start streaming a generation in a thread; refused (with a message) while one runs."""
        return self._start(self.generate)

    def on_race_click(self, _button: Any = None) -> threading.Thread | None:
        """Start the race in a thread; refused while busy."""
        return self._start(self.race)

    def wait(self, timeout: float | None = 600) -> None:
        """Wait for the running generation or race (for nbval and tests)."""
        if self.thread is not None:
            self.thread.join(timeout)
            if self.thread.is_alive():
                raise TimeoutError(f"The playground's generation is still running after {timeout} s.")

    def _start(self, work: Callable[[], Any]) -> threading.Thread | None:
        if not self._busy.acquire(blocking=False):
            self._show_message("Still generating: this click was ignored. Wait until the counters say finished.",
                               "#8a6d00")
            return None
        self._set_buttons_enabled(False)
        self.thread = threading.Thread(target=self._run_guarded, args=(work,), daemon=True)
        self.thread.start()
        return self.thread

    def _run_guarded(self, work: Callable[[], Any]) -> None:
        try:
            self.last_error = None
            self._show_message("", "")
            work()
        except Exception as error:  # every failure becomes a message in the page, never a traceback
            self.last_error = f"{type(error).__name__}: {error}".splitlines()[0]
            self._show_message(self.last_error, "#b00020")
        finally:
            self._set_buttons_enabled(True)
            self._busy.release()

    def _show_message(self, text: str, colour: str) -> None:
        self.message.value = (f'<div class="specdec-message" style="color:{colour}">{html.escape(text)}</div>'
                              if text else "")

    def _set_buttons_enabled(self, enabled: bool) -> None:
        for name in ("generate", "race"):
            self.controls[name].disabled = not enabled

    # ----- the work (synchronous; the handlers run it in a thread)

    def generate(self) -> GenerationRecord:
        """Generate with the current settings, streaming coloured steps and counters into the widgets."""
        choice = self.choice()
        prompt = check_prompt(choice.prompt)
        settings = choice.settings()
        self.prompt_tokens.check_fits(choice.folders()[0], prompt, settings)
        self._show_message(f"Loading {choice.mode} pipeline on {choice.device} (once per setting)…", "#555")
        freed = len(self.cache.evictions)
        loaded = self.cache.for_choice(choice)
        self._show_evictions(freed)
        label = f"{choice.mode} {settings.label} on {choice.device}, {choice.precision}"
        counters = LiveCounters(k=settings.num_assistant_tokens if choice.mode != "plain" else None)
        live = LiveText(self.text, lambda ids: loaded.tokenizer.decode(ids, skip_special_tokens=True))
        started = [time.perf_counter()]

        def on_step(step: list[int]) -> None:
            counters.add_step(step, time.perf_counter() - started[0])
            live.add_step(step)
            self.counters.value = counters.as_html(label)

        recorder = StepRecorder(on_step=on_step)
        started[0] = time.perf_counter()
        record = run_prompt(loaded, prompt, settings, streamer=recorder)
        counters.seconds = record.wall_seconds
        counters.acceptance_reported = record.acceptance_rate
        counters.finished = True
        self.counters.value = counters.as_html(label)
        self.last_record = record
        return record

    def race(self) -> RaceResult:
        """Plain, then the chosen mode, one after the other on the same prompt; then both replayed at their pace."""
        choice = self.choice()
        prompt = check_prompt(choice.prompt)
        if choice.mode == "plain":
            raise ValueError("The race compares plain decoding with speculation: choose the mode "
                             "'draft model' or 'prompt lookup', then click Race again.")
        settings = choice.settings()
        self.prompt_tokens.check_fits(choice.folders()[0], prompt, settings)
        plain_settings = DecodingSettings("plain", max_new_tokens=choice.max_new_tokens)
        self._show_message("Loading both pipelines (once per setting)…", "#555")
        freed = len(self.cache.evictions)
        plain_pipeline = self.cache.for_choice(choice, "plain")
        speculative_pipeline = self.cache.for_choice(choice)
        self._show_message("Running plain, then speculative (not at the same time: on 2 cores they would slow "
                           "each other)…", "#555")
        for target in (self.race_plain, self.race_speculative, self.race_result):
            target.value = ""
        runs = [race_run(plain_pipeline, prompt, plain_settings), race_run(speculative_pipeline, prompt, settings)]
        self._show_evictions(freed)
        decode = lambda ids: plain_pipeline.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
        views = [LiveText(self.race_plain, decode), LiveText(self.race_speculative, decode)]
        started = time.perf_counter()
        for moment, index, step in replay_events(runs):
            delay = moment / self.replay_speed - (time.perf_counter() - started)
            if delay > 0:
                time.sleep(delay)
            views[index].add_step(step)
        plain, speculative = runs
        same_count = plain.record.generated_tokens == speculative.record.generated_tokens
        result = RaceResult(
            plain=plain, speculative=speculative,
            speedup=plain.record.wall_seconds / speculative.record.wall_seconds if same_count else None,
            identical=plain.record.token_ids == speculative.record.token_ids)
        self.race_result.value = result.as_html()
        self.last_race = result
        return result

    def _show_evictions(self, since: int) -> None:
        """Show the pipelines the cache freed since eviction number `since` (or clear the message)."""
        self._show_message(" ".join(self.cache.evictions[since:]), "#555")


def _draft_options(pair_name: str) -> list[str]:
    return [DEFAULT_DRAFT_VARIANT, *sorted(PAIRS[pair_name].alternative_drafts)]


def build_playground(device: Any, *, prompt: str = DEFAULT_PROMPT, pair: str = "offline", mode: str = "draft model",
                     k: int = 3, threshold: float = 0.0, precision: str = "f32", max_new_tokens: int = 32,
                     cache: PipelineCache | None = None) -> Playground:
    """The playground's widgets wired to their handlers; `device` is a `device_picker()` Dropdown.

    Raises InputError before any widget is made for a setting outside its widget's range.
    """
    if mode not in MODE_LABELS:
        raise InputError(f"mode must be one of {', '.join(map(repr, MODE_LABELS))} (the Mode buttons), got {mode!r}: "
                         "choose one of them.")
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(map(repr, PRECISIONS))} (the Precision menu), "
                         f"got {precision!r}: choose one of them.")
    if pair not in PAIRS:
        raise InputError(f"pair {pair!r} is not a known model pair: choose one of {', '.join(map(repr, PAIRS))} "
                         "(utils.models.model_catalogue.PAIRS).")
    check_integer_setting(k, "K", K_RANGE, "K", "k=3")
    check_threshold(threshold)
    check_integer_setting(max_new_tokens, "max_new_tokens", MAX_NEW_TOKENS_RANGE, "New tokens", "max_new_tokens=32")
    import ipywidgets as widgets

    wide = widgets.Layout(width="95%")
    style = {"description_width": "9em"}
    controls = {
        "prompt": widgets.Textarea(value=prompt, description="Prompt:", layout=widgets.Layout(width="95%",
                                   height="4em"), style=style),
        "pair": widgets.Dropdown(options=list(PAIRS), value=pair, description="Pair:", style=style),
        "draft": widgets.Dropdown(options=_draft_options(pair), value=DEFAULT_DRAFT_VARIANT,
                                  description="Draft variant:", style=style),
        "mode": widgets.ToggleButtons(options=list(MODE_LABELS), value=mode, description="Mode:", style=style),
        "k": widgets.IntSlider(value=k, min=K_RANGE[0], max=K_RANGE[1], description="K (draft tokens):", style=style),
        "threshold": widgets.FloatSlider(value=threshold, min=0.0, max=THRESHOLD_MAX, step=THRESHOLD_STEP, style=style,
                                         description="Threshold:", readout_format=".2f"),
        "precision": widgets.Dropdown(options=list(PRECISIONS), value=precision, description="Precision:",
                                      style=style),
        "max_new_tokens": widgets.IntSlider(value=max_new_tokens, min=MAX_NEW_TOKENS_RANGE[0],
                                            max=MAX_NEW_TOKENS_RANGE[1], description="New tokens:", style=style),
        "generate": widgets.Button(description="Generate", button_style="primary", icon="play"),
        "race": widgets.Button(description="Race plain vs speculative", icon="flag-checkered",
                               layout=widgets.Layout(width="16em")),
    }
    for name, control in controls.items():
        control.add_class(f"specdec-{name.replace('_', '-')}")
    device.add_class("specdec-device")
    threshold_note = widgets.HTML("threshold 0 = fixed K; above 0 the draft stops when less sure than that "
                                  "(draft model only, K is then ignored)")

    def update_variants(change: dict) -> None:
        controls["draft"].options = _draft_options(change["new"])
        controls["draft"].value = DEFAULT_DRAFT_VARIANT

    controls["pair"].observe(update_variants, names="value")
    html_box = lambda name: widgets.HTML(layout=wide).add_class(name)  # noqa: E731
    message, counters, text = html_box("specdec-message-box"), html_box("specdec-counters"), html_box("specdec-text")
    race_plain, race_speculative = html_box("specdec-race-plain"), html_box("specdec-race-speculative")
    race_result = html_box("specdec-race-result-box")
    column = widgets.Layout(width="50%")
    race_view = widgets.HBox([
        widgets.VBox([widgets.HTML("<b>plain</b>"), race_plain], layout=column),
        widgets.VBox([widgets.HTML("<b>speculative</b> (the chosen mode)"), race_speculative], layout=column)])
    widget = widgets.VBox([
        controls["prompt"],
        widgets.HBox([controls["pair"], controls["draft"], device]),
        controls["mode"],
        widgets.HBox([controls["k"], controls["threshold"]]), threshold_note,
        widgets.HBox([controls["precision"], controls["max_new_tokens"]]),
        controls["generate"], message, widgets.HTML(legend_html()), counters, text,
    ]).add_class("specdec-playground")
    race_widget = widgets.VBox([
        widgets.HTML("The race uses the settings above (prompt, pair, mode, K, precision, device)."),
        controls["race"], message, race_view, race_result]).add_class("specdec-race")
    playground = Playground(controls=controls, device=device, message=message, counters=counters, text=text,
                            race_plain=race_plain, race_speculative=race_speculative, race_result=race_result,
                            widget=widget, race_widget=race_widget, cache=cache or PipelineCache())
    controls["generate"].on_click(playground.on_generate_click)
    controls["race"].on_click(playground.on_race_click)
    return playground
