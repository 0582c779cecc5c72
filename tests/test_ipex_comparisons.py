"""utils.selfspec.ipex_comparisons: side-by-side rows, Leviathan's formula beside them, and the OpenVINO half's glue."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from utils.selfspec import ipex_comparisons as compare
from utils.selfspec import ipex_self_speculation as ss
from utils.selfspec.ov_self_speculation import summary_rows as openvino_summary_rows

# The counters IPEX-LLM leaves on the model after a speculative call (3 verify steps).
IPEX_COUNTERS = SimpleNamespace(n_drafted=9, n_matched=5, draft_num=[3, 4, 2], accept_num=[4, 2, 2],
                                draft_time=[0.03, 0.04, 0.02], verify_time=[0.05, 0.05, 0.06],
                                first_token_time=0.2, n_token_generated=9)


def test_sweep_settings_and_labels() -> None:
    settings = compare.sweep_settings((0.4, 0.8), (2,), auto_threshold=(True, False))
    assert settings == [{"th_stop_draft": 0.4, "auto_th_stop_draft": True},
                        {"th_stop_draft": 0.4, "auto_th_stop_draft": False},
                        {"th_stop_draft": 0.8, "auto_th_stop_draft": True},
                        {"th_stop_draft": 0.8, "auto_th_stop_draft": False},
                        {"max_step_draft": 2}]
    assert [compare.setting_label(s) for s in settings] == ["th=0.4 auto", "th=0.4 fixed", "th=0.8 auto",
                                                       "th=0.8 fixed", "max_step=2"]
    assert compare.setting_label({}) == "defaults"


def test_divergence_report_shows_both_continuations() -> None:
    decode = lambda ids: " ".join(str(i) for i in ids)  # noqa: E731
    report = compare.divergence_report(decode, [1, 2, 3], [1, 2, 4])
    assert "identical for 2 tokens" in report and "'3'" in report and "'4'" in report
    assert compare.divergence_report(decode, [1], [1]).startswith("identical (1 tokens)")


def test_summary_rows_match_the_openvino_rows() -> None:
    comparison = compare.Comparison("p", {"th_stop_draft": 0.6}, 3, 10, 10, 1.0, 0.5, 0.5, 2.0, 3.0, 1.0, 1.0, None,
                               stats=ss.read_speculation_stats(IPEX_COUNTERS))
    [ipex_row] = compare.summary_rows([comparison], cost_ratio=0.7, precision="bf16")
    assert ipex_row["speed-up"] == pytest.approx(2.0)
    assert ipex_row["identical to plain"] is True
    openvino = {"cost_ratio": {"int4": 0.6}, "settings": {"num_assistant_tokens": 3}, "records": [
        {"mode": "speculative", "draft": "int4", "setting": "K=3", "prompt_id": "p", "input_tokens": 3,
         "generated_tokens": 10, "speedup_vs_plain": 1.1, "acceptance_rate": 0.8, "main_passes": 4,
         "tokens_per_step": [1, 4, 2, 2],
         "identical_to_plain": True, "first_difference": None, "precision": "f32"}]}
    [openvino_row] = openvino_summary_rows(openvino)
    assert list(ipex_row) == list(openvino_row)
    assert ipex_row["k"] == 3 and ipex_row["tokens/pass"] == pytest.approx(2.0)
    assert openvino_row["k"] == 3 and openvino_row["tokens/pass"] == pytest.approx(6 / 2)  # prefill and last passes left out


def test_formula_check_recovers_the_prediction_it_is_fed() -> None:
    from utils.decoding.speedup_model import expected_tokens_per_pass, predicted_speedup

    row = {"backend": "b", "draft": "d", "prompt": "p", "k": 4, "tokens/pass": expected_tokens_per_pass(0.7, 4),
           "cost ratio c": 0.5, "speed-up (CPU time)": 1.1, "speed-up": 1.2}
    [checked] = compare.formula_check([row])
    assert checked["a"] == pytest.approx(0.7, abs=1e-6)
    assert checked["predicted"] == pytest.approx(predicted_speedup(0.7, 4, 0.5))
    assert checked["measured (CPU time)"] == 1.1 and checked["measured (wall)"] == 1.2
    [clamped] = compare.formula_check([{**row, "tokens/pass": 6.5}])  # more than k + 1: IPEX-LLM's k varies per step
    assert clamped["a"] == pytest.approx(1.0, abs=1e-6)
    assert checked["predicted (measured passes)"] is None
    cost = {"backend": "b", "draft": "d", "prompt": "p", "verify pass / plain step": 1.0, "draft pass / plain step": 0.5}
    [same] = compare.formula_check([row], [cost])
    assert same["predicted (measured passes)"] == pytest.approx(same["predicted"])
    [dearer] = compare.formula_check([row], [{**cost, "verify pass / plain step": 1.3}])
    assert dearer["predicted (measured passes)"] < dearer["predicted"]


def test_step_costs_relate_passes_to_a_plain_step() -> None:
    comparison = compare.Comparison("p", {}, 3, plain_tokens=40, speculative_tokens=40, plain_seconds=4.0,
                               speculative_seconds=3.0, acceptance_rate=0.5, tokens_per_step=2.0,
                               drafted_per_step=3.0, draft_ms_per_token=50.0, verify_ms_per_step=120.0,
                               first_divergence=None)
    [row] = compare.step_costs([comparison])
    assert row["verify pass / plain step"] == pytest.approx(1.2)  # plain: 100 ms per token
    assert row["draft pass / plain step"] == pytest.approx(0.5)
    assert (row["backend"], row["draft"], row["prompt"]) == ("IPEX-LLM", "INT4 copy", "p")


def test_speculation_stats_can_be_written_as_json(tmp_path: Path) -> None:
    from utils.result_files import write_json

    stats = ss.read_speculation_stats(IPEX_COUNTERS)
    path = write_json(tmp_path / "deep" / "stats.json", {"stats": stats})
    assert json.loads(path.read_text())["stats"]["accepted"] == 5


def test_openvino_half_is_checked_up_front(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    (main / "openvino_model.xml").write_text("<net/>")
    compare.check_openvino_half(sys.executable, main, {"int4": main})
    with pytest.raises(ss.SelfSpeculationError, match="draft int8"):
        compare.check_openvino_half(sys.executable, main, {"int4": main, "int8": tmp_path / "missing"})
    with pytest.raises(ss.SelfSpeculationError, match="MAIN_PYTHON"):
        compare.check_openvino_half(tmp_path / "no-python", main, {})


def test_main_python_missing_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ss.SelfSpeculationError, match="tutorial.py lab"):
        compare.run_main_python(["utils.selfspec.ov_self_speculation", "--help"], tmp_path / "no-python")


def test_main_python_runs_modules_from_the_repository_root() -> None:
    completed = compare.run_main_python(["utils.selfspec.ov_self_speculation", "--help"], sys.executable)
    assert "--num-assistant-tokens" in completed.stdout
    with pytest.raises(RuntimeError, match="failed"):
        compare.run_main_python(["utils.selfspec.ov_self_speculation", "--bogus"], sys.executable)
