"""The devnet chain's clock follows the wall clock: after setup, in bursts, idle, after a stall."""

from __future__ import annotations

import threading
import time

from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.config.run_config import RunConfig


def _wait_for_block(w3, predicate, what: str, timeout_s: float = 20.0):
    """The latest block once `predicate(block)` holds, polled until a bounded deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        block = w3.eth.get_block("latest")
        if predicate(block):
            return block
        if time.monotonic() > deadline:
            raise AssertionError(f"no block {what} within {timeout_s} s (latest {block.number})")
        time.sleep(0.05)


def _wall_clock_block(w3):
    """The next block mined after this call, with the wall-clock second before and after it
    (a block stamped with the wall clock has floor(before) <= timestamp <= floor(after))."""
    before = int(time.time())
    n = w3.eth.block_number
    block = _wait_for_block(w3, lambda b: b.number > n, f"after #{n}")
    return before, block, int(time.time())


def test_chain_time_follows_wall_clock():
    chain = DevChain(funded_accounts=24)
    w3 = chain.handle.w3
    deployer = ChainClient(chain.handle, deploy(chain.handle, chain.deployer, RunConfig()), chain.deployer)
    chain.start()
    try:
        # setup left chain time ahead of or behind the clock; the first block from the
        # miner is stamped with the wall clock either way
        before, block0, after = _wall_clock_block(w3)
        assert before <= block0.timestamp <= after

        # a burst: one transaction from each of 24 accounts, sent from 4 threads at once
        accounts = chain.node_accounts()
        hashes: list[bytes] = []
        errors: list[BaseException] = []

        def send(batch):
            try:
                for a in batch:
                    client = deployer.with_account(a)
                    hashes.append(client.sender.send(client.token.functions.approve(a.address, 1), a, wait=False)["transactionHash"])
            except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
                errors.append(exc)

        threads = [threading.Thread(target=send, args=(accounts[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        receipts = [deployer.sender.wait(h) for h in hashes]
        assert len(receipts) == 24
        burst_block = w3.eth.get_block(max(r["blockNumber"] for r in receipts))
        # no racing ahead: 24 transactions did not push chain time past the clock, as one
        # block per transaction stamped parent + 1 would (by 24 s less the burst's length)
        assert burst_block.timestamp <= int(time.time())

        # idle: nobody transacts, blocks keep coming, and chain time passes a deadline
        # 2 s past the clock's reading now without getting ahead of the clock
        deadline = int(time.time()) + 2
        idle_block = _wait_for_block(w3, lambda b: b.timestamp >= deadline, f"at or past {deadline}")
        assert idle_block.timestamp <= int(time.time())

        # a stall (a busy host keeps the miner off the chain for 3 s): the next block is
        # stamped with the clock when it is mined, not with its parent's timestamp + 1
        with chain.lock:
            parent = chain.tester.get_block_by_number("latest")
            stall_end = parent["timestamp"] + 3  # within 4 s: the parent is not ahead
            while int(time.time()) < stall_end:
                time.sleep(0.05)
            before = int(time.time())
        block = _wait_for_block(w3, lambda b: b.number > parent["number"], f"after #{parent['number']}")
        assert before <= block.timestamp <= int(time.time())
    finally:
        chain.stop()
