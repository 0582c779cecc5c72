"""Tests for utils.models.model_catalogue: pairs, sources, folders and estimates."""
from __future__ import annotations

from pathlib import Path

import pytest

from utils.models.model_catalogue import PAIRS, ModelSpec, get_pair, pair_table
from utils.paths import REPO_ROOT, models_dir


def spec(weight_format: str, parameters: float = 1e9, **extra) -> ModelSpec:
    return ModelSpec(folder_name=f"m-{weight_format}", description="test", parameters=parameters,
                     weight_format=weight_format, **extra)


def test_pairs_are_found_by_their_own_name_and_never_share_a_folder_by_accident() -> None:
    """A pair registered under another name, or two different models with one folder name, would mix up models."""
    folders: dict[str, ModelSpec] = {}
    for name, pair in PAIRS.items():
        assert get_pair(name) is pair and pair.name == name
        for spec in (pair.main, pair.draft, *pair.alternative_drafts.values()):
            other = folders.setdefault(spec.folder_name, spec)
            assert other is spec or other == spec, f"{spec.folder_name} names two different models"


def test_unknown_pair_lists_the_known_ones() -> None:
    with pytest.raises(KeyError) as error:
        get_pair("llama-70b")
    message = str(error.value)
    assert "llama-70b" in message
    for name in PAIRS:
        assert name in message


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_every_pair_has_a_main_and_a_draft_that_can_be_obtained(name: str) -> None:
    pair = get_pair(name)
    for model in (pair.main, pair.draft):
        assert model.sources, f"{model.folder_name} has no way to be obtained"
        assert model.weight_format in ("fp16", "int8", "int4")
        assert model.parameters > 0
    assert pair.main.folder_name != pair.draft.folder_name
    assert pair.draft.parameters <= pair.main.parameters
    if pair.needs_network:
        assert "offline" not in pair.main.sources + pair.draft.sources
    else:
        assert pair.main.sources[0] == pair.draft.sources[0] == "offline"


def test_offline_pair_needs_no_network_and_lives_in_models_dir(monkeypatch, tmp_path: Path) -> None:
    pair = get_pair("offline")
    assert pair.needs_network is False
    assert (pair.main.weight_format, pair.draft.weight_format) == ("fp16", "int4")
    monkeypatch.delenv("SPECDEC_MODELS_DIR", raising=False)
    assert pair.main.path == REPO_ROOT / "models" / pair.main.folder_name
    assert pair.draft.path.parent == models_dir() == REPO_ROOT / "models"
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    assert pair.main.path == tmp_path.resolve() / pair.main.folder_name  # read at call time
    assert pair.draft.path == tmp_path.resolve() / pair.draft.folder_name


def test_tmp_models_dir_fixture_moves_every_model(tmp_models_dir: Path) -> None:
    for pair in PAIRS.values():
        assert pair.main.path.parent == tmp_models_dir and pair.draft.path.parent == tmp_models_dir


def test_disk_estimates_shrink_with_the_weight_format() -> None:
    fp16, int8, int4 = spec("fp16"), spec("int8"), spec("int4")
    assert fp16.disk_gb > int8.disk_gb > int4.disk_gb > 0
    assert fp16.disk_gb == pytest.approx(2 * int8.disk_gb)
    assert fp16.run_memory_gb > int8.run_memory_gb > int4.run_memory_gb
    assert spec("fp16", 2e9).disk_gb == pytest.approx(2 * fp16.disk_gb)
    assert 1.9 < fp16.disk_gb < 2.3  # about 2 bytes per weight


def test_offline_estimates_are_near_the_real_folder_sizes(offline_pair) -> None:
    from utils.models.atomic_folder import folder_size_bytes

    pair = get_pair("offline")
    for model in (pair.main, pair.draft, pair.draft_variant("int8")):
        real_gb = folder_size_bytes(model.path) / 1e9
        assert 0.5 * real_gb < model.disk_gb < 2 * real_gb, (model.folder_name, real_gb, model.disk_gb)


def test_sources_in_order() -> None:
    everything = spec("int4", built_locally=True, huggingface_id="a/b", modelscope_id="c/d", export_source_id="e/f")
    assert everything.sources == ["offline", "huggingface", "modelscope", "export"]
    assert spec("int4").sources == []
    assert spec("int4", modelscope_id="c/d", export_source_id="e/f").sources == ["modelscope", "export"]


def test_draft_variants() -> None:
    offline = get_pair("offline")
    assert offline.draft_variant(None) is offline.draft
    assert offline.draft_variant("int8").weight_format == "int8"
    assert offline.draft_variant("fp16") is offline.main
    with pytest.raises(KeyError, match="int2") as error:
        offline.draft_variant("int2")
    assert "int4" in str(error.value) and "int8" in str(error.value)
    with pytest.raises(KeyError, match="none"):
        get_pair("phi-3").draft_variant("int8")


def test_pair_table_covers_every_model(tmp_models_dir: Path) -> None:
    rows = pair_table()
    expected = {(pair.name, role, model.folder_name)
                for pair in PAIRS.values() for role, model in (("main", pair.main), ("draft", pair.draft))}
    assert {(row["pair"], row["role"], row["folder"]) for row in rows} == expected
    assert len(rows) == len(expected)
    assert not any(row["ready"] for row in rows)  # nothing in the empty models folder
    for row in rows:
        assert row["sources"] and row["disk GB (est.)"] > 0


def test_pair_table_marks_prepared_models_ready(offline_pair) -> None:
    ready = {(row["pair"], row["role"]): row["ready"] for row in pair_table()}
    assert ready[("offline", "main")] and ready[("offline", "draft")]
