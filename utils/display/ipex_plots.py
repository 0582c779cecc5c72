"""Plots of IPEX-LLM self-speculation results (notebook 04); matplotlib is imported inside each function.

    from utils.display import ipex_plots
    ipex_plots.plot_step_statistics(run.stats)      # one speculative call, step by step
    ipex_plots.plot_draft_settings(comparisons)            # acceptance, tokens per pass, speed-up per draft setting
    ipex_plots.plot_side_by_side(rows)              # IPEX-LLM and OpenVINO GenAI rows of `summary_rows`
    ipex_plots.plot_payoff(a, k, measured_c, fit)   # predicted speed-up against c and model size
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from utils.selfspec.ipex_comparisons import Comparison, setting_label
from utils.selfspec.ipex_self_speculation import SpeculationStats
from utils.selfspec.step_cost_model import predicted_cost_ratio


def plot_step_statistics(stats: SpeculationStats, title: str = "") -> Any:
    """Per verify step: tokens drafted vs accepted, and the time spent drafting vs verifying."""
    import matplotlib.pyplot as plt

    steps = range(1, stats.steps + 1)
    figure, (counts, times) = plt.subplots(1, 2, figsize=(11, 3.4))
    counts.bar(steps, stats.drafted_per_step, color="#c9d6ea", label="drafted by the INT4 copy")
    counts.bar(steps, stats.accepted_per_step, color="#3465a4", label="accepted by the main model")
    counts.set(xlabel="verify step", ylabel="tokens", title=f"acceptance {stats.acceptance_rate:.0%}")
    counts.legend(fontsize=8)
    times.bar(steps, [1000 * t for t in stats.draft_seconds], color="#f0a35e", label="draft")
    times.bar(steps, [1000 * t for t in stats.verify_seconds], bottom=[1000 * t for t in stats.draft_seconds],
              color="#7a7a7a", label="verify")
    times.set(xlabel="verify step", ylabel="ms", title="time per step")
    times.legend(fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_draft_settings(comparisons: Sequence[Comparison], title: str = "") -> Any:
    """Acceptance, tokens per verify step and speed-up for each draft setting, one line per prompt."""
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(setting_label(comparison.setting) for comparison in comparisons))
    prompts = list(dict.fromkeys(comparison.prompt_id for comparison in comparisons))
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.6), sharex=True)
    metrics = (("acceptance", lambda c: c.acceptance_rate), ("tokens per verify step", lambda c: c.tokens_per_step),
               ("speed-up vs plain", lambda c: c.speedup))
    for axis, (name, value) in zip(axes, metrics, strict=True):
        for prompt in prompts:
            by_label = {setting_label(c.setting): value(c) for c in comparisons if c.prompt_id == prompt}
            axis.plot(range(len(labels)), [by_label.get(label, float("nan")) for label in labels], "o-", label=prompt)
        axis.set_title(name)
        axis.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
    axes[2].axhline(1.0, color="black", linewidth=0.8)
    axes[0].legend(fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_side_by_side(rows: Sequence[dict], title: str = "", speedup_key: str = "speed-up (CPU time)") -> Any:
    """Speed-up and acceptance per prompt for every backend/draft (rows from both `summary_rows`)."""
    import matplotlib.pyplot as plt

    systems = list(dict.fromkeys(f"{row['backend']}, {row['draft']}" for row in rows))
    prompts = list(dict.fromkeys(row["prompt"] for row in rows))
    width = 0.8 / len(systems)
    figure, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    for axis, key in zip(axes, (speedup_key, "acceptance"), strict=True):
        for index, system in enumerate(systems):
            values = {row["prompt"]: row[key] for row in rows if f"{row['backend']}, {row['draft']}" == system}
            positions = [p + index * width - 0.4 + width / 2 for p in range(len(prompts))]
            axis.bar(positions, [values.get(prompt) or 0.0 for prompt in prompts], width, label=system)
        axis.set_xticks(range(len(prompts)), prompts, fontsize=8)
        axis.set_title(key)
    axes[0].axhline(1.0, color="black", linewidth=0.8)
    axes[0].legend(fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_payoff(acceptance: float, draft_length: int, measured: dict[str, float], fit: dict,
                sizes: Sequence[float] = (1.35e8, 5e8, 1.5e9, 3e9, 7e9, 1.3e10, 3.4e10, 7e10)) -> Any:
    """Left: predicted speed-up against the cost ratio c, measured c's marked. Right: c and speed-up by model size."""
    import matplotlib.pyplot as plt

    from utils.decoding.speedup_model import predicted_speedup

    figure, (by_cost, by_size) = plt.subplots(1, 2, figsize=(12, 3.8))
    costs = [i / 100 for i in range(0, 101)]
    by_cost.plot(costs, [predicted_speedup(acceptance, draft_length, c) for c in costs], color="#3465a4")
    for label, c in measured.items():
        by_cost.plot([c], [predicted_speedup(acceptance, draft_length, c)], "o", label=f"{label}: c={c:.2f}")
    by_cost.axhline(1.0, color="black", linewidth=0.8)
    by_cost.set(xlabel="cost ratio c = draft step / main step", ylabel="predicted speed-up",
                title=f"a={acceptance:.2f}, k={draft_length}")
    by_cost.legend(fontsize=8)
    ratios = [predicted_cost_ratio(size, fit) for size in sizes]
    by_size.semilogx(sizes, [predicted_speedup(acceptance, draft_length, c) for c in ratios], "o-",
                     label="predicted speed-up")
    by_size.semilogx(sizes, ratios, "s--", label="predicted c (INT4 / bf16)")
    by_size.axhline(1.0, color="black", linewidth=0.8)
    by_size.set(xlabel="parameters", title="if step time = overhead + weight bytes / bandwidth")
    by_size.legend(fontsize=8)
    figure.tight_layout()
    return figure
