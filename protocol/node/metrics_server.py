"""Serve a node's metrics over HTTP for Prometheus to scrape (GET /metrics), from a daemon
thread, until the node stops (`veritrain miner|validator --metrics-port N`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from prometheus_client import start_http_server

from protocol.core.errors import ConfigError
from protocol.node.metrics import NodeMetrics


class MetricsPortUnavailable(ConfigError):
    """Raised when the metrics endpoint cannot listen where --metrics-host/--metrics-port say."""


class MetricsServer:
    """`metrics` served on http://host:port/ (port 0: a free one, see `port`) until `close`."""

    def __init__(self, metrics: NodeMetrics, host: str, port: int) -> None:
        try:
            self._httpd, self._thread = start_http_server(port, host, registry=metrics.registry)
        except OSError as exc:
            raise MetricsPortUnavailable(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
        self.metrics = metrics
        metrics.exported = True

    @property
    def port(self) -> int:
        return int(self._httpd.server_port)

    def close(self) -> None:
        self._httpd.shutdown()  # returns once the serving loop has stopped
        self._httpd.server_close()
        self._thread.join()
        self.metrics.exported = False

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def check_metrics_port(host: str, port: int) -> None:
    """MetricsPortUnavailable unless `host:port` can be listened on now: said before a node
    registers or sends anything, though the server itself starts only with the node."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, _, _, _, addr = infos[0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            sock.bind(addr)
    except OSError as exc:
        raise MetricsPortUnavailable(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc


@contextmanager
def serving(metrics: NodeMetrics, host: str, port: int | None) -> Iterator[str | None]:
    """`metrics` served while inside, at the URL this yields (port None: not served, None)."""
    if port is None:
        yield None
        return
    with MetricsServer(metrics, host, port) as server:
        yield f"http://{host}:{server.port}/metrics"
