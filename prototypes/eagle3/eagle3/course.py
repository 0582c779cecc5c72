"""The few things taken from the course's `utils/`: its benchmark prompts (the held-out set).

`utils/` is being reorganised into sub-packages; both layouts are tried.
"""
from __future__ import annotations

from typing import Any


def benchmark_prompts() -> list[Any]:
    """The course's built-in prompts (`Prompt` objects with id, task, text): held out from the training data."""
    try:
        from utils.decoding.prompts import PROMPTS
    except ImportError:
        from utils.prompts import PROMPTS  # type: ignore[no-redef]
    return list(PROMPTS)
