"""The formula you can turn (notebook 07): Leviathan's expected speed-up over K, redrawn as sliders for a, K, c move.

Measured points are drawn over the curve, showing why a cheap-but-poor or good-but-costly draft does not pay.
"""
from __future__ import annotations

import io
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from utils.decoding.speedup_model import break_even_acceptance, predicted_speedup


@dataclass(frozen=True)
class MeasuredPoint:
    """A measured speculative run of the pair: its K, speed-up, and the a and c that explain it."""

    k: int
    speedup: float
    acceptance: float
    cost_ratio: float


def measured_points(breakdown_rows: Sequence[dict]) -> list[MeasuredPoint]:
    """Points from fixed-K `speculation_breakdown` rows with a measured speed-up, a and c (c needs the plain run)."""
    points = []
    for row in breakdown_rows:
        setting = row["setting"]
        measured = (row["measured speed-up"], row["per-token acceptance a"], row["cost ratio c"])
        if None in measured or not setting.startswith("K="):
            continue
        points.append(MeasuredPoint(k=int(setting.split(",")[0][2:]), speedup=row["measured speed-up"],
                                    acceptance=row["per-token acceptance a"], cost_ratio=row["cost ratio c"]))
    return points


@dataclass
class FormulaExplorer:
    """Sliders a, K, c and the image of Leviathan's expected speed-up over K they redraw."""

    acceptance: Any
    k: Any
    cost_ratio: Any
    image: Any
    summary: Any
    widget: Any
    points: list[MeasuredPoint]
    points_label: str = "measured here"
    max_k: int = 10
    last_curve: list[tuple[int, float]] = field(default_factory=list)
    redraws: int = 0

    def redraw(self, _change: Any = None) -> None:
        from matplotlib.figure import Figure

        a, k, c = float(self.acceptance.value), int(self.k.value), float(self.cost_ratio.value)
        ks = list(range(1, self.max_k + 1))
        self.last_curve = [(draft_length, predicted_speedup(a, draft_length, c)) for draft_length in ks]
        figure = Figure(figsize=(7, 3.6), dpi=90)
        axes = figure.add_subplot()
        axes.plot(ks, [speedup for _, speedup in self.last_curve], marker="o", label=f"formula: a={a:.2f}, c={c:.2f}")
        axes.axhline(1.0, color="grey", linestyle="--", label="break-even (1x)")
        axes.axvline(k, color="#d62728", alpha=0.4, label=f"K={k}")
        if self.points:
            axes.scatter([point.k for point in self.points], [point.speedup for point in self.points], color="black",
                         marker="x", s=60, zorder=3, label=self.points_label)
        axes.set_xlabel("K, draft tokens per step")
        axes.set_ylabel("expected speed-up")
        axes.set_xticks(ks)
        axes.legend(fontsize=8, loc="upper right")
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        self.image.value = buffer.getvalue()
        break_even = break_even_acceptance(k, c)
        needed = "never pays at this K and c (even a = 1)" if break_even != break_even else \
            f"pays from a ≥ {break_even:.2f}"
        self.summary.value = (f'<div class="specdec-formula-summary">At K={k}: expected speed-up '
                              f"<b>{predicted_speedup(a, k, c):.2f}x</b>; with c={c:.2f} speculation {needed}.</div>")
        self.redraws += 1


def build_formula_explorer(points: Sequence[MeasuredPoint] = (), *, pair: str, acceptance: float | None = None,
                           k: int = 3, cost_ratio: float | None = None, max_k: int = 10) -> FormulaExplorer:
    """Sliders for a, K, c (default: the measured points' medians) redrawing the curve; `pair` names the legend."""
    import ipywidgets as widgets

    points = list(points)
    if acceptance is None:
        acceptance = statistics.median(point.acceptance for point in points) if points else 0.6
    if cost_ratio is None:
        cost_ratio = statistics.median(point.cost_ratio for point in points) if points else 0.5
    style = {"description_width": "11em"}
    a_slider = widgets.FloatSlider(value=round(acceptance, 2), min=0.0, max=0.99, step=0.01, style=style,
                                   description="acceptance a:").add_class("specdec-formula-a")
    k_slider = widgets.IntSlider(value=k, min=1, max=max_k, description="K:", style=style).add_class(
        "specdec-formula-k")
    c_slider = widgets.FloatSlider(value=round(cost_ratio, 2), min=0.0, max=1.5, step=0.01, style=style,
                                   description="cost ratio c:").add_class("specdec-formula-c")
    image = widgets.Image(format="png").add_class("specdec-formula-image")
    summary = widgets.HTML()
    widget = widgets.VBox([a_slider, k_slider, c_slider, summary, image])
    explorer = FormulaExplorer(acceptance=a_slider, k=k_slider, cost_ratio=c_slider, image=image, summary=summary,
                               widget=widget, points=points,
                               points_label=f"measured here ({pair} pair)", max_k=max_k)
    for slider in (a_slider, k_slider, c_slider):
        slider.observe(explorer.redraw, names="value")
    explorer.redraw()
    return explorer
