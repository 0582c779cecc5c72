"""Tests for utils.tables: tables show marks every default font has (no emoji)."""
from __future__ import annotations

from utils.tables import html_table, text_table


def test_booleans_are_words_that_every_font_shows() -> None:
    rows = [{"feature": "AVX2", "present": True}, {"feature": "AMX_BF16", "present": False}]
    page = html_table(rows)
    assert "<td>yes</td>" in page and "<td>no</td>" in page
    assert page.isascii(), "a mark outside ASCII may need a font the machine lacks (the emoji showed as boxes)"
    assert [line.split() for line in text_table(rows).splitlines()[2:]] == [["AVX2", "yes"], ["AMX_BF16", "no"]]


def test_values_are_escaped_and_numbers_shortened() -> None:
    page = html_table([{"name": "<b>", "value": 0.123456, "big": 123456.0, "none": None}])
    assert "&lt;b&gt;" in page and "<td>0.123</td>" in page and "<td>123,456</td>" in page
    assert "<td></td>" in page


def test_headings_use_the_glossarys_words_not_snake_case() -> None:
    table = html_table([{"tokens_per_pass": 2.5, "acceptance_rate": 0.5, "speedup": 1.2, "prompt": "p"}])
    assert "<th>tokens per main pass</th><th>acceptance rate</th><th>speed-up</th><th>prompt</th>" in table
    assert "_" not in table.split("<tbody>")[0]
