"""Comparing two generations token by token (used for the losslessness checks)."""
from __future__ import annotations

from collections.abc import Sequence


def first_divergence(reference: Sequence, candidate: Sequence) -> int | None:
    """Index of the first position where the sequences differ, or None if identical.

    A sequence that is a strict prefix of the other diverges at its own length.
    """
    # unequal lengths are expected: a strict prefix is handled after the loop
    for index, (left, right) in enumerate(zip(reference, candidate, strict=False)):
        if left != right:
            return index
    if len(reference) != len(candidate):
        return min(len(reference), len(candidate))
    return None
