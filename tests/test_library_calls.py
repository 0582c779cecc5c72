"""Tests for maintainers.library_calls: calls are counted by where their first name came from."""
from __future__ import annotations

from maintainers.library_calls import count_calls


def test_calls_count_for_the_package_their_first_name_came_from_through_assignments() -> None:
    code = """
import openvino_genai as ov_genai
from utils.decoding.generation import compare_with_plain
pipe = ov_genai.LLMPipeline("m", "CPU")
config = pipe.get_generation_config()
text = pipe.generate("hi", config)
records = compare_with_plain([])
records.sort()
print(text)
"""
    count = count_calls(code)
    assert (count.library, count.course) == (3, 2)  # LLMPipeline, get_generation_config, generate / two via utils


def test_an_optimum_cli_command_in_a_cell_counts_for_the_library() -> None:
    assert count_calls('command = "optimum-cli export openvino -m x y"').library == 1
