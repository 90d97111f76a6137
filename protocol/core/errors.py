"""Typed errors (py-evm style): one subclass per failure, each saying when it is raised.

Modules define their own subclasses next to the code that raises them; they all derive
from `VeritrainError`, so the CLI and node supervisors can turn any of them into a
one-line message without a traceback.
"""

from __future__ import annotations


class VeritrainError(Exception):
    """Base of every error veritrain raises on purpose."""


class ConfigError(VeritrainError):
    """Raised when a run config, deployment file or CLI option is missing, malformed or inconsistent."""


class SignatureError(VeritrainError):
    """Raised when an ed25519 signature or public key is malformed or does not verify."""


class ChainError(VeritrainError):
    """Raised when the chain cannot be reached or answers something unexpected."""


class ContractRevert(ChainError):
    """Raised when a contract call reverts, on eth-tester and on JSON-RPC nodes alike.

    `reason` is the revert string (prefixed with the contract name, e.g. "staking: ...").
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InsufficientFunds(ChainError):
    """Raised when an account cannot pay for gas or has too few tokens for an action."""


class ResultError(VeritrainError):
    """Raised when a round's settlement inputs are malformed (a score out of range, a vector of
    the wrong length, an unknown account) or a value cannot be ABI-encoded as a word."""
