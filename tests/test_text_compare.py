"""Tests for utils.text_compare.first_divergence: where two generations part, token by token."""
from __future__ import annotations

import pytest

from utils.text_compare import first_divergence


@pytest.mark.parametrize("reference, candidate, position", [
    ([5, 6, 7, 8], [5, 6, 9, 8], 2),  # a changed token, the rest equal again
    ([5, 6, 7], [1, 6, 7], 0),  # the very first token
    ([5, 6, 7, 8], [5, 6, 7, 9], 3),  # the last token
    ("the cat", "the hat", 4),  # any sequences: characters too
])
def test_the_first_differing_position_is_reported(reference, candidate, position: int) -> None:
    assert first_divergence(reference, candidate) == position


@pytest.mark.parametrize("shorter, longer", [([5, 6], [5, 6, 7, 8]), ([], [1])])
def test_a_strict_prefix_diverges_at_its_own_length_whichever_side_it_is_on(shorter: list[int],
                                                                           longer: list[int]) -> None:
    assert first_divergence(shorter, longer) == len(shorter)
    assert first_divergence(longer, shorter) == len(shorter)


def test_a_prefix_that_differs_before_its_end_reports_the_difference_not_the_length() -> None:
    assert first_divergence([5, 0], [5, 6, 7]) == 1


@pytest.mark.parametrize("sequence", [[], [3, 1, 4, 1, 5], "abc"])
def test_identical_sequences_have_no_divergence(sequence) -> None:
    assert first_divergence(sequence, list(sequence) if isinstance(sequence, list) else sequence) is None


def test_tuples_and_lists_compare_by_value() -> None:
    assert first_divergence((1, 2, 3), [1, 2, 3]) is None
    assert first_divergence((1, 2, 3), [1, 2, 4]) == 2
