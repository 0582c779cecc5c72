"""Fabricated generation records and sweep results, for tests of sweeps, recommendations and plots."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from utils.decoding.generation import GenerationRecord
from utils.decoding.prompts import Prompt
from utils.tuning.sweeps import PointResult, SweepPoint, SweepResult

PROMPTS = [Prompt("c1", "code", "Write code."), Prompt("h1", "chat", "Hello?"),
           Prompt("s1", "summarisation", "Summarise " + "words " * 10, "long")]


def record(**values) -> GenerationRecord:
    """A GenerationRecord with harmless defaults for every field not given."""
    defaults = {"mode": "speculative", "setting": "K=3", "prompt_id": "p", "task": "chat", "device": "CPU",
                "precision": "f32", "backend": "continuous_batching", "input_tokens": 10, "generated_tokens": 8,
                "token_ids": [1] * 8, "text": "", "wall_seconds": 1.0, "tokens_per_second": 8.0}
    data = {}
    for field in dataclasses.fields(GenerationRecord):
        if field.name in values:
            data[field.name] = values[field.name]
        elif field.name in defaults:
            data[field.name] = defaults[field.name]
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            data[field.name] = None
    return GenerationRecord(**data)


def k_speedup(point: SweepPoint, prompt: Prompt) -> float:
    """The default pretend speed-up: 1 + 0.1 K, whatever the prompt."""
    return 1 + 0.1 * (point.settings.num_assistant_tokens or 1)


def fake_records(point: SweepPoint, prompts: Sequence[Prompt],
                 speedup: Callable[[SweepPoint, Prompt], float] = k_speedup) -> list[GenerationRecord]:
    """Pretend measurement: plain takes 1 s per prompt, the point (in its own mode) 1/speedup s with identical output.

    Every draft token is accepted in the steps (K+1 tokens per pass); the
    counted acceptance is (9 - K) / 10, so each K has its own.
    """
    k = point.settings.num_assistant_tokens or 1
    out = []
    for prompt in prompts:
        steps = [1] + [k + 1] * 3 + [1]  # the prefill pass, every draft token accepted, a cut-short last pass
        factor = speedup(point, prompt)
        out.append(record(mode="plain", setting="greedy", prompt_id=prompt.id, task=prompt.task, wall_seconds=1.0))
        out.append(record(mode=point.settings.mode, prompt_id=prompt.id, task=prompt.task, wall_seconds=1.0 / factor,
                          speedup_vs_plain=factor, plain_wall_seconds=1.0, identical_to_plain=True, accepted_tokens=9 - k, draft_tokens=10,
                          tokens_per_step=steps, generated_tokens=sum(steps), main_passes=len(steps)))
    return out


def fake_sweep(points: Sequence[SweepPoint], speedup: Callable[[SweepPoint, Prompt], float] = k_speedup,
               name: str = "fake sweep") -> SweepResult:
    """A SweepResult of `points` over PROMPTS, measured by `fake_records` (nothing is loaded or cached)."""
    return SweepResult(name, "fake", "CPU", [PointResult(point, fake_records(point, PROMPTS, speedup))
                                             for point in points], list(PROMPTS))
