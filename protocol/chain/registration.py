"""A node's registration on chain: its role, ed25519 node key and the address peers dial,
bound to its account by the node key's signature over `binding_message` (what every peer
checks before admitting the node, protocol/p2p/registry.py)."""

from __future__ import annotations

from protocol.chain.client import ChainClient, Role
from protocol.core.crypto.signing import NodeIdentity, binding_message
from protocol.core.errors import ConfigError


def register_node(client: ChainClient, role: Role, identity: NodeIdentity, multiaddr: str) -> dict:
    """Register the client's account as `role` with `identity`'s node key and `multiaddr`;
    the transaction's receipt. A later call replaces the key and address (not the role)."""
    message = binding_message(client.handle.chain_id, bytes.fromhex(client.staking.address[2:]),
                              bytes.fromhex(client.address[2:]))
    return client.register(role, identity.public_key, multiaddr, identity.sign(message))


def holds_registration(client: ChainClient, role: Role, identity: NodeIdentity, multiaddr: str) -> bool:
    """Whether the chain already holds exactly this registration for the client's account.
    Raises ConfigError when the account registered as the other role: a role never changes."""
    staking = client.read.staking
    current = staking.role(client.address)
    if current not in (0, int(role)):
        raise ConfigError(f"account {client.address} is registered as the other role")
    return (current != 0 and staking.multiaddr(client.address) == multiaddr
            and staking.node_key(client.address) == identity.public_key)
