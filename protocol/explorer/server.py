"""The explorer's HTTP server: the page (static/, shipped as package data) and the JSON API on
one local port, from the standard library's threading HTTP server on a background thread.

The page loads nothing from elsewhere (the Content-Security-Policy forbids it), so it works on
a machine without internet access."""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any
from urllib.parse import urlsplit

from protocol.core.errors import ConfigError
from protocol.explorer.api import ExplorerApi, Reply, error_reply

log = logging.getLogger("veritrain.explorer")

SOCKET_TIMEOUT_S = 10.0  # a client that stalls mid-request frees its thread after this
STATIC = files("protocol.explorer") / "static"
CONTENT_TYPES = {"html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
                 "css": "text/css; charset=utf-8"}
HEADERS = {
    "Cache-Control": "no-store",  # every poll reads the chain's current state
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # same origin only: no CDN, no remote fonts, no frames; strings from the chain are text, never markup
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
}


def static_reply(name: str) -> Reply:
    """A file of static/ by its bare name (a listed file only: no paths, no traversal)."""
    suffix = name.rpartition(".")[2]
    target = STATIC / name
    if "/" in name or suffix not in CONTENT_TYPES or not target.is_file():
        return error_reply(404, f"no such page: /static/{name}")
    return Reply(200, target.read_bytes(), CONTENT_TYPES[suffix])


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = SOCKET_TIMEOUT_S
    server_version = "veritrain-explorer"

    def do_GET(self) -> None:  # noqa: N802  (http.server's naming)
        self._send(self._reply(), with_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._send(self._reply(), with_body=False)

    def _reply(self) -> Reply:
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            return static_reply("index.html")
        if path.startswith("/static/"):
            return static_reply(path.removeprefix("/static/"))
        return self.server.api.get(path)  # /api/... or a 404

    def _send(self, reply: Reply, with_body: bool) -> None:
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            if with_body:
                self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):  # the page went away mid-answer
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (http.server's signature)
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled client never keeps the process alive

    def __init__(self, host: str, port: int, api: ExplorerApi) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.api = api
        super().__init__((host, port), _Handler)


class Explorer:
    """The page and the API served from a background thread until `stop()`."""

    def __init__(self, api: ExplorerApi, host: str = "127.0.0.1", port: int = 0) -> None:
        try:
            self._server = _Server(host, port, api)
        except OSError as exc:  # port taken, address not ours, name not resolvable
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.api = api
        self._thread = threading.Thread(target=self._server.serve_forever, name="explorer-http", daemon=True)

    @property
    def url(self) -> str:
        host, port = str(self._server.server_address[0]), int(self._server.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def start(self) -> str:
        """Start serving; the page's URL (with the port chosen when `port` was 0)."""
        self._thread.start()
        return self.url

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self.api.close()

    def __enter__(self) -> Explorer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
