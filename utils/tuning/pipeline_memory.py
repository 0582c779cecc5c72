"""Peak resident memory of a pipeline (scheduler cache settings, plain vs speculative), one fresh process each.

Each pipeline gets a child process because peak RSS only grows.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from utils.decoding.generation import DecodingSettings
from utils.decoding.prompts import Prompt, as_prompt
from utils.models.model_catalogue import ModelPair, get_pair
from utils.system.peak_memory import current_rss_bytes, measure_in_fresh_process
from utils.tuning.pipeline_pool import PipelineSpec, load_spec_pipeline
from utils.tuning.sweeps import SweepPoint, check_pair_ready, progress_bar


def load_and_generate(pair: str, spec: dict, device: str, settings: dict, texts: list[str]) -> dict:
    """Load one pipeline and generate for all `texts` (run in a child): RSS after load and generate, in MB."""
    loaded = load_spec_pipeline(get_pair(pair), PipelineSpec(**spec), device)
    after_load = current_rss_bytes()
    import psutil

    virtual_after_load = psutil.Process().memory_info().vms
    config = DecodingSettings(**settings).generation_config(loaded.pipeline.get_generation_config())
    loaded.pipeline.generate(texts, config)
    return {"rss_after_load_mb": after_load / 1e6, "virtual_mb": virtual_after_load / 1e6,
            "rss_after_generate_mb": current_rss_bytes() / 1e6}


def measure_memory(
    pair: ModelPair,
    specs: Sequence[PipelineSpec],
    prompts: Sequence[Prompt | str],
    settings_by_mode: dict[str, DecodingSettings],
    *,
    device: str = "CPU",
    progress: bool = True,
    timeout_seconds: float = 600,
) -> list[dict]:
    """Peak RSS (VmHWM) and RSS after load/generate of each pipeline in a fresh process, plus weight sizes."""
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    check_pair_ready(pair, [SweepPoint("memory", 0, settings_by_mode[spec.mode], spec) for spec in specs])
    bar = progress_bar(len(specs), "memory", progress)
    rows = []
    for spec in specs:
        settings = settings_by_mode[spec.mode]
        arguments = {"pair": pair.name, "spec": asdict(spec), "device": device, "settings": asdict(settings),
                     "texts": [prompt.text for prompt in prompt_list]}

        if bar is not None:
            bar.set_postfix_str(spec.label)
        measured = measure_in_fresh_process("utils.tuning.pipeline_memory:load_and_generate", arguments,
                                            timeout=timeout_seconds)
        draft = spec.draft_spec(pair)
        weights = (pair.main.path / "openvino_model.bin").stat().st_size
        draft_weights = (draft.path / "openvino_model.bin").stat().st_size if draft else 0
        rows.append({"pipeline": spec.label, "mode": spec.mode,
                     "cache_size_gb": spec.cache_size_gb or "dynamic",
                     "main_weights_mb": weights / 1e6, "draft_weights_mb": draft_weights / 1e6,
                     **measured})
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return rows
