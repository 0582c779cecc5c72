"""The OpenVINO half of notebook 04: argument parsing, the shared files, and one real (small) run."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from utils.selfspec import ov_self_speculation as ov


def test_parse_drafts() -> None:
    assert ov.parse_drafts(["int4=/m/a", "int8=rel/b"]) == {"int4": Path("/m/a"), "int8": Path("rel/b")}


@pytest.mark.parametrize("values, message", [
    ([], "at least one"),
    (["int4"], "NAME=FOLDER"),
    (["=folder"], "NAME=FOLDER"),
    (["int4="], "NAME=FOLDER"),
    (["int4=a", "int4=b"], "twice"),
])
def test_parse_drafts_refuses_bad_values(values: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ov.parse_drafts(values)


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_read_prompts_accepts_the_shared_format(tmp_path: Path) -> None:
    prompts = [{"id": "p", "task": "chat", "text": "Hi", "input_ids": [1, 2, 3]}]
    assert ov.read_prompts(write(tmp_path / "p.json", prompts)) == prompts


@pytest.mark.parametrize("content, message", [
    ([], "non-empty"),
    ({"id": "p"}, "non-empty"),
    ([{"id": "p", "task": "chat", "text": "Hi"}], "input_ids"),
    ([{"id": "p", "task": "chat", "text": "Hi", "input_ids": []}], "non-empty list of ints"),
    ([{"id": "p", "task": "chat", "text": "Hi", "input_ids": [1, "2"]}], "non-empty list of ints"),
])
def test_read_prompts_refuses_malformed_files(tmp_path: Path, content, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ov.read_prompts(write(tmp_path / "p.json", content))


def test_cost_ratios() -> None:
    assert ov.cost_ratios(50.0, {"int4": 25.0, "int8": 40.0}) == {"int4": 0.5, "int8": 0.8}
    with pytest.raises(ValueError):
        ov.cost_ratios(0.0, {"int4": 1.0})


def test_summary_rows_skip_plain_runs_and_name_the_draft() -> None:
    record = {"setting": "K=3", "prompt_id": "p", "input_tokens": 5, "generated_tokens": 12, "speedup_vs_plain": 0.9,
              "acceptance_rate": 0.5, "main_passes": 4, "tokens_per_step": [1, 4, 3, 4], "identical_to_plain": False,
              "first_difference": 7,
              "precision": "default"}
    results = {"cost_ratio": {"int4": 0.45, "int8": 0.6}, "settings": {"num_assistant_tokens": 3}, "records": [
        {**record, "mode": "plain", "draft": None, "main_passes": 12},
        {**record, "mode": "speculative", "draft": "int8"},
    ]}
    [row] = ov.summary_rows(results)
    assert row["draft"] == "int8 copy"
    assert row["cost ratio c"] == 0.6
    assert row["k"] == 3 and row["tokens/pass"] == pytest.approx(7 / 2)  # the prefill and last passes left out
    assert row["first difference"] == 7 and row["identical to plain"] is False


def test_pipeline_step_costs_relate_passes_to_a_plain_step() -> None:
    plain = {"mode": "plain", "prompt_id": "p", "tpot_ms": 50.0, "draft": None}
    speculative = {"mode": "speculative", "prompt_id": "p", "draft": "int4",
                   "main_model_metrics": {"inference_ms": 700.0, "ttft_ms": 100.0, "passes": 11},
                   "draft_model_metrics": {"inference_ms": 750.0, "passes": 30}}
    [row] = ov.pipeline_step_costs({"cost_ratio": {"int4": 0.4}, "records": [plain, speculative]})
    assert row["verify pass / plain step"] == pytest.approx(60.0 / 50.0)
    assert row["draft pass / plain step"] == pytest.approx(25.0 / 50.0)
    assert row["draft passes / verify pass"] == pytest.approx(3.0)
    assert row["c (draft alone)"] == 0.4
    assert ov.pipeline_step_costs({"cost_ratio": {}, "records": [plain]}) == []


@dataclass
class FakeRecord:
    """The fields of utils.decoding.generation.GenerationRecord that median_timed_run reads and writes."""

    wall_seconds: float
    token_ids: list[int]
    generated_tokens: int = 2
    tokens_per_second: float = 0.0
    repeats: int = 1
    wall_seconds_all: list[float] = field(default_factory=list)
    outputs_stable: bool = True


def test_median_timed_run_keeps_the_median_wall_time_and_cpu_time() -> None:
    record = FakeRecord
    chosen, cpu = ov.median_timed_run([(record(3.0, [1, 2]), 0.9), (record(1.0, [1, 2]), 0.5),
                                     (record(2.0, [1, 3]), 0.7)])
    assert chosen.wall_seconds == 2.0 and chosen.token_ids == [1, 3]
    assert chosen.wall_seconds_all == [3.0, 1.0, 2.0] and chosen.repeats == 3
    assert chosen.outputs_stable is False
    assert cpu == 0.7
    with pytest.raises(ValueError):
        ov.median_timed_run([])


def test_cpu_speedup_is_per_token() -> None:
    assert ov.cpu_speedup({"generated_tokens": 10, "cpu_seconds": 2.0},
                          {"generated_tokens": 20, "cpu_seconds": 2.0}) == pytest.approx(2.0)
    assert ov.cpu_speedup({"generated_tokens": 10, "cpu_seconds": 2.0},
                          {"generated_tokens": 0, "cpu_seconds": 1.0}) is None


def test_a_real_run_writes_comparable_results(offline_pair, tmp_path: Path) -> None:
    """fp16 main with its int4 copy, f32: speculative output equals plain greedy; input ids are checked."""
    import openvino_genai

    from utils.decoding.generation import encode_prompt

    text = "Write a Python function that adds two numbers."
    tokenizer = openvino_genai.Tokenizer(str(offline_pair.main))
    ids = encode_prompt(tokenizer, text).input_ids.data[0].tolist()
    prompts = write(tmp_path / "prompts.json", [
        {"id": "right-ids", "task": "code", "text": text, "input_ids": ids},
        {"id": "wrong-ids", "task": "code", "text": text, "input_ids": ids[:-1]},
    ])
    output = tmp_path / "out" / "openvino.json"
    results = ov.run(prompts, output, offline_pair.main, {"int4": offline_pair.draft}, max_new_tokens=8, repeats=1,
                     num_assistant_tokens=3, precision="f32", threads=1)
    assert json.loads(output.read_text()) == results
    assert results["same_input_ids"] == {"right-ids": True, "wrong-ids": False}
    assert set(results["cost_ratio"]) == {"int4"} and results["cost_ratio"]["int4"] > 0
    assert [record["draft"] for record in results["records"]] == [None, None, "int4", "int4"]
    rows = ov.summary_rows(results)
    assert len(rows) == 2
    for row in rows:
        assert row["identical to plain"] is True
        assert row["tokens"] == 8
        assert 1.0 <= row["tokens/pass"] <= 4.0
        assert row["speed-up (CPU time)"] > 0


def test_missing_draft_folder_is_refused_before_loading(offline_pair, tmp_path: Path) -> None:
    prompts = write(tmp_path / "prompts.json", [{"id": "p", "task": "chat", "text": "Hi", "input_ids": [1]}])
    with pytest.raises(ValueError, match="does not exist"):
        ov.run(prompts, tmp_path / "o.json", offline_pair.main, {"int4": tmp_path / "missing"}, max_new_tokens=4,
               repeats=1, num_assistant_tokens=3, precision="f32", threads=1)
