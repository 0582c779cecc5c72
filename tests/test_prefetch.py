"""Tests for maintainers.prefetch: planning and checks in-process, the command end to end
against a local fake Hugging Face hub (tests/hub_server.py) through huggingface_hub."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from maintainers import prefetch
from utils.models.atomic_folder import folder_size_bytes
from utils.models.model_catalogue import PHI3_DRAFT, PHI3_MAIN, get_pair
from utils.paths import REPO_ROOT

sys.path.insert(0, str(Path(__file__).parent))
from hub_server import FakeHub, FakeRepository  # noqa: E402


def fake_openvino_folder(marker: str, weights_bytes: int) -> dict[str, bytes]:
    """Files shaped like an OpenVINO model folder (not loadable), with `marker` in config.json."""
    return {
        "config.json": json.dumps({"model_type": "phi3", "marker": marker}).encode(),
        "generation_config.json": b'{"eos_token_id": 32000}',
        "openvino_model.xml": b"<?xml version='1.0'?><net name='fake'/>",
        "openvino_model.bin": bytes(range(256)) * (weights_bytes // 256),
        "openvino_tokenizer.xml": b"<net name='tokenizer'/>",
        "openvino_tokenizer.bin": b"\x01" * 1000,
        "openvino_detokenizer.xml": b"<net name='detokenizer'/>",
        "openvino_detokenizer.bin": b"\x02" * 1000,
        "tokenizer_config.json": b"{}",
        "nested/readme.md": f"# {marker}".encode(),
    }


PHI3_MAIN_FILES = fake_openvino_folder("main", 400_000)
PHI3_DRAFT_FILES = fake_openvino_folder("draft", 120_000)


def run_prefetch(arguments: list[str], hub_url: str, models: Path, home: Path) -> subprocess.CompletedProcess:
    """`python -m maintainers.prefetch ...` in a fresh process that talks to the fake hub only."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGINGFACE"))}
    environment |= {
        "HF_ENDPOINT": hub_url,
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "SPECDEC_MODELS_DIR": str(models),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    return subprocess.run([sys.executable, "-m", "maintainers.prefetch", *arguments], cwd=REPO_ROOT, env=environment,
                          capture_output=True, text=True, timeout=120)


def table_row(output: str, folder_name: str) -> str:
    """The row of the printed table (which starts at the "pair" header) for one folder."""
    lines = output.splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("pair "))
    rows = [line for line in lines[header:] if folder_name in line and not line.startswith("[")]
    assert len(rows) == 1, output
    return rows[0]


def hub_file_requests(hub: FakeHub) -> list[tuple[str, str]]:
    return [request for request in hub.requests if "/resolve/" in request[1] or request[1].startswith("/api/models/")]


def test_fetches_a_pair_from_the_hub_then_skips_it(tmp_path: Path) -> None:
    models = tmp_path / "models"
    repositories = {
        PHI3_MAIN.huggingface_id: FakeRepository(PHI3_MAIN_FILES),
        PHI3_DRAFT.huggingface_id: FakeRepository(PHI3_DRAFT_FILES),
    }
    with FakeHub(repositories) as hub:
        first = run_prefetch(["--pairs", "phi-3", "--source", "huggingface"], hub.url, models, tmp_path / "hf")
        assert first.returncode == 0, first.stdout + first.stderr
        for spec, files in ((PHI3_MAIN, PHI3_MAIN_FILES), (PHI3_DRAFT, PHI3_DRAFT_FILES)):
            folder = models / spec.folder_name
            for name, content in files.items():
                assert (folder / name).read_bytes() == content
            assert (folder / ".complete").is_file()
            row = table_row(first.stdout, spec.folder_name)
            assert "fetched" in row and "huggingface" in row
            assert f"{folder_size_bytes(folder) / 1e6:.1f}" in row.split()
        assert not list(models.glob(".tmp-*"))
        requests_after_first_run = len(hub_file_requests(hub))
        assert requests_after_first_run > 0

        second = run_prefetch(["--pairs", "phi-3", "--source", "huggingface"], hub.url, models, tmp_path / "hf")
        assert second.returncode == 0, second.stdout + second.stderr
        assert "already there" in table_row(second.stdout, PHI3_MAIN.folder_name)
        assert "already there" in table_row(second.stdout, PHI3_DRAFT.folder_name)
        assert len(hub_file_requests(hub)) == requests_after_first_run  # nothing asked of the hub


def test_a_failed_model_is_reported_and_the_others_still_fetched(tmp_path: Path) -> None:
    models = tmp_path / "models"
    with FakeHub({PHI3_DRAFT.huggingface_id: FakeRepository(PHI3_DRAFT_FILES)}) as hub:  # the main is missing
        hub_url = hub.url
        result = run_prefetch(["--pairs", "phi-3"], hub_url, models, tmp_path / "hf")
    assert result.returncode == 1, result.stdout + result.stderr
    main_row = table_row(result.stdout, PHI3_MAIN.folder_name)
    assert main_row.endswith("failed [1]")
    assert (f"[1] {PHI3_MAIN.folder_name}: ModelNotOnHubError: The Hugging Face hub at {hub_url} has no model "
            f"repository '{PHI3_MAIN.huggingface_id}'") in result.stdout
    assert "fetched" in table_row(result.stdout, PHI3_DRAFT.folder_name)
    assert not (models / PHI3_MAIN.folder_name).exists()
    assert not list(models.glob(".tmp-*"))


def test_a_source_a_model_lacks_is_refused_before_any_download(tmp_path: Path) -> None:
    models = tmp_path / "models"
    with FakeHub({}) as hub:
        result = run_prefetch(["--pairs", "dolly-v2", "phi-3", "--source", "huggingface"],
                              hub.url, models, tmp_path / "hf")
        assert hub_file_requests(hub) == []
    assert result.returncode == 2
    assert "dolly-v2-7b-fp16-ov cannot be fetched from huggingface" in result.stderr
    assert "dolly-v2-3b-fp16-ov" in result.stderr and "modelscope" in result.stderr
    assert not (models / PHI3_DRAFT.folder_name).exists()


def test_plan_picks_sources_in_preference_order_and_marks_complete_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    ready = tmp_path / PHI3_DRAFT.folder_name
    ready.mkdir()
    (ready / "openvino_model.bin").write_bytes(b"x" * 2_000_000)
    (ready / ".complete").write_text(json.dumps({"recipe": {"source": "huggingface"}}))

    plan = prefetch.plan_prefetch(["dolly-v2", "phi-3"], ["modelscope", "huggingface"])

    by_folder = {entry.spec.folder_name: entry for entry in plan}
    assert by_folder["dolly-v2-7b-fp16-ov"].source == "modelscope"
    assert by_folder[PHI3_MAIN.folder_name].source == "modelscope"
    assert by_folder[PHI3_MAIN.folder_name].status == prefetch.PLANNED
    assert by_folder[PHI3_DRAFT.folder_name].status == prefetch.ALREADY_THERE
    assert by_folder[PHI3_DRAFT.folder_name].source == "huggingface"  # from its marker
    assert by_folder[PHI3_DRAFT.folder_name].size_bytes >= 2_000_000
    assert "2.0" in prefetch.plan_table(plan)


def test_offline_pair_is_planned_once_per_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    plan = prefetch.plan_prefetch(["offline", "offline"], ["huggingface"])
    offline = get_pair("offline")
    assert [entry.spec.folder_name for entry in plan] == [offline.main.folder_name, offline.draft.folder_name]
    assert {entry.source for entry in plan} == {"offline"}


def test_resource_problems_for_disk_and_export_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    plan = prefetch.plan_prefetch(["dolly-v2"], ["export"])
    needed = sum(entry.spec.disk_gb for entry in plan) * 1e9

    assert prefetch.resource_problems(plan, free_disk_bytes=int(needed * 2), memory_bytes=int(1e12)) == []
    too_little_disk = prefetch.resource_problems(plan, free_disk_bytes=int(needed / 2), memory_bytes=int(1e12))
    assert len(too_little_disk) == 1 and "free" in too_little_disk[0]
    too_little_ram = prefetch.resource_problems(plan, free_disk_bytes=int(needed * 2), memory_bytes=int(24e9))
    assert len(too_little_ram) == 1 and "dolly-v2-7b-fp16-ov" in too_little_ram[0]


def test_a_complete_folder_missing_files_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    for spec, files in ((PHI3_MAIN, PHI3_MAIN_FILES), (PHI3_DRAFT, PHI3_DRAFT_FILES)):
        for name, content in files.items():
            (spec.path / name).parent.mkdir(parents=True, exist_ok=True)
            (spec.path / name).write_bytes(content)
        (spec.path / ".complete").write_text(json.dumps({"recipe": {"source": "huggingface"}}))
    (PHI3_MAIN.path / "openvino_tokenizer.bin").unlink()  # e.g. a copy that was cut short
    plan = prefetch.plan_prefetch(["phi-3"], ["huggingface"])

    prefetch.run_plan(plan, fetch=lambda entry: pytest.fail("nothing should be fetched"))

    assert [entry.status for entry in plan] == [prefetch.FAILED, prefetch.ALREADY_THERE]
    assert "openvino_tokenizer.bin" in plan[0].message


def test_run_plan_records_failures_and_missing_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    plan = prefetch.plan_prefetch(["phi-3"], ["huggingface"])

    def fetch(entry: prefetch.PlannedModel) -> None:
        if entry.role == "main":
            raise ConnectionError("no network here\nsecond line")
        entry.spec.path.mkdir(parents=True)  # writes files but never the marker

    prefetch.run_plan(plan, fetch)

    assert [entry.status for entry in plan] == [prefetch.FAILED, prefetch.FAILED]
    assert plan[0].message == "ConnectionError: no network here second line"
    assert ".complete" in plan[1].message


def test_command_line_help_and_dry_run(tmp_path: Path) -> None:
    help_text = subprocess.run([sys.executable, "-m", "maintainers.prefetch", "--help"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=60, check=True).stdout
    assert "--pairs" in help_text and "--source" in help_text

    dry = subprocess.run([sys.executable, "-m", "maintainers.prefetch", "--dry-run", "--models-dir", str(tmp_path)],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "to fetch" in table_row(dry.stdout, "dolly-v2-7b-fp16-ov")
    assert list(tmp_path.iterdir()) == []
    not_yet_there = tmp_path / "not" / "yet"
    dry = subprocess.run([sys.executable, "-m", "maintainers.prefetch", "--dry-run", "--models-dir", str(not_yet_there)],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert not (tmp_path / "not").exists()


@pytest.mark.standins  # waits out a silent stand-in hub
def test_prefetch_does_not_hang_on_a_hub_that_never_answers(tmp_path: Path) -> None:
    from hub_server import SilentServer

    from utils.models.model_fetch import ANSWER_TIMEOUT_S, CONNECT_TIMEOUT_S

    with SilentServer() as server:
        started = time.monotonic()
        result = run_prefetch(["--pairs", "phi-3", "--source", "huggingface"], server.url, tmp_path / "models",
                              tmp_path / "hf-home")
        seconds = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    # two models, each failing after at most one connect and one read timeout, plus the start-up of Python
    assert seconds < 2 * (CONNECT_TIMEOUT_S + ANSWER_TIMEOUT_S) + 20
    for spec in (PHI3_MAIN, PHI3_DRAFT):
        assert "failed" in table_row(result.stdout, spec.folder_name)
    assert result.stdout.count("HubUnreachableError: Cannot reach the Hugging Face hub at " + server.url) == 2
    assert "did not answer within" in result.stdout
    assert not any((tmp_path / "models").iterdir())


def test_main_refuses_a_fetch_the_disk_cannot_hold_with_the_override_named(tmp_path: Path, monkeypatch, capsys) -> None:
    """The free space comes from the project's one disk check (`input_checks.free_disk_bytes`), of the models folder."""
    from utils import input_checks

    asked: list[Path] = []

    def little_free(folder: Path) -> int:
        asked.append(Path(folder))
        return 1_000_000

    assert prefetch.free_disk_bytes is input_checks.free_disk_bytes  # no disk check of its own
    monkeypatch.setattr(prefetch, "free_disk_bytes", little_free)
    monkeypatch.setattr(prefetch, "run_plan", lambda *a, **k: pytest.fail("fetched despite too little disk"))
    models = tmp_path / "not" / "yet" / "models"
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(models))
    assert prefetch.main(["--pairs", "phi-3", "--models-dir", str(models)]) == 2
    error = capsys.readouterr().err
    assert "only 0.0 GB is free in the models folder" in error and "--allow-low-resources" in error
    assert asked == [models.resolve()]
