"""A p2p node in its own OS process, for kill/freeze tests.

    python -m tests.p2p.peer_process --index 7 --store DIR --peers 0,1 [--bytes-per-s N]
        [--fetch-addr MULTIADDR --fetch-index I --fetch-hash HEX]

Prints its /p2p multiaddr on stdout once listening, then serves (and optionally keeps
fetching one blob from another node) until killed.
"""

from __future__ import annotations

import argparse
import dataclasses

import trio

from protocol.p2p import DirectoryBlobSource, P2PNode, RatePolicy, RegistryView
from protocol.p2p.errors import P2PError

from .conftest import CHAIN_ID, CONTRACT, entry_for, identity, p2p_config


async def _fetch_forever(node: P2PNode, key: bytes, blob: bytes) -> None:
    while True:
        try:
            await node.fetch_blob(key, blob)
        except P2PError:
            await trio.sleep(0.1)


async def main(args: argparse.Namespace) -> None:
    registry = RegistryView(CHAIN_ID, CONTRACT)
    for i in [int(x) for x in args.peers.split(",") if x]:
        registry.upsert(entry_for(i))
    registry.upsert(entry_for(args.index))
    policy = dataclasses.replace(RatePolicy(), base_bytes_per_s=args.bytes_per_s)
    config = p2p_config(rate_policy=policy, read_timeout_s=2.0)
    node = P2PNode(identity(args.index), config, registry, DirectoryBlobSource(args.store))
    async with node.run():
        print(node.p2p_addr, flush=True)
        if args.fetch_addr:
            registry.upsert(entry_for(args.fetch_index, args.fetch_addr))
            key = identity(args.fetch_index).public_key
            await _fetch_forever(node, key, bytes.fromhex(args.fetch_hash))
        await trio.sleep_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--peers", default="")
    parser.add_argument("--bytes-per-s", type=float, default=64 * 1024 * 1024)
    parser.add_argument("--fetch-addr", default="")
    parser.add_argument("--fetch-index", type=int, default=0)
    parser.add_argument("--fetch-hash", default="")
    trio.run(main, parser.parse_args())
