"""Stage 3 of an EAGLE-3 head: the draft vocabulary (the main's most frequent greedy targets) and its maps.

Few output rows make a head cheap. `d2t`/`t2d` follow SpecForge's layout; GenAI reads only `d2t`.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from utils.training.scaffold import TrainingError


@dataclass(frozen=True)
class DraftVocabulary:
    """The kept target ids (ascending) and the coverage of the counted targets."""

    target_ids: Any  # int64 [draft_vocab_size], ascending
    vocab_size: int
    coverage: float  # share of the counted target positions whose id is kept

    @property
    def size(self) -> int:
        return int(len(self.target_ids))

    def d2t(self) -> Any:
        """int64 [draft]: offsets with target id = draft id + d2t[draft id]."""
        import numpy as np

        return (self.target_ids - np.arange(self.size, dtype=np.int64)).astype(np.int64)

    def t2d(self) -> Any:
        """bool [vocab]: True for target ids in the draft vocabulary."""
        import numpy as np

        mask = np.zeros(self.vocab_size, dtype=bool)
        mask[self.target_ids] = True
        return mask

    def target_to_draft(self) -> Any:
        """int64 [vocab]: the draft id of each target id, -1 where it has none (for training labels)."""
        import numpy as np

        index = np.full(self.vocab_size, -1, dtype=np.int64)
        index[self.target_ids] = np.arange(self.size, dtype=np.int64)
        return index


def draft_vocabulary(targets: Iterable[int] | Any, size: int, vocab_size: int,
                     always_keep: Iterable[int] = ()) -> DraftVocabulary:
    """The `size` most frequent ids among `targets` (ties: lower id first) plus `always_keep`, padded with the
    lowest unused ids so the output layer has exactly `size` rows."""
    import numpy as np

    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise TrainingError(f"draft vocabulary size must be an integer >= 1, got {size!r}.")
    if size > vocab_size:
        raise TrainingError(f"draft vocabulary size {size} exceeds the main's vocabulary ({vocab_size}).")
    ids = np.asarray(list(targets) if not hasattr(targets, "dtype") else targets, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise TrainingError(f"target ids must lie in [0, {vocab_size}); got {ids.min()}..{ids.max()}.")
    counts = np.bincount(ids, minlength=vocab_size)
    keep = [int(i) for i in always_keep]
    for token in keep:
        if not 0 <= token < vocab_size:
            raise TrainingError(f"always_keep id {token} outside [0, {vocab_size}).")
    order = np.lexsort((np.arange(vocab_size), -counts))  # by count descending, then id ascending
    chosen: list[int] = list(dict.fromkeys(keep))[:size]
    seen = set(chosen)
    for token in order:
        if len(chosen) >= size:
            break
        if int(token) not in seen:
            chosen.append(int(token))
            seen.add(int(token))
    kept = np.sort(np.asarray(chosen, dtype=np.int64))
    coverage = float(counts[kept].sum() / max(ids.size, 1))
    return DraftVocabulary(kept, vocab_size, coverage)


def vocabulary_from_d2t(d2t: Any, vocab_size: int) -> DraftVocabulary:
    """Rebuild the kept target ids from a stored `d2t` (checks they are valid and distinct)."""
    import numpy as np

    d2t = np.asarray(d2t, dtype=np.int64)
    target_ids = d2t + np.arange(len(d2t), dtype=np.int64)
    if target_ids.min() < 0 or target_ids.max() >= vocab_size:
        raise TrainingError(f"d2t maps draft ids outside the main's vocabulary [0, {vocab_size}).")
    if len(np.unique(target_ids)) != len(target_ids):
        raise TrainingError("d2t maps two draft ids to the same target id.")
    return DraftVocabulary(target_ids, vocab_size, float("nan"))
