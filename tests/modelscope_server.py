"""A tiny local stand-in for the ModelScope API, enough for `modelscope.snapshot_download` (modelscope 1.40).

It answers, for model repositories held in memory:

- ``GET /api/v1/models/{owner}/{name}/repo/files?Revision=...&Recursive=...``: the file list,
  ``{"Code": 200, "Success": true, "Data": {"Files": [{"Path", "Name", "Type", "Size", "Sha256"}, ...]}}``;
- ``GET`` / ``HEAD /api/v1/models/{owner}/{name}/repo?Revision=...&FilePath=...``: one file's bytes
  (a ``Range: bytes=start-[end]`` header gets a 206 with that part).

``stall_after`` ({file path: bytes}) turns a file into a stalled download: a GET announces the whole
length, sends the file up to that offset, then sends nothing more until the server stops (a hub that
answers part of a download and then stalls). Anything else gets ModelScope's JSON error with status
404. Point the client at it with ``MODELSCOPE_DOMAIN=server.url`` (the variable `utils.models.model_fetch`
reads too).
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import parse_qs, unquote, urlsplit

MODELS_PREFIX = "/api/v1/models/"


@dataclass
class FakeModelScope:
    """Serve `repositories` ({"owner/name": {path: bytes}}) on 127.0.0.1 from a background thread."""

    repositories: dict[str, dict[str, bytes]]
    stall_after: dict[str, int] = field(default_factory=dict)  # file path -> bytes sent before stalling
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of every request
    _server: ThreadingHTTPServer | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        assert self._server is not None, "the server is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeModelScope:
        self._stopping.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stopping.set()  # releases stalled downloads
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self._route(send_body=True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._route(send_body=False)

            def _route(self, send_body: bool) -> None:
                service.requests.append((self.command, self.path))
                parts = urlsplit(self.path)
                query = {key: values[0] for key, values in parse_qs(parts.query).items()}
                path = unquote(parts.path)
                if not path.startswith(MODELS_PREFIX):
                    self._error(404, "not found", send_body)
                    return
                rest = path[len(MODELS_PREFIX):]
                if rest.endswith("/repo/files"):
                    self._file_list(rest[: -len("/repo/files")], send_body)
                elif rest.endswith("/repo"):
                    self._file(rest[: -len("/repo")], query.get("FilePath", ""), send_body)
                else:
                    self._error(404, f"model {rest} not found", send_body)

            def _file_list(self, model_id: str, send_body: bool) -> None:
                files = service.repositories.get(model_id)
                if files is None:
                    self._error(404, f"model {model_id} not found", send_body)
                    return
                entries = [{"Name": name.rsplit("/", 1)[-1], "Path": name, "Type": "blob", "Size": len(content),
                            "Sha256": hashlib.sha256(content).hexdigest(), "Revision": "master"}
                           for name, content in sorted(files.items())]
                self._json(200, {"Code": 200, "Success": True, "Message": "success", "Data": {"Files": entries}},
                           send_body)

            def _file(self, model_id: str, file_path: str, send_body: bool) -> None:
                files = service.repositories.get(model_id)
                if files is None or file_path not in files:
                    self._error(404, f"file {file_path} of {model_id} not found", send_body)
                    return
                content = files[file_path]
                start, end = self._byte_range(len(content))
                headers = {"Content-Type": "application/octet-stream"}
                status = 200
                if (start, end) != (0, len(content)):
                    status = 206
                    headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(content)}"
                stall = service.stall_after.get(file_path)
                if stall is None or not send_body:
                    self._send(status, content[start:end], headers, send_body)
                    return
                self._send_then_stall(status, content[start:end], headers, max(0, stall - start))

            def _byte_range(self, size: int) -> tuple[int, int]:
                """[start, end) asked for by the Range header (the whole file without one)."""
                asked = self.headers.get("Range", "")
                if not asked.startswith("bytes="):
                    return 0, size
                first, _, last = asked[len("bytes="):].partition("-")
                start = int(first or 0)
                return start, min(size, int(last) + 1) if last else size

            def _send_then_stall(self, status: int, body: bytes, headers: dict[str, str], sent: int) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:sent])
                self.wfile.flush()
                service._stopping.wait()

            def _error(self, status: int, message: str, send_body: bool) -> None:
                self._json(status, {"Code": status, "Success": False, "Message": message}, send_body)

            def _json(self, status: int, payload: dict, send_body: bool) -> None:
                self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json"}, send_body)

            def _send(self, status: int, body: bytes, headers: dict[str, str], send_body: bool) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)

        return Handler
