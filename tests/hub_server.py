"""A tiny local stand-in for the Hugging Face hub, enough for `snapshot_download`.

It answers the two kinds of request huggingface_hub 1.21 makes to fetch a model
repository, for repositories held in memory:

- ``GET /api/models/{repo_id}[/revision/{revision}]``: JSON with ``id``, ``sha``
  and ``siblings`` (one ``{"rfilename": ..., "size": ...}`` per file);
- ``GET /api/models/{repo_id}/tree/{revision}``: the file list as ``list_repo_files`` reads it
  (optimum-cli asks for it before an export);
- ``HEAD`` / ``GET /{repo_id}/resolve/{revision}/{filename}``: the file, with the
  ``ETag``, ``X-Repo-Commit`` and ``Content-Length`` headers the client requires.

A repository's ``card`` fields (e.g. ``pipeline_tag``, ``library_name``, ``tags``) are
added to its info, as the real hub gives them.

Unknown repositories and files get a 404 with the ``X-Error-Code`` header the
client turns into ``RepositoryNotFoundError`` / ``EntryNotFoundError``. Point a
client at it with ``HF_ENDPOINT=hub.url`` (read when huggingface_hub is imported).
"""
from __future__ import annotations

import hashlib
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import unquote, urlsplit


@dataclass
class FakeRepository:
    """Files of one model repository at a single commit."""

    files: dict[str, bytes]
    commit: str = ""
    card: dict = field(default_factory=dict)  # extra model-info fields, e.g. {"pipeline_tag": "text-generation"}

    def __post_init__(self) -> None:
        if not self.commit:
            digest = hashlib.sha1()
            for name in sorted(self.files):
                digest.update(name.encode() + b"\0" + self.files[name])
            self.commit = digest.hexdigest()


@dataclass
class FakeHub:
    """Serve `repositories` over HTTP on 127.0.0.1 from a background thread (a context manager)."""

    repositories: dict[str, FakeRepository]
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of every request
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """Base address to put in HF_ENDPOINT."""
        assert self._server is not None, "the hub is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeHub:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_HEAD(self) -> None:
                self._answer(send_body=False)

            def do_GET(self) -> None:
                self._answer(send_body=True)

            def _answer(self, send_body: bool) -> None:
                path = unquote(urlsplit(self.path).path)
                hub.requests.append((self.command, path))
                if path.startswith("/api/models/") and "/tree/" in path:
                    self._tree(path[len("/api/models/"):].split("/tree/", 1)[0], send_body)
                elif path.startswith("/api/models/"):
                    repo_id = path[len("/api/models/"):].split("/revision/", 1)[0]
                    self._repo_info(repo_id, send_body)
                elif "/resolve/" in path:
                    repo_id, rest = path.lstrip("/").split("/resolve/", 1)
                    filename = rest.split("/", 1)[1] if "/" in rest else ""
                    self._file(repo_id, filename, send_body)
                else:
                    self._not_found("RepoNotFound", None, send_body)

            def _repo_info(self, repo_id: str, send_body: bool) -> None:
                repository = hub.repositories.get(repo_id)
                if repository is None:
                    self._not_found("RepoNotFound", None, send_body)
                    return
                body = json.dumps(repository.card | {
                    "id": repo_id,
                    "modelId": repo_id,
                    "sha": repository.commit,
                    "private": False,
                    "siblings": [{"rfilename": name, "size": len(content)}
                                 for name, content in sorted(repository.files.items())],
                }).encode()
                self._send(200, body, {"Content-Type": "application/json"}, send_body)

            def _tree(self, repo_id: str, send_body: bool) -> None:
                repository = hub.repositories.get(repo_id)
                if repository is None:
                    self._not_found("RepoNotFound", None, send_body)
                    return
                body = json.dumps([{"type": "file", "path": name, "size": len(content),
                                    "oid": hashlib.sha1(content).hexdigest()}
                                   for name, content in sorted(repository.files.items())]).encode()
                self._send(200, body, {"Content-Type": "application/json"}, send_body)

            def _file(self, repo_id: str, filename: str, send_body: bool) -> None:
                repository = hub.repositories.get(repo_id)
                if repository is None:
                    self._not_found("RepoNotFound", None, send_body)
                    return
                if filename not in repository.files:
                    self._not_found("EntryNotFound", repository.commit, send_body)
                    return
                content = repository.files[filename]
                headers = {
                    "Content-Type": "application/octet-stream",
                    "ETag": f'"{hashlib.sha256(content).hexdigest()}"',
                    "X-Repo-Commit": repository.commit,
                }
                self._send(200, content, headers, send_body)

            def _not_found(self, error_code: str, commit: str | None, send_body: bool) -> None:
                headers = {"Content-Type": "application/json", "X-Error-Code": error_code}
                if commit:
                    headers["X-Repo-Commit"] = commit
                body = json.dumps({"error": f"{error_code}: {self.path}"}).encode()
                self._send(404, body, headers, send_body)

            def _send(self, status: int, body: bytes, headers: dict[str, str], send_body: bool) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)

        return Handler


class SilentServer:
    """A local TCP server that accepts connections (the kernel's backlog) and never answers: a hung hub."""

    def __enter__(self) -> SilentServer:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        host, port = self._socket.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._socket.close()
