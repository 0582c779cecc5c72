"""Tests of utils.tuning.pipeline_memory: peak memory of a real pipeline in a fresh process."""
from __future__ import annotations

from utils.decoding.generation import DecodingSettings
from utils.decoding.prompts import select_prompts
from utils.models.model_catalogue import get_pair
from utils.tuning import pipeline_memory
from utils.tuning.pipeline_pool import PipelineSpec

OFFLINE = get_pair("offline")


def test_memory_of_a_plain_pipeline_is_probed_in_a_fresh_process(offline_pair) -> None:
    prompts = select_prompts(tasks=["code"], length="short", per_task=1)
    settings = {"plain": DecodingSettings("plain", max_new_tokens=4)}
    [row] = pipeline_memory.measure_memory(OFFLINE, [PipelineSpec("plain")], prompts, settings, progress=False)
    assert row["peak_rss_mb"] >= row["rss_after_load_mb"] > row["rss_start_mb"] > 0
    assert row["rss_after_generate_mb"] > 0 and row["virtual_mb"] >= row["rss_after_load_mb"]
    assert row["main_weights_mb"] > 100 and row["draft_weights_mb"] == 0  # a plain pipeline has no draft
    assert (row["pipeline"], row["mode"], row["cache_size_gb"]) == ("plain (main f32)", "plain", "dynamic")
