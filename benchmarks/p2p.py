"""P2P throughput and gossip latency, measured in one run.

    python -m benchmarks p2p [--quick] [--json PATH]

- libp2p_MBps: a 50 MB blob through our blob protocol (Noise + yamux, chunk framing, blake3
  check), served by a node in a separate OS process, as nodes really are;
- raw_MBps: the same bytes over a plain loopback TCP socket from a separate process;
- throughput_ratio (target >= 0.12): the median over reps of libp2p MB/s / raw MB/s, each rep
  a libp2p fetch and RAW_PER_REP raw transfers back to back (order alternating), so both
  sides of a ratio see the same load on a shared machine; libp2p_MBps and raw_MBps are the
  medians of all transfers;
- libp2p_{client,server}_cpu_ms_per_MB: median CPU cost of that fetch on each side (see
  _Meter), the figure to compare across runs when the machine is shared;
- gossip p50/p95 latency over 1 and 2 hops on a line of three in-process nodes (the
  top-level gossip_p50_ms / gossip_p95_ms are the 2-hop figures);
- gossip_loaded_*: 1-hop latency of announcements the blob server publishes (one every
  GOSSIP_INTERVAL_S) to the fetching node while it serves the blob over the same connection
  (after the timed fetches, which run without gossip), against gossip_xproc_idle_* from the
  same two processes with no transfer running. The publisher stamps CLOCK_MONOTONIC (shared
  by all processes on the machine) into the announcement's `size` field.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import IO

import blake3
import trio
from rich.console import Console
from rich.table import Table

from protocol.core.crypto.signing import NodeIdentity, binding_message
from protocol.core.wire.messages import UpdateAnnounced, to_hex
from protocol.p2p import DirectoryBlobSource, P2PConfig, P2PNode, RegistryEntry, RegistryView

CHAIN_ID = 31337
CONTRACT = bytes.fromhex("5fbdb2315678afecb367f032d93f642f64180aa3")
MB = 1024 * 1024
SERVER = 9  # identity index of the serving process
# The serving process publishes one announcement this often during the gossip phases: 20/s,
# well above a round's real traffic. While it also serves a fetch on a loaded 2-core box the
# receiving node keeps up with ~20/s (p50 60-80 ms) but not 50/s (p50 0.25-0.6 s, growing:
# a queue), because py-libp2p's pubsub spends many scheduler rounds per message.
GOSSIP_INTERVAL_S = 0.05
# A raw 50 MB transfer takes ~20 ms, short enough for scheduling noise to swing it 1.3-4 GB/s;
# each rep's raw figure is the median of this many back-to-back transfers.
RAW_PER_REP = 3
IDLE_GOSSIP_S = 1.5  # gossip sampled with no transfer running
LOADED_GOSSIP_S = 1.5  # gossip sampled during back-to-back fetches (after the timed ones)


def _identity(i: int) -> NodeIdentity:
    return NodeIdentity(blake3.blake3(b"veritrain-bench-node-%d" % i).digest())


def _account(i: int) -> bytes:
    return blake3.blake3(b"veritrain-bench-account-%d" % i).digest()[:20]


def _entry(i: int, addr: str = "") -> RegistryEntry:
    ident = _identity(i)
    return RegistryEntry(
        node_key=ident.public_key,
        account=_account(i),
        role="miner",
        stake=10**18,
        reputation=65535,
        multiaddr=addr,
        binding_sig=ident.sign(binding_message(CHAIN_ID, CONTRACT, _account(i))),
        eligible=True,  # staked at the role's minimum: admitted at the connection
    )


def _config() -> P2PConfig:
    return P2PConfig(chain_id=CHAIN_ID, contract=CONTRACT, max_blob_size=512 * MB)


def _registry(indices: range | list[int]) -> RegistryView:
    reg = RegistryView(CHAIN_ID, CONTRACT)
    for i in indices:
        reg.upsert(_entry(i))
    return reg


# -- child process roles ---------------------------------------------------------------------


async def _serve_blobs(store: Path, gossip_interval_s: float) -> None:
    """Serve blobs; while stdin says "gossip on", also publish stamped announcements."""
    node = P2PNode(_identity(SERVER), _config(), _registry([0, SERVER]), DirectoryBlobSource(store))
    gossip_on = trio.Event()
    async with node.run(), trio.open_nursery() as nursery:

        async def control() -> None:
            nonlocal gossip_on
            while line := await trio.to_thread.run_sync(sys.stdin.readline):
                if line.strip() == "gossip on":
                    gossip_on.set()
                elif gossip_on.is_set():
                    gossip_on = trio.Event()

        nursery.start_soon(control)
        print(node.p2p_addr, flush=True)
        for n in range(10**9):  # until stopped: stamped announcements, paced
            await gossip_on.wait()
            await node.publish(0, _announcement(n, SERVER, time.monotonic_ns() // 1000))
            await trio.sleep(gossip_interval_s)


def _serve_raw(size: int) -> None:
    payload = os.urandom(MB)
    with socket.create_server(("127.0.0.1", 0)) as srv:
        print(srv.getsockname()[1], flush=True)
        while True:
            conn, _ = srv.accept()
            with conn:
                for _ in range(size // MB):
                    conn.sendall(payload)


# -- measurements ----------------------------------------------------------------------------


def _spawn(*args: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "benchmarks.p2p", *args]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _stop(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Meter:
    """Wall-clock MB/s plus CPU ms per MB of this process and the serving child, per transfer.

    CPU per MB survives a busy machine: other load stretches the wall clock but adds little
    to our own CPU time, so its median over reps is steadier than MB/s.
    """

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.mbps: list[float] = []
        self.client_ms: list[float] = []
        self.server_ms: list[float] = []

    def start(self) -> None:
        self._t = (time.perf_counter(), time.process_time(), _proc_cpu_s(self.server_pid))

    def stop(self, nbytes: int) -> None:
        wall, cpu, server = self._t
        mb = nbytes / MB
        self.mbps.append(mb / (time.perf_counter() - wall))
        self.client_ms.append(1000 * (time.process_time() - cpu) / mb)
        self.server_ms.append(1000 * (_proc_cpu_s(self.server_pid) - server) / mb)


def _raw_transfer(port: int, size: int, meter: _Meter) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        buf = bytearray(MB)
        got = 0
        meter.start()
        while got < size:
            n = s.recv_into(buf)
            if not n:
                break
            got += n
        meter.stop(got)


async def _stamped_latencies(node: P2PNode, out: dict[str, list[float]], phase: list[str]) -> None:
    """Latency (ms) of each stamped announcement, filed under the phase it arrived in."""
    while True:
        body = (await node.receive()).payload.body
        assert isinstance(body, UpdateAnnounced)
        out[phase[0]].append((time.monotonic_ns() // 1000 - body.size) / 1000)


async def _fetch_rate(
    addr: str, blob: bytes, size: int, reps: int, control: IO[str], meter: _Meter, raw: _RawSide
) -> dict[str, list[float]]:
    """`reps` pairs of a raw transfer and a timed fetch (no gossip running); then gossip
    latencies, idle and during more fetches of the same blob (LOADED_GOSSIP_S at least)."""
    registry = _registry([0])
    registry.upsert(_entry(SERVER, addr.split("/p2p/")[0]))
    lat: dict[str, list[float]] = {"idle": [], "loaded": [], "drain": []}
    phase = ["idle"]
    server = _identity(SERVER).public_key
    with tempfile.TemporaryDirectory() as tmp:
        node = P2PNode(_identity(0), _config(), registry, DirectoryBlobSource(Path(tmp)))
        async with node.run(), trio.open_nursery() as nursery:
            await node.connect(addr)  # dial once, outside the timed part

            async def fetch() -> None:
                meter.start()
                data = await node.fetch_blob(server, blob)
                assert isinstance(data, bytes)
                meter.stop(len(data))

            async def raw_transfers() -> None:
                for _ in range(RAW_PER_REP):
                    await trio.to_thread.run_sync(_raw_transfer, raw.port, size, raw.meter)

            for rep in range(reps):
                for step in (raw_transfers, fetch) if rep % 2 == 0 else (fetch, raw_transfers):
                    await step()
            nursery.start_soon(_stamped_latencies, node, lat, phase)
            await node.wait_for_topic_peers(1)
            await trio.sleep(1.5)  # one heartbeat: mesh grafted
            control.write("gossip on\n")
            control.flush()
            await trio.sleep(IDLE_GOSSIP_S)
            phase[0] = "loaded"
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < LOADED_GOSSIP_S:
                await node.fetch_blob(server, blob)
            control.write("gossip off\n")
            control.flush()
            phase[0] = "drain"
            await _drained(lat["drain"])
            nursery.cancel_scope.cancel()
    return lat


async def _drained(arrivals: list[float], quiet_s: float = 0.5, limit_s: float = 10.0) -> None:
    """Until no announcement has arrived for `quiet_s`: py-libp2p's pubsub raises if a
    message arrives while the host shuts down, so the publisher must have gone quiet."""
    with trio.move_on_after(limit_s):
        while True:
            seen = len(arrivals)
            await trio.sleep(quiet_s)
            if len(arrivals) == seen:
                return


@dataclass
class _RawSide:
    port: int
    meter: _Meter


def transfer_rates(size: int, reps: int) -> tuple[_Meter, _Meter, dict[str, list[float]]]:
    """(libp2p meter, raw meter, gossip latencies): both servers run for the whole run."""
    raw_proc, port = _spawn("--role", "raw", "--size", str(size))
    try:
        raw = _RawSide(int(port), _Meter(raw_proc.pid))
        with tempfile.TemporaryDirectory() as tmp:
            blob = DirectoryBlobSource(Path(tmp)).put(os.urandom(size))
            interval = str(GOSSIP_INTERVAL_S)
            proc, addr = _spawn("--role", "blobs", "--store", tmp, "--gossip-interval", interval)
            try:
                assert proc.stdin is not None
                meter = _Meter(proc.pid)
                lat = trio.run(_fetch_rate, addr, blob, size, reps, proc.stdin, meter, raw)
                return meter, raw.meter, lat
            finally:
                _stop(proc)
    finally:
        _stop(raw_proc)


def _announcement(n: int, sender: int = 0, size: int = 1) -> UpdateAnnounced:
    digest = blake3.blake3(b"bench-%d-%d" % (sender, n)).digest()
    return UpdateAnnounced(
        miner=to_hex(_account(sender)),
        update_hash=to_hex(digest),
        trace_root=to_hex(digest),
        size=size,
        multiaddr="/ip4/127.0.0.1/tcp/1",
    )


async def _gossip_latency(count: int) -> tuple[list[float], list[float]]:
    """Publish `count` paced messages on a line a - b - c; latencies (ms) at b and at c."""
    with tempfile.TemporaryDirectory() as tmp:
        nodes = [
            P2PNode(_identity(i), _config(), _registry(range(3)), DirectoryBlobSource(Path(tmp)))
            for i in range(3)
        ]
        sent: dict[str, float] = {}
        lat: list[list[float]] = [[], []]

        async def listen(node: P2PNode, out: list[float]) -> None:
            while True:
                msg = await node.receive()
                body = msg.payload.body
                assert isinstance(body, UpdateAnnounced)
                out.append((time.perf_counter() - sent[body.update_hash]) * 1000)

        async with nodes[0].run(), nodes[1].run(), nodes[2].run():
            await nodes[1].connect(nodes[0].p2p_addr)
            await nodes[2].connect(nodes[1].p2p_addr)
            await nodes[1].wait_for_topic_peers(2)
            await trio.sleep(1.5)  # one heartbeat: meshes grafted
            async with trio.open_nursery() as nursery:
                nursery.start_soon(listen, nodes[1], lat[0])
                nursery.start_soon(listen, nodes[2], lat[1])
                for n in range(count):
                    sent[_announcement(n).update_hash] = time.perf_counter()
                    await nodes[0].publish(0, _announcement(n))
                    await trio.sleep(0.02)  # paced: we measure latency, not queueing
                with trio.move_on_after(10):
                    while min(len(x) for x in lat) < count:
                        await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
    return lat[0], lat[1]


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def run(quick: bool) -> dict[str, float]:
    size, reps = 50 * MB, (3 if quick else 7)
    p2p_meter, raw_meter, xproc = transfer_rates(size, reps)
    raw_by_rep = [raw_meter.mbps[i : i + RAW_PER_REP] for i in range(0, reps * RAW_PER_REP, RAW_PER_REP)]
    ratios = [p / median(r) for p, r in zip(p2p_meter.mbps, raw_by_rep, strict=True)]
    hop1, hop2 = trio.run(_gossip_latency, 30 if quick else 200)
    return {
        "throughput_ratio": median(ratios),
        "libp2p_MBps": median(p2p_meter.mbps),
        "raw_MBps": median(raw_meter.mbps),
        "throughput_ratio_min": min(ratios),
        "throughput_ratio_max": max(ratios),
        # CPU ms per MB of the fetching and the serving process: the busier side bounds
        # MB/s on an idle machine, and unlike MB/s these move less when other work shares
        # the CPUs (raw TCP's are too small for /proc's 10 ms ticks)
        "libp2p_client_cpu_ms_per_MB": median(p2p_meter.client_ms),
        "libp2p_server_cpu_ms_per_MB": median(p2p_meter.server_ms),
        "gossip_p50_ms": _pct(hop2, 0.5),
        "gossip_p95_ms": _pct(hop2, 0.95),
        "gossip_1hop_p50_ms": _pct(hop1, 0.5),
        "gossip_1hop_p95_ms": _pct(hop1, 0.95),
        "gossip_2hop_p50_ms": _pct(hop2, 0.5),
        "gossip_2hop_p95_ms": _pct(hop2, 0.95),
        "gossip_delivered_1hop": float(len(hop1)),
        "gossip_delivered_2hop": float(len(hop2)),
        "gossip_xproc_idle_p50_ms": _pct(xproc["idle"], 0.5),
        "gossip_xproc_idle_p95_ms": _pct(xproc["idle"], 0.95),
        "gossip_loaded_p50_ms": _pct(xproc["loaded"], 0.5),
        "gossip_loaded_p95_ms": _pct(xproc["loaded"], 0.95),
        "gossip_loaded_max_ms": max(xproc["loaded"], default=float("nan")),
        "gossip_loaded_delivered": float(len(xproc["loaded"])),
        "blob_MB": size / MB,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks p2p")
    parser.add_argument("--quick", action="store_true", help="3 transfer pairs, 30 gossip messages")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    figures = run(args.quick)
    table = Table(title="p2p: blob throughput and gossip latency")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        table.add_row(key, f"{value:.3f}" if key.startswith("throughput_ratio") else f"{value:.1f}")
    Console().print(table)
    target = "meets" if figures["throughput_ratio"] >= 0.12 else "misses"
    print(f"throughput_ratio {figures['throughput_ratio']:.3f} {target} the 0.12 target")
    if args.json:
        out = {"benchmark": "p2p", "quick": args.quick, "figures": figures}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


def _child(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["blobs", "raw"], required=True)
    parser.add_argument("--store", default="")
    parser.add_argument("--size", type=int, default=50 * MB)
    parser.add_argument("--gossip-interval", type=float, default=GOSSIP_INTERVAL_S)
    args = parser.parse_args(argv)
    if args.role == "raw":
        _serve_raw(args.size)
    else:
        trio.run(_serve_blobs, Path(args.store), args.gossip_interval)


if __name__ == "__main__":  # child process roles, started by the measurements above
    _child(sys.argv[1:])
