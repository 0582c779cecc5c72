"""An EAGLE-3 head for the offline main, for real: the folder, the optimum-cli export with `eagle3_mode`, and the
benchmark (`--draft-dir`) running it losslessly beside plain decoding. Notebook 08 runs the whole training."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from maintainers import benchmark
from utils.training.eagle3_build import random_head_folder
from utils.training.eagle3_checks import check_exported_head, check_head_matches_main, has_eagle3_mode
from utils.training.eagle3_folder import export_head
from utils.training.scaffold import MainModel, TrainingError


@pytest.fixture(scope="module")
def exported_random_head(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from utils.training.scaffold import main_folders

    main = main_folders("offline")
    root = tmp_path_factory.mktemp("eagle3")
    head = random_head_folder(main.hf, root / "smollm2-135m-eagle3-random-hf", draft_vocab_size=512,
                              intermediate_size=256)
    exported = export_head(head, root / "smollm2-135m-eagle3-random-fp16-ov", "fp16")
    return main.openvino, exported


def test_the_export_carries_eagle3_mode_and_fits_the_main(exported_random_head, offline_pair) -> None:
    main_dir, exported = exported_random_head
    assert has_eagle3_mode(exported)
    assert (exported / ".complete").is_file() and (exported / "openvino_tokenizer.xml").is_file()
    check_exported_head(exported, main_dir)
    check_head_matches_main(exported, offline_pair.hf)
    with pytest.raises(TrainingError, match="eagle3_mode"):
        check_exported_head(main_dir)  # an ordinary model is not a head


def test_a_reused_export_is_not_rebuilt(exported_random_head, offline_pair) -> None:
    main_dir, exported = exported_random_head
    marker = (exported / ".complete").read_text(encoding="utf-8")
    head = exported.with_name("smollm2-135m-eagle3-random-hf")
    assert export_head(head, exported, "fp16") == exported
    assert (exported / ".complete").read_text(encoding="utf-8") == marker


def test_the_benchmark_runs_a_head_as_its_draft_and_stays_lossless(exported_random_head, offline_pair,
                                                                  tmp_path: Path, capsys) -> None:
    main_dir, exported = exported_random_head
    output = tmp_path / "records.json"
    code = benchmark.main(["--main-dir", str(main_dir), "--draft-dir", str(exported), "--precision", "f32",
                           "--modes", "plain", "speculative", "-k", "3", "--tasks", "code", "--per-task", "2",
                           "--max-new-tokens", "24", "--repeats", "1", "--json", str(output)])
    assert code == 0
    records = json.loads(output.read_text(encoding="utf-8"))["records"]
    speculative = [record for record in records if record["mode"] == "speculative"]
    assert len(speculative) == 2
    assert all(record["identical_to_plain"] for record in speculative)
    assert all(record["draft_model_metrics"]["decode_passes"] > 0 for record in speculative)
    assert "speculative" in capsys.readouterr().out


def test_a_main_model_without_its_tokenizer_files_gives_a_head_without_them(tmp_path: Path, offline_pair) -> None:
    bare = tmp_path / "bare-main-hf"
    bare.mkdir()
    (bare / "config.json").write_text((offline_pair.hf / "config.json").read_text(encoding="utf-8"))
    with pytest.raises(TrainingError, match="tokenizer"):
        random_head_folder(MainModel(offline_pair.main, bare).hf, tmp_path / "head", draft_vocab_size=64)


def test_a_chain_accuracy_row_implies_tokens_per_pass_from_its_shares() -> None:
    from utils.training.eagle3_build import chain_accuracy_row

    row = chain_accuracy_row("code", 120, [0.5, 0.25, 0.1])
    assert row["answers of"] == "code" and row["answer positions"] == 120
    assert [row[f"first {j} right"] for j in (1, 2, 3)] == [0.5, 0.25, 0.1]
    assert [row[f"implied tokens per main pass, K = {k}"] for k in (1, 2, 3)] == pytest.approx([1.5, 1.75, 1.85])


def test_answer_chain_accuracy_scores_a_head_on_the_mains_own_answers(exported_random_head, offline_pair,
                                                                     tmp_path: Path) -> None:
    import openvino_genai

    from utils.decoding.pipelines import main_model_properties
    from utils.training.eagle3_build import answer_chain_accuracy
    from utils.training.eagle3_settings import Eagle3Settings
    from utils.training.scaffold import main_folders

    main = main_folders("offline")
    main_dir, exported = exported_random_head
    head = exported.with_name("smollm2-135m-eagle3-random-hf")
    pipeline = openvino_genai.LLMPipeline(str(main_dir), "CPU", **main_model_properties("f32"))
    tokenizer = pipeline.get_tokenizer()
    answers = []
    for group, message in (("code", "Write a Python function that adds two numbers."), ("chat", "Why is the sky blue?"),
                           ("chat", "Name three colours.")):
        text = pipeline.generate(message, openvino_genai.GenerationConfig(max_new_tokens=12))
        answers.append((group, message, [int(t) for t in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]))
    rows = answer_chain_accuracy(head, main, answers, Eagle3Settings.preset("quick"))
    assert [row["answers of"] for row in rows] == ["code", "chat"]
    assert rows[1]["answer positions"] == len(answers[1][2]) + len(answers[2][2])
    for row in rows:
        shares = [row[f"first {j} right"] for j in (1, 2, 3)]
        assert all(0.0 <= share <= 1.0 for share in shares) and shares == sorted(shares, reverse=True)
        assert row["implied tokens per main pass, K = 3"] == pytest.approx(1 + sum(shares))
    with pytest.raises(ValueError, match="EAGLE-3 head"):
        answer_chain_accuracy(tmp_path / "no-head", main, answers, Eagle3Settings.preset("quick"))
