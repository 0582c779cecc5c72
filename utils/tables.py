"""The one table renderer: lists of records as HTML in a notebook, or as text (tabulate) in printed output."""
from __future__ import annotations

import html
from collections.abc import Sequence


def _cell(value) -> str:
    if isinstance(value, bool):  # words, not emoji: a machine without an emoji font shows ✅ as an empty box
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return html.escape("" if value is None else str(value))


# Record keys in code spell quantities in snake_case; a table heads them in the glossary's words (docs/glossary.md).
HEADER_WORDS = {"speedup": "speed-up", "speedup_vs_plain": "speed-up", "measured": "speed-up (median)",
                "tokens_per_pass": "tokens per main pass", "a_K": "per-token acceptance a",
                "per_token_acceptance": "per-token acceptance a", "genai_acceptance_rate": "acceptance rate",
                "cost_ratio": "cost ratio c", "verify_over_plain_step": "verify / plain",
                "leviathan": "predicted (Leviathan)", "with_verification_cost": "predicted (step times)",
                "identical_prompts": "identical to plain (prompts)"}


def header(key: str) -> str:
    """The column heading of a record key: `HEADER_WORDS`, else the key with spaces for underscores."""
    return HEADER_WORDS.get(key, key.replace("_", " "))


def html_table(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    """An HTML table with one row per record and one column per key (headed by `header`)."""
    if not rows:
        return "<p><i>(no rows)</i></p>"
    columns = list(columns or dict.fromkeys(key for row in rows for key in row))
    head = "".join(f"<th>{html.escape(header(str(c)))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(row.get(c))}</td>" for c in columns) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def show_table(rows: Sequence[dict], columns: Sequence[str] | None = None) -> None:
    """Display `rows` as a table in Jupyter (plain text elsewhere)."""
    from IPython.display import HTML, display

    display(HTML(html_table(rows, columns)))


def text_table(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    """A fixed-width text table (tabulate's "simple" format: heading, rule, rows), for printed output."""
    from tabulate import tabulate

    if not rows:
        return "(no rows)"
    columns = list(columns or dict.fromkeys(key for row in rows for key in row))

    def text(value) -> str:
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.3g}"
        return "" if value is None else str(value)

    return tabulate([[text(row.get(c)) for c in columns] for row in rows], headers=[str(c) for c in columns],
                    tablefmt="simple", disable_numparse=True)
