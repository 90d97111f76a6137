"""In-memory view of the on-chain node registry, as the p2p layer needs it.

The chain layer feeds it (`upsert` / `remove` from registry events); tests populate it
directly. It is the single source of truth for "is this peer allowed" and for per-peer
rate limits. Rule (docs/PROTOCOL.md §4): an entry counts only if its binding signature
verifies, and the first valid binding of a node key wins, because the contract cannot check
ed25519 and so cannot stop a squatter from registering someone else's key.

Admission (docs/INTEROP.md §2a): a peer is *admitted* only while its entry is `eligible`,
i.e. the chain's staking view says its account is eligible in its registered role
(registered and staked at least the role's minimum). `admitted_peer` / `admitted_key` are
what the connection gate, gossip and the blob server ask; `on_revoke` listeners hear of
every node key that stops being admitted, so open connections to it can be dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

from libp2p.crypto.ed25519 import Ed25519PublicKey
from libp2p.peer.id import ID

from protocol.core.crypto.signing import binding_message, verify
from protocol.core.errors import SignatureError
from protocol.p2p.errors import RegistryError

Role = Literal["miner", "validator"]
MAX_REPUTATION = 65535


@dataclass(frozen=True)
class RegistryEntry:
    """One registered node, as recorded on chain."""

    node_key: bytes  # 32-byte ed25519 public key == libp2p identity
    account: bytes  # 20-byte Ethereum address
    role: Role
    stake: int  # token base units
    reputation: int  # 0..65535, meaning 0..1
    multiaddr: str  # where the node listens, e.g. /ip4/127.0.0.1/tcp/4001
    binding_sig: bytes  # ed25519 over binding_message(chain_id, contract, account)
    # the chain's staking view: eligible in `role` (staking.eligible_role(account) == role).
    # Fail closed: an entry nobody marked eligible admits nothing.
    eligible: bool = False


def peer_id_of(node_key: bytes) -> ID:
    """The libp2p peer id of an ed25519 node key (identity multihash of the key)."""
    if len(node_key) != 32:
        raise RegistryError("node key must be 32 bytes")
    return ID.from_pubkey(Ed25519PublicKey.from_bytes(node_key))


def node_key_of(peer_id: ID) -> bytes | None:
    """The raw ed25519 key embedded in a peer id, or None for non-ed25519 ids."""
    try:
        key = peer_id.extract_public_key()
    except (ValueError, TypeError):  # malformed multihash/protobuf from a remote
        return None
    if not isinstance(key, Ed25519PublicKey):
        return None
    return key.to_bytes()


class RegistryView:
    """node_key -> RegistryEntry, with first-valid-binding-wins and peer-id lookup."""

    def __init__(self, chain_id: int, contract: bytes) -> None:
        if len(contract) != 20:
            raise RegistryError("contract must be a 20-byte address")
        self.chain_id = chain_id
        self.contract = contract
        self._by_key: dict[bytes, RegistryEntry] = {}
        self._by_peer: dict[ID, bytes] = {}
        self._by_account: dict[bytes, bytes] = {}
        self._revoke_listeners: list[Callable[[bytes], None]] = []
        self.version = 0  # bumped on every change, so dialers can notice new addresses

    def on_revoke(self, listener: Callable[[bytes], None]) -> None:
        """Call `listener(node_key)` whenever an admitted node key stops being admitted
        (entry removed, moved to a new key, or no longer eligible). Listeners must not
        block: they are called synchronously from `upsert` / `remove`."""
        self._revoke_listeners.append(listener)

    def _revoked(self, node_key: bytes) -> None:
        for listener in list(self._revoke_listeners):
            listener(node_key)

    def _check(self, entry: RegistryEntry) -> None:
        if len(entry.account) != 20:
            raise RegistryError("account must be a 20-byte address")
        if entry.role not in ("miner", "validator"):
            raise RegistryError(f"unknown role {entry.role!r}")
        if entry.stake < 0 or not 0 <= entry.reputation <= MAX_REPUTATION:
            raise RegistryError("stake must be >= 0 and reputation in 0..65535")
        try:
            msg = binding_message(self.chain_id, self.contract, entry.account)
            verify(entry.node_key, msg, entry.binding_sig)
        except SignatureError as exc:
            raise RegistryError(f"binding signature invalid: {exc}") from exc

    def upsert(self, entry: RegistryEntry) -> None:
        """Add or update an entry. Raises RegistryError (and changes nothing) when the binding
        signature is invalid or the node key is already bound to another account."""
        self._check(entry)
        current = self._by_key.get(entry.node_key)
        if current is not None and current.account != entry.account:
            raise RegistryError("node key already bound to another account (first wins)")
        old_key = self._by_account.get(entry.account)
        if old_key is not None and old_key != entry.node_key:
            self.remove(old_key)  # the account moved to a new node key
        self._by_key[entry.node_key] = entry
        self._by_peer[peer_id_of(entry.node_key)] = entry.node_key
        self._by_account[entry.account] = entry.node_key
        self.version += 1
        if current is not None and current.eligible and not entry.eligible:
            self._revoked(entry.node_key)

    def update_standing(
        self, node_key: bytes, stake: int, reputation: int, eligible: bool | None = None
    ) -> None:
        """Apply a stake/reputation (and, if given, eligibility) change to an existing entry."""
        entry = self._by_key.get(node_key)
        if entry is None:
            raise RegistryError("no entry for that node key")
        keep = entry.eligible if eligible is None else eligible
        self.upsert(replace(entry, stake=stake, reputation=reputation, eligible=keep))

    def set_eligible(self, node_key: bytes, eligible: bool) -> None:
        """Mark an existing entry (in)eligible; an entry losing eligibility is revoked."""
        entry = self._by_key.get(node_key)
        if entry is None:
            raise RegistryError("no entry for that node key")
        self.upsert(replace(entry, eligible=eligible))

    def remove(self, node_key: bytes) -> None:
        entry = self._by_key.pop(node_key, None)
        if entry is None:
            return
        self._by_peer.pop(peer_id_of(node_key), None)
        if self._by_account.get(entry.account) == node_key:
            del self._by_account[entry.account]
        self.version += 1
        if entry.eligible:
            self._revoked(node_key)

    def lookup_by_node_key(self, node_key: bytes) -> RegistryEntry | None:
        return self._by_key.get(node_key)

    def lookup_by_peer_id(self, peer_id: ID) -> RegistryEntry | None:
        key = self._by_peer.get(peer_id)
        return None if key is None else self._by_key.get(key)

    def lookup_by_account(self, account: bytes) -> RegistryEntry | None:
        key = self._by_account.get(account)
        return None if key is None else self._by_key.get(key)

    def admitted_key(self, node_key: bytes) -> RegistryEntry | None:
        """The entry of `node_key` if it may use the network (eligible), else None."""
        entry = self._by_key.get(node_key)
        return entry if entry is not None and entry.eligible else None

    def admitted_peer(self, peer_id: ID) -> RegistryEntry | None:
        """The entry behind `peer_id` if it may use the network (eligible), else None."""
        entry = self.lookup_by_peer_id(peer_id)
        return entry if entry is not None and entry.eligible else None

    def admits(self, peer_id: ID) -> bool:
        return self.admitted_peer(peer_id) is not None

    def entries(self) -> Iterator[RegistryEntry]:
        return iter(list(self._by_key.values()))

    def __len__(self) -> int:
        return len(self._by_key)
