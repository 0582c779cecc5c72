"""Plots for notebook 06: the draft's training curve, and what its acceptance buys according to the speed-up formula."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from utils.decoding.speedup_model import break_even_acceptance, predicted_speedup


def _smooth(values: Sequence[float], window: int) -> list[float]:
    """Trailing moving average (the first points average what exists so far)."""
    smoothed, total = [], 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        smoothed.append(total / min(index + 1, window))
    return smoothed


def plot_training(history: Any, axes: Sequence[Any] | None = None) -> Any:
    """Loss per step (raw and smoothed) and the held-out greedy agreement (estimated acceptance) over training."""
    import matplotlib.pyplot as plt

    if axes is None:
        figure, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    else:
        figure = axes[0].figure
    loss_axis, agreement_axis = axes
    loss_axis.plot(history.steps, history.loss, color="tab:blue", alpha=0.25, linewidth=0.8, label="per step")
    window = max(1, len(history.loss) // 25)
    loss_axis.plot(history.steps, _smooth(history.loss, window), color="tab:blue", label=f"mean of {window} steps")
    loss_axis.set_xlabel("training step")
    loss_axis.set_ylabel("loss")
    loss_axis.set_title(f"Training loss ({history.training_seconds / 60:.1f} min, {history.tokens_seen:,} tokens seen)")
    loss_axis.legend()
    loss_axis.grid(alpha=0.3)
    agreements = [evaluation["agreement"] for evaluation in history.evaluations]
    agreement_axis.plot([evaluation["step"] for evaluation in history.evaluations], agreements, marker="o",
                        color="tab:green")
    agreement_axis.set_xlabel("training step")
    agreement_axis.set_ylabel("share of the main's greedy tokens predicted")
    agreement_axis.set_title("Held-out top-1 agreement (estimates acceptance a)")
    agreement_axis.set_ylim(0, max([0.5] + [value + 0.05 for value in agreements]))
    agreement_axis.grid(alpha=0.3)
    figure.tight_layout()
    return figure


def plot_speedup_vs_acceptance(cost_ratio: float, draft_lengths: Sequence[int], measured: Sequence[dict] = (),
                               reference_cost_ratios: dict[str, float] | None = None, axis: Any = None) -> Any:
    """The formula's speed-up against acceptance `a` for each K at this cost ratio, with the measured runs on it.

    reference_cost_ratios: other c values, drawn dashed for the largest K.
    """
    import matplotlib.pyplot as plt

    if axis is None:
        figure, axis = plt.subplots(figsize=(7.5, 4.5))
    else:
        figure = axis.figure
    grid = [i / 200 for i in range(201)]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, k in enumerate(draft_lengths):
        colour = colours[index % len(colours)]
        axis.plot(grid, [predicted_speedup(a, k, cost_ratio) for a in grid], color=colour,
                  label=f"K={k}, c={cost_ratio:.2f} (break-even a={break_even_acceptance(k, cost_ratio):.2f})")
        for row in measured:
            if row["K"] == k and row.get("speedup") is not None and row.get("per_token_acceptance") is not None:
                axis.scatter([row["per_token_acceptance"]], [row["speedup"]], color=colour, zorder=3,
                             edgecolor="black", s=50)
    for name, other in (reference_cost_ratios or {}).items():
        k = max(draft_lengths)
        axis.plot(grid, [predicted_speedup(a, k, other) for a in grid], linestyle="--", color="grey",
                  label=f"K={k}, c={other:.2f}: {name}")
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xlabel("per-token acceptance a")
    axis.set_ylabel("speed-up over plain decoding")
    axis.set_title("Speed-up formula; dots = this draft, measured")
    axis.set_xlim(0, 1)
    axis.set_ylim(0, max(2.5, max((predicted_speedup(0.9, k, cost_ratio) for k in draft_lengths), default=2.5)))
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    return figure
