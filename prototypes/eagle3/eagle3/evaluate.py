"""Stage 7: the head in OpenVINO GenAI - plain vs EAGLE-3 on the same prompts, measured fairly.

The main runs as the *exact* f32 main (`EXACT_MAIN`: f32 compute, no dynamic
quantisation, f32 KV cache), under which speculative output must equal plain
greedy output token for token; every comparison asserts it per prompt.
Both pipelines use the continuous-batching backend (a `SchedulerConfig`),
which is the one that runs EAGLE-3 heads. Each pipeline is warmed up, then the
prompts run interleaved (plain, EAGLE-3, plain, ...) `repeats` times, and the
per-prompt medians are compared.

Figures per prompt: wall time, tokens, tokens per main pass (the complete
verification passes), acceptance, c = one head step / one plain main step,
speed-up. Tree mode (`branching_factor`, `tree_depth`) is run with the default
KV cache and with `KV_CACHE_PRECISION=f32`, to show that only the latter stays
lossless.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

EXACT_MAIN = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0", "KV_CACHE_PRECISION": "f32"}
F32_NO_KV = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
DRAFT_PROPERTIES = {"INFERENCE_PRECISION_HINT": "f32"}


def scheduler_config(cache_size_gb: int = 1, max_num_batched_tokens: int = 4096) -> Any:
    """A SchedulerConfig with a token budget larger than any prompt (a small budget broke exactness here)."""
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = cache_size_gb
    scheduler.max_num_batched_tokens = max_num_batched_tokens
    scheduler.dynamic_split_fuse = True
    return scheduler


def load_plain(main_dir: Path, main_properties: dict | None = None, device: str = "CPU") -> Any:
    """The main alone, on the continuous-batching backend."""
    import openvino_genai

    return openvino_genai.LLMPipeline(str(main_dir), device, scheduler_config=scheduler_config(),
                                      **(EXACT_MAIN if main_properties is None else main_properties))


def load_eagle3(main_dir: Path, head_dir: Path, main_properties: dict | None = None, device: str = "CPU") -> Any:
    """The main with the exported head as its EAGLE-3 draft (checked first)."""
    import openvino_genai

    from eagle3.checks import check_exported_head

    check_exported_head(Path(head_dir), Path(main_dir))
    draft = openvino_genai.draft_model(str(head_dir), device, **DRAFT_PROPERTIES)
    return openvino_genai.LLMPipeline(str(main_dir), device, scheduler_config=scheduler_config(), draft_model=draft,
                                      **(EXACT_MAIN if main_properties is None else main_properties))


def generation_config(max_new_tokens: int, assistant_tokens: int | None = None, branching_factor: int | None = None,
                      tree_depth: int | None = None) -> Any:
    """Greedy decoding; chain mode with `assistant_tokens`, tree mode with `branching_factor` and `tree_depth`."""
    import openvino_genai

    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = max_new_tokens
    config.do_sample = False
    if assistant_tokens is not None:
        config.num_assistant_tokens = assistant_tokens
    if branching_factor is not None:
        config.branching_factor = branching_factor
    if tree_depth is not None:
        config.tree_depth = tree_depth
    return config


@dataclass
class Run:
    """One generation: its text, tokens, wall time and, for a speculative run, its per-pass figures."""

    text: str
    tokens: int
    seconds: float
    tpot_ms: float | None = None
    passes: list[int] = field(default_factory=list)  # tokens per main pass, prefill first
    accepted: int | None = None
    drafted: int | None = None
    draft_step_ms: float | None = None


def run_once(pipeline: Any, prompt: str, config: Any) -> Run:
    """Generate once and collect the figures GenAI reports."""
    started = time.perf_counter()
    result = pipeline.generate([prompt], config)
    seconds = time.perf_counter() - started
    metrics = result.perf_metrics
    run = Run(text=result.texts[0], tokens=int(metrics.get_num_generated_tokens()), seconds=seconds,
              tpot_ms=float(metrics.get_tpot().mean))
    extended = result.extended_perf_metrics
    if extended is not None:
        run.passes = [int(n) for n in extended.main_model_metrics.raw_metrics.m_batch_sizes]
        run.accepted = int(extended.get_num_accepted_tokens())
        try:
            run.drafted = int(extended.get_num_draft_tokens())
        except AttributeError:
            run.drafted = None
        timed = [d / 1000.0 for d in extended.draft_model_metrics.raw_metrics.m_durations if d > 0]
        run.draft_step_ms = sum(timed[1:]) / (len(timed) - 1) if len(timed) > 1 else None
    return run


def tokens_per_main_pass(passes: Sequence[int]) -> float | None:
    """Mean tokens of the complete verification passes (neither the prefill nor the cut-short last one)."""
    complete = list(passes[1:-1])
    return sum(complete) / len(complete) if complete else None


@dataclass
class PromptResult:
    prompt_id: str
    task: str
    plain_s: float
    spec_s: float
    tokens: int
    identical: bool
    tokens_per_pass: float | None
    acceptance: float | None
    draft_step_ms: float | None
    plain_step_ms: float | None

    @property
    def speedup(self) -> float:
        return self.plain_s / self.spec_s

    @property
    def c(self) -> float | None:
        if self.draft_step_ms is None or not self.plain_step_ms:
            return None
        return self.draft_step_ms / self.plain_step_ms

    def as_dict(self) -> dict:
        return asdict(self) | {"speedup": self.speedup, "c": self.c}


def compare(plain: Any, speculative: Any, prompts: Sequence[Any], spec_config: Any, max_new_tokens: int,
            repeats: int = 3, require_identical: bool = True, log: Any = None) -> list[PromptResult]:
    """Plain vs speculative on every prompt (warm-up, interleaved repeats, medians); identical output asserted."""
    plain_config = generation_config(max_new_tokens)
    run_once(plain, prompts[0].text, plain_config)
    run_once(speculative, prompts[0].text, spec_config)
    plain_runs: dict[str, list[Run]] = {p.id: [] for p in prompts}
    spec_runs: dict[str, list[Run]] = {p.id: [] for p in prompts}
    for _ in range(repeats):
        for prompt in prompts:
            plain_runs[prompt.id].append(run_once(plain, prompt.text, plain_config))
            spec_runs[prompt.id].append(run_once(speculative, prompt.text, spec_config))
    results = []
    for prompt in prompts:
        reference, runs = plain_runs[prompt.id][0], spec_runs[prompt.id]
        identical = all(r.text == reference.text and r.tokens == reference.tokens for r in runs)
        if require_identical and not identical:
            raise AssertionError(f"EAGLE-3 output differs from plain greedy output on prompt {prompt.id}:\n"
                                 f"plain: {reference.text[:300]!r}\nEAGLE-3: {runs[0].text[:300]!r}")
        passes = [tokens_per_main_pass(r.passes) for r in runs]
        passes = [p for p in passes if p is not None]
        steps = [r.draft_step_ms for r in runs if r.draft_step_ms is not None]
        drafted = runs[0].drafted
        result = PromptResult(
            prompt_id=prompt.id, task=prompt.task,
            plain_s=statistics.median(r.seconds for r in plain_runs[prompt.id]),
            spec_s=statistics.median(r.seconds for r in runs), tokens=reference.tokens, identical=identical,
            tokens_per_pass=statistics.median(passes) if passes else None,
            acceptance=(runs[0].accepted / drafted) if drafted else None,
            draft_step_ms=statistics.median(steps) if steps else None,
            plain_step_ms=statistics.median(r.tpot_ms for r in plain_runs[prompt.id] if r.tpot_ms))
        if log is not None:
            log(f"{prompt.id:24s} {result.tokens:4d} tok  plain {result.plain_s:.2f}s  spec {result.spec_s:.2f}s  "
                f"x{result.speedup:.2f}  tok/pass {result.tokens_per_pass}  c {result.c}  identical {identical}")
        results.append(result)
    return results


def summarise(results: Sequence[PromptResult]) -> dict:
    """Totals over the prompts and per task: speed-up (sum of medians), mean tokens per pass, mean c."""
    def block(rows: Sequence[PromptResult]) -> dict:
        passes = [r.tokens_per_pass for r in rows if r.tokens_per_pass is not None]
        costs = [r.c for r in rows if r.c is not None]
        return {"prompts": len(rows), "speedup": sum(r.plain_s for r in rows) / sum(r.spec_s for r in rows),
                "tokens_per_pass": statistics.mean(passes) if passes else None,
                "c": statistics.median(costs) if costs else None, "all_identical": all(r.identical for r in rows),
                "tokens": sum(r.tokens for r in rows)}
    tasks = sorted({r.task for r in results})
    return {"all": block(results), "by_task": {t: block([r for r in results if r.task == t]) for t in tasks}}


def tree_trap(main_dir: Path, head_dir: Path, prompts: Sequence[Any], max_new_tokens: int, branching_factor: int = 2,
              tree_depth: int = 3, assistant_tokens: int | None = None, log: Any = None) -> dict:
    """Tree mode with the default KV cache vs an f32 KV cache: how many outputs differ from plain greedy."""
    plain = load_plain(main_dir)
    plain_config = generation_config(max_new_tokens)
    references = {p.id: run_once(plain, p.text, plain_config) for p in prompts}
    del plain
    tree_config = generation_config(max_new_tokens, assistant_tokens, branching_factor, tree_depth)
    report: dict = {"branching_factor": branching_factor, "tree_depth": tree_depth,
                    "num_assistant_tokens": assistant_tokens}
    for label, properties in (("default_kv_cache", F32_NO_KV), ("kv_cache_f32", EXACT_MAIN)):
        pipeline = load_eagle3(main_dir, head_dir, properties)
        differing, examples, passes = [], {}, []
        for prompt in prompts:
            run = run_once(pipeline, prompt.text, tree_config)
            if run.text != references[prompt.id].text:
                differing.append(prompt.id)
                examples.setdefault("first", {"prompt": prompt.id, "plain": references[prompt.id].text[:160],
                                              "tree": run.text[:160]})
            value = tokens_per_main_pass(run.passes)
            if value is not None:
                passes.append(value)
        report[label] = {"differing": differing, "of": len(prompts), "examples": examples,
                         "tokens_per_pass": statistics.mean(passes) if passes else None}
        if log is not None:
            log(f"tree {label}: {len(differing)}/{len(prompts)} outputs differ from plain greedy")
        del pipeline
    return report


def table_text(rows: Sequence[dict], columns: Sequence[str], digits: int = 3) -> str:
    """A plain-text table of `rows` (dicts) with `columns`, numbers rounded to `digits`."""
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.{digits}f}"
        return "-" if value is None else str(value)
    body = [[cell(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in body)) if body else len(column)
              for i, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(width) for column, width in zip(columns, widths, strict=True))]
    lines += ["  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True)) for line in body]
    return "\n".join(lines)
