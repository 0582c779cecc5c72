"""Real builds in real processes: two at once on one folder, and one killed with SIGKILL half-way (issue 15).

Each build is `optimum-cli export openvino` of a tiny random Llama (2 layers,
hidden size 16) that carries the offline pair's real tokenizer, through the
same functions `python -m maintainers.offline_pair` uses (`ensure_built`,
`export_with_optimum`, `atomic_folder`). One export costs about 20 s of CPU.

No test waits a fixed time for the export to get somewhere: each waits for what
the export does (its temporary folder, the first file optimum-cli writes) and
then stops the exporter (SIGSTOP) where it is, so the export cannot finish
before the test has done what it needs at that point.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
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
    from maintainers.offline_pair import ensure_built
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


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
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


def exporters(build: psutil.Process) -> list[psutil.Process]:
    """The optimum-cli processes under a build process."""
    found = []
    for child in build.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if any("optimum-cli" in part for part in child.cmdline()):
                found.append(child)
    return found


def freeze_children(build: psutil.Process) -> list[psutil.Process]:
    """Stop (SIGSTOP) every process under `build`, those started meanwhile included; return them all.

    A stopped exporter can neither finish its export nor start another process: the list is complete."""
    frozen: dict[int, psutil.Process] = {}
    while new := [child for child in build.children(recursive=True) if child.pid not in frozen]:
        for child in new:
            frozen[child.pid] = child
            with contextlib.suppress(psutil.NoSuchProcess):
                child.suspend()
    return list(frozen.values())


def resume(processes: Iterable[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.resume()


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
    first_process = psutil.Process(first.pid)
    # the second starts while the first is exporting: its temporary folder exists and its optimum-cli runs, stopped
    # until the second has found the folder locked (however long the second takes to start)
    wait_for(lambda: (models / f".tmp-tiny-fp16-ov-{first.pid}").is_dir() and bool(exporters(first_process)), 120,
             "the first build's temporary folder and optimum-cli")
    frozen = freeze_children(first_process)
    try:
        second = start_build(tiny_model, destination, mode)
        said = ""
        while "Another process is building" not in said and (line := second.stdout.readline()):
            said += line  # until the second says it waits for the first (or ends without saying so)
    finally:
        resume(frozen)
    outputs = [first.communicate(timeout=600)[0], said + second.stdout.read()]  # one reader for the second's output
    second.wait(timeout=60)
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
    temporary = models / f".tmp-tiny-fp16-ov-{build.pid}"
    # half-way: optimum-cli has loaded the model and written its first file (config.json), and is converting;
    # stopped there, it cannot finish before the kill
    wait_for(lambda: (temporary / "config.json").is_file(), 120, "optimum-cli to write config.json")
    descendants = freeze_children(parent)
    try:
        assert exporters(parent), "optimum-cli ended before it could be stopped half-way"
        assert temporaries(models) == [temporary.name] and not destination.exists()
        build.kill()  # SIGKILL: the build gets no chance to clean up
        build.communicate()
        # the kernel kills the stopped exporter with its parent (SIGKILL ends a stopped process too)
        wait_for(lambda: all(is_gone(process) for process in descendants), 15,
                 f"the build's children {[p.pid for p in descendants]} to die with it (orphans)")
    finally:
        for process in descendants:  # orphans of a failed check are not left stopped behind
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    assert live_temporaries(destination) == []

    next_run = start_build(tiny_model, destination, "ensure_built")
    output = next_run.communicate(timeout=600)[0]
    assert next_run.returncode == 0, output[-3000:]
    assert output.strip().splitlines()[-1] == "BUILT"
    assert_complete_export(destination)
    # every process of the killed build is gone (checked above) and, stopped, started no other: none can write here
    assert temporaries(models) == []
    assert sorted(p.name for p in models.iterdir()) == [".tiny-fp16-ov.lock", "tiny-fp16-ov"]
