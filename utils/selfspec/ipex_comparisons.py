"""IPEX-LLM self-speculation compared: plain vs speculative on the same prompts, and beside OpenVINO GenAI.

    runs = compare_plain_and_speculative(model, prompts, sweep_settings([0.4, 0.6]), max_new_tokens=48)
    rows = summary_rows(runs, cost_ratio=c, precision="bf16")      # the side-by-side format of both backends
    checked = formula_check(rows + openvino_rows, step_costs(runs) + openvino_costs)   # Leviathan beside them

The model-facing part (load, generate, IPEX-LLM's statistics, step times) is `utils.selfspec.ipex_self_speculation`;
the OpenVINO GenAI half runs in the main environment (`run_main_python`, `utils.selfspec.ov_self_speculation`), because
the IPEX-LLM environment has no OpenVINO. Plots: `utils.display.ipex_plots`.
"""
from __future__ import annotations

import os
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.decoding import decoding_metrics
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
    """Plain vs speculative greedy on one prompt with one draft setting (medians over repeats)."""

    prompt_id: str
    setting: dict
    prompt_tokens: int
    plain_tokens: int
    speculative_tokens: int
    plain_seconds: float
    speculative_seconds: float
    acceptance_rate: float
    tokens_per_step: float
    drafted_per_step: float
    draft_ms_per_token: float
    verify_ms_per_step: float
    first_divergence: int | None
    plain_cpu_seconds: float = float("nan")
    speculative_cpu_seconds: float = float("nan")
    plain_ids: list[int] = field(repr=False, default_factory=list)
    speculative_ids: list[int] = field(repr=False, default_factory=list)
    stats: SpeculationStats | None = field(repr=False, default=None)

    @property
    def speedup(self) -> float:
        """Per-token speed-up: plain seconds/token over speculative seconds/token (token counts may differ)."""
        return (self.plain_seconds / self.plain_tokens) / (self.speculative_seconds / self.speculative_tokens)

    @property
    def speedup_cpu(self) -> float:
        """The same ratio from this process's CPU time (robust to other programs on a shared machine)."""
        return (self.plain_cpu_seconds / self.plain_tokens) / (self.speculative_cpu_seconds / self.speculative_tokens)

    def row(self) -> dict:
        return {
            "prompt": self.prompt_id,
            "setting": setting_label(self.setting),
            "prompt tokens": self.prompt_tokens,
            "tokens plain/spec": f"{self.plain_tokens}/{self.speculative_tokens}",
            "speed-up": round(self.speedup, 2),
            "speed-up (CPU time)": round(self.speedup_cpu, 2),
            "acceptance": round(self.acceptance_rate, 2),
            "tokens/step": round(self.tokens_per_step, 2),
            "drafted/step": round(self.drafted_per_step, 2),
            "first difference": "identical" if self.first_divergence is None else self.first_divergence,
        }


def compare_plain_and_speculative(
    model: Any,
    prompts: dict[str, Any],
    settings: Sequence[dict],
    *,
    max_new_tokens: int,
    repeats: int = 3,
    warm_up_each_setting: bool = True,
) -> list[Comparison]:
    """For each prompt and draft setting: plain vs speculative greedy, interleaved, medians of `repeats`.

    `prompts` maps a prompt id to its input ids. Plain runs are shared by all
    settings of a prompt. Each prompt gets an untimed plain warm-up, and every
    (prompt, setting) an untimed speculative one unless `warm_up_each_setting`
    is False (then only the first setting is warmed up).
    """
    if repeats < 1:
        raise SelfSpeculationError(f"repeats must be >= 1, got {repeats}.")
    for options in settings:
        check_generate_inputs(next(iter(prompts.values())), max_new_tokens, options)
    results = []
    for prompt_id, ids in prompts.items():
        generate_greedy(model, ids, max_new_tokens=max_new_tokens, speculative=False)  # warm-up
        plain_runs: list[GenerationRun] = []
        spec_runs: dict[int, list[GenerationRun]] = {index: [] for index in range(len(settings))}
        for options in settings if warm_up_each_setting else settings[:1]:
            generate_greedy(model, ids, max_new_tokens=max_new_tokens, **options)  # warm-up
        for _ in range(repeats):
            plain_runs.append(generate_greedy(model, ids, max_new_tokens=max_new_tokens, speculative=False))
            for index, options in enumerate(settings):
                spec_runs[index].append(generate_greedy(model, ids, max_new_tokens=max_new_tokens, **options))
        plain = _median_run(plain_runs)
        for index, options in enumerate(settings):
            spec = _median_run(spec_runs[index])
            stats = spec.stats
            assert stats is not None, "generate_greedy reads IPEX-LLM's statistics on every speculative run"
            results.append(Comparison(
                prompt_id=prompt_id,
                setting=dict(options),
                prompt_tokens=int(ids.shape[1]),
                plain_tokens=plain.generated_tokens,
                speculative_tokens=spec.generated_tokens,
                plain_seconds=plain.seconds,
                speculative_seconds=spec.seconds,
                acceptance_rate=stats.acceptance_rate,
                tokens_per_step=stats.mean_tokens_per_step,
                drafted_per_step=stats.mean_drafted_per_step,
                draft_ms_per_token=1000 * stats.draft_seconds_per_token,
                verify_ms_per_step=1000 * stats.verify_seconds_per_step,
                first_divergence=first_divergence(plain.token_ids, spec.token_ids),
                plain_cpu_seconds=statistics.median(run.cpu_seconds for run in plain_runs),
                speculative_cpu_seconds=statistics.median(run.cpu_seconds for run in spec_runs[index]),
                plain_ids=plain.token_ids,
                speculative_ids=spec.token_ids,
                stats=stats,
            ))
    return results


def _median_run(runs: Sequence[GenerationRun]) -> GenerationRun:
    """The run with the median wall time (odd count) or the faster of the middle two."""
    ordered = sorted(runs, key=lambda run: run.seconds)
    return ordered[(len(ordered) - 1) // 2]


def sweep_settings(thresholds: Sequence[float] = (), max_steps: Sequence[int] = (),
                   auto_threshold: Sequence[bool] = (True,)) -> list[dict]:
    """Draft settings to try: every threshold x auto on/off (default max_step_draft), then every max_step_draft."""
    settings = [{"th_stop_draft": threshold, "auto_th_stop_draft": auto}
                for threshold in thresholds for auto in auto_threshold]
    settings += [{"max_step_draft": steps} for steps in max_steps]
    return settings


def setting_label(setting: dict) -> str:
    """Short label, e.g. 'th=0.6 auto', 'th=0.6 fixed', 'max_step=4', 'defaults'."""
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


def divergence_report(decode: Any, reference: Sequence[int], candidate: Sequence[int]) -> str:
    """Where two generations part: the shared start, then each one's continuation (decoded)."""
    position = first_divergence(reference, candidate)
    if position is None:
        return f"identical ({len(reference)} tokens):\n{decode(list(reference))}"
    return (f"identical for {position} tokens:\n{decode(list(reference[:position]))}\n"
            f"--- plain greedy continues:    {decode(list(reference[position:]))!r}\n"
            f"--- self-speculative continues: {decode(list(candidate[position:]))!r}")


# --------------------------------------------------------------------------- side-by-side rows and the formula


def summary_rows(comparisons: Sequence[Comparison], cost_ratio: float | None, precision: str) -> list[dict]:
    """Rows in the format `utils.selfspec.ov_self_speculation.summary_rows` uses, for one side-by-side table."""
    return [{
        "backend": "IPEX-LLM",
        "draft": "INT4 copy",
        "setting": setting_label(comparison.setting),
        "prompt": comparison.prompt_id,
        "prompt tokens": comparison.prompt_tokens,
        "tokens": comparison.speculative_tokens,
        "speed-up": comparison.speedup,
        "speed-up (CPU time)": comparison.speedup_cpu,
        "acceptance": comparison.acceptance_rate,
        "k": max(1, round(comparison.drafted_per_step)),
        "tokens/pass": comparison.tokens_per_step,
        "identical to plain": comparison.first_divergence is None,
        "first difference": comparison.first_divergence,
        "cost ratio c": cost_ratio,
        "precision": precision,
    } for comparison in comparisons]


def step_costs(comparisons: Sequence[Comparison]) -> list[dict]:
    """Inside each speculative run: a verify pass and a draft pass, relative to one plain decode step (wall time).

    The plain step is the plain run's time per generated token (prompt pass
    included, so slightly high for long prompts). Leviathan's formula assumes
    1 and c for these two.
    """
    rows = []
    for comparison in comparisons:
        plain_ms = 1000 * comparison.plain_seconds / comparison.plain_tokens
        rows.append({
            "backend": "IPEX-LLM",
            "draft": "INT4 copy",
            "prompt": comparison.prompt_id,
            "verify pass / plain step": decoding_metrics.verification_cost(comparison.verify_ms_per_step, plain_ms),
            "draft pass / plain step": decoding_metrics.cost_ratio(comparison.draft_ms_per_token, plain_ms),
        })
    return rows


def formula_check(rows: Sequence[dict], costs: Sequence[dict] = ()) -> list[dict]:
    """Leviathan's predicted speed-up beside the measured ones, for side-by-side rows of either backend.

    Each row needs ``k`` (tokens drafted per verify step), ``tokens/pass``
    (tokens per verification pass) and ``cost ratio c``. The per-token
    acceptance ``a`` is the one that explains the measured tokens per pass
    with that k (`utils.decoding.decoding_metrics.per_token_acceptance`).
    "predicted" assumes a verify pass costs one plain step and a draft pass c;
    when `costs` (from `step_costs` / `ov_self_speculation.pipeline_step_costs`)
    has the row's measured pass costs, "predicted (measured passes)" uses those.
    """
    from utils.decoding.speedup_model import predicted_speedup, predicted_speedup_with_step_times

    by_run = {(cost["backend"], cost["draft"], cost["prompt"]): cost for cost in costs}
    checked = []
    for row in rows:
        draft_length, cost_ratio = row["k"], row["cost ratio c"]
        acceptance = decoding_metrics.per_token_acceptance(row["tokens/pass"], draft_length)
        cost = by_run.get((row["backend"], row["draft"], row["prompt"]))
        checked.append({
            "backend": row["backend"],
            "draft": row["draft"],
            "prompt": row["prompt"],
            "k": draft_length,
            "tokens/pass": row["tokens/pass"],
            "a": acceptance,
            "cost ratio c": cost_ratio,
            "predicted": predicted_speedup(acceptance, draft_length, cost_ratio),
            "predicted (measured passes)": predicted_speedup_with_step_times(
                acceptance, draft_length, cost["draft pass / plain step"], 1.0, cost["verify pass / plain step"])
            if cost else None,
            "measured (CPU time)": row["speed-up (CPU time)"],
            "measured (wall)": row["speed-up"],
        })
    return checked


# --------------------------------------------------------------------------- results shared with OpenVINO


def check_openvino_half(main_python: Path | str, main_folder: Path | str, draft_folders: dict[str, Path]) -> None:
    """Raise now, not after minutes of IPEX-LLM work, if the OpenVINO half cannot run."""
    how = "Prepare them with `python3 tutorial.py lab` (or `.venv/bin/python -m utils.models.offline_pair`)."
    if not Path(main_python).exists():
        raise SelfSpeculationError(
            f"{main_python} does not exist: the main environment (with openvino-genai) is not set up. Run "
            "`python3 tutorial.py lab`, or set MAIN_PYTHON in the parameters cell.")
    folders = {"main": Path(main_folder), **{f"draft {name}": Path(path) for name, path in draft_folders.items()}}
    missing = [f"{role} ({folder})" for role, folder in folders.items() if not (folder / "openvino_model.xml").is_file()]
    if missing:
        raise SelfSpeculationError(f"OpenVINO model folder(s) missing: {', '.join(missing)}. {how}")


def run_main_python(module_args: Sequence[str], python: Path | str | None = None, timeout: float = 1800,
                    env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m <module_args>`` with the MAIN environment's python, from the repository root.

    The IPEX-LLM kernel has no OpenVINO; the OpenVINO half runs there instead.
    Raises with the child's stderr if it fails.
    """
    python = Path(python) if python else REPO_ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        raise SelfSpeculationError(
            f"{python} does not exist: the main environment is not set up. Run `python3 tutorial.py lab` first, "
            "or set MAIN_PYTHON in the parameters cell to a python with openvino-genai.")
    child_env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHONPATH", "VIRTUAL_ENV"))}
    child_env.update(env or {})
    completed = subprocess.run([str(python), "-m", *module_args], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=timeout, env=child_env)
    if completed.returncode != 0:
        raise RuntimeError(f"`{python} -m {' '.join(module_args)}` failed:\n{completed.stderr[-3000:]}")
    return completed
