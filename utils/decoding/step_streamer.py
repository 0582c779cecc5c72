"""See speculation happen: record generated tokens step by step (`StepRecorder`) and colour text by step.

GenAI hands its streamer one verification step's tokens at once: accepted draft tokens, then the main model's own.
Caveat: a last step cut short by `max_new_tokens` or EOS shows its last token as the main model's, though it may have
been an accepted draft token.
"""
from __future__ import annotations

import html
import numbers
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

ACCEPTED_COLOUR = "#b7e4c7"  # green: proposed by the draft (or copied from the prompt) and accepted
MAIN_COLOUR = "#ffd6a5"  # orange: produced by the main model itself


class StepRecorder:
    """Collects the tokens of every generation step; with echo (needs `tokenizer`) prints the text as it arrives."""

    def __init__(self, tokenizer: Any = None, echo: bool = False, write: Callable[[str], Any] | None = None,
                 on_step: Callable[[list[int]], Any] | None = None):
        if echo and tokenizer is None:
            raise ValueError("StepRecorder(echo=True) needs the tokenizer to decode text.")
        self.tokenizer = tokenizer
        self.echo = echo
        self.on_step = on_step
        self.write = write or (lambda text: (sys.stdout.write(text), sys.stdout.flush()))
        self.steps: list[list[int]] = []
        self._printed = ""
        self.finished = False

    def add(self, tokens: int | Sequence[int]) -> None:
        """Record one step's tokens (an int or a sequence, as GenAI passes them)."""
        if isinstance(tokens, numbers.Integral):  # an int, NumPy's too
            step = [int(tokens)]
        else:
            step = [int(token) for token in cast(Sequence[int], tokens)]
        if not step:
            return
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)
        if self.echo:
            text = self.text
            # Hold back an incomplete multi-byte character until its last byte arrives.
            if text.startswith(self._printed) and not text.endswith("\ufffd"):
                self.write(text[len(self._printed):])
                self._printed = text

    def end(self) -> None:
        """Called by GenAI when generation ends; prints what was held back."""
        if self.echo and not self.finished:
            text = self.text
            if text.startswith(self._printed):
                self.write(text[len(self._printed):])
            self.write("\n")
        self.finished = True

    @property
    def token_ids(self) -> list[int]:
        return [token for step in self.steps for token in step]

    @property
    def text(self) -> str:
        if self.tokenizer is None:
            raise ValueError("StepRecorder has no tokenizer to decode with.")
        return self.tokenizer.decode(self.token_ids, skip_special_tokens=True)

    def as_genai_streamer(self) -> Any:
        """An `openvino_genai.StreamerBase` that feeds this recorder."""
        import openvino_genai

        recorder = self

        class _StepStreamer(openvino_genai.StreamerBase):
            def write(self, token):  # noqa: D401 - GenAI's callback name
                recorder.add(token)
                return openvino_genai.StreamingStatus.RUNNING

            def end(self):
                recorder.end()

        return _StepStreamer()


class StepSegmenter:
    """Turns steps into coloured text pieces one step at a time; cumulative decoding keeps split characters whole."""

    def __init__(self, decode: Callable[[list[int]], str]):
        self.decode = decode
        self.step_count = 0
        self._so_far: list[int] = []
        self._previous_text = ""

    def add_step(self, step: Sequence[int]) -> list[tuple[str, str, int]]:
        """(text, origin, step number) pieces of one more step; see `step_segments`."""
        self.step_count += 1
        segments: list[tuple[str, str, int]] = []
        for position, token in enumerate(step):
            self._so_far.append(int(token))
            text = self.decode(self._so_far)
            if text.endswith("\ufffd"):
                continue  # wait for the rest of a multi-byte character
            origin = "main" if position == len(step) - 1 else "accepted"
            piece = text[len(self._previous_text):] if text.startswith(self._previous_text) else text
            if piece:
                segments.append((piece, origin, self.step_count))
            self._previous_text = text
        return segments


def step_segments(decode: Callable[[list[int]], str], steps: Sequence[Sequence[int]]) -> list[tuple[str, str, int]]:
    """(text, origin, step number from 1) pieces; origin is "main" for each step's last token, else "accepted"."""
    segmenter = StepSegmenter(decode)
    return [segment for step in steps for segment in segmenter.add_step(step)]


def segment_html(text: str, origin: str, step_number: int) -> str:
    """One coloured piece: green for an accepted draft token, orange (and a step-ending line) for the main's own."""
    colour = ACCEPTED_COLOUR if origin == "accepted" else MAIN_COLOUR
    border = "border-right:1px solid #555;" if origin == "main" else ""
    return f'<span title="step {step_number}" style="background:{colour};{border}">{html.escape(text)}</span>'


def steps_to_html(tokenizer: Any, steps: Sequence[Sequence[int]], title: str = "") -> str:
    """HTML of the text, accepted draft tokens in green, the main model's own in orange (hover: step number)."""
    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    pieces = [segment_html(*segment) for segment in step_segments(decode, steps)]
    accepted = sum(len(step) - 1 for step in steps)
    total = sum(len(step) for step in steps)
    legend = (
        f'<div style="font-size:90%;margin-bottom:4px">{html.escape(title)} '
        f'<span style="background:{ACCEPTED_COLOUR}">&nbsp;accepted draft token&nbsp;</span> '
        f'<span style="background:{MAIN_COLOUR}">&nbsp;main model\'s own token&nbsp;</span> '
        f'{total} tokens in {len(steps)} main-model passes, {accepted} accepted from the draft</div>')
    body = "".join(pieces)
    return f'{legend}<div style="white-space:pre-wrap;font-family:monospace;line-height:1.6">{body}</div>'
