"""The devnet's embedded chain: eth-tester whose clock follows the wall clock.

eth-tester stamps each block with its parent's timestamp + 1, so bursts of
transactions race ahead of real time and idle periods stand still (docs/ARCHITECTURE.md §6). Here
auto-mining is off and one thread mines a block every `block_time` seconds, stamped
with the wall clock and holding every pending transaction. eth-tester has no locking
of its own, so every request and every mined block goes through one lock.

With auto-mining off eth-tester accepts only one pending transaction per sender per
block, so the deployer's setup (many transactions from one account) runs before
`start()` with auto-mining on. Node accounts are funded with gas in the genesis state
rather than by transactions, which keeps that setup to a handful of blocks. When setup
pushed chain time ahead of the wall clock, the miner waits for the clock to catch up.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.providers.eth_tester import EthereumTesterProvider

from protocol.chain.backend import ChainHandle, embedded_backend, lean

# requests whose answer depends only on chain state: answered from a cache until the
# state changes (any other request, or a mined block), since every node of the devnet
# polls the same views in one process and py-evm runs each eth_call in pure Python
_READ_ONLY = frozenset({"eth_call", "eth_blockNumber", "eth_chainId", "eth_getBlockByNumber", "eth_getBlockByHash",
                        "eth_getLogs", "eth_getBalance", "eth_getCode", "eth_getTransactionCount", "eth_accounts",
                        "eth_getTransactionReceipt", "eth_estimateGas", "eth_gasPrice", "eth_maxPriorityFeePerGas"})


class _LockedTesterProvider(EthereumTesterProvider):
    def __init__(self, tester: Any, lock: threading.RLock) -> None:
        super().__init__(tester)
        self._chain_lock = lock
        self._answers: dict[str, Any] = {}

    def make_request(self, method: Any, params: Any) -> Any:
        with self._chain_lock:
            if method not in _READ_ONLY:
                self._answers.clear()
                return super().make_request(method, params)
            key = f"{method}:{params!r}"
            if (cached := self._answers.get(key)) is None:
                cached = self._answers[key] = super().make_request(method, params)
            else:
                self._current_request_id += 1
            # a copy: web3's formatters must not see one answer object twice
            return {**copy.deepcopy(cached), "id": repr(self._current_request_id - 1)}

    def state_changed(self) -> None:
        with self._chain_lock:
            self._answers.clear()


class DevChain:
    """`start()` switches to wall-clock blocks; `handle` is safe to use from many threads."""

    def __init__(self, funded_accounts: int = 16, block_time: float = 1.0) -> None:
        from eth_tester import EthereumTester, PyEVMBackend

        self.block_time = block_time
        self.lock = threading.RLock()
        # account 0 is the deployer; the others are node accounts with gas from genesis
        state = PyEVMBackend.generate_genesis_state(num_accounts=funded_accounts + 1)
        self.backend = embedded_backend(genesis_state=state)
        self.tester = EthereumTester(self.backend)
        self._provider = _LockedTesterProvider(self.tester, self.lock)
        w3 = lean(Web3(self._provider))
        # calls name their sender, so web3 does not ask for the account list before each one
        w3.eth.default_account = self.deployer.address
        self.handle = ChainHandle(w3=w3, embedded=True, tester=self.tester)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._mine_forever, name="devchain-miner", daemon=True)

    @property
    def deployer(self) -> LocalAccount:
        return Account.from_key(self.backend.account_keys[0].to_bytes())

    def node_accounts(self) -> list[LocalAccount]:
        """Accounts funded with gas in the genesis block, for the devnet's nodes."""
        return [Account.from_key(k.to_bytes()) for k in self.backend.account_keys[1:]]

    def start(self) -> DevChain:
        with self.lock:
            self.tester.disable_auto_mine_transactions()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def mine_if_due(self) -> bool:
        """Mine one block stamped with the wall clock, unless chain time is still ahead."""
        with self.lock:
            latest = int(self.tester.get_block_by_number("latest")["timestamp"])
            now = int(time.time())
            if now <= latest:
                return False
            pending = int(self.tester.get_block_by_number("pending")["timestamp"])
            if now > pending:
                self.tester.time_travel(now)
            self.tester.mine_block()
            self._provider.state_changed()
            return True

    def _mine_forever(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            next_at += self.block_time
            self._stop.wait(max(0.0, next_at - time.monotonic()))
            if not self._stop.is_set():
                self.mine_if_due()

    def __enter__(self) -> DevChain:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
