"""Real builds in real processes: two at once on one folder, and one killed with SIGKILL half-way (issue 15).

Each build is `optimum-cli export openvino` of a tiny random Llama (2 layers,
hidden size 16) that carries the offline pair's real tokenizer, through the
same functions `python -m utils.models.offline_pair` uses (`ensure_built`,
`export_with_optimum`, `atomic_folder`). One export costs about 20 s of CPU.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from utils.models.atomic_folder import damaged_files, live_temporaries, read_marker
from utils.models.model_check import check_model_folder
from utils.paths import REPO_ROOT

RECIPE = {"test": "tiny export"}
EXPORTED_FILES = {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "export.log",
                  "openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_tokenizer.bin",
                  "openvino_detokenizer.xml", "openvino_detokenizer.bin"}

# What each build process runs: `ensure_built` decides under the lock (as prepare_offline_models does);
# "always" exports unconditionally, like a `--force` rebuild.
BUILD = """
import sys
from pathlib import Path
from utils.models.optimum_export import export_with_optimum

model, destination, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
recipe = {"test": "tiny export"}
export = lambda: export_with_optimum(model, destination, "fp16", recipe, local_folder=True)
if mode == "always":
    export()
    print("BUILT")
else:
    from utils.models.atomic_folder import ensure_built
    print("BUILT" if ensure_built(destination, recipe, export) else "REUSED")
"""


@pytest.fixture(scope="module")
def tiny_model(offline_pair, tmp_path_factory) -> Path:
    """A Hugging Face folder: random tiny Llama weights, the offline pair's tokenizer files."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny") / "tiny-llama-hf"
    source_config = LlamaConfig.from_pretrained(offline_pair.hf)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=source_config.vocab_size, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=256, tie_word_embeddings=True,
                         bos_token_id=source_config.bos_token_id, eos_token_id=source_config.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (offline_pair.hf / name).is_file():
            shutil.copy2(offline_pair.hf / name, folder / name)
    return folder


def start_build(model: Path, destination: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BUILD, str(model), str(destination), mode], cwd=REPO_ROOT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.2)


def temporaries(models: Path) -> list[str]:
    return sorted(path.name for path in models.iterdir() if path.name.startswith(".tmp-"))


def assert_complete_export(destination: Path) -> None:
    assert check_model_folder(destination) == destination
    assert damaged_files(destination) == []
    marker = read_marker(destination)
    assert marker["recipe"] == RECIPE
    assert set(marker["files"]) >= EXPORTED_FILES, f"missing: {EXPORTED_FILES - set(marker['files'])}"
    assert {p.name for p in destination.iterdir()} >= EXPORTED_FILES | {".complete"}


def is_gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("mode", ["ensure_built", "always"])
def test_two_builds_at_once_both_end_with_a_complete_folder(tiny_model: Path, tmp_path: Path, mode: str) -> None:
    """Issue 15, item 2: the second build deleted the first's live temporary folder and a folder without its
    config and tokenizer files was marked complete. Now the second waits for the first."""
    models = tmp_path / "models"
    destination = models / "tiny-fp16-ov"
    first = start_build(tiny_model, destination, mode)
    # the second starts while the first is exporting (its temporary folder exists, optimum-cli runs)
    wait_for(lambda: models.is_dir() and any(name.startswith(".tmp-") for name in temporaries(models)), 120,
             "the first build's temporary folder")
    second = start_build(tiny_model, destination, mode)
    outputs = [process.communicate(timeout=600)[0] for process in (first, second)]
    for process, output in zip((first, second), outputs, strict=True):
        assert process.returncode == 0, output[-3000:]
    assert_complete_export(destination)
    assert temporaries(models) == []
    results = sorted(output.strip().splitlines()[-1] for output in outputs)
    assert results == (["BUILT", "REUSED"] if mode == "ensure_built" else ["BUILT", "BUILT"]), outputs
    assert "Another process is building" in outputs[1]  # the second one waited, and said so


def test_killed_build_leaves_no_orphan_and_the_next_run_leaves_nothing_behind(tiny_model: Path,
                                                                                  tmp_path: Path) -> None:
    """Issue 15, item 3: after `kill -9` of the build, optimum-cli lived on and recreated a hidden temporary
    folder that no later run removed."""
    models = tmp_path / "models"
    destination = models / "tiny-fp16-ov"
    build = start_build(tiny_model, destination, "ensure_built")
    parent = psutil.Process(build.pid)

    def exporter_running() -> list[psutil.Process]:
        return [child for child in parent.children(recursive=True)
                if any("optimum-cli" in part for part in child.cmdline())]

    wait_for(lambda: bool(exporter_running()), 120, "optimum-cli to start")
    time.sleep(3)  # half-way: optimum-cli is loading/converting the model
    assert temporaries(models) == [f".tmp-tiny-fp16-ov-{build.pid}"] and not destination.exists()
    descendants = parent.children(recursive=True)
    build.kill()  # SIGKILL: the build gets no chance to clean up
    build.communicate()
    wait_for(lambda: all(is_gone(process) for process in descendants), 15,
             f"the build's children {[p.pid for p in descendants]} to die with it (orphans)")
    assert live_temporaries(destination) == []

    next_run = start_build(tiny_model, destination, "ensure_built")
    output = next_run.communicate(timeout=600)[0]
    assert next_run.returncode == 0, output[-3000:]
    assert output.strip().splitlines()[-1] == "BUILT"
    assert_complete_export(destination)
    time.sleep(2)  # an orphan that were still alive would recreate its folder now
    assert temporaries(models) == []
    assert sorted(p.name for p in models.iterdir()) == [".tiny-fp16-ov.lock", "tiny-fp16-ov"]
