"""Fast tests for utils.training.draft_settings: settings, presets, the main model, folder names and missing inputs."""
from __future__ import annotations

from pathlib import Path

import pytest
from draft_standins import tiny_settings

from utils.training import draft_data as dd
from utils.training import draft_export as dx
from utils.training import draft_settings as ds
from utils.training import draft_train as dtr
from utils.training import scaffold


def test_settings_reject_bad_values_and_presets_exist() -> None:
    with pytest.raises(scaffold.TrainingError, match="multiple of attention_heads"):
        ds.DraftTrainingSettings(hidden_size=250, attention_heads=4)
    with pytest.raises(scaffold.TrainingError, match="teacher_top_k"):
        ds.DraftTrainingSettings(teacher_top_k=0, distill_weight=0.5)
    with pytest.raises(scaffold.TrainingError, match="prompts"):
        ds.DraftTrainingSettings(prompts=0)
    with pytest.raises(scaffold.TrainingError, match="Unknown preset"):
        ds.DraftTrainingSettings.preset("huge")
    assert ds.DraftTrainingSettings.preset("quick").name == "quick" and ds.DraftTrainingSettings.preset("full").name == "full"
    assert ds.DraftTrainingSettings.preset("full").prompts > ds.DraftTrainingSettings.preset("quick").prompts


def test_recipes_split_data_and_training_settings() -> None:
    settings = ds.DraftTrainingSettings.preset("quick")
    assert "prompts" in settings.data_settings() and "prompts" not in settings.draft_settings()
    assert "hidden_size" in settings.draft_settings() and "hidden_size" not in settings.data_settings()
    changed = ds.DraftTrainingSettings(learning_rate=settings.learning_rate * 2)
    assert changed.data_settings() == settings.data_settings()
    assert changed.draft_settings() != settings.draft_settings()


def test_main_folders_refuse_a_pair_whose_main_has_no_hugging_face_folder() -> None:
    with pytest.raises(scaffold.TrainingError, match="no Hugging Face folder for its main model"):
        scaffold.main_folders("phi-3")
    with pytest.raises(scaffold.TrainingError, match="Unknown model pair"):
        scaffold.main_folders("no-such-pair")


def test_folder_names_derive_from_the_main_model(tmp_path: Path) -> None:
    """SmolLM2 keeps the folder names prepared models already have; another main gets its own."""
    quick = ds.DraftTrainingSettings.preset("quick")
    smollm2 = scaffold.MainModel(tmp_path / "smollm2-135m-instruct-fp16-ov", tmp_path / "smollm2-135m-instruct-hf")
    folders = ds.draft_folders(quick, smollm2, root=tmp_path)
    assert [folder.name for folder in (folders.data, folders.hf, folders.openvino, folders.trimmed)] == [
        "smollm2-135m-selfdraft-quick-data", "smollm2-135m-selfdraft-quick-hf",
        "smollm2-135m-selfdraft-quick-fp16-ov", "smollm2-135m-selfdraft-quick-fp16-trimmed-ov"]
    qwen = scaffold.MainModel(tmp_path / "qwen2.5-0.5b-instruct-int8-ov", tmp_path / "qwen2.5-0.5b-instruct-hf")
    assert ds.draft_folders(ds.DraftTrainingSettings.preset("full"), qwen, root=tmp_path).data.name == "qwen2.5-0.5b-selfdraft-full-data"


def test_the_offline_pair_main_is_found_in_the_catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    from utils.models.model_catalogue import SMOLLM2_FP16, SMOLLM2_HF_FOLDER

    with pytest.raises(scaffold.TrainingError, match="missing or incomplete"):
        scaffold.main_folders("offline")
    for folder in (tmp_path / SMOLLM2_FP16.folder_name, tmp_path / SMOLLM2_HF_FOLDER):
        folder.mkdir()
        (folder / ".complete").write_text("{}")
    main = scaffold.as_main_model("offline")
    assert (main.openvino.name, main.hf.name, main.label) == (SMOLLM2_FP16.folder_name, SMOLLM2_HF_FOLDER,
                                                              "SmolLM2-135M-Instruct")
    assert scaffold.as_main_model(main) is main


def test_missing_inputs_raise_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    main = scaffold.MainModel(tmp_path / "main-ov", tmp_path / "main-hf")
    with pytest.raises(scaffold.TrainingError, match="missing or incomplete"):
        dd.prepare_training_data(tiny_settings(), main)
    with pytest.raises(scaffold.TrainingError, match="missing or incomplete"):
        dtr.prepare_trained_draft(tiny_settings(), main)
    with pytest.raises(scaffold.TrainingError, match="missing or incomplete"):
        dx.prepare_exported_draft(tiny_settings(), main)
    assert not list(tmp_path.iterdir())  # nothing was made


def test_integer_settings_refuse_booleans_and_store_numpy_integers_as_ints() -> None:
    import json

    import numpy as np

    with pytest.raises(scaffold.TrainingError, match=r"layers must be an integer >= 1, got True"):
        ds.DraftTrainingSettings(layers=True)
    settings = ds.DraftTrainingSettings(batch_size=np.int32(8))
    assert type(settings.batch_size) is int and json.loads(json.dumps(settings.draft_settings()))["batch_size"] == 8
