"""The RPC-outage relay used by the fault tests really refuses every connection while down
(a bare close() once let the first client after down() through, for the whole outage)."""

from __future__ import annotations

import socket
import threading

from tests.integration.netutil import TcpRelay


def _greeter() -> int:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            conn.sendall(b"hi")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return int(server.getsockname()[1])


def _attempt(port: int) -> bytes | str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            return s.recv(10)
    except OSError as exc:
        return type(exc).__name__


def test_relay_refuses_every_connection_while_down_and_relays_again_when_up():
    relay = TcpRelay(_greeter())
    assert _attempt(relay.port) == b"hi"
    relay.down()  # returns once its accept loop has ended
    assert [_attempt(relay.port) for _ in range(3)] == ["ConnectionRefusedError"] * 3
    relay.up()
    assert _attempt(relay.port) == b"hi"
    relay.down()
