"""Plots drawn by more than one cell (notebooks 05, 06); each speed-up plot draws the plain reference (1.0x)."""
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


def plot_theory(rows: Sequence[dict]):
    """Measured speed-up vs K next to the predictions (left), and predicted vs measured (right)."""
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    ks = [row["K"] for row in rows]
    series = (("measured", "measured speed-up", "o", "-"),   # the glossary's names
              ("leviathan", "predicted (Leviathan)", "s", "--"),
              ("leviathan_pooled_a", "predicted (Leviathan), one a for all K", "^", ":"),
              ("with_verification_cost", "predicted (step times)", "D", "-."))
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
