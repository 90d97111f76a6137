"""A web3 contract whose calls cost what one function costs, not what the whole ABI costs.

web3 resolves every call (`contract.functions.f(...)`, for a read, an estimate or a
transaction) with `get_abi_element(contract_abi, "f", ...)`, which first validates the whole ABI:
a keccak of every function's signature, 49 of them for Rounds. That keccak alone was 13.6 % of a
devnet's profile. `LeanContract` gives each function name its own web3 contract, whose ABI is that name's
entries only (several where Vyper's default arguments make overloads), so the lookup and its
validation see one function. Events, the address and the full ABI are the full contract's.
"""

from __future__ import annotations

from typing import Any

from eth_typing import ChecksumAddress
from web3 import Web3
from web3.contract import Contract


class _Functions:
    def __init__(self, w3: Web3, full: Contract) -> None:
        self._w3, self._full = w3, full
        self._by_name: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._by_name:
            entries = [e for e in self._full.abi if e.get("type") == "function" and e.get("name") == name]
            if not entries:
                return getattr(self._full.functions, name)  # web3's own error for an unknown name
            self._by_name[name] = getattr(self._w3.eth.contract(address=self._full.address, abi=entries).functions,
                                          name)
        return self._by_name[name]


class LeanContract:
    """`w3.eth.contract(address=..., abi=...)` with per-function ABIs behind `.functions`."""

    def __init__(self, w3: Web3, address: ChecksumAddress, abi: Any) -> None:
        self.full = w3.eth.contract(address=address, abi=abi)
        self.functions = _Functions(w3, self.full)

    @property
    def address(self) -> str:
        return str(self.full.address)

    @property
    def abi(self) -> Any:
        return self.full.abi

    @property
    def events(self) -> Any:
        return self.full.events

    def decode_function_input(self, data: Any) -> Any:
        """(function, arguments) of a transaction's input, looked up in the full ABI."""
        return self.full.decode_function_input(data)
