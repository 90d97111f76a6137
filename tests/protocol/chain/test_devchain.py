"""The devnet chain's clock follows the wall clock, in bursts and when idle."""

from __future__ import annotations

import threading
import time

from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.config.run_config import RunConfig


def test_chain_time_follows_wall_clock():
    chain = DevChain(funded_accounts=24)
    w3 = chain.handle.w3
    deployer = ChainClient(chain.handle, deploy(chain.handle, chain.deployer, RunConfig()), chain.deployer)
    chain.start()
    try:
        # a burst: one transaction from each of 24 accounts, sent from 4 threads at once
        wall0, block0 = time.time(), w3.eth.get_block("latest")
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
        for h in hashes:
            deployer.sender.wait(h)
        burst_block = w3.eth.get_block("latest")
        wall_burst = time.time() - wall0
        assert burst_block.timestamp - block0.timestamp <= wall_burst + 1  # no racing ahead
        assert abs(burst_block.timestamp - time.time()) <= 2

        # idle: nobody transacts, blocks keep coming, deadlines can pass
        time.sleep(3.2)
        idle_block = w3.eth.get_block("latest")
        assert idle_block.number >= burst_block.number + 2
        assert idle_block.timestamp - burst_block.timestamp >= 2
        assert abs(idle_block.timestamp - time.time()) <= 2
    finally:
        chain.stop()
