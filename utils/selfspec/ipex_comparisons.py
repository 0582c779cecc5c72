"""IPEX-LLM self-speculation compared: plain vs speculative on the same prompts, and beside OpenVINO GenAI.

A setting's speed-up is total plain time / total speculative time over the prompts, one sample per repeat; c is one
draft step / one plain main step, both from the same interleaved runs. The OpenVINO half runs in the main environment
(`run_main_python`) because the IPEX-LLM environment has no OpenVINO.
"""
from __future__ import annotations

import os
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from utils.decoding import decoding_metrics
from utils.decoding.measurement import Measured, interleaved_runs, median_run
from utils.models.model_check import check_model_folder
from utils.paths import REPO_ROOT
from utils.selfspec.ipex_self_speculation import (
    GenerationRun,
    SelfSpeculationError,
    SpeculationStats,
    check_generate_inputs,
    generate_greedy,
)
from utils.text_compare import first_divergence


@dataclass
class Comparison:
    """Plain vs speculative greedy on one prompt with one draft setting: every timed repeat of both."""

    prompt_id: str
    setting: dict
    prompt_tokens: int
    plain: Measured
    speculative: Measured

    @property
    def plain_run(self) -> GenerationRun:
        return median_run(self.plain.runs).result

    @property
    def speculative_run(self) -> GenerationRun:
        return median_run(self.speculative.runs).result

    @property
    def stats(self) -> SpeculationStats:
        stats = self.speculative_run.stats
        assert stats is not None, "generate_greedy reads IPEX-LLM's statistics on every speculative run"
        return stats

    @property
    def plain_ids(self) -> list[int]:
        return self.plain_run.token_ids

    @property
    def speculative_ids(self) -> list[int]:
        return self.speculative_run.token_ids

    @property
    def first_divergence(self) -> int | None:
        return first_divergence(self.plain_ids, self.speculative_ids)

    @property
    def speculative_seconds(self) -> float:
        return self.speculative.median_wall_seconds

    @property
    def plain_step_ms(self) -> float:
        """One plain main step: the plain run's median wall time less the main model's prompt pass (IPEX-LLM's
        ``first_token_time`` of the speculative run on the same prompt), per remaining token."""
        tokens = max(1, self.plain_run.generated_tokens - 1)
        return 1000 * max(0.0, self.plain.median_wall_seconds - self.stats.first_token_seconds) / tokens

    @property
    def cost_ratio(self) -> float:
        """c: one INT4 draft step over one plain main step, both from these interleaved runs."""
        return decoding_metrics.cost_ratio(1000 * self.stats.draft_seconds_per_token, self.plain_step_ms)

    def speedups(self) -> list[float]:
        """This prompt's speed-up, one sample per repeat (plain time / speculative time of that repeat)."""
        return _speedups([self])

    def row(self) -> dict:
        samples = self.speedups()
        return {
            "prompt": self.prompt_id,
            "setting": setting_label(self.setting),
            "prompt tokens": self.prompt_tokens,
            "tokens plain/spec": f"{self.plain_run.generated_tokens}/{self.speculative_run.generated_tokens}",
            "speed-up": decoding_metrics.speedup_text(samples),
            "acceptance": round(self.stats.acceptance_rate, 2),
            "tokens/step": round(self.stats.mean_tokens_per_step, 2),
            "drafted/step": round(self.stats.mean_drafted_per_step, 2),
            "first difference": "identical" if self.first_divergence is None else self.first_divergence,
        }


def compare_plain_and_speculative(model: Any, prompts: dict[str, Any], settings: Sequence[dict], *,
                                  max_new_tokens: int, repeats: int = 3) -> list[Comparison]:
    """For each prompt (id -> input ids) and draft setting: plain vs speculative greedy, timed by `interleaved_runs`."""
    ids = list(prompts.values())
    for options in settings:  # refuse bad settings before the warm-up
        check_generate_inputs(ids[0], max_new_tokens, options)
    runners = [partial(generate_greedy, model, max_new_tokens=max_new_tokens, **options)
               for options in [{"speculative": False}, *settings]]
    measured = interleaved_runs(runners, ids, repeats=repeats, desc="plain vs self-speculative")
    return [Comparison(prompt_id, dict(options), int(item.shape[1]), measured[0][index], measured[1 + number][index])
            for index, (prompt_id, item) in enumerate(prompts.items()) for number, options in enumerate(settings)]


def _speedups(comparisons: Sequence[Comparison], clock: str = "wall_seconds") -> list[float]:
    """`decoding_metrics.speedup_per_repeat` over the comparisons' prompts, by wall or ("cpu_seconds") CPU time."""
    def seconds(measured: Measured) -> list[float]:
        return [getattr(run, clock) for run in measured.runs]

    return decoding_metrics.speedup_per_repeat([seconds(c.plain) for c in comparisons],
                                               [seconds(c.speculative) for c in comparisons])


def speedup_summary(label: dict, wall: Sequence[float], cpu: Sequence[float] = ()) -> dict:
    """One row: speed-up as median [min-max] over repeats with its verdict, by wall and (if given) CPU time."""
    row = {**label, "repeats": len(wall), "speed-up": decoding_metrics.speedup_text(wall),
           "verdict": decoding_metrics.verdict(wall)}
    if cpu:
        row["speed-up, CPU time"] = decoding_metrics.speedup_text(cpu)
        row["verdict, CPU time"] = decoding_metrics.verdict(cpu)
    return row


def speedup_rows(comparisons: Sequence[Comparison]) -> list[dict]:
    """Per draft setting, over all its prompts: `speedup_summary` of the per-repeat speed-ups (wall and CPU time)."""
    rows = []
    for label in dict.fromkeys(setting_label(comparison.setting) for comparison in comparisons):
        group = [comparison for comparison in comparisons if setting_label(comparison.setting) == label]
        rows.append(speedup_summary({"backend": "IPEX-LLM", "draft": "INT4 copy", "setting": label,
                                     "prompts": len(group)}, _speedups(group), _speedups(group, "cpu_seconds")))
    return rows


def setting_label(setting: dict) -> str:
    """Short label, e.g. 'th=0.6 auto', 'th=0.6 fixed', 'max_step=4', 'hf_adjust', 'defaults'."""
    parts = []
    if "th_stop_draft" in setting:
        parts.append(f"th={setting['th_stop_draft']:g}")
    if "auto_th_stop_draft" in setting:
        parts.append("auto" if setting["auto_th_stop_draft"] else "fixed")
    if "max_step_draft" in setting:
        parts.append(f"max_step={setting['max_step_draft']}")
    known = {"th_stop_draft", "auto_th_stop_draft", "max_step_draft"}
    parts += [name if value is True else f"{name}={value}" for name, value in setting.items() if name not in known]
    return " ".join(parts) or "defaults"


def summary_rows(comparisons: Sequence[Comparison], precision: str) -> list[dict]:
    """Per prompt, in `openvino_summary_rows`' format; "k" is the mean drafted per verify step (IPEX-LLM's varies)."""
    rows = []
    for comparison in comparisons:
        stats, samples = comparison.stats, comparison.speedups()
        rows.append({
            "backend": "IPEX-LLM", "draft": "INT4 copy", "setting": setting_label(comparison.setting),
            "prompt": comparison.prompt_id, "tokens": comparison.speculative_run.generated_tokens,
            "speed-up (median)": statistics.median(samples), "speed-up": decoding_metrics.speedup_text(samples),
            "acceptance": stats.acceptance_rate, "k": stats.mean_drafted_per_step,
            "tokens/pass": stats.mean_tokens_per_step, "identical to plain": comparison.first_divergence is None,
            "first difference": comparison.first_divergence, "plain step ms": comparison.plain_step_ms,
            "cost ratio c": comparison.cost_ratio,
            "verify pass / plain step": decoding_metrics.verification_cost(1000 * stats.verify_seconds_per_step,
                                                                           comparison.plain_step_ms),
            "precision": precision,
        })
    return rows


def check_openvino_half(main_python: Path | str, main_folder: Path | str, draft_folders: dict[str, Path]) -> None:
    """Raise now, not after minutes of IPEX-LLM work, if the OpenVINO half cannot run (`check_model_folder`)."""
    if not Path(main_python).exists():
        raise SelfSpeculationError(
            f"{main_python} does not exist: the main environment (with openvino-genai) is not set up. Run "
            "`python3 tutorial.py lab`, or set MAIN_PYTHON in the parameters cell.")
    check_model_folder(main_folder, "main model")
    for name, folder in draft_folders.items():
        check_model_folder(folder, f"{name} draft")


def run_main_python(module_args: Sequence[str], python: Path | str) -> subprocess.CompletedProcess:
    """Run ``python -m <module_args>`` from the repo root, without this environment's variables; raise if it fails.
    `check_openvino_half` checks `python` up front."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHONPATH", "VIRTUAL_ENV"))}
    completed = subprocess.run([str(python), "-m", *module_args], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=1800, env=env)
    if completed.returncode != 0:
        raise RuntimeError(f"`{python} -m {' '.join(module_args)}` failed:\n{completed.stderr[-3000:]}")
    return completed
