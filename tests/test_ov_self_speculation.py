"""The OpenVINO half of notebook 04: argument parsing, the shared files, and one real (small) run."""
from __future__ import annotations

import json
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


def test_summary_rows_skip_plain_runs_and_name_the_draft() -> None:
    record = {"setting": "K=3", "prompt_id": "p", "generated_tokens": 12, "wall_seconds_all": [1.0],
              "acceptance_rate": 0.5, "tokens_per_step": [1, 4, 3, 4], "identical_to_plain": False,
              "first_difference": 7, "precision": "default", "tpot_ms": 40.0}
    results = {"settings": {"num_assistant_tokens": 3}, "records": [
        {**record, "mode": "plain", "draft": None},
        {**record, "mode": "speculative", "draft": "int8", "wall_seconds_all": [0.8]},
    ]}
    [row] = ov.openvino_summary_rows(results)
    assert row["draft"] == "int8 copy" and row["speed-up (median)"] == pytest.approx(1.25)
    assert row["cost ratio c"] is None and row["plain step ms"] == 40.0  # no per-model metrics in this record
    assert row["k"] == 3 and row["tokens/pass"] == pytest.approx(7 / 2)  # the prefill and last passes left out
    assert row["first difference"] == 7 and row["identical to plain"] is False


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
    assert set(results["speedups"]) == {"int4"}
    assert len(results["speedups"]["int4"]["wall"]) == len(results["speedups"]["int4"]["cpu"]) == 1
    assert [record["draft"] for record in results["records"]] == [None, None, "int4", "int4"]
    rows = ov.openvino_summary_rows(results)
    assert len(rows) == 2
    for row in rows:
        assert row["identical to plain"] is True
        assert row["tokens"] == 8
        assert 1.0 <= row["tokens/pass"] <= 4.0
        assert row["speed-up (median)"] > 0 and row["cost ratio c"] > 0


def test_missing_draft_folder_is_refused_before_loading(offline_pair, tmp_path: Path) -> None:
    prompts = write(tmp_path / "prompts.json", [{"id": "p", "task": "chat", "text": "Hi", "input_ids": [1]}])
    with pytest.raises(ValueError, match="does not exist"):
        ov.run(prompts, tmp_path / "o.json", offline_pair.main, {"int4": tmp_path / "missing"}, max_new_tokens=4,
               repeats=1, num_assistant_tokens=3, precision="f32", threads=1)
