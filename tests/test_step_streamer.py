"""Tests for utils.decoding.step_streamer without a model: the recorder as GenAI's streamer, echoing text whose
characters span several tokens, the coloured pieces step by step, and the HTML legend's counts.

The tokenizers are stand-ins: one token per character, or one token per UTF-8 byte (so "é" takes two tokens and
the text in between ends with U+FFFD, as a real tokenizer's decode does).
"""
from __future__ import annotations

import html
import re
from collections.abc import Sequence

import openvino_genai
import pytest

from utils.decoding.step_streamer import (
    ACCEPTED_COLOUR,
    MAIN_COLOUR,
    StepRecorder,
    StepSegmenter,
    segment_html,
    step_segments,
    steps_to_html,
)


class ByteTokenizer:
    """Token id = one UTF-8 byte; an incomplete character decodes to U+FFFD, as a byte-level BPE tokenizer's does."""

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


def tokens(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def byte_decode(ids: Sequence[int]) -> str:
    return ByteTokenizer().decode(ids)


# --------------------------------------------------------------------------- StepRecorder


def test_echo_holds_back_a_character_until_its_last_byte_arrives() -> None:
    written: list[str] = []
    recorder = StepRecorder(ByteTokenizer(), echo=True, write=written.append)
    first, second = tokens("é")
    recorder.add(tokens("x"))
    recorder.add([*tokens("ab"), first])
    assert written == ["x"]  # the step ends inside "é": its text waits (no "\ufffd" is printed)
    recorder.add([second, *tokens("c")])
    assert written == ["x", "abéc"]
    recorder.end()
    assert "".join(written) == "xabéc\n" and recorder.text == "xabéc"


def test_end_writes_what_was_held_back_and_the_newline_once() -> None:
    written: list[str] = []
    recorder = StepRecorder(ByteTokenizer(), echo=True, write=written.append)
    recorder.add(tokens("hi") + tokens("é")[:1])  # generation stopped inside a character
    recorder.end()
    recorder.end()
    assert written == ["hi\ufffd", "\n"] and recorder.finished


def test_without_echo_nothing_is_written_but_every_step_is_reported() -> None:
    written: list[str] = []
    seen: list[list[int]] = []
    recorder = StepRecorder(write=written.append, on_step=seen.append)
    recorder.add(7)
    recorder.add((8, 9))
    recorder.add([])  # an empty call is not a step
    recorder.end()
    assert seen == [[7], [8, 9]] == recorder.steps and written == [] and recorder.finished
    with pytest.raises(ValueError, match="no tokenizer"):
        _ = recorder.text


def test_the_genai_streamer_feeds_the_recorder_and_keeps_generation_running() -> None:
    recorder = StepRecorder()
    streamer = recorder.as_genai_streamer()
    assert isinstance(streamer, openvino_genai.StreamerBase)
    assert streamer.write(5) == openvino_genai.StreamingStatus.RUNNING
    assert streamer.write([6, 7, 8]) == openvino_genai.StreamingStatus.RUNNING
    streamer.end()
    assert recorder.steps == [[5], [6, 7, 8]] and recorder.token_ids == [5, 6, 7, 8] and recorder.finished


# --------------------------------------------------------------------------- steps and coloured pieces


def test_each_step_ends_with_the_main_models_own_token() -> None:
    steps = [tokens("T"), tokens("he"), tokens("n"), tokens(" ok")]
    assert step_segments(byte_decode, steps) == [
        ("T", "main", 1), ("h", "accepted", 2), ("e", "main", 2), ("n", "main", 3),
        (" ", "accepted", 4), ("o", "accepted", 4), ("k", "main", 4)]


def test_a_character_split_across_steps_comes_out_whole_in_the_step_that_completes_it() -> None:
    first, second = tokens("é")
    segments = step_segments(byte_decode, [[*tokens("a"), first], [second, *tokens("b")]])
    assert "".join(text for text, _, _ in segments) == "aéb"
    assert segments == [("a", "accepted", 1), ("é", "accepted", 2), ("b", "main", 2)]


def test_the_segmenter_step_by_step_gives_the_same_pieces_as_all_at_once() -> None:
    steps = [tokens("Ça"), tokens(" va"), tokens("!")]
    segmenter = StepSegmenter(byte_decode)
    live = [piece for step in steps for piece in segmenter.add_step(step)]
    assert live == step_segments(byte_decode, steps) and segmenter.step_count == 3
    assert "".join(text for text, _, _ in live) == "Ça va!"


def test_a_piece_is_escaped_and_coloured_by_its_origin() -> None:
    accepted = segment_html("<a&b>", "accepted", 2)
    main = segment_html("x", "main", 3)
    assert html.escape("<a&b>") in accepted and "<a&b>" not in accepted
    assert ACCEPTED_COLOUR in accepted and 'title="step 2"' in accepted and "border-right" not in accepted
    assert MAIN_COLOUR in main and 'title="step 3"' in main and "border-right" in main


def test_the_html_legend_counts_tokens_passes_and_accepted_tokens() -> None:
    steps = [tokens("A"), tokens("bcd"), tokens("e"), tokens("fg")]
    page = steps_to_html(ByteTokenizer(), steps, title="K=3 <demo>")
    assert "7 tokens in 4 main-model passes, 3 accepted from the draft" in page
    assert "K=3 &lt;demo&gt;" in page
    pieces = re.findall(r'<span title="step (\d+)" style="background:([^;]+);', page)
    assert [(int(step), colour) for step, colour in pieces] == [
        (1, MAIN_COLOUR), (2, ACCEPTED_COLOUR), (2, ACCEPTED_COLOUR), (2, MAIN_COLOUR), (3, MAIN_COLOUR),
        (4, ACCEPTED_COLOUR), (4, MAIN_COLOUR)]


def test_plain_decoding_shows_no_accepted_token() -> None:
    page = steps_to_html(ByteTokenizer(), [[token] for token in tokens("plain")])
    assert "5 tokens in 5 main-model passes, 0 accepted from the draft" in page
    assert ACCEPTED_COLOUR not in page.split("</div>", 1)[1]  # only the legend uses the green


def test_a_numpy_integer_is_one_token() -> None:
    import numpy as np

    recorder = StepRecorder()
    recorder.add(np.int64(7))
    recorder.add(np.array([8, 9]))
    assert recorder.steps == [[7], [8, 9]]
