"""Tests of utils.tuning.pipeline_memory: what a memory probe runs, in a fresh process, on a real pipeline."""
from __future__ import annotations

from utils.decoding.prompts import select_prompts
from utils.system.peak_memory import measure_in_fresh_process


def test_a_plain_pipeline_is_probed_in_a_fresh_process(offline_pair) -> None:
    texts = [prompt.text for prompt in select_prompts(tasks=["code"], length="short", per_task=1)]
    row = measure_in_fresh_process("utils.tuning.pipeline_memory:load_and_generate", {
        "pair": "offline", "mode": "plain", "cache_size_gb": 0, "texts": texts, "max_new_tokens": 4}, timeout=600)
    assert row["peak_rss_mb"] >= row["rss_after_load_mb"] > row["rss_start_mb"] > 0
    assert row["rss_after_generate_mb"] > 0
