"""Faults that need a separate OS process: a peer killed mid-transfer, a peer frozen by SIGSTOP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from protocol.p2p import DirectoryBlobSource
from protocol.p2p.errors import PeerUnavailable, TransferTimeout, TruncatedStream

from .conftest import cluster, entry_for, identity

MB = 1024 * 1024
REPO = Path(__file__).resolve().parents[2]
CHILD = 7  # identity index of the node in the child process


@contextmanager
def child_node(store: Path, *extra: str) -> Iterator[subprocess.Popen[str]]:
    cmd = [sys.executable, "-m", "tests.p2p.peer_process", "--index", str(CHILD)]
    cmd += ["--store", str(store), "--peers", "0,1", *extra]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=10)


async def child_addr(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    with trio.fail_after(60):
        line = await trio.to_thread.run_sync(proc.stdout.readline)
    assert line.startswith("/ip4/127.0.0.1/"), line
    return line.strip()


async def _wait_partial(store: DirectoryBlobSource, min_bytes: int) -> None:
    """Until a download into `store` has written at least `min_bytes`."""
    while not any(
        p.name.startswith(".partial-") and p.stat().st_size >= min_bytes
        for p in store.root.iterdir()
    ):
        await trio.sleep(0.01)


@pytest.mark.trio
async def test_killed_server_gives_typed_error_then_fetch_from_another_peer(tmp_path):
    data = os.urandom(20 * MB)
    child_store = DirectoryBlobSource(tmp_path / "child")
    h = child_store.put(data)
    # the child serves at ~10 MB/s so the kill lands mid-transfer
    with child_node(child_store.root, "--bytes-per-s", str(5 * MB)) as proc:
        addr = await child_addr(proc)
        with trio.fail_after(60):
            async with cluster(tmp_path, 2) as c:
                client, backup = c.nodes
                c.stores[1].put(data)
                for reg in c.registries:
                    reg.upsert(entry_for(CHILD, addr.split("/p2p/")[0]))
                child_key = identity(CHILD).public_key
                async with trio.open_nursery() as nursery:

                    async def kill_when_started() -> None:
                        await _wait_partial(c.stores[0], 2 * MB)
                        proc.kill()

                    nursery.start_soon(kill_when_started)
                    with pytest.raises((TruncatedStream, PeerUnavailable, TransferTimeout)):
                        await client.fetch_blob(child_key, h, store=c.stores[0])
                assert c.stores[0].get(h) is None
                assert not list(c.stores[0].root.iterdir())  # no partial left behind
                got = await client.fetch_blob_any(
                    [child_key, backup.identity.public_key], h, store=c.stores[0]
                )
                assert got.read_bytes() == data


@pytest.mark.trio
async def test_frozen_peer_times_out_in_bound_and_node_keeps_serving(tmp_path):
    read_timeout = 2.0
    data = os.urandom(20 * MB)
    child_store = DirectoryBlobSource(tmp_path / "child")
    h = child_store.put(data)
    async with cluster(tmp_path, 2, read_timeout_s=read_timeout) as c:
        node, other = c.nodes
        served = os.urandom(8 * MB)
        served_hash = c.stores[0].put(served)
        extra = ["--bytes-per-s", str(5 * MB), "--fetch-addr", node.listen_addr]
        extra += ["--fetch-index", "0", "--fetch-hash", served_hash.hex()]
        with child_node(child_store.root, *extra) as proc:
            addr = await child_addr(proc)
            for reg in c.registries:
                reg.upsert(entry_for(CHILD, addr.split("/p2p/")[0]))
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    stopped_at: list[float] = []

                    async def freeze_when_started() -> None:
                        await _wait_partial(c.stores[0], 2 * MB)
                        os.kill(proc.pid, signal.SIGSTOP)
                        stopped_at.append(trio.current_time())

                    nursery.start_soon(freeze_when_started)
                    with pytest.raises(TransferTimeout):
                        await node.fetch_blob(identity(CHILD).public_key, h, store=c.stores[0])
                    waited = trio.current_time() - stopped_at[0]
                # Our upload to the frozen child fills the TCP buffer and holds the connection's
                # yamux write lock, so the download's window updates queue behind it; but each
                # stream read's deadline covers its window update too, so the stuck upload
                # cannot stretch the download's timeout (measured: 2.0-2.5 s for a 2 s deadline
                # idle, 4.0 s on a loaded 2-core run). A stretched one waits on the frozen peer
                # until the 60 s fail_after. Bound: three read deadlines and the close grace,
                # a margin of 2.6x over the idle figure and 1.6x over the loaded one.
                bound = 3 * read_timeout + node.config.close_timeout_s
                assert waited <= bound, waited
                assert not list(c.stores[0].root.glob(".partial-*"))
                # while the child stays frozen, the node serves others and drops its stuck
                # upload to the child once that write times out
                assert await other.fetch_blob(node.identity.public_key, served_hash) == served
                with trio.fail_after(read_timeout + 3):
                    while node.server.active:
                        await trio.sleep(0.05)
