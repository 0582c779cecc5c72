"""Tests for utils.decoding.exactness: where outputs part from plain is printed, and fails only when told to."""
from __future__ import annotations

import pytest

from tests.fake_sweeps import record
from utils.decoding.exactness import STRICT_EXACTNESS_ENV, partings, report_exactness, require_exact
from utils.decoding.generation import compare_with_plain


def compared(speculative_tokens: list[int], backend: str = "continuous_batching") -> list:
    plain = record(mode="plain", setting="greedy", token_ids=[5, 6, 7, 8], generated_tokens=4, backend=backend)
    speculative = record(token_ids=speculative_tokens, generated_tokens=len(speculative_tokens), backend=backend)
    return compare_with_plain([plain, speculative])


def test_an_output_that_parts_is_found_at_its_first_different_token() -> None:
    [parting] = partings(compared([5, 6, 9, 9]))
    assert (parting.prompt_id, parting.position, parting.margin) == ("p", 2, None)
    assert "speculative K=3" in parting.label and "parts from plain at generated token 2" in parting.line()


def test_an_output_that_stops_early_parts_where_it_ends_and_equal_outputs_do_not_part() -> None:
    assert [parting.position for parting in partings(compared([5, 6]))] == [2]
    assert partings(compared([5, 6, 7, 8])) == []


def test_each_stack_is_compared_with_its_own_plain_run() -> None:
    records = compared([5, 6, 7, 8]) + compared([5, 0, 7, 8], backend="transformers")
    [parting] = partings(records)
    assert parting.position == 1 and parting.label.endswith("transformers")


def test_the_report_counts_and_carries_on_unless_the_strict_check_is_on(capsys: pytest.CaptureFixture) -> None:
    records = compared([5, 6, 9, 9]) + compared([5, 6, 7, 8])
    report_exactness(records, environ={})
    printed = capsys.readouterr().out
    assert "f32: 1 of 2 speculative outputs equal plain" in printed and "generated token 2" in printed
    with pytest.raises(AssertionError, match="1 speculative outputs parted"):
        report_exactness(records, environ={STRICT_EXACTNESS_ENV: "1"})


def test_nothing_parted_never_fails() -> None:
    require_exact(0, "outputs", environ={STRICT_EXACTNESS_ENV: "1"})
    require_exact(3, "outputs", environ={STRICT_EXACTNESS_ENV: "0"})


def test_the_margin_is_the_exact_main_models_where_the_plain_output_parts(offline_pair) -> None:
    import openvino_genai as ov_genai

    from utils.decoding.generation import encode_prompt
    from utils.decoding.generation_reports import divergence_margin

    plain_ids = [504, 3058, 314, 260]
    records = compare_with_plain([record(mode="plain", setting="greedy", token_ids=plain_ids, generated_tokens=4),
                                  record(token_ids=[504, 3058, 42, 42], generated_tokens=4)])
    [parting] = partings(records, offline_pair.main, prompt_texts={"p": "Why is the sky blue?"})
    prompt_ids = encode_prompt(ov_genai.Tokenizer(str(offline_pair.main)), "Why is the sky blue?")
    assert parting.position == 2
    assert parting.margin == pytest.approx(divergence_margin(offline_pair.main, prompt_ids, plain_ids, 2), abs=1e-6)
    assert parting.margin is not None and parting.margin >= 0
