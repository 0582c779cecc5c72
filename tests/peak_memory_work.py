"""Work for tests/test_peak_memory.py, run by `python -m utils.system.peak_memory` in a fresh process."""
from __future__ import annotations


def hold_megabytes(megabytes: int) -> dict:
    """Touch `megabytes` MB of memory, then free it."""
    block = bytearray(megabytes * 1_000_000)
    for index in range(0, len(block), 4096):
        block[index] = 1
    del block
    return {"held_mb": megabytes}


def fail() -> dict:
    raise RuntimeError("this work fails on purpose")
