"""An EAGLE-3 head for the offline main, for real: the folder, the optimum-cli export with `eagle3_mode`, and the
benchmark (`--draft-dir`) running it losslessly beside plain decoding. Notebook 08 runs the whole training."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from utils.decoding import benchmark
from utils.training.draft_settings import MainModel
from utils.training.eagle3_build import random_head_folder
from utils.training.eagle3_checks import check_exported_head, check_head_matches_main, has_eagle3_mode
from utils.training.eagle3_folder import export_head
from utils.training.eagle3_settings import Eagle3Error


@pytest.fixture(scope="module")
def exported_random_head(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from utils.training.draft_settings import main_folders

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
    with pytest.raises(Eagle3Error, match="eagle3_mode"):
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
    with pytest.raises(Eagle3Error, match="tokenizer"):
        random_head_folder(MainModel(offline_pair.main, bare).hf, tmp_path / "head", draft_vocab_size=64)
