"""An EAGLE-3 head's settings, folders and recipes, the held-out check of its data, and the fast failures before
long work (export packages, no network). No model is loaded."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from utils.decoding.generation import DecodingSettings
from utils.models.model_fetch import HubUnreachableError
from utils.training.eagle3_build import export_published_head
from utils.training.eagle3_checks import check_export_packages
from utils.training.eagle3_settings import Eagle3Settings, eagle3_folders, head_recipe, hidden_recipe
from utils.training.scaffold import MainModel, TrainingError, stage_recipe

get_settings = Eagle3Settings.preset

MAIN = MainModel(Path("/m/smollm2-135m-instruct-fp16-ov"), Path("/m/smollm2-135m-instruct-hf"))


def test_folders_are_named_after_the_main_and_the_preset(tmp_path: Path) -> None:
    folders = eagle3_folders(get_settings("reference"), MAIN, tmp_path)
    assert folders.data == tmp_path / "smollm2-135m-eagle3-reference-data"
    assert folders.hidden.name == "smollm2-135m-eagle3-reference-hidden"
    assert folders.head.name == "smollm2-135m-eagle3-reference-hf"
    assert folders.exported.name == "smollm2-135m-eagle3-reference-int8-ov"  # the reference preset exports int8
    assert eagle3_folders(get_settings("quick", weight_format="int8"), MAIN, tmp_path).exported.name.endswith("int8-ov")


def test_unknown_overrides_and_impossible_values_are_refused() -> None:
    with pytest.raises(TrainingError, match="Unknown settings"):
        get_settings("quick", learning_rte=1e-3)
    with pytest.raises(TrainingError, match="prompts"):
        get_settings("quick", prompts=0)
    with pytest.raises(TrainingError, match="weight_format"):
        get_settings("quick", weight_format="int4")


def test_recipes_follow_what_decides_each_stage(tmp_path: Path) -> None:
    quick = get_settings("quick")
    longer_training = get_settings("quick", epochs=5.0)
    more_data = get_settings("quick", prompts=64)
    data, hidden = tmp_path / "data", tmp_path / "hidden"

    def data_recipe(settings: Eagle3Settings) -> dict:
        return stage_recipe("data", settings.data_settings(), [MAIN.openvino], ("openvino",), ())

    # the training length is not part of the data or the tapped states, but it is part of the head
    assert data_recipe(quick) == data_recipe(longer_training) != data_recipe(more_data)
    assert hidden_recipe(quick, MAIN.openvino, data) == hidden_recipe(longer_training, MAIN.openvino, data)
    assert head_recipe(quick, hidden, MAIN.hf) != head_recipe(longer_training, hidden, MAIN.hf)
    # the export's weight format decides the exported folder, not the trained weights
    assert head_recipe(quick, hidden, MAIN.hf) == head_recipe(get_settings("quick", weight_format="int8"), hidden,
                                                             MAIN.hf)
    # nor does a preset's name: a head trained under one name is the same head under another
    assert head_recipe(quick, hidden, MAIN.hf) == head_recipe(get_settings("quick", name="renamed"), hidden, MAIN.hf)


def test_a_missing_export_package_is_named_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    check_export_packages()  # the lock file installs both
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "diffusers" else real_find_spec(name, *args))
    with pytest.raises(TrainingError, match="needs diffusers.*tutorial.py setup"):
        check_export_packages()


def test_a_published_head_without_a_network_fails_before_any_export(unreachable_hubs: str, tmp_models_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails at the reachability check, in seconds, rather than after optimum-cli has tried to download."""
    from utils.models import optimum_export

    monkeypatch.setattr(optimum_export, "export_with_optimum", lambda *args, **kwargs: pytest.fail("export started"))
    with pytest.raises(HubUnreachableError, match="Cannot reach the Hugging Face hub"):
        export_published_head("AngelSlim/Qwen3-1.7B_eagle3", "Qwen/Qwen3-1.7B")
    assert list(tmp_models_dir.iterdir()) == []


def test_a_setting_can_be_named_after_its_draft() -> None:
    assert DecodingSettings("speculative", num_assistant_tokens=3).label == "K=3"
    assert DecodingSettings("speculative", num_assistant_tokens=3, name="EAGLE-3 head").label == "EAGLE-3 head"


def test_integer_settings_refuse_booleans_and_floats_and_store_numpy_integers_as_ints() -> None:
    import json

    import numpy as np

    for bad in (True, 2.0, "8"):
        with pytest.raises(TrainingError, match=r"unroll_steps must be an integer >= 1"):
            get_settings("quick", unroll_steps=bad)
    settings = get_settings("quick", prompts=np.int64(12))
    assert type(settings.prompts) is int and json.loads(json.dumps(settings.as_dict()))["prompts"] == 12
