"""Several requests at once through the continuous-batching pipeline: throughput under load, and exactness.

`measure_concurrency` times each level, plain and speculative interleaved; `batch_exactness` checks outputs.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Sequence

from utils.decoding.generation import DecodingSettings
from utils.decoding.measurement import interleaved_runs
from utils.decoding.pipelines import LoadedPipeline, SpeculationSetupError, make_scheduler_config
from utils.decoding.prompts import Prompt, as_prompt
from utils.models.model_catalogue import ModelPair
from utils.tuning.pipeline_pool import PipelinePool, PipelineSpec, load_spec_pipeline
from utils.tuning.sweeps import SweepPoint, check_pair_ready, plain_settings_for, progress_bar

_DEFAULT_PIPELINE = PipelineSpec()  # frozen, so one shared default is safe


def _generate_batch(loaded: LoadedPipeline, texts: list[str], settings: DecodingSettings) -> tuple[float, int, list[str]]:
    config = settings.generation_config(loaded.pipeline.get_generation_config())
    started = time.perf_counter()
    result = loaded.pipeline.generate(texts, config)
    wall = time.perf_counter() - started
    return wall, int(result.perf_metrics.get_num_generated_tokens()), list(result.texts)


def measure_concurrency(
    pair: ModelPair,
    concurrencies: Iterable[int],
    prompts: Sequence[Prompt | str],
    settings: DecodingSettings,
    *,
    device: str = "CPU",
    pipeline: PipelineSpec = _DEFAULT_PIPELINE,
    repeats: int = 2,
    pool: PipelinePool | None = None,
    progress: bool = True,
) -> list[dict]:
    """Send n requests at once (n in `concurrencies`) to plain and speculative pipelines; one row per (n, mode).

    latency_seconds is what a user of the batch waits, tokens_per_second the server's throughput (medians).
    """
    if settings.mode != "speculative":
        raise SpeculationSetupError("measure_concurrency compares speculative settings against plain decoding.")
    levels = sorted(set(int(level) for level in concurrencies))
    if not levels or levels[0] < 1:
        raise ValueError(f"concurrencies must be integers >= 1, got {list(concurrencies)}.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    check_pair_ready(pair, [SweepPoint("concurrency", 0, settings, pipeline)])
    pool = pool if pool is not None else PipelinePool(pair, device)
    plain_settings = plain_settings_for(settings)
    bar = progress_bar(len(levels), "concurrent requests", progress)
    rows: list[dict] = []
    plain = pool.get(pipeline.plain_reference)
    speculative = pool.get(pipeline)
    runners = [lambda texts, loaded=loaded, mode_settings=mode_settings: _generate_batch(loaded, texts, mode_settings)
               for loaded, mode_settings in ((plain, plain_settings), (speculative, settings))]
    for level in levels:
        if bar is not None:
            bar.set_postfix_str(f"{level} at once")
        texts = [prompt_list[index % len(prompt_list)].text for index in range(level)]
        # a warm-up at this batch size, then plain and speculative alternate
        (plain_runs,), (speculative_runs,) = interleaved_runs(runners, [texts], repeats=repeats, show_progress=False)
        outputs = {"plain": plain_runs.runs[-1].result[1:], "speculative": speculative_runs.runs[-1].result[1:]}
        for mode, runs in (("plain", plain_runs), ("speculative", speculative_runs)):
            tokens, generated = outputs[mode]
            walls = [run.result[0] for run in runs.runs]
            median_wall = statistics.median(walls)
            rows.append({"concurrency": level, "mode": mode, "latency_seconds": median_wall,
                         "generated_tokens": tokens, "tokens_per_second": tokens / median_wall,
                         "wall_seconds_all": walls, "identical_to_plain": generated == outputs["plain"][1]})
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    plain_rate = {row["concurrency"]: row["tokens_per_second"] for row in rows if row["mode"] == "plain"}
    plain_latency = {row["concurrency"]: row["latency_seconds"] for row in rows if row["mode"] == "plain"}
    for row in rows:
        row["throughput_vs_plain"] = row["tokens_per_second"] / plain_rate[row["concurrency"]]
        row["latency_speedup"] = plain_latency[row["concurrency"]] / row["latency_seconds"]
    return rows


def batch_exactness(
    pair: ModelPair,
    prompts: Sequence[Prompt | str],
    requests: int,
    settings: DecodingSettings,
    *,
    token_budgets: Sequence[int | None] = (None, 4096),
    device: str = "CPU",
    progress: bool = True,
) -> list[dict]:
    """Is a batch of `requests` speculative requests still token-for-token plain decoding of each prompt alone?

    One row per scheduler `max_num_batched_tokens` (None = default). GenAI 2026.4, f32: with the default (256)
    some batched speculative requests diverged from the first token; with 4096 none did.
    """
    if settings.mode != "speculative":
        raise SpeculationSetupError("batch_exactness checks speculative settings against plain decoding.")
    if isinstance(requests, bool) or not isinstance(requests, int) or requests < 1:
        raise ValueError(f"requests must be an integer >= 1, got {requests!r}.")
    prompt_list = [as_prompt(prompt, index) for index, prompt in enumerate(prompts)]
    if not prompt_list:
        raise ValueError("Give at least one prompt.")
    if not token_budgets:
        raise ValueError("Give at least one token budget (None = the scheduler's default).")
    default_budget = make_scheduler_config().max_num_batched_tokens
    check_pair_ready(pair, [SweepPoint("requests", requests, settings, PipelineSpec())])
    plain_settings = plain_settings_for(settings)
    texts = [prompt_list[index % len(prompt_list)].text for index in range(requests)]
    bar = progress_bar(1 + 2 * len(token_budgets), "batch exactness", progress)

    def step(description: str) -> None:
        if bar is not None:
            bar.set_postfix_str(description)
            bar.update(1)

    reference: list[str] = []
    rows = []
    for budget in token_budgets:
        spec = PipelineSpec(max_num_batched_tokens=budget)
        plain = load_spec_pipeline(pair, spec.plain_reference, device)
        if not reference:  # plain decoding of each prompt alone, once
            alone = {text: _generate_batch(plain, [text], plain_settings)[2][0] for text in dict.fromkeys(texts)}
            reference = [alone[text] for text in texts]
            step("plain, one request at a time")
        plain_batch = _generate_batch(plain, texts, plain_settings)[2]
        del plain
        step(f"plain batch, budget {budget or 'default'}")
        speculative_batch = _generate_batch(load_spec_pipeline(pair, spec, device), texts, settings)[2]
        step(f"speculative batch, budget {budget or 'default'}")
        differing = [index for index, (got, want) in enumerate(zip(speculative_batch, reference, strict=True))
                     if got != want]
        first = differing[0] if differing else None
        rows.append({
            "max_num_batched_tokens": budget if budget is not None else f"default ({default_budget})",
            "requests": requests,
            "plain batch = alone": sum(got == want for got, want in zip(plain_batch, reference, strict=True)),
            "speculative batch = alone": requests - len(differing),
            "differing requests": differing,
            "alone (start)": reference[first][:40] if first is not None else "",
            "speculative (start)": speculative_batch[first][:40] if first is not None else "",
        })
    if bar is not None:
        bar.close()
    return rows
