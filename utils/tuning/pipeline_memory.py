"""What a memory probe runs in its fresh process (`utils.system.peak_memory.measure_in_fresh_process`).

Peak resident memory only grows, so notebook 05 probes each pipeline in a child of its own:
``measure_in_fresh_process("utils.tuning.pipeline_memory:load_and_generate", {...})``.
"""
from __future__ import annotations

from utils.models.model_catalogue import get_pair
from utils.system.peak_memory import current_rss_bytes
from utils.tuning.pipeline_pool import PipelineSpec, load_spec_pipeline


def load_and_generate(pair: str, mode: str, cache_size_gb: int, texts: list[str], max_new_tokens: int,
                      device: str = "CPU") -> dict:
    """Load one pipeline (K=3 if speculative) and generate for all `texts`: RSS after load and generate, in MB."""
    loaded = load_spec_pipeline(get_pair(pair), PipelineSpec(mode, cache_size_gb=cache_size_gb), device)
    after_load = current_rss_bytes()
    config = loaded.pipeline.get_generation_config()
    config.max_new_tokens = max_new_tokens
    if mode == "speculative":
        config.num_assistant_tokens = 3
    loaded.pipeline.generate(texts, config)
    return {"rss_after_load_mb": after_load / 1e6, "rss_after_generate_mb": current_rss_bytes() / 1e6}
