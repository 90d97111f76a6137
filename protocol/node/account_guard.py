"""One live node per account: before its first transaction a node makes sure the chain's
registration of its account is its own, or that nobody is serving the account from it.

Two processes on one account corrupt a run: the second re-registers the account's address,
the first's commits are then served from nowhere, validators report them unavailable and the
account is paid nothing. So a node whose account is registered at another address (or with
another node key) asks the node there to prove the registered key (protocol/p2p/key_probe.py)
and refuses in one line: a live node there is serving the account (a twin, when it proved this
node's own key); no proof means a stale or moved registration. `--move` says the operator means
to take the registration over; the node it replaces sees the new registration and stops
(`RegistrySync`'s `on_moved`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from protocol.chain.client import ChainClient, Role
from protocol.chain.registration import holds_registration
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.errors import ConfigError

Probe = Callable[[str, bytes], bool]  # (address, node key): does a live node there hold the key


class AccountInUse(ConfigError):
    """Raised when a live node at the account's registered address proves the registered key."""


class RegisteredElsewhere(ConfigError):
    """Raised when the account is registered at another address or key where no node proves
    the registered key (stale or moved), and `--move` was not given."""


class AccountMoved(ConfigError):
    """Raised (by a running node) when its account was registered again by another node."""


@dataclass(frozen=True)
class RegistrationCheck:
    """What the chain holds for this node's account, and what the node must send."""

    found: bool  # exactly this node's registration is on chain: nothing to send
    replaces: str | None = None  # the address a `--move` takes the registration from


def check_registration(client: ChainClient, role: Role, identity: NodeIdentity, addr: str, move: bool,
                       probe: Probe) -> RegistrationCheck:
    """Whether to register; refuses (AccountInUse, RegisteredElsewhere) as the module says."""
    if holds_registration(client, role, identity, addr):  # also refuses the other role
        return RegistrationCheck(found=True)
    staking = client.read.staking
    if staking.role(client.address) == 0:
        return RegistrationCheck(found=False)
    there, key = staking.multiaddr(client.address), bytes(staking.node_key(client.address))
    if move:
        return RegistrationCheck(found=False, replaces=there)
    if probe(there, key):
        whose = ("it proved this node's own key: a twin started with the same keys" if key == identity.public_key
                 else "with another node key")
        raise AccountInUse(f"account {client.address} is already served by a live node at {there} ({whose}); "
                           "two nodes on one account corrupt its commits. Stop that node, or pass --move to move "
                           "the account to this one (that node stops when it sees the move)")
    raise RegisteredElsewhere(f"account {client.address} is registered at {there}, where no node proves the "
                              f"registered key: a stale or moved registration. Pass --move to register this node "
                              f"at {addr} instead")
