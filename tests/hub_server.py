"""A loopback HTTP server that speaks the Hugging Face Hub's file protocol, for tests.

It serves ``/{repo_id}/resolve/{revision}/{filename}`` (HEAD and GET) with the headers
huggingface_hub relies on (X-Repo-Commit, ETag, Content-Length) and the Hub's error codes
(X-Error-Code: RepoNotFound, GatedRepo, RevisionNotFound, EntryNotFound), and HTTP range requests
(206 Partial Content), as huggingface_hub's safetensors metadata reader sends them. Every request
is recorded, with the body bytes sent, so tests can count them.
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


class Repo:
    def __init__(self, files_by_commit: dict[str, dict[str, bytes]], refs: dict[str, str], gated: bool = False):
        self.files_by_commit = files_by_commit
        self.refs = refs
        self.gated = gated


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        #: (method, path, Range header or None, body bytes sent) per answered file request
        self.transfers: list[tuple[str, str, str | None, int]] = []
        #: queued faults: [path suffix, method or None, action] (see fault())
        self.faults: list[list] = []
        #: headers that replace the real ones on every file answer (a hostile Hub: ETag, X-Repo-Commit)
        self.override: dict[str, str] = {}
        #: only this token opens gated repos (None: any Authorization header does)
        self.gated_token: str | None = None
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as separate writes: without this, Nagle and the client's delayed
            # ACK hold every keep-alive answer for ~40 ms
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub._handle(self, body=False)

            def do_GET(self):
                hub._handle(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(
        self,
        repo_id: str,
        files: dict[str, bytes],
        *,
        commit: str | None = None,
        ref: str = "main",
        gated: bool = False,
    ) -> str:
        """Add (or extend) a repo with one commit holding `files`; `ref` points at it. Returns the commit."""
        commit = commit or hashlib.sha1(repr(sorted(files.items())).encode()).hexdigest()
        repo = self.repos.setdefault(repo_id, Repo({}, {}, gated))
        repo.gated = gated
        repo.files_by_commit[commit] = dict(files)
        repo.refs[ref] = commit
        return commit

    def fault(self, suffix: str, *actions, method: str | None = None) -> None:
        """Queue faults for the next requests whose path ends with `suffix` (and, if given, use
        `method`), one action per request, in order: an HTTP status (429, 500, 503, ...);
        ("cut", n): announce the whole body, send n bytes, drop the connection; ("slow", s): wait s
        seconds, then answer normally; ("drip", s): send the body one byte every s seconds;
        ("flood", n): answer a GET with an n-byte body whatever the file is (a HEAD stays truthful);
        "hangup": send the status line and one header, then close the connection (HEAD or GET);
        "forever:<status>", "forever:cut:<n>" or "forever:hangup": that, for every such request until
        `faults` is cleared."""
        with self._lock:
            for action in actions:
                self.faults.append([suffix, method, action])

    def _take_fault(self, path: str, method: str):
        with self._lock:
            for i, (suffix, m, action) in enumerate(self.faults):
                if path.endswith(suffix) and (m is None or m == method):
                    if not (isinstance(action, str) and action.startswith("forever:")):
                        del self.faults[i]
                    return action
        return None

    def bytes_sent(self, suffix: str = "") -> int:
        """Body bytes sent for files whose path ends with `suffix`."""
        with self._lock:
            return sum(n for _, p, _, n in self.transfers if p.endswith(suffix))

    def count(self, method: str | None = None) -> int:
        """File requests (HEAD or GET of /resolve/ URLs) seen so far."""
        with self._lock:
            return sum(1 for m, p, _ in self.requests if "/resolve/" in p and (method is None or m == method))

    def _send(self, h: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes, send_body: bool):
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if send_body:
            h.wfile.write(body)

    def _error(self, h, status: int, code: str, send_body: bool, extra: dict[str, str] | None = None):
        headers = {"X-Error-Code": code, "X-Error-Message": code, **(extra or {})}
        self._send(h, status, headers, code.encode(), send_body)

    def _handle(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        with self._lock:
            self.requests.append((h.command, h.path, dict(h.headers)))
        path = h.path.split("?")[0]
        if path.startswith("/api/models/"):
            return self._api(h, unquote(path[len("/api/models/") :]), body)
        if "/resolve/" not in path:
            return self._error(h, 404, "RepoNotFound", body)
        fault = self._take_fault(path, h.command)
        if isinstance(fault, str) and fault.startswith("forever:cut:"):
            fault = ("cut", int(fault.rsplit(":", 1)[1]))
        elif isinstance(fault, str) and fault.startswith("forever:slow:"):
            fault = ("slow", float(fault.rsplit(":", 1)[1]))
        elif fault == "forever:hangup":
            fault = "hangup"
        elif isinstance(fault, str) and fault.startswith("forever:"):
            fault = int(fault.split(":", 1)[1])
        if fault == "hangup":
            import socket

            h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n")
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if isinstance(fault, int):
            return self._error(h, fault, "Fault", body)
        if isinstance(fault, tuple) and fault[0] == "slow":
            import time

            time.sleep(fault[1])
            fault = None
        repo_id, rest = path.lstrip("/").split("/resolve/", 1)
        revision, _, filename = rest.partition("/")
        revision, filename = unquote(revision), unquote(filename)
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._error(h, 401, "RepoNotFound", body)
        auth = {k.lower(): v for k, v in h.headers.items()}.get("authorization")
        if repo.gated and (auth is None or (self.gated_token and auth != f"Bearer {self.gated_token}")):
            return self._error(h, 401 if auth is None else 403, "GatedRepo", body)
        commit = revision if revision in repo.files_by_commit else repo.refs.get(revision)
        if commit is None:
            return self._error(h, 404, "RevisionNotFound", body)
        files = repo.files_by_commit[commit]
        if filename not in files:
            return self._error(h, 404, "EntryNotFound", body, {"X-Repo-Commit": commit})
        data = files[filename]
        etag = '"' + hashlib.sha256(data).hexdigest() + '"'
        headers = {"X-Repo-Commit": commit, "ETag": etag, "Content-Type": "application/octet-stream", **self.override}
        wanted = h.headers.get("Range")
        status, part = 200, data
        if wanted and wanted.startswith("bytes="):
            first, _, last = wanted[len("bytes=") :].partition("-")
            start = int(first)
            end = min(int(last) if last else len(data) - 1, len(data) - 1)
            if start >= len(data):
                return self._error(h, 416, "RangeNotSatisfiable", body)
            status, part = 206, data[start : end + 1]
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        if isinstance(fault, tuple) and fault[0] in ("drip", "flood") and body:
            import time

            size = fault[1] if fault[0] == "flood" else len(part)
            h.send_response(status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(size))
            h.end_headers()
            sent = 0
            try:
                while sent < size:
                    chunk = part[sent : sent + 1] if fault[0] == "drip" else b" " * min(65536, size - sent)
                    h.wfile.write(chunk)
                    h.wfile.flush()
                    sent += len(chunk)
                    if fault[0] == "drip":
                        time.sleep(fault[1])
            except OSError:
                pass  # the client gave up
            h.close_connection = True
            return
        if isinstance(fault, tuple) and fault[0] == "cut" and body:
            h.send_response(status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(part)))
            h.end_headers()
            h.wfile.write(part[: fault[1]])
            h.wfile.flush()
            h.close_connection = True
            with self._lock:
                self.transfers.append((h.command, path, wanted, fault[1]))
            import socket

            h.connection.shutdown(socket.SHUT_RDWR)
            return
        with self._lock:
            self.transfers.append((h.command, path, wanted, len(part) if body else 0))
        self._send(h, status, headers, part, body)

    def _api(self, h: BaseHTTPRequestHandler, rest: str, body: bool) -> None:
        """The two Hub API answers a snapshot download asks for (what vLLM's loader does):
        `/api/models/REPO/revision/REV` (model info: commit and files) and
        `/api/models/REPO/tree/REV[/PATH]` (the files, flat)."""
        import json

        for kind in ("/revision/", "/tree/"):
            if kind in rest:
                repo_id, _, revision = rest.partition(kind)
                revision = revision.split("/", 1)[0]
                break
        else:
            repo_id, kind, revision = rest, "/revision/", "main"
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._error(h, 404, "RepoNotFound", body)
        commit = revision if revision in repo.files_by_commit else repo.refs.get(revision)
        if commit is None:
            return self._error(h, 404, "RevisionNotFound", body)
        files = repo.files_by_commit[commit]
        if kind == "/tree/":
            answer: object = [
                {"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
                for name, data in sorted(files.items())
            ]
        else:
            answer = {
                "id": repo_id,
                "modelId": repo_id,
                "sha": commit,
                "private": False,
                "siblings": [{"rfilename": name} for name in sorted(files)],
            }
        self._send(
            h, 200, {"Content-Type": "application/json", "X-Repo-Commit": commit}, json.dumps(answer).encode(), body
        )
