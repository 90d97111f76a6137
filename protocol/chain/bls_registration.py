"""Validators' BLS keys on chain: registering one, once, with its proof of possession, and
reading which keys a round's aggregate holds."""

from __future__ import annotations

from protocol.chain.client import ChainClient
from protocol.core.crypto.bls import (
    bls_bound_pop_prove,
    bls_public_key,
    g1_to_eip2537,
    g2_to_eip2537,
)
from protocol.core.crypto.keccak import address_bytes
from protocol.core.errors import ConfigError


def registration(client: ChainClient, secret: int) -> tuple[bytes, bytes]:
    """(the key, its proof of possession), EIP-2537 encoded, for the client's account on the
    client's chain and BlsKeys contract: the proof is worthless from any other account or
    deployment."""
    pop = bls_bound_pop_prove(secret, address_bytes(client.address), client.deployment.chain_id,
                              address_bytes(client.keys.address))
    return g1_to_eip2537(bls_public_key(secret)), g2_to_eip2537(pop)


def ensure_bls_key(client: ChainClient, secret: int) -> bool:
    """Register `secret`'s public key for the client's account unless it is already; True if
    this call registered it. A different key already registered is an error: keys never change."""
    public = g1_to_eip2537(bls_public_key(secret))
    registered = client.read.keys.bls_key(client.address)
    if registered:
        if registered != public:
            raise ConfigError(f"account {client.address} registered another BLS key; a key can never change")
        return False
    client.register_bls(*registration(client, secret))
    return True


def aggregate_keys(client: ChainClient, r: int, accounts: list[str]) -> list[bytes]:
    """Each account's BLS key if round `r`'s aggregate holds it, else empty (what `post_result`
    takes for non-signers)."""
    read = client.read
    return [read.keys.bls_key(a) if read.rounds.aggregate_holds(r, a) else b"" for a in accounts]
