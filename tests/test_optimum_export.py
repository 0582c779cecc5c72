"""Tests for utils.models.optimum_export: the command it runs and how a failed export ends."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from utils.models.optimum_export import ExportError, export_with_optimum, optimum_export_command


def test_command_for_a_hub_model() -> None:
    command = optimum_export_command("databricks/dolly-v2-3b", Path("/models/dolly"), "fp16")
    assert Path(command[0]).name == "optimum-cli" and Path(command[0]).parent == Path(sys.executable).parent
    assert command[1:] == ["export", "openvino", "--model", "databricks/dolly-v2-3b", "--weight-format", "fp16",
                           "/models/dolly"]
    assert "--task" not in command


def test_command_for_a_local_folder_adds_the_task_and_extra_args() -> None:
    command = optimum_export_command("/models/hf", Path("/models/out"), "int4", ("--group-size", "64"),
                                     local_folder=True)
    assert command[1:] == ["export", "openvino", "--model", "/models/hf", "--weight-format", "int4",
                           "--task", "text-generation-with-past", "--group-size", "64", "/models/out"]


@pytest.mark.standins  # runs optimum-cli
def test_failed_export_raises_with_the_log_tail_and_leaves_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never reach for the network, whatever optimum does
    broken_model = tmp_path / "broken-hf-folder"
    broken_model.mkdir()
    (broken_model / "config.json").write_text('{"model_type": "no-such-architecture"}')
    destination = tmp_path / "models" / "never-exported-ov"
    with pytest.raises(ExportError) as error:
        export_with_optimum(str(broken_model), destination, "fp16", {"test": True}, local_folder=True)
    message = str(error.value)
    assert "broken-hf-folder" in message and "fp16" in message and "exit code" in message
    log_tail = message.split("Last lines of its log:\n", 1)[1]
    assert "no-such-architecture" in log_tail  # optimum-cli's own complaint about the model
    assert not destination.exists()
    # no .tmp-* folder left; only the (empty) lock file that builds of this folder share
    assert [p.name for p in destination.parent.iterdir()] == [".never-exported-ov.lock"]
    printed = capsys.readouterr().out
    assert printed.startswith("$ optimum-cli export openvino") and str(destination) in printed
    assert ".tmp-" not in printed  # the command shown names the final folder, not the temporary one


def test_export_of_a_missing_local_folder_fails_at_once(tmp_path: Path, capsys) -> None:
    destination = tmp_path / "models" / "never-exported-ov"
    with pytest.raises(ExportError, match="not a Hugging Face model folder"):
        export_with_optimum(str(tmp_path / "no-such-folder"), destination, "fp16", {"test": True}, local_folder=True)
    assert not destination.exists() and capsys.readouterr().out == ""  # optimum-cli never started
