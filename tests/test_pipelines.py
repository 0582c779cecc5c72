"""Tests for utils.decoding.pipelines without a model: folder checks (GGUF files, missing folders, the pair check),
the scheduler configuration, the single-thread bf16 guard, and what `load_pipeline` hands OpenVINO GenAI.

OpenVINO GenAI's `LLMPipeline` and `draft_model` are replaced by recorders, the device list by a fixed one, and the
model folders are `fake_pair`'s placeholders, so every test checks the arguments, never a loaded model.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import openvino_genai
import pytest

from utils import input_checks
from utils.decoding.pipelines import (
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    EXACT_KV_CACHE,
    EXACT_MAIN_PROPERTIES,
    LoadedPipeline,
    SpeculationSetupError,
    check_draft_folder,
    check_main_folder,
    check_single_thread_precision,
    load_pipeline,
    make_scheduler_config,
)
from utils.models import model_check
from utils.models.model_catalogue import ModelPair
from utils.models.model_check import ModelFolderError


class GenAIRecorder:
    """Stands in for `openvino_genai.LLMPipeline` and `draft_model`: records each call, loads nothing."""

    def __init__(self) -> None:
        self.pipelines: list[tuple[str, str, dict[str, Any]]] = []
        self.drafts: list[tuple[str, str, dict[str, Any]]] = []

    def pipeline(self, path: str, device: str, **arguments: Any) -> SimpleNamespace:
        self.pipelines.append((path, device, arguments))
        return SimpleNamespace(path=path)

    def draft(self, path: str, device: str, **properties: Any) -> SimpleNamespace:
        self.drafts.append((path, device, properties))
        return SimpleNamespace(draft_path=path)


@pytest.fixture
def genai(monkeypatch: pytest.MonkeyPatch) -> GenAIRecorder:
    """Recorders for GenAI's constructors, a machine with a CPU and one GPU, and a pair check that records."""
    recorder = GenAIRecorder()
    monkeypatch.setattr(openvino_genai, "LLMPipeline", recorder.pipeline)
    monkeypatch.setattr(openvino_genai, "draft_model", recorder.draft)
    monkeypatch.setattr(input_checks, "available_devices", lambda: ["CPU", "GPU.0"])
    return recorder


@pytest.fixture
def checked_pairs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, Path]]:
    """Replace the tokenizer comparison of a main and draft folder (it needs real tokenizers) by a list of calls."""
    calls: list[tuple[Path, Path]] = []
    monkeypatch.setattr(model_check, "check_pair", lambda main, draft: calls.append((Path(main), Path(draft))))
    return calls


# --------------------------------------------------------------------------- model folders


def test_a_gguf_file_is_accepted_as_a_main_model_but_never_as_a_draft(tmp_path: Path) -> None:
    gguf = tmp_path / "model.GGUF"
    gguf.write_bytes(b"GGUF" + b"\0" * 16)
    assert check_main_folder(gguf) == gguf
    with pytest.raises(SpeculationSetupError, match="GGUF file.*main model only"):
        check_draft_folder(gguf)
    with pytest.raises(SpeculationSetupError, match="Export the draft to an OpenVINO folder"):
        check_draft_folder(tmp_path / "not-there-yet.gguf")  # refused by its name, before looking for it


def test_a_gguf_draft_is_recognised_by_its_magic_bytes_without_the_suffix(tmp_path: Path) -> None:
    renamed = tmp_path / "draft.bin"
    renamed.write_bytes(b"GGUF\x03\x00")
    with pytest.raises(SpeculationSetupError, match="is a GGUF file"):
        check_draft_folder(renamed)
    other = tmp_path / "notes.txt"
    other.write_bytes(b"not a model")
    with pytest.raises(ModelFolderError, match="is not a folder"):
        check_draft_folder(other)


def test_missing_folders_are_named_with_their_role(tmp_path: Path) -> None:
    with pytest.raises(ModelFolderError, match=r"The main model folder .*missing-main does not exist"):
        check_main_folder(tmp_path / "missing-main")
    with pytest.raises(ModelFolderError, match=r"The draft model folder .*missing-draft does not exist"):
        check_draft_folder(tmp_path / "missing-draft")


def test_a_draft_with_a_main_model_is_checked_as_a_pair(fake_pair: ModelPair,
                                                        checked_pairs: list[tuple[Path, Path]]) -> None:
    assert check_draft_folder(fake_pair.draft.path) == fake_pair.draft.path
    assert checked_pairs == []  # alone: only the folder
    assert check_draft_folder(fake_pair.draft.path, fake_pair.main.path) == fake_pair.draft.path
    assert checked_pairs == [(fake_pair.main.path, fake_pair.draft.path)]


# --------------------------------------------------------------------------- scheduler and precision guard


def test_the_scheduler_grows_its_cache_on_demand_and_batches_whole_prompts_by_default() -> None:
    config = make_scheduler_config()
    assert config.cache_size == 0
    assert config.max_num_batched_tokens == DEFAULT_MAX_NUM_BATCHED_TOKENS
    assert config.max_num_batched_tokens != openvino_genai.SchedulerConfig().max_num_batched_tokens
    explicit = make_scheduler_config(2, 256)
    assert (explicit.cache_size, explicit.max_num_batched_tokens) == (2, 256)


@pytest.mark.parametrize("arguments, name", [
    ((-1, None), "cache_size_gb"), ((1.5, None), "cache_size_gb"), ((True, None), "cache_size_gb"),
    ((0, 0), "max_num_batched_tokens"), ((0, "4096"), "max_num_batched_tokens")])
def test_scheduler_settings_must_be_whole_numbers_in_range(arguments: tuple, name: str) -> None:
    with pytest.raises(SpeculationSetupError, match=name):
        make_scheduler_config(*arguments)


class FakeCore:
    """`openvino.Core` whose CPU reports the given default inference precision."""

    precision = "bf16"

    def get_property(self, device: str, name: str) -> str:
        assert (device, name) == ("CPU", "INFERENCE_PRECISION_HINT")
        return FakeCore.precision


@pytest.mark.parametrize("reported", ["bf16", "<Type: 'bfloat16'>"])
def test_one_thread_on_a_bf16_cpu_is_refused_before_it_crashes(monkeypatch: pytest.MonkeyPatch, reported: str) -> None:
    import openvino

    monkeypatch.setattr(openvino, "Core", FakeCore)
    monkeypatch.setattr(FakeCore, "precision", reported)
    with pytest.raises(SpeculationSetupError, match="threads=1 with the CPU's default bf16"):
        check_single_thread_precision("CPU", None, "default", 1)
    with pytest.raises(SpeculationSetupError):
        check_single_thread_precision("GPU", "CPU", None, 1)  # the draft on the CPU is enough
    for safe in (("CPU", None, "f32", 1), ("CPU", None, "default", 2), ("CPU", None, "default", None),
                 ("GPU", None, "default", 1)):
        check_single_thread_precision(*safe)


def test_one_thread_on_an_f32_cpu_is_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    import openvino

    monkeypatch.setattr(openvino, "Core", FakeCore)
    monkeypatch.setattr(FakeCore, "precision", "f32")
    check_single_thread_precision("CPU", None, "default", 1)


# --------------------------------------------------------------------------- what load_pipeline builds


def test_a_plain_pipeline_gets_the_exact_main_properties_and_the_scheduler(fake_pair: ModelPair,
                                                                           genai: GenAIRecorder) -> None:
    loaded = load_pipeline("plain", fake_pair.main.path, "cpu", precision="f32", threads=2)
    ((path, device, arguments),) = genai.pipelines
    assert (path, device) == (str(fake_pair.main.path), "CPU")
    scheduler = arguments.pop("scheduler_config")
    assert scheduler.max_num_batched_tokens == DEFAULT_MAX_NUM_BATCHED_TOKENS
    assert arguments == {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 2, **EXACT_MAIN_PROPERTIES}
    assert genai.drafts == []
    assert (loaded.mode, loaded.device, loaded.precision, loaded.backend) == ("plain", "CPU", "f32",
                                                                              "continuous_batching")
    assert loaded.draft_dir is None and loaded.main_dir == fake_pair.main.path
    assert loaded.description == "plain on CPU (continuous_batching, precision=f32), main=fake-main"


def test_a_speculative_pipeline_gives_the_draft_the_fast_path(fake_pair: ModelPair, genai: GenAIRecorder,
                                                              checked_pairs: list[tuple[Path, Path]]) -> None:
    loaded = load_pipeline("speculative", fake_pair.main.path, draft_dir=fake_pair.draft.path, draft_device="gpu",
                           precision="f32", cache_size_gb=1, max_num_batched_tokens=512)
    ((draft_path, draft_device, draft_properties),) = genai.drafts
    assert (draft_path, draft_device) == (str(fake_pair.draft.path), "GPU")
    assert draft_properties == {"INFERENCE_PRECISION_HINT": "f32"}  # no exact-main extras for the draft
    ((_, device, arguments),) = genai.pipelines
    assert device == "CPU" and arguments["draft_model"].draft_path == str(fake_pair.draft.path)
    assert (arguments["scheduler_config"].cache_size, arguments["scheduler_config"].max_num_batched_tokens) == (1, 512)
    assert checked_pairs == [(fake_pair.main.path, fake_pair.draft.path)]  # tokenizers compared before loading
    assert loaded.description.endswith("main=fake-main, draft=fake-draft")


def test_the_draft_can_run_at_its_own_precision_and_the_main_without_exactness(fake_pair: ModelPair,
                                                                               genai: GenAIRecorder,
                                                                               checked_pairs: list) -> None:
    load_pipeline("speculative", fake_pair.main.path, draft_dir=fake_pair.draft.path, precision="f32",
                  draft_precision="bf16", exact_main=False)
    ((_, draft_device, draft_properties),) = genai.drafts
    assert draft_device == "CPU" and draft_properties == {"INFERENCE_PRECISION_HINT": "bf16"}
    ((_, _, arguments),) = genai.pipelines
    assert {key: arguments[key] for key in arguments if key not in ("scheduler_config", "draft_model")} == {
        "INFERENCE_PRECISION_HINT": "f32", **EXACT_KV_CACHE}


def test_prompt_lookup_and_the_stateful_backend(fake_pair: ModelPair, genai: GenAIRecorder) -> None:
    lookup = load_pipeline("prompt_lookup", fake_pair.main.path, precision=None)
    stateful = load_pipeline("plain", fake_pair.main.path, backend="stateful")
    (_, _, lookup_arguments), (_, _, stateful_arguments) = genai.pipelines
    assert lookup_arguments["prompt_lookup"] is True and "scheduler_config" in lookup_arguments
    assert stateful_arguments == {}  # no scheduler, default precision, all threads
    assert lookup.precision == "default" and stateful.backend == "stateful"


@pytest.mark.parametrize("mode, options, message", [
    ("beam", {}, "Unknown mode 'beam'"),
    ("plain", {"backend": "gpu"}, "backend must be one of"),
    ("speculative", {"backend": "stateful"}, "continuous-batching backend"),
    ("plain", {"device": "NPU"}, "this machine has no NPU device"),
    ("plain", {"draft_device": "NPU"}, "draft_device 'NPU'"),
    ("plain", {"threads": 0}, "threads"),
    ("plain", {"precision": "fp64"}, "precision must be one of"),
    ("speculative", {}, "needs draft_dir"),
    ("prompt_lookup", {"draft_dir": "somewhere"}, "only used by mode='speculative'"),
])
def test_bad_settings_are_refused_before_anything_loads(fake_pair: ModelPair, genai: GenAIRecorder, mode: str,
                                                        options: dict, message: str) -> None:
    with pytest.raises(SpeculationSetupError, match=message):
        load_pipeline(mode, fake_pair.main.path, **options)
    assert genai.pipelines == [] and genai.drafts == []


def test_a_gguf_main_model_runs_plain_but_not_with_a_draft(tmp_path: Path, fake_pair: ModelPair,
                                                          genai: GenAIRecorder) -> None:
    gguf = tmp_path / "main.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(SpeculationSetupError, match="GGUF main model cannot be combined with a draft"):
        load_pipeline("speculative", gguf, draft_dir=fake_pair.draft.path)
    assert genai.pipelines == []
    assert load_pipeline("plain", gguf).main_dir == gguf
    assert genai.pipelines[0][0] == str(gguf)


def test_a_missing_main_folder_is_refused_before_loading(tmp_path: Path, genai: GenAIRecorder) -> None:
    with pytest.raises(ModelFolderError, match="main model folder"):
        load_pipeline("plain", tmp_path / "nowhere")
    assert genai.pipelines == []


def test_the_loaded_pipeline_hands_out_its_tokenizer() -> None:
    tokenizer = object()
    loaded = LoadedPipeline(mode="plain", pipeline=SimpleNamespace(get_tokenizer=lambda: tokenizer),
                            main_dir=Path("m"), draft_dir=None, device="CPU", precision="default",
                            backend="stateful", load_seconds=0.0)
    assert loaded.tokenizer is tokenizer

