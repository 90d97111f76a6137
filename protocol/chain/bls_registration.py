"""Registering a validator's BLS key on chain, once, with its proof of possession."""

from __future__ import annotations

from protocol.chain.client import ChainClient
from protocol.core.bls import bls_pop_prove, bls_public_key, g1_to_eip2537, g2_to_eip2537
from protocol.core.errors import ConfigError


def ensure_bls_key(client: ChainClient, secret: int) -> bool:
    """Register `secret`'s public key for the client's account unless it is already; True if
    this call registered it. A different key already registered is an error: keys never change."""
    public = g1_to_eip2537(bls_public_key(secret))
    registered = bytes(client.call("keys", "key_of", client.address))
    if registered:
        if registered != public:
            raise ConfigError(f"account {client.address} registered another BLS key; a key can never change")
        return False
    client.register_bls(public, g2_to_eip2537(bls_pop_prove(secret)))
    return True
