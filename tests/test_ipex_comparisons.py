"""utils.selfspec.ipex_comparisons: side-by-side rows, Leviathan's formula beside them, and the OpenVINO half's glue."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from utils.decoding.measurement import Measured, TimedRun
from utils.selfspec import ipex_comparisons as compare
from utils.selfspec import ipex_self_speculation as ss
from utils.selfspec.ov_self_speculation import openvino_summary_rows

# The counters IPEX-LLM leaves on the model after a speculative call (3 verify steps).
IPEX_COUNTERS = SimpleNamespace(n_drafted=9, n_matched=5, draft_num=[3, 4, 2], accept_num=[4, 2, 2],
                                draft_time=[0.03, 0.04, 0.02], verify_time=[0.05, 0.05, 0.06],
                                first_token_time=0.2, n_token_generated=9)


def test_setting_labels_name_the_keyword_arguments() -> None:
    settings = [{"th_stop_draft": 0.4, "auto_th_stop_draft": True}, {"th_stop_draft": 0.8, "auto_th_stop_draft": False},
                {"max_step_draft": 2}, {"hf_adjust": True}, {}]
    assert [compare.setting_label(s) for s in settings] == ["th=0.4 auto", "th=0.8 fixed", "max_step=2", "hf_adjust",
                                                            "defaults"]


def comparison(plain_seconds: list[float], speculative_seconds: list[float], prompt: str = "p",
               setting: dict | None = None) -> compare.Comparison:
    """A Comparison of 9-token runs (the counters above) with the given wall times per repeat; CPU time = wall / 2."""
    stats = ss.read_speculation_stats(IPEX_COUNTERS)
    plain = ss.GenerationRun(list(range(9)))
    speculative = ss.GenerationRun(list(range(9)), stats=stats)
    return compare.Comparison(prompt, setting or {}, 3,
                              Measured(prompt, [TimedRun(plain, t, t / 2) for t in plain_seconds]),
                              Measured(prompt, [TimedRun(speculative, t, t / 2) for t in speculative_seconds]))


def test_speedups_are_total_times_per_repeat_with_one_verdict() -> None:
    runs = [comparison([1.0, 1.0], [0.5, 2.0], "a"), comparison([3.0, 1.0], [1.5, 0.5], "b")]
    assert runs[0].speedups() == [2.0, 0.5]
    [row] = compare.speedup_rows(runs)
    assert row["repeats"] == 2 and row["prompts"] == 2
    assert row["speed-up"] == "1.40x [0.80x-2.00x]"  # repeat 1: 4 / 2; repeat 2: 2 / 2.5
    assert row["verdict"] == "no clear difference" and row["verdict, CPU time"] == "no clear difference"
    [faster] = compare.speedup_rows([comparison([1.0, 1.0], [0.5, 0.8])])
    assert faster["verdict"] == "faster"
    assert compare.speedup_summary({}, [0.9, 0.8])["verdict"] == "slower"


def test_cost_ratio_uses_a_plain_step_of_the_same_runs() -> None:
    run = comparison([1.0], [0.5])  # plain: (1.0 s - 0.2 s first token) / 8 tokens = 100 ms per step
    assert run.plain_step_ms == pytest.approx(100.0)
    assert run.cost_ratio == pytest.approx(10.0 / 100.0)  # 0.09 s drafting / 9 drafted tokens


def test_summary_rows_match_the_openvino_rows() -> None:
    [ipex_row] = compare.summary_rows([comparison([1.0, 1.2], [0.5, 0.5], setting={"th_stop_draft": 0.6})],
                                      precision="bf16")
    assert ipex_row["speed-up (median)"] == pytest.approx(2.2)
    assert ipex_row["identical to plain"] is True
    assert ipex_row["k"] == pytest.approx(3.0)  # mean drafted per step, not rounded
    plain = {"mode": "plain", "draft": None, "prompt_id": "p", "tpot_ms": 50.0, "wall_seconds_all": [1.0, 1.2],
             "generated_tokens": 10}
    openvino = {"settings": {"num_assistant_tokens": 3}, "records": [plain,
        {"mode": "speculative", "draft": "int4", "setting": "K=3", "prompt_id": "p", "generated_tokens": 10,
         "wall_seconds_all": [0.5, 0.6], "acceptance_rate": 0.8, "tokens_per_step": [1, 4, 2, 2],
         "main_model_metrics": {"inference_ms": 700.0, "ttft_ms": 100.0, "passes": 11},
         "draft_model_metrics": {"inference_ms": 750.0, "passes": 30},
         "identical_to_plain": True, "first_difference": None, "precision": "f32"}]}
    [openvino_row] = openvino_summary_rows(openvino)
    assert list(ipex_row) == list(openvino_row)
    assert openvino_row["speed-up (median)"] == pytest.approx(2.0)
    assert openvino_row["k"] == 3 and openvino_row["tokens/pass"] == pytest.approx(6 / 2)  # prefill and last pass out
    assert openvino_row["verify pass / plain step"] == pytest.approx(60.0 / 50.0)
    assert openvino_row["cost ratio c"] == pytest.approx(25.0 / 50.0)


def test_speculation_stats_can_be_written_as_json(tmp_path: Path) -> None:
    from utils.result_files import write_json

    stats = ss.read_speculation_stats(IPEX_COUNTERS)
    path = write_json(tmp_path / "deep" / "stats.json", {"stats": stats})
    assert json.loads(path.read_text())["stats"]["accepted"] == 5


def test_openvino_half_is_checked_up_front(tmp_path: Path) -> None:
    from utils.models.model_check import REQUIRED_OPENVINO_FILES, ModelFolderError

    main = tmp_path / "main"
    main.mkdir()
    for name in REQUIRED_OPENVINO_FILES:
        (main / name).write_text("x")
    compare.check_openvino_half(sys.executable, main, {"int4": main})
    with pytest.raises(ModelFolderError, match="int8 draft folder .* does not exist"):
        compare.check_openvino_half(sys.executable, main, {"int4": main, "int8": tmp_path / "missing"})
    with pytest.raises(ss.SelfSpeculationError, match="MAIN_PYTHON"):
        compare.check_openvino_half(tmp_path / "no-python", main, {})


def test_main_python_runs_modules_from_the_repository_root() -> None:
    completed = compare.run_main_python(["utils.selfspec.ov_self_speculation", "--help"], sys.executable)
    assert "--num-assistant-tokens" in completed.stdout
    with pytest.raises(RuntimeError, match="failed"):
        compare.run_main_python(["utils.selfspec.ov_self_speculation", "--bogus"], sys.executable)
