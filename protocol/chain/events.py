"""Reading contract events from the deployment block on, decoded to plain dicts."""

from __future__ import annotations

import threading
from typing import Any

from eth_utils import event_abi_to_log_topic

from protocol.chain.client import ChainClient

LOG_CHUNK_BLOCKS = 5000  # some JSON-RPC nodes cap eth_getLogs ranges


def read_events(client: ChainClient, contract: str, event: str, from_block: int | None = None,
                to_block: int | None = None) -> list[dict[str, Any]]:
    """All `event` logs of `contract` ("token", "staking", "rounds", "scores", "rewards", "attestation", "disputes"), oldest first."""
    return read_many(client, [(contract, event)], from_block, to_block)[(contract, event)]


def read_many(client: ChainClient, events: list[tuple[str, str]], from_block: int | None = None,
              to_block: int | None = None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Several (contract, event) logs in one eth_getLogs per block range: eth-tester looks up
    every receipt in the range by scanning the chain, so one query beats one per event."""
    start = client.deployment.deploy_block if from_block is None else from_block
    end = int(client.w3.eth.block_number) if to_block is None else to_block
    # a plain eth_getLogs by address and topic: web3's contract-level get_logs re-derives
    # checksummed addresses with keccak on every call, which nodes polling every block felt
    handles: dict[tuple[str, str], Any] = {}
    for contract, event in events:
        instance = getattr(client, contract)
        handle = getattr(instance.events, event)()
        handles[(instance.address.lower(), "0x" + event_abi_to_log_topic(handle.abi).hex())] = handle
    out: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in events}
    names = dict(zip(handles, events, strict=True))
    addresses = sorted({getattr(client, contract).address for contract, _ in events})  # checksummed
    query = {"address": addresses, "topics": [sorted({t for _, t in handles})]}
    for lo in range(start, end + 1, LOG_CHUNK_BLOCKS):
        hi = min(end, lo + LOG_CHUNK_BLOCKS - 1)
        for raw in client.w3.eth.get_logs({**query, "fromBlock": lo, "toBlock": hi}):  # type: ignore[typeddict-item]
            key = (str(raw["address"]).lower(), "0x" + bytes(raw["topics"][0]).hex())
            if key not in handles:
                continue
            log = handles[key].process_log(raw)
            row = dict(log["args"])
            row["_block"] = int(log["blockNumber"])
            row["_tx"] = log["transactionHash"].hex()
            out[names[key]].append(row)
    return out


class EventLog:
    """One event's logs, read incrementally: each `rows()` call fetches only the blocks since
    the last one, so a long-running node does not rescan the chain from the deployment block.
    Dev chains and anvil do not reorganise; on a real chain, point nodes at a node that only
    serves final blocks."""

    def __init__(self, client: ChainClient, contract: str, event: str) -> None:
        self.client, self.contract, self.event = client, contract, event
        self._rows: list[dict[str, Any]] = []
        self._next_block = client.deployment.deploy_block
        self._lock = threading.Lock()  # called from worker threads (ChainPort)

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            head = int(self.client.w3.eth.block_number)
            if head >= self._next_block:
                self._rows += read_events(self.client, self.contract, self.event, self._next_block, head)
                self._next_block = head + 1
            return list(self._rows)
