"""Plots for notebook 05 (tuning speculative decoding).

Every plot of a speed-up draws the plain-decoding reference (1.0x) as a line.
Functions take the results of `utils.tuning.sweeps`, `utils.tuning.concurrency`,
`utils.tuning.pipeline_memory`, `utils.decoding.step_timing` and `utils.tuning.autotune` and
return a matplotlib Figure; matplotlib is imported inside them.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

KNOB_LABELS = {
    "num_assistant_tokens": "K = num_assistant_tokens (draft tokens per step)",
    "assistant_confidence_threshold": "assistant_confidence_threshold",
    "draft": "draft (weights @ inference precision)",
}


def _plain_line(axis: Any, label: str = "plain decoding (1.0x)") -> None:
    axis.axhline(1.0, color="black", linestyle="--", linewidth=1, label=label)


def _series(rows: Sequence[dict], metric: str) -> dict[str, tuple[list, list]]:
    by_group: dict[str, list[tuple[Any, float]]] = {}
    for row in rows:
        if row.get(metric) is not None:
            by_group.setdefault(row["group"], []).append((row["value"], row[metric]))
    return {group: ([x for x, _ in sorted(points)], [y for _, y in sorted(points)])
            for group, points in sorted(by_group.items())}


def plot_sweep(result: Any, by: str | None = "task", title: str | None = None):
    """Speed-up (left) and draft acceptance rate (right) against the swept knob, one line per group."""
    import matplotlib.pyplot as plt

    rows = result.rows(by)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for group, (xs, ys) in _series(rows, "speedup").items():
        left.plot(xs, ys, marker="o", label=group)
    _plain_line(left)
    left.set_ylabel("speed-up over plain decoding")
    for group, (xs, ys) in _series(rows, "acceptance_rate").items():
        right.plot(xs, ys, marker="o", label=group)
    right.set_ylabel("draft tokens accepted (fraction)")
    right.set_ylim(0, 1.05)
    for axis in (left, right):
        axis.set_xlabel(KNOB_LABELS.get(result.knob, result.knob))
        axis.grid(alpha=0.3)
    left.legend(fontsize=8)
    figure.suptitle(title or f"{result.name}: pair '{result.pair}' on {result.device}")
    figure.tight_layout()
    return figure


def plot_drafts(result: Any, draft_sizes_mb: dict[str, float] | None = None):
    """Speed-up and acceptance per draft variant (bars), labelled with the draft's size on disk."""
    import matplotlib.pyplot as plt

    rows = result.rows(None)
    labels = [str(row["value"]) for row in rows]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    positions = list(range(len(rows)))
    left.bar(positions, [row["speedup"] or 0 for row in rows], color="tab:blue")
    _plain_line(left)
    left.set_ylabel("speed-up over plain decoding")
    left.set_ylim(0, max([1.25] + [(row["speedup"] or 0) * 1.2 for row in rows]))
    right.bar(positions, [row["acceptance_rate"] or 0 for row in rows], color="tab:green")
    right.set_ylabel("draft tokens accepted (fraction)")
    right.set_ylim(0, 1.05)
    for axis in (left, right):
        tick_labels = []
        for label in labels:
            size = (draft_sizes_mb or {}).get(label)
            tick_labels.append(f"{label}\n{size:.0f} MB" if size else label)
        axis.set_xticks(positions, tick_labels, fontsize=8)
        axis.grid(alpha=0.3, axis="y")
    for position, row in zip(positions, rows, strict=True):
        left.annotate("same text" if row["identical"] else "text differs", (position, row["speedup"] or 0),
                      ha="center", va="bottom", fontsize=7)
    left.legend(fontsize=8, loc="upper right")
    figure.suptitle(f"Draft weights and precision (main model fixed): pair '{result.pair}' on {result.device}")
    figure.tight_layout()
    return figure


def plot_concurrency(rows: Sequence[dict]):
    """Throughput of plain and speculative decoding (left) and their ratio (right) vs requests at once.

    A batch returns when its last request is done, so for a batch the latency
    ratio and the throughput ratio are the same number.
    """
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for mode in ("plain", "speculative"):
        mode_rows = sorted((row for row in rows if row["mode"] == mode), key=lambda row: row["concurrency"])
        left.plot([row["concurrency"] for row in mode_rows], [row["tokens_per_second"] for row in mode_rows],
                  marker="o", label=mode)
    left.set_ylabel("generated tokens per second (all requests)")
    speculative = sorted((row for row in rows if row["mode"] == "speculative"), key=lambda row: row["concurrency"])
    levels = [row["concurrency"] for row in speculative]
    right.plot(levels, [row["throughput_vs_plain"] for row in speculative], marker="o", color="tab:orange",
               label="speculative vs plain (batch time and throughput)")
    _plain_line(right, "plain decoding")
    right.set_ylabel("speed-up over plain decoding")
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(levels, [str(level) for level in levels])
        axis.set_xlabel("requests at once (continuous batching)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle("Under load: speculation's latency gain turns into a throughput cost")
    figure.tight_layout()
    return figure


def plot_step_times(main_steps: Sequence[Any], draft_step: Any | None = None, jump_factor: float = 1.5):
    """Time of one main-model pass vs the number of draft tokens K it verifies (K+1 tokens in)."""
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 3.8))
    ks = [step.tokens - 1 for step in main_steps]
    axis.plot(ks, [step.median_ms for step in main_steps], marker="o", label=f"main model ({main_steps[0].model})")
    for step in main_steps:
        axis.scatter([step.tokens - 1] * len(step.samples_ms), step.samples_ms, color="tab:blue", alpha=0.2, s=8)
    one_token = next(step.median_ms for step in main_steps if step.tokens == 1)
    axis.axhline(one_token, color="black", linestyle="--", linewidth=1, label="plain step (1 token)")
    axis.axhline(one_token * jump_factor, color="grey", linestyle=":", linewidth=1,
                 label=f"{jump_factor}x plain step")
    if draft_step is not None:
        axis.axhline(draft_step.median_ms, color="tab:orange", linestyle="-.", linewidth=1,
                     label=f"one draft step ({draft_step.model})")
    axis.set_xlabel("K = draft tokens verified in one pass (the pass takes K+1 tokens)")
    axis.set_ylabel("ms per pass (median)")
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    axis.set_title("The cost of verification")
    figure.tight_layout()
    return figure


def plot_memory(rows: Sequence[dict]):
    """RSS after loading and peak RSS per pipeline configuration (horizontal bars)."""
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(9, 0.6 * len(rows) + 1.5))
    labels = [f"{row['pipeline']}\ncache: {row['cache_size_gb']}" + (" GB" if row["cache_size_gb"] != "dynamic"
                                                                      else "") for row in rows]
    positions = list(range(len(rows)))
    axis.barh([p + 0.2 for p in positions], [row["peak_rss_mb"] for row in rows], height=0.4, label="peak RSS")
    axis.barh([p - 0.2 for p in positions], [row["rss_after_load_mb"] for row in rows], height=0.4,
              label="after loading")
    axis.set_yticks(positions, labels, fontsize=8)
    axis.set_xlabel("MB resident")
    axis.grid(alpha=0.3, axis="x")
    axis.legend(fontsize=8)
    axis.set_title("Memory of plain and speculative pipelines")
    figure.tight_layout()
    return figure


def plot_theory(rows: Sequence[dict]):
    """Measured speed-up vs K next to the predictions (left), and predicted vs measured (right)."""
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    ks = [row["K"] for row in rows]
    series = (("measured", "measured", "o", "-"),
              ("leviathan", "Leviathan, a_K and c", "s", "--"),
              ("leviathan_pooled_a", "Leviathan, one a for all K", "^", ":"),
              ("with_verification_cost", "with measured verification cost", "D", "-."))
    for key, label, marker, style in series:
        left.plot(ks, [row[key] for row in rows], marker=marker, linestyle=style, label=label)
    _plain_line(left)
    left.set_xlabel("K")
    left.set_ylabel("speed-up over plain decoding")
    left.legend(fontsize=8)
    measured = [row["measured"] for row in rows]
    for key, label, marker, _ in series[1:]:
        right.scatter(measured, [row[key] for row in rows], marker=marker, label=label)
    for row in rows:
        right.annotate(f"K={row['K']}", (row["measured"], row["with_verification_cost"]), fontsize=7,
                       xytext=(3, 3), textcoords="offset points")
    limits = [min(measured + [row["leviathan"] for row in rows]) * 0.9,
              max(measured + [row["leviathan"] for row in rows]) * 1.1]
    right.plot(limits, limits, color="black", linewidth=1, label="prediction = measurement")
    right.set_xlabel("measured speed-up")
    right.set_ylabel("predicted speed-up")
    right.legend(fontsize=8)
    for axis in (left, right):
        axis.grid(alpha=0.3)
    figure.suptitle("Theory (Leviathan et al., arXiv:2211.17192) against measurement")
    figure.tight_layout()
    return figure


def plot_autotune(sweep_speedups: dict, result: Any, tolerance: float = 0.05):
    """The full sweep's curve, the tuner's trials in the order it ran them, its pick and the sweep's best."""
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4))
    values = sorted(sweep_speedups)
    axis.plot(values, [sweep_speedups[value] for value in values], marker="o", color="lightgrey",
              label="full sweep (every value measured)")
    best_value = max(values, key=lambda value: sweep_speedups[value])
    best = sweep_speedups[best_value]
    axis.axhspan(best * (1 - tolerance), best, color="tab:green", alpha=0.12,
                 label=f"within {tolerance:.0%} of the sweep's best")
    axis.scatter([trial.value for trial in result.trials], [trial.speedup for trial in result.trials],
                 color="tab:blue", zorder=3, label="tuner's trials (its own runs)")
    for order, trial in enumerate(result.trials, start=1):
        axis.annotate(str(order), (trial.value, trial.speedup), xytext=(4, 4), textcoords="offset points",
                      fontsize=8, color="tab:blue")
    if result.predictions:
        predicted = sorted(result.predictions.items())
        axis.plot([value for value, _ in predicted], [speedup for _, speedup in predicted], linestyle=":",
                  color="tab:blue", label="tuner's calibrated prediction")
    if result.best_value in sweep_speedups:
        axis.scatter([result.best_value], [sweep_speedups[result.best_value]], marker="*", s=200, color="tab:red",
                     zorder=4, label=f"tuner's pick in the sweep ({result.best_value})")
    _plain_line(axis)
    axis.set_xlabel(KNOB_LABELS.get(result.knob, result.knob))
    axis.set_ylabel("speed-up over plain decoding")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    axis.set_title(f"Auto-tuner: {len(result.trials)} of {len(result.candidates)} values measured "
                   f"in {result.spent_seconds:.0f} s")
    figure.tight_layout()
    return figure


def plot_task_choices(choices: Sequence[Any], margin: float = 0.05, tolerance: float = 0.03):
    """Per task type: every candidate's speed-up on the tuning prompts, the choice, and its held-out ratio.

    choices: `utils.tuning.task_tuner.TaskChoice`s. The band above 1.0 is the margin a candidate must clear to be
    chosen; the band below is the held-out promise (at most `tolerance` slower than plain).
    """
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(name for choice in choices for name in choice.candidates))
    figure, axis = plt.subplots(figsize=(9, 4))
    width = 0.8 / (len(names) + 1)
    for task_index, choice in enumerate(choices):
        for name_index, name in enumerate(names):
            speedup = choice.candidates.get(name)
            if speedup is None:
                continue
            chosen = name == choice.label
            axis.bar(task_index + name_index * width, speedup, width, color=f"C{name_index}",
                     edgecolor="black" if chosen else "none", linewidth=2 if chosen else 0,
                     label=name if task_index == 0 else None)
        if choice.held_out_speedup is not None:
            axis.scatter([task_index + len(names) * width], [choice.held_out_speedup], marker="D", s=60,
                         color="black", zorder=3, label="choice on held-out prompts" if task_index == 0 else None)
            axis.annotate(choice.label, (task_index + len(names) * width, choice.held_out_speedup),
                          xytext=(0, 8), textcoords="offset points", ha="center", fontsize=8)
    axis.axhspan(1.0, 1.0 + margin, color="tab:orange", alpha=0.15, label=f"needed to leave plain (+{margin:.0%})")
    axis.axhspan(1.0 - tolerance, 1.0, color="tab:red", alpha=0.12, label=f"held-out promise (-{tolerance:.0%})")
    _plain_line(axis)
    axis.set_xticks([index + len(names) * width / 2 for index in range(len(choices))])
    axis.set_xticklabels([choice.task for choice in choices])
    axis.set_ylabel("speed-up over plain decoding")
    axis.set_title("Per-task choice: candidates on the tuning prompts (black edge: chosen), check on held-out ones")
    axis.grid(alpha=0.3, axis="y")
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    return figure
