"""Connecting to a chain: the embedded eth-tester EVM by default, any JSON-RPC node by URL."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

import requests
from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3

from protocol.core.errors import ChainError

# anvil's (and hardhat's) first well-known dev account; only ever funded on dev chains
ANVIL_DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
RPC_TIMEOUT_S = 30.0
FIRST_ANSWER_TIMEOUT_S = 10.0  # a wrong or dead --rpc is reported within this (docs/OPERATORS.md §11.2)


@dataclass
class ChainHandle:
    """A connected web3 plus, for the embedded chain, its tester (for mining control)."""

    w3: Web3
    embedded: bool
    tester: object | None = None

    @functools.cached_property
    def chain_id(self) -> int:
        # asked once: a chain's id never changes, and nodes use it outside the retrying
        # ChainPort (signing, envelope headers), where an RPC outage must not reach
        return int(self.w3.eth.chain_id)


def lean(w3: Web3) -> Web3:
    """Drop middleware that costs a request per call and buys nothing here: web3 asks the
    node for its chain id before every eth_call to validate a chainId field that calls never
    carry (transactions are signed locally with the cached id), and nodes never use ENS names."""
    for name in ("validation", "ens_name_to_address"):
        w3.middleware_onion.remove(name)
    return w3


def connect(rpc_url: str | None) -> ChainHandle:
    """Connect to `rpc_url`, or start an in-process eth-tester chain when it is None."""
    if rpc_url is None or rpc_url == "embedded":
        return _embedded()
    check_rpc_url(rpc_url)
    # the first answer under a short timeout, so a wrong address fails fast; later calls may be slow
    first = lean(Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": FIRST_ANSWER_TIMEOUT_S},
                                        exception_retry_configuration=None)))  # web3 retries 5 times
    try:
        first.eth.chain_id  # noqa: B018  (forces a round trip)
    except (requests.exceptions.RequestException, OSError, ValueError) as exc:
        raise ChainError(f"cannot reach RPC node at {rpc_url} within {FIRST_ANSWER_TIMEOUT_S:.0f} s: "
                         f"{type(exc).__name__} (is the node running, and is the URL right?)") from exc
    return ChainHandle(w3=lean(Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": RPC_TIMEOUT_S}))),
                       embedded=False)


def check_rpc_url(rpc_url: str) -> None:
    """Refuses a URL that is not HTTP(S) JSON-RPC, naming the fix (a string check: no I/O)."""
    if not rpc_url.startswith(("http://", "https://")):
        raise ChainError(f"--rpc {rpc_url} needs its scheme: http://{rpc_url.split('://')[-1]} "
                         "(or https://); only HTTP JSON-RPC is supported")


def one_run_gas_estimate(state: Any, transaction: Any) -> int:
    """py-evm's default estimator binary-searches the gas limit, ~10 executions per
    transaction, which made estimates most of the embedded chain's work. One execution at
    the block gas limit gives the gas used, or the revert; TxSender adds the headroom."""
    from eth.vm.spoof import SpoofTransaction

    snapshot = state.snapshot()
    try:
        computation = state.apply_transaction(SpoofTransaction(transaction, gas=state.gas_limit, gas_price=0))
        if computation.is_error:
            raise computation.error
        return int(transaction.intrinsic_gas + computation.get_gas_used())
    finally:
        state.revert(snapshot)


def indexed_transaction_lookup(chain: Any, transaction_hash: bytes) -> tuple[Any, Any, int]:
    """(block, transaction, index) of a transaction, from py-evm's transaction index.

    eth-tester finds a transaction by walking every block back from the head, once per
    receipt and once per log it returns, so reading a round's events grew with the square of
    the chain's length (most of a 64-miner benchmark round). py-evm keeps the index anyway."""
    from eth.exceptions import TransactionNotFound as NotIndexed
    from eth_tester.exceptions import TransactionNotFound

    pending = chain.get_block()
    for index, transaction in enumerate(pending.transactions):
        if transaction.hash == transaction_hash:
            return pending, transaction, index
    try:
        number, index = chain.chaindb.get_transaction_index(transaction_hash)
    except NotIndexed:
        raise TransactionNotFound(f"No transaction found for transaction hash: 0x{transaction_hash.hex()}") from None
    block = chain.get_canonical_block_by_number(number)
    return block, block.transactions[index], index


def embedded_backend(**kwargs: Any) -> Any:
    """A py-evm backend for eth-tester that estimates gas in one execution, finds transactions
    by index and checks BLS12-381 sooner (protocol/chain/evm_precompiles.py)."""
    from eth_tester import PyEVMBackend
    from eth_tester.backends.pyevm import main as pyevm_backend

    from protocol.chain import evm_precompiles

    evm_precompiles.install()

    pyevm_backend._get_transaction_by_hash = indexed_transaction_lookup  # module-level helper it calls
    backend = PyEVMBackend(**kwargs)
    backend.chain.gas_estimator = one_run_gas_estimate
    backend.mine_blocks = functools.partial(_mine_keeping_prevrandao, backend)
    backend.chain.header = backend.chain.header.copy(mix_hash=os.urandom(32))
    return backend


def _mine_keeping_prevrandao(backend: Any, num_blocks: int = 1, coinbase: bytes = b"\x00" * 20) -> tuple[bytes, ...]:
    """eth-tester's `mine_blocks`, except for PREVRANDAO. eth-tester runs pending transactions
    under the pending header's mix_hash and then mines the block under a fresh random one, so a
    transaction that reads PREVRANDAO (the round's seed, contracts/round_clock.vy) would make its
    block invalid. Here each pending block draws its random value first and is mined with it."""
    from eth_tester.backends.pyevm import main as pyevm_backend

    hashes = []
    for _ in range(num_blocks):
        chain = backend.chain
        kwargs: dict[str, Any] = {"coinbase": coinbase, "mix_hash": chain.header.mix_hash}
        if isinstance(chain.get_vm(), pyevm_backend.PragueVM):
            kwargs["blob_gas_used"] = sum(pyevm_backend.get_total_blob_gas(tx) for tx in chain.get_block().transactions)
        hashes.append(chain.mine_block(**kwargs).hash)
        chain.header = chain.header.copy(mix_hash=os.urandom(32))
    return tuple(hashes)


def _embedded() -> ChainHandle:
    # imported here, with py-evm: a node on an RPC never loads them
    from eth_tester import EthereumTester
    from web3.providers.eth_tester import EthereumTesterProvider

    tester = EthereumTester(embedded_backend())
    w3 = lean(Web3(EthereumTesterProvider(tester)))
    return ChainHandle(w3=w3, embedded=True, tester=tester)


def dev_account(handle: ChainHandle) -> LocalAccount:
    """The pre-funded dev account: eth-tester's first account, or anvil's."""
    if handle.embedded:
        backend = handle.tester.backend  # type: ignore[attr-defined]
        return Account.from_key(backend.account_keys[0].to_bytes())
    return Account.from_key(ANVIL_DEV_KEY)


def advance_time(handle: ChainHandle, seconds: int) -> None:
    """Move a dev chain's clock `seconds` ahead and mine a block there (benchmarks and the
    scripted round wait out challenge windows this way; never on a real chain)."""
    if handle.embedded:
        tester: Any = handle.tester
        latest = int(tester.get_block_by_number("latest")["timestamp"])
        tester.time_travel(latest + seconds)
        return
    handle.w3.provider.make_request("evm_increaseTime", [seconds])  # type: ignore[arg-type]
    handle.w3.provider.make_request("evm_mine", [])  # type: ignore[arg-type]
