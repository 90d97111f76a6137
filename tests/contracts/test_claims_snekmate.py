"""The core's claim proofs verify with snekmate's merkle_proof_verification, as Rewards uses it."""

from __future__ import annotations

import boa
import pytest

from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.settlement.claims_tree import claim_leaf, claim_proof, claims_root

VERIFIER = """
# pragma version ~=0.4.3
from snekmate.utils import merkle_proof_verification

@external
@pure
def verify(proof: DynArray[bytes32, 32], root: bytes32, leaf: bytes32) -> bool:
    return merkle_proof_verification._verify(proof, root, leaf)
"""

ACCOUNTS = [checksum_address(keccak256(b"claimer %d" % k)[:20]) for k in range(7)]


@pytest.fixture(scope="module")
def verifier():  # type: ignore[no-untyped-def]
    return boa.loads(VERIFIER)


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_every_core_proof_verifies_on_chain(verifier, count: int) -> None:  # type: ignore[no-untyped-def]
    leaves = [claim_leaf(a, 10**18 * (k + 1)) for k, a in enumerate(ACCOUNTS[:count])]
    root = claims_root(leaves)
    for k, leaf in enumerate(leaves):
        assert verifier.verify(claim_proof(leaves, k), root, leaf)
    assert not verifier.verify(claim_proof(leaves, 0), root, claim_leaf(ACCOUNTS[0], 1))
