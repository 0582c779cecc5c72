"""Tests for utils.display.speculation_figures, checked by what each figure draws (a PNG of empty axes is several
kilobytes too). The spread plot and the coloured steps have their tests in tests/test_generation.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from utils.decoding.generation import GenerationRecord


def make_record(mode: str, tokens_per_step: list[int], backend: str = "continuous_batching") -> GenerationRecord:
    tokens = list(range(sum(tokens_per_step)))
    record = GenerationRecord(
        mode=mode, setting="greedy" if mode == "plain" else "K=3", prompt_id="p", task="chat", device="CPU",
        precision="f32", backend=backend, input_tokens=10, generated_tokens=len(tokens), token_ids=tokens, text="",
        wall_seconds=1.0, tokens_per_second=len(tokens), ttft_ms=None, tpot_ms=None, genai_tokens_per_second=None,
        main_passes=len(tokens_per_step), tokens_per_step=tokens_per_step, accepted_from_steps=0,
        wall_seconds_all=[1.0])
    return record


@pytest.fixture(autouse=True)
def agg_backend() -> None:
    import matplotlib

    matplotlib.use("agg")


def texts(figure) -> list[str]:
    return [text.get_text() for axis in figure.axes for text in axis.texts]


def test_tokens_per_pass_leaves_out_plain_and_pools_complete_verification_passes() -> None:
    from utils.decoding.decoding_metrics import pooled_tokens_per_main_pass
    from utils.display.speculation_figures import plot_tokens_per_pass

    steps = [1, 4, 2, 4]
    figure = plot_tokens_per_pass([make_record("plain", [1, 1, 1]), make_record("speculative", steps)])
    heights = [round(float(patch.get_height()), 6) for patch in figure.axes[0].patches]
    assert heights == [round(pooled_tokens_per_main_pass([steps]), 6)]
    assert texts(figure) == [f"{pooled_tokens_per_main_pass([steps]):.2f}"]


def test_two_stacks_are_named_in_the_legend() -> None:
    from utils.display.speculation_figures import plot_tokens_per_pass

    figure = plot_tokens_per_pass([make_record("speculative", [1, 3, 3, 2]),
                                   make_record("speculative", [1, 2, 2, 1], backend="transformers")])
    labels = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert labels == ["OpenVINO speculative (K=3)", "transformers speculative (K=3)"]


def test_agreement_timeline_and_idea_draw_what_they_are_given(tmp_path: Path) -> None:
    from matplotlib.colors import to_hex

    from utils.display import speculation_figures as figures

    agreement = figures.plot_token_agreement([1, 2, 3], [1, 2, 4])
    assert [to_hex(patch.get_facecolor()) for patch in agreement.axes[0].patches] == ["#2f9e44", "#2f9e44", "#e03131"]
    assert agreement.axes[0].get_title() == "speculative vs plain: first difference at token 2 of 3"
    timeline = figures.draw_timeline(tokens_per_step=(1, 4, 2), num_assistant_tokens=3, draft_cost=0.3)
    assert texts(timeline) == ["+1", "+4", "+2"]
    assert timeline.axes[0].get_title().endswith("needs 3 main passes plus draft passes (4.8 vs 7.0)")
    for figure in (figures.draw_speculation_idea(), timeline, agreement):
        figure.savefig(tmp_path / "figure.png")  # each one renders
    with pytest.raises(ValueError, match="accepted"):
        figures.draw_speculation_idea(accepted=9)
