"""Sending transactions and mapping reverts to one project error on every backend."""

from __future__ import annotations

import re
import sys
import threading
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils.exceptions import ValidationError as EthValidationError
from hexbytes import HexBytes
from web3 import Web3
from web3.exceptions import ContractLogicError, TimeExhausted, Web3RPCError

from protocol.core.errors import ChainError, ContractRevert, InsufficientFunds

RECEIPT_TIMEOUT_S = 120.0
GAS_HEADROOM = 1.25  # estimates can undershoot when state moves between estimate and inclusion
# ...and a fixed margin on top: a call estimated while another is pending can take a costlier
# path once mined (the attestation that reaches the majority also opens the next round).
# Only gas used is charged, so the margin costs nothing when unused.
GAS_MARGIN = 400_000


def _revert_classes() -> tuple[type[BaseException], ...]:
    """What a revert raises: web3's error, and eth-tester's on the embedded chain. eth-tester
    (with py-evm, 0.3 s) is imported only by an embedded chain, never by a node on an RPC."""
    tester = sys.modules.get("eth_tester.exceptions")
    return (ContractLogicError,) if tester is None else (ContractLogicError, tester.TransactionFailed)


def revert_reason(exc: BaseException) -> str:
    """Pull the human revert string out of whatever the backend raised."""
    text = str(exc.args[0]) if exc.args else str(exc)
    if isinstance(exc.args[0] if exc.args else None, bytes):
        text = _decode_error_bytes(exc.args[0])
    text = text.removeprefix("execution reverted: ").removeprefix("execution reverted")
    return text.strip(" :'\"") or "reverted without a reason"


def _decode_error_bytes(data: bytes) -> str:
    # Error(string) selector 0x08c379a0 + abi-encoded string
    if data[:4] == bytes.fromhex("08c379a0") and len(data) >= 68:
        length = int.from_bytes(data[36:68], "big")
        return data[68 : 68 + length].decode(errors="replace")
    return data.hex()


class TxSender:
    """Signs locally, tracks nonces per account (so bursts work), waits for receipts."""

    def __init__(self, w3: Web3) -> None:
        self.w3 = w3
        # JSON-RPC nodes estimate against the latest block unless told "pending", which
        # would make block.number checks (store_seed) look one block early; eth-tester
        # lacks "pending" but already estimates in the block being built.
        self._estimate_block = "latest" if _is_eth_tester(w3) else "pending"
        self._nonces: dict[str, int] = {}
        self._lock = threading.Lock()
        self._account_locks: dict[str, threading.Lock] = {}

    def send(self, fn: Any, account: LocalAccount, wait: bool = True) -> dict:
        """Build, sign and send a contract call; raises ContractRevert on any revert.

        With `wait` (the default) one transaction per account is in flight at a time: a
        node's concurrent tasks (round loop, dispute votes) never race for a nonce, and each
        estimate sees the state its predecessor left.
        """
        if not wait:
            return self._send(fn, account)
        with self._account_lock(account.address):
            sent = self._send(fn, account)
            return self.wait(sent["transactionHash"], fn, sent["params"])

    def _send(self, fn: Any, account: LocalAccount) -> dict:
        params = {"from": account.address, "chainId": self.w3.eth.chain_id}
        try:
            gas = fn.estimate_gas(params, block_identifier=self._estimate_block)
        except _revert_classes() as exc:
            raise ContractRevert(revert_reason(exc)) from exc
        except (Web3RPCError, EthValidationError) as exc:
            raise self._rpc_error(exc, account) from exc
        with self._lock:
            nonce = self._next_nonce(account.address)
            tx = fn.build_transaction({**params, "gas": self._gas_limit(gas), "nonce": nonce})
            signed = account.sign_transaction(tx)
            try:
                tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
            except (Web3RPCError, ValueError, EthValidationError) as exc:
                self._nonces.pop(account.address, None)
                raise self._rpc_error(exc, account) from exc
            except _revert_classes() as exc:
                self._nonces.pop(account.address, None)
                raise ContractRevert(revert_reason(exc)) from exc
            self._nonces[account.address] = nonce + 1
        return {"transactionHash": tx_hash, "params": params}

    def _account_lock(self, address: str) -> threading.Lock:
        with self._lock:
            return self._account_locks.setdefault(address, threading.Lock())

    def wait(self, tx_hash: bytes, fn: Any = None, params: dict | None = None) -> dict:
        try:
            receipt = self.w3.eth.wait_for_transaction_receipt(HexBytes(tx_hash), timeout=RECEIPT_TIMEOUT_S)
        except TimeExhausted as exc:
            raise ChainError(f"transaction {tx_hash.hex()} not mined within {RECEIPT_TIMEOUT_S}s") from exc
        if receipt["status"] != 1:
            raise ContractRevert(self._replay_reason(fn, params, receipt))
        return dict(receipt)

    def _gas_limit(self, estimate: int) -> int:
        block_limit = int(self.w3.eth.get_block("latest")["gasLimit"])
        return min(int(estimate * GAS_HEADROOM) + GAS_MARGIN, block_limit)

    def _next_nonce(self, address: str) -> int:
        pending = self.w3.eth.get_transaction_count(Web3.to_checksum_address(address), "pending")
        return max(pending, self._nonces.get(address, 0))

    def _replay_reason(self, fn: Any, params: dict | None, receipt: Any) -> str:
        # the state moved between estimate and inclusion; re-run the call there for the reason
        if fn is None or params is None:
            return "transaction reverted"
        try:
            fn.call(params, block_identifier=receipt["blockNumber"])
        except _revert_classes() as exc:
            return revert_reason(exc)
        except Web3RPCError:
            pass
        return "transaction reverted"

    def _rpc_error(self, exc: BaseException, account: LocalAccount) -> ChainError:
        text = str(exc)
        if re.search(r"insufficient funds|gas required exceeds|cannot afford|balance", text, re.IGNORECASE):
            return InsufficientFunds(f"account {account.address} cannot pay for gas")
        return ChainError(f"node rejected the transaction: {text[:200]}")


def _is_eth_tester(w3: Web3) -> bool:
    from web3.providers.eth_tester import EthereumTesterProvider

    return isinstance(w3.provider, EthereumTesterProvider)
