"""Figures of notebooks 02, 03 and 08: the idea of speculative decoding, and plots of measured records.

Speed-ups come from `speedup_by_task` rows, so a plot shows the numbers its verdict prints.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from utils.decoding.generation import GenerationRecord
from utils.decoding.step_streamer import ACCEPTED_COLOUR, MAIN_COLOUR

DRAFT_COLOUR = "#cfe2ff"
REJECTED_COLOUR = "#f8c5c5"
DISCARDED_COLOUR = "#e9ecef"


def _token_box(ax: Any, x: float, y: float, text: str, colour: str, width: float = 1.0, mark: str = "") -> None:
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x + 0.05, y - 0.3), width - 0.1, 0.6, boxstyle="round,pad=0.02",
                                facecolor=colour, edgecolor="#444", linewidth=0.8))
    ax.text(x + width / 2, y, text, ha="center", va="center", fontsize=10)
    if mark:
        ax.text(x + width / 2, y + 0.45, mark, ha="center", va="center", fontsize=12,
                color="#1b7f3b" if mark == "✓" else "#b02a37")


def draw_speculation_idea(
    context: str = "The sky looks",
    draft_tokens: Sequence[str] = (" blue", " because", " the", " ocean"),
    accepted: int = 3,
    main_token: str = " air",
) -> Any:
    """One speculative-decoding step in three rows: propose, verify in one pass, accept a prefix + one own token.

    main_token replaces the first rejected draft token, or is a bonus when all are accepted.
    """
    import matplotlib.pyplot as plt

    k = len(draft_tokens)
    if not 0 <= accepted <= k:
        raise ValueError(f"accepted must lie in [0, {k}], got {accepted}.")
    figure, ax = plt.subplots(figsize=(10, 4.2))
    context_width = 2.6
    rows = [
        (3.0, f"1. The draft proposes K={k} tokens\n(K cheap passes of a small model)"),
        (1.8, "2. The main model scores all K in ONE pass\nand keeps the longest prefix it agrees with"),
        (0.6, f"3. This step yields {accepted} accepted + 1 own token\n= {accepted + 1} tokens for one main-model pass"),
    ]
    for y, label in rows:
        ax.text(-0.2, y, label, ha="right", va="center", fontsize=9.5)
        _token_box(ax, 0, y, context, "white", width=context_width)
    start = context_width
    for index, token in enumerate(draft_tokens):
        x = start + index
        _token_box(ax, x, 3.0, repr(token)[1:-1], DRAFT_COLOUR)
        if index < accepted:
            _token_box(ax, x, 1.8, repr(token)[1:-1], ACCEPTED_COLOUR, mark="✓")
            _token_box(ax, x, 0.6, repr(token)[1:-1], ACCEPTED_COLOUR)
        elif index == accepted:
            _token_box(ax, x, 1.8, repr(token)[1:-1], REJECTED_COLOUR, mark="✗")
        else:
            _token_box(ax, x, 1.8, repr(token)[1:-1], DISCARDED_COLOUR)
    _token_box(ax, start + accepted, 0.6, repr(main_token)[1:-1], MAIN_COLOUR)
    ax.annotate("", xy=(start + accepted + 0.5, 0.95), xytext=(start + min(accepted, k - 1) + 0.5, 1.45),
                arrowprops={"arrowstyle": "->", "color": "#b02a37" if accepted < k else "#444"})
    legend = [("draft proposal", DRAFT_COLOUR), ("accepted draft token", ACCEPTED_COLOUR),
              ("rejected", REJECTED_COLOUR), ("discarded (after a rejection)", DISCARDED_COLOUR),
              ("main model's own token", MAIN_COLOUR)]
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(facecolor=colour, edgecolor="#444", label=label) for label, colour in legend],
              loc="lower center", bbox_to_anchor=(0.35, -0.28), ncol=3, fontsize=8.5, frameon=False)
    ax.set_xlim(-6.2, start + k + 1.2)
    ax.set_ylim(0, 3.7)
    ax.axis("off")
    ax.set_title("One step of speculative decoding (greedy): output is what the main model alone would write",
                 fontsize=11)
    figure.tight_layout()
    return figure


def draw_timeline(tokens_per_step: Sequence[int] = (1, 4, 2, 4, 1, 3), num_assistant_tokens: int = 3,
                  draft_cost: float = 0.3) -> Any:
    """Time lanes: plain (one main pass per token) vs speculative steps; draft_cost is the cost ratio c."""
    import matplotlib.pyplot as plt

    total = sum(tokens_per_step)
    figure, ax = plt.subplots(figsize=(10, 2.6))
    for index in range(total):
        ax.barh(1, 0.95, left=index, color=MAIN_COLOUR, edgecolor="#444")
    time = 0.0
    for step_index, tokens in enumerate(tokens_per_step):
        if step_index > 0:  # the first pass is the prefill: no draft yet
            for _ in range(num_assistant_tokens):
                ax.barh(0, draft_cost * 0.95, left=time, color=DRAFT_COLOUR, edgecolor="#444")
                time += draft_cost
        ax.barh(0, 0.95, left=time, color=MAIN_COLOUR, edgecolor="#444")
        ax.text(time + 0.47, 0, f"+{tokens}", ha="center", va="center", fontsize=8)
        time += 1.0
    ax.set_yticks([0, 1], [f"speculative (K={num_assistant_tokens}, c={draft_cost:g})", "plain"])
    ax.set_xlabel("time, in main-model passes")
    ax.set_title(f"{total} tokens: plain needs {total} main passes; speculative needs {len(tokens_per_step)} "
                 f"main passes plus draft passes ({time:.1f} vs {total:.1f})", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    return figure


def _groups(records: Sequence[GenerationRecord]) -> list[tuple[str, str, str]]:
    """(backend, mode, setting) of every non-plain decoding, in order of appearance."""
    return list(dict.fromkeys((r.backend, r.mode, r.setting) for r in records if r.mode != "plain"))


def _group_label(key: tuple[str, str, str], records: Sequence[GenerationRecord]) -> str:
    backend, mode, setting = key
    stacks = {record.stack for record in records}
    prefix = ("transformers " if backend == "transformers" else "OpenVINO ") if len(stacks) > 1 else ""
    return f"{prefix}{mode.replace('_', ' ')} ({setting})"


def plot_speedup_spread(rows: Sequence[dict], title: str = "") -> Any:
    """Bars of median speed-up per task and setting from `speedup_by_task` rows, with slowest-fastest repeat lines."""
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(row["setting"] for row in rows))
    tasks = list(dict.fromkeys(row["task"] for row in rows))
    if not settings:
        raise ValueError("No speed-up rows to plot.")
    figure, ax = plt.subplots(figsize=(max(6.0, 1.9 * len(tasks) * max(1, len(settings)) ** 0.5), 4))
    width = 0.8 / len(settings)
    top = 1.2
    for index, setting in enumerate(settings):
        for task_index, task in enumerate(tasks):
            row = next((r for r in rows if r["setting"] == setting and r["task"] == task), None)
            if row is None or row["speed-up (median)"] is None:
                continue
            x = task_index + (index - (len(settings) - 1) / 2) * width
            median, low, high = row["speed-up (median)"], row["slowest repeat"], row["fastest repeat"]
            ax.bar(x, median, width * 0.9, color=f"C{index}", label=setting if task_index == 0 else None)
            ax.errorbar(x, median, yerr=[[median - low], [high - median]], color="black", capsize=4, linewidth=1)
            ax.text(x + width * 0.08, high, f"{median:.2f}x", ha="left", va="bottom", fontsize=8)
            ax.text(x, 0.03, f"{row['repeats']} rep.\n{row['identical to plain']} same", ha="center", va="bottom",
                    fontsize=7, color="white")
            top = max(top, high * 1.15)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_ylim(0, top)
    ax.set_xticks(range(len(tasks)), [task.replace("_", " ") for task in tasks])
    ax.set_ylabel("speed-up over plain decoding")
    ax.set_title(title or "Speed-up over plain by task", fontsize=10)
    ax.set_xlabel("bar: median over repeats; line: slowest to fastest repeat; inside: repeats, outputs equal to plain",
                  fontsize=8)
    if len(settings) > 1:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    return figure


def plot_tokens_per_pass(records: Sequence[GenerationRecord], title: str = "") -> Any:
    """Mean tokens per main-model pass (pooled over prompts) by task and setting: 1.0 means nothing saved."""
    import matplotlib.pyplot as plt

    from utils.decoding.decoding_metrics import pooled_tokens_per_main_pass

    groups, tasks = _groups(records), list(dict.fromkeys(r.task for r in records))
    figure, ax = plt.subplots(figsize=(max(6, 2.2 * len(tasks)), 3.6))
    width = 0.8 / max(1, len(groups))
    for group_index, key in enumerate(groups):
        for task_index, task in enumerate(tasks):
            runs = [r.tokens_per_step for r in records if (r.backend, r.mode, r.setting) == key and r.task == task
                    and r.tokens_per_step]
            value = pooled_tokens_per_main_pass(runs) if runs else None
            if value is None:
                continue
            x = task_index + (group_index - (len(groups) - 1) / 2) * width
            ax.bar(x, value, width * 0.95, color=f"C{group_index}",
                   label=_group_label(key, records) if task_index == 0 else None)
            ax.text(x, value, f"{value:.2f}", ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_ylim(0, max(1.2, ax.get_ylim()[1] * 1.1))
    ax.set_xticks(range(len(tasks)), [task.replace("_", " ") for task in tasks])
    ax.set_ylabel("tokens per main-model pass")
    ax.set_title(title or "How many tokens each main-model pass produced", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    return figure


def plot_token_agreement(reference: Sequence[int], candidate: Sequence[int], labels: tuple[str, str] = (
        "plain", "speculative"), title: str = "") -> Any:
    """A strip of generated positions: green while the two outputs agree, red from the first difference on."""
    import matplotlib.pyplot as plt

    from utils.text_compare import first_divergence

    length = max(len(reference), len(candidate))
    divergence = first_divergence(reference, candidate)
    figure, ax = plt.subplots(figsize=(10, 1.3))
    for position in range(length):
        same = divergence is None or position < divergence
        ax.bar(position, 1, 1.0, color="#2f9e44" if same else "#e03131", edgecolor="white", linewidth=0.3)
    verdict = (f"identical ({length} tokens)" if divergence is None
               else f"first difference at token {divergence} of {length}")
    ax.set_title(title or f"{labels[1]} vs {labels[0]}: {verdict}", fontsize=10)
    ax.set_yticks([])
    ax.set_xlabel("generated token position")
    ax.set_xlim(-0.5, max(length, 1) - 0.5)
    ax.spines[["top", "right", "left"]].set_visible(False)
    figure.tight_layout()
    return figure


def plot_steps(tokenizer: Any, steps: Sequence[Sequence[int]], title: str = "", width_chars: int = 96) -> Any:
    """The coloured step text as a figure (a PNG survives viewers that drop inline styles)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from utils.decoding.step_streamer import ACCEPTED_COLOUR, MAIN_COLOUR, step_segments

    segments = step_segments(lambda ids: tokenizer.decode(ids, skip_special_tokens=True), steps)
    lines: list[list[tuple[str, str]]] = [[]]
    column, wrapped = 0, False
    for text, origin, _ in segments:
        colour = ACCEPTED_COLOUR if origin == "accepted" else MAIN_COLOUR
        for index, part in enumerate(text.split("\n")):
            if index and not wrapped:  # a newline right after a wrap starts no second line
                lines.append([])
                column = 0
            wrapped = wrapped and not index
            while part:
                chunk, part = part[:width_chars - column], part[width_chars - column:]
                lines[-1].append((chunk, colour))
                column, wrapped = column + len(chunk), False
                if column >= width_chars:
                    lines.append([])
                    column, wrapped = 0, True
    figure, ax = plt.subplots(figsize=(width_chars * 0.075 + 0.3, 0.24 * len(lines) + 0.9))
    ax.set_xlim(-0.5, width_chars + 0.5)
    ax.set_ylim(len(lines) - 0.4, -0.6)
    ax.axis("off")
    for row, line in enumerate(lines):
        x = 0
        for chunk, colour in line:
            if chunk.strip():
                ax.text(x, row, chunk, family="monospace", fontsize=9, va="center", ha="left",
                        bbox={"facecolor": colour, "edgecolor": "none", "pad": 1.2})
            x += len(chunk)
    accepted = sum(len(step) - 1 for step in steps)
    ax.set_title(f"{title} {sum(len(step) for step in steps)} tokens in {len(steps)} main-model passes, "
                 f"{accepted} accepted from the draft".strip(), fontsize=9, loc="left")
    ax.legend(handles=[Patch(facecolor=ACCEPTED_COLOUR, label="accepted draft token"),
                       Patch(facecolor=MAIN_COLOUR, label="main model's own token")],
              fontsize=8, loc="upper left", bbox_to_anchor=(0.0, 0.0), ncol=2, frameon=False)
    return figure
