"""Tests for utils.models.model_fetch without a network: fast, clear failures and no needless work.

"Fast" is checked by what happens, not by a clock: one refused connection and then the error (no retry, no
timeout waited out), a lookup that hangs given up on, each attempt at a stalled file bounded by the read timeout.
(The successful download against a local fake hub is tested in tests/test_prefetch.py.)
"""
from __future__ import annotations

import dataclasses
import socket
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from utils.models import model_fetch
from utils.models.atomic_folder import atomic_folder
from utils.models.model_catalogue import BYTES_PER_WEIGHT, DOLLY_3B, PHI3_DRAFT, PHI3_MAIN
from utils.models.model_check import is_complete
from utils.models.model_fetch import (
    HubUnreachableError,
    InsufficientDiskError,
    ModelNotOnHubError,
    can_reach,
    checkpoint_bytes,
    download_from_huggingface,
    download_from_modelscope,
    export_disk_bytes,
    export_from_hub,
    get_model,
    modelscope_bytes,
    require_free_disk,
)

sys.path.insert(0, str(Path(__file__).parent))
from hub_server import FakeHub, FakeRepository  # noqa: E402
from modelscope_server import FakeModelScope  # noqa: E402

Attempt = tuple[object, type[OSError] | None]  # (address, the error the connection ended in, or None)


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[Attempt]:
    """Every TCP connection this process attempts during the test (any thread, any client library)."""
    attempts: list[Attempt] = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: object) -> None:
        try:
            real_connect(self, address)
        except OSError as error:
            attempts.append((address, type(error)))
            raise
        attempts.append((address, None))

    monkeypatch.setattr(socket.socket, "connect", connect)
    return attempts


def attempts_to(connections: list[Attempt], url: str) -> list[type[OSError] | None]:
    """How each connection to `url`'s host and port ended."""
    parsed = urlparse(url)
    return [outcome for address, outcome in connections if address == (parsed.hostname, parsed.port)]


# A closed local port refuses at once: one refused connection and no other is all a fast failure may cost.
REFUSED_ONCE = [ConnectionRefusedError]


def assert_points_to_the_offline_pair(error: pytest.ExceptionInfo, url: str) -> None:
    message = str(error.value)
    assert url in message and "offline" in message and "PAIR = 'offline'" in message


def test_endpoints_follow_the_environment(monkeypatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.delenv("MODELSCOPE_DOMAIN", raising=False)
    assert model_fetch.huggingface_endpoint() == "https://huggingface.co"
    assert "modelscope" in model_fetch.modelscope_endpoint()
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example:8080")
    monkeypatch.setenv("MODELSCOPE_DOMAIN", "http://ms.example")
    assert model_fetch.huggingface_endpoint() == "http://mirror.example:8080"
    assert model_fetch.modelscope_endpoint() == "http://ms.example"


def test_can_reach_a_closed_port_is_false_from_the_refusal(unreachable_hubs: str, connections) -> None:
    assert can_reach(unreachable_hubs) is False
    assert attempts_to(connections, unreachable_hubs) == REFUSED_ONCE


def test_can_reach_an_open_local_port() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert can_reach(f"http://127.0.0.1:{server.getsockname()[1]}") is True


def test_can_reach_an_unresolvable_host_is_false(connections) -> None:
    assert can_reach("https://no-such-host.invalid", timeout_s=1.0) is False
    assert connections == []  # the name never resolved: nothing to connect to


def test_can_reach_does_not_wait_for_a_lookup_that_never_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """getaddrinfo has no timeout of its own: can_reach must answer False while the lookup still hangs."""
    release, finished = threading.Event(), threading.Event()

    def hanging_lookup(*_args, **_kwargs):
        release.wait(120)  # a resolver that never answers, until the test lets go
        finished.set()
        raise socket.gaierror("no answer")

    monkeypatch.setattr(socket, "getaddrinfo", hanging_lookup)
    try:
        assert can_reach("https://slow-resolver.invalid", timeout_s=0.1) is False
        assert not finished.is_set(), "can_reach waited for the lookup to end instead of its own timeout"
    finally:
        release.set()


def test_huggingface_download_fails_fast(unreachable_hubs: str, tmp_models_dir: Path, connections) -> None:
    destination = tmp_models_dir / "some-model-ov"
    with pytest.raises(HubUnreachableError) as error:
        download_from_huggingface("OpenVINO/some-model-ov", destination)
    assert attempts_to(connections, unreachable_hubs) == REFUSED_ONCE
    assert_points_to_the_offline_pair(error, unreachable_hubs)
    assert "Hugging Face" in str(error.value)
    assert list(tmp_models_dir.iterdir()) == []  # nothing created, not even a temporary folder


def test_modelscope_download_fails_fast(unreachable_hubs: str, tmp_models_dir: Path, connections) -> None:
    with pytest.raises(HubUnreachableError) as error:
        download_from_modelscope("OpenVINO/some-model-ov", tmp_models_dir / "some-model-ov", 1e6)
    assert attempts_to(connections, unreachable_hubs) == REFUSED_ONCE
    assert_points_to_the_offline_pair(error, unreachable_hubs)
    assert "ModelScope" in str(error.value)
    assert list(tmp_models_dir.iterdir()) == []


@pytest.mark.parametrize("spec, source", [(PHI3_DRAFT, None), (PHI3_MAIN, "modelscope"), (DOLLY_3B, "export")],
                         ids=["phi3-draft-default", "phi3-main-modelscope", "dolly-export"])
def test_get_model_fails_fast(unreachable_hubs: str, tmp_models_dir: Path, connections, spec, source) -> None:
    with pytest.raises(HubUnreachableError) as error:
        get_model(spec, source)
    assert attempts_to(connections, unreachable_hubs) == REFUSED_ONCE
    assert_points_to_the_offline_pair(error, unreachable_hubs)
    assert not spec.path.exists() and list(tmp_models_dir.iterdir()) == []


def test_export_from_hub_fails_fast(unreachable_hubs: str, tmp_models_dir: Path, connections) -> None:
    with pytest.raises(HubUnreachableError) as error:
        export_from_hub(DOLLY_3B)
    assert attempts_to(connections, unreachable_hubs) == REFUSED_ONCE
    assert_points_to_the_offline_pair(error, unreachable_hubs)
    with pytest.raises(ValueError, match="no checkpoint to export"):
        export_from_hub(PHI3_DRAFT)


def test_export_disk_needs_follow_the_checkpoint_on_the_hub() -> None:
    """Checkpoint (16-bit) plus the export at its format's bytes per weight; the catalogue's guess without sizes."""
    assert export_disk_bytes(DOLLY_3B, 6_000) == 6_000 + 3_000 * BYTES_PER_WEIGHT["fp16"]
    int4 = dataclasses.replace(DOLLY_3B, weight_format="int4")
    assert export_disk_bytes(int4, 6_000) == 6_000 + 3_000 * BYTES_PER_WEIGHT["int4"]
    assert export_disk_bytes(DOLLY_3B, None) == DOLLY_3B.parameters * 2 + DOLLY_3B.disk_gb * 1e9


def test_checkpoint_bytes_are_the_weights_optimum_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    both = {"config.json": b"{}", "model.safetensors": b"s" * 10, "pytorch_model.bin": b"b" * 99}
    bin_only = {"config.json": b"{}", "pytorch_model-1.bin": b"b" * 7, "pytorch_model-2.bin": b"b" * 5}
    with FakeHub({"org/both": FakeRepository(both), "org/bin-only": FakeRepository(bin_only),
                  "org/no-weights": FakeRepository({"config.json": b"{}"})}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert checkpoint_bytes("org/both") == 10
        assert checkpoint_bytes("org/bin-only") == 12
        assert checkpoint_bytes("org/no-weights") is None
        with pytest.raises(ModelNotOnHubError, match="no model repository 'org/gone'"):
            checkpoint_bytes("org/gone")


def test_export_from_hub_checks_disk_for_the_checkpoint_it_will_download(tmp_models_dir: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[float] = []

    def refuse(folder: Path, needed_bytes: float, **_options) -> None:
        asked.append(needed_bytes)
        raise InsufficientDiskError("refused by the test")

    monkeypatch.setattr(model_fetch, "require_free_disk", refuse)
    weights = {"config.json": b"{}", "model.safetensors": b"w" * 4_000}
    with FakeHub({DOLLY_3B.export_source_id: FakeRepository(weights)}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(InsufficientDiskError, match="refused by the test"):
            export_from_hub(DOLLY_3B)
    assert asked == [export_disk_bytes(DOLLY_3B, 4_000)]
    assert not DOLLY_3B.path.exists()


def test_modelscope_bytes_sum_its_file_list(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeModelScope({"OpenVINO/tiny": {"config.json": b"{}", "sub/openvino_model.bin": b"x" * 30}}) as modelscope:
        monkeypatch.setenv("MODELSCOPE_DOMAIN", modelscope.url)
        assert modelscope_bytes("OpenVINO/tiny") == 32
        assert modelscope_bytes("OpenVINO/gone") is None  # snapshot_download then says what is wrong


def test_require_free_disk(tmp_path: Path) -> None:
    require_free_disk(tmp_path, 1)
    require_free_disk(tmp_path / "not" / "yet" / "created", 1)  # the nearest existing parent is checked
    with pytest.raises(InsufficientDiskError) as error:
        require_free_disk(tmp_path / "models", 1e18)
    message = str(error.value)
    assert "1100000000.0 GB" in message and "SPECDEC_MODELS_DIR" in message and str(tmp_path) in message


def test_get_model_refuses_a_source_the_model_lacks(unreachable_hubs: str, tmp_models_dir: Path) -> None:
    with pytest.raises(ValueError, match="cannot be obtained from 'modelscope'") as error:
        get_model(PHI3_DRAFT, "modelscope")
    assert "huggingface" in str(error.value)
    with pytest.raises(ValueError, match="export"):
        get_model(PHI3_MAIN, "export")


def test_complete_folder_is_skipped_without_network(tmp_models_dir: Path, monkeypatch, capsys) -> None:
    with atomic_folder(PHI3_DRAFT.path, {"source": "copied by hand"}) as work:
        (work / "openvino_model.xml").write_text("<net/>")

    def no_network(*_args, **_kwargs):
        raise AssertionError("network used for a model that is already prepared")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    for name in ("can_reach", "download_from_huggingface", "download_from_modelscope", "export_from_hub"):
        monkeypatch.setattr(model_fetch, name, no_network)
    assert get_model(PHI3_DRAFT) == PHI3_DRAFT.path
    assert get_model(PHI3_DRAFT, "huggingface") == PHI3_DRAFT.path
    assert "already prepared" in capsys.readouterr().out


def test_incomplete_folder_is_not_mistaken_for_prepared(unreachable_hubs: str, tmp_models_dir: Path) -> None:
    PHI3_DRAFT.path.mkdir()
    (PHI3_DRAFT.path / "openvino_model.xml").write_text("<net/>")  # e.g. copied by hand, half done: no marker
    with pytest.raises(HubUnreachableError):
        get_model(PHI3_DRAFT)


def test_offline_models_have_no_hub_source() -> None:
    from utils.models.model_catalogue import SMOLLM2_FP16

    with pytest.raises(ValueError, match="built locally"):
        get_model(SMOLLM2_FP16, "huggingface")


HUNG_HUB_LIMIT_S = model_fetch.CONNECT_TIMEOUT_S + model_fetch.ANSWER_TIMEOUT_S + 5.0


@pytest.fixture
def hung_hubs(monkeypatch) -> str:
    """Point both hubs at a local server that accepts connections and never answers; return its URL."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from hub_server import SilentServer

    with SilentServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("MODELSCOPE_DOMAIN", server.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
        yield server.url


@pytest.mark.parametrize("spec, source", [(PHI3_DRAFT, "huggingface"), (PHI3_MAIN, "modelscope"), (DOLLY_3B, "export")],
                         ids=["huggingface", "modelscope", "export"])
@pytest.mark.standins  # waits out a silent stand-in hub
def test_get_model_does_not_hang_on_a_hub_that_never_answers(hung_hubs: str, tmp_models_dir: Path, spec,
                                                             source) -> None:
    started = time.monotonic()
    with pytest.raises(HubUnreachableError) as error:
        get_model(spec, source)
    assert time.monotonic() - started < HUNG_HUB_LIMIT_S
    assert_points_to_the_offline_pair(error, hung_hubs)
    assert "did not answer within" in str(error.value)
    assert list(tmp_models_dir.iterdir()) == []


def test_the_reachability_check_sees_a_silent_server(hung_hubs: str) -> None:
    assert can_reach(hung_hubs) is True  # the connection opens...
    assert "did not answer" in model_fetch.hub_answer_problem(hung_hubs, timeout_s=1.0)  # ...but nothing comes back


STALLED_FILE = "openvino_model.bin"
STALLED_REPOSITORY = {"config.json": b"{}", "openvino_tokenizer.xml": b"<net/>", STALLED_FILE: b"w" * 300_000}


def test_modelscope_download_limits_are_set_inside_and_restored_after(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    modules = {name: importlib.import_module(module) for module, name in model_fetch.MODELSCOPE_SETTINGS}
    for name, module in modules.items():
        monkeypatch.setattr(module, name, f"{name} as it was")  # whatever modelscope's own value: it comes back
    before = {name: getattr(module, name) for name, module in modules.items()}
    with model_fetch.modelscope_download_limits(read_timeout_s=1.5, retries=0):
        assert {name: getattr(module, name) for name, module in modules.items()} == {
            "DOWNLOAD_TIMEOUT": 1.5, "DOWNLOAD_RETRY_TIMES": 0}
    assert {name: getattr(module, name) for name, module in modules.items()} == before
    with pytest.raises(RuntimeError), model_fetch.modelscope_download_limits(read_timeout_s=1.5, retries=0):
        raise RuntimeError("restored on an error too")
    assert {name: getattr(module, name) for name, module in modules.items()} == before


@pytest.fixture
def sent_requests(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, object]]:
    """(url, timeout) of every request sent through `requests` (which modelscope uses) during the test."""
    import requests.adapters

    sent: list[tuple[str, object]] = []
    real_send = requests.adapters.HTTPAdapter.send

    def send(self, request, **options):
        sent.append((request.url, options.get("timeout")))
        return real_send(self, request, **options)

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", send)
    return sent


def read_timeout(timeout: object) -> object:
    """The read part of a `requests` timeout: (connect, read) or one number for both."""
    return timeout[1] if isinstance(timeout, tuple) else timeout


@pytest.mark.parametrize("retries", [0, 1])
def test_a_modelscope_download_that_stalls_gives_up_with_a_clear_error(tmp_models_dir: Path, monkeypatch,
                                                                       sent_requests, retries: int) -> None:
    """The hub sends part of a file and then nothing: the download ends within its bounds, leaving nothing."""
    read_timeout_s = 1.5
    destination = tmp_models_dir / "tiny-ov"
    with FakeModelScope({"OpenVINO/tiny": STALLED_REPOSITORY}, stall_after={STALLED_FILE: 100_000}) as modelscope:
        monkeypatch.setenv("MODELSCOPE_DOMAIN", modelscope.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        with pytest.raises(HubUnreachableError) as error:
            download_from_modelscope("OpenVINO/tiny", destination, 1e6, read_timeout_s=read_timeout_s,
                                     retries=retries)
        url = modelscope.url
    attempts = [path for method, path in modelscope.requests if method == "GET" and STALLED_FILE in path]
    assert len(attempts) == retries + 1, (str(error.value), modelscope.requests)  # the bounds ended it
    # each attempt gave up after read_timeout_s without bytes (not modelscope's own 60 s)
    stalled = [read_timeout(timeout) for sent_url, timeout in sent_requests if f"FilePath={STALLED_FILE}" in sent_url]
    assert stalled == [read_timeout_s] * (retries + 1), sent_requests
    message = str(error.value)
    assert "\n" not in message and "ModelScope" in message and url in message
    assert f"downloading OpenVINO/tiny failed: no data for 2 s in each of {retries + 1} attempts" in message
    assert "PAIR = 'offline'" in message and "run it again later" in message
    assert not destination.exists() and not is_complete(destination)
    assert [path.name for path in tmp_models_dir.iterdir() if not path.name.endswith(".lock")] == []


def test_the_default_modelscope_bounds_are_the_hubs(tmp_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default a stalled file costs what it costs on the Hugging Face path: READ_TIMEOUT_S per attempt, one retry."""
    import importlib

    import modelscope

    in_effect: dict[str, float] = {}

    def snapshot_download(model_id: str, local_dir: str, endpoint: str) -> None:
        in_effect.update({name: getattr(importlib.import_module(module), name)
                          for module, name in model_fetch.MODELSCOPE_SETTINGS})
        (Path(local_dir) / "config.json").write_text("{}")

    monkeypatch.setattr(model_fetch, "require_reachable", lambda url, what: None)
    monkeypatch.setattr(model_fetch, "modelscope_bytes", lambda model_id: 2)
    monkeypatch.setattr(modelscope, "snapshot_download", snapshot_download)
    download_from_modelscope("OpenVINO/tiny", tmp_models_dir / "tiny-ov", 1e6)  # no bounds given: the defaults
    assert in_effect == {"DOWNLOAD_TIMEOUT": model_fetch.READ_TIMEOUT_S,
                         "DOWNLOAD_RETRY_TIMES": model_fetch.MODELSCOPE_DOWNLOAD_RETRIES}
    # a stalled file: every attempt's read timeout and a back-off of at most 2 s; measured: 26 s (394 s before)
    assert in_effect["DOWNLOAD_TIMEOUT"] * (in_effect["DOWNLOAD_RETRY_TIMES"] + 1) + 2.0 < 60.0
