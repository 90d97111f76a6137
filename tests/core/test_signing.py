"""ed25519 identity: RFC 8032 golden vector, binding messages, typed failures."""

from __future__ import annotations

import pytest

from protocol.core.crypto.signing import (
    BINDING_DOMAIN,
    NodeIdentity,
    binding_message,
    is_valid,
    verify,
)
from protocol.core.errors import SignatureError

# RFC 8032 section 7.1, TEST 1 (empty message)
RFC_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)


def test_rfc8032_golden_vector():
    identity = NodeIdentity(RFC_SEED)
    assert identity.public_key == RFC_PUBLIC
    assert identity.sign(b"") == RFC_SIGNATURE
    verify(RFC_PUBLIC, b"", RFC_SIGNATURE)


def test_signatures_are_deterministic_and_bound_to_the_message():
    identity = NodeIdentity.generate()
    assert identity.sign(b"round 3") == identity.sign(b"round 3")
    assert is_valid(identity.public_key, b"round 3", identity.sign(b"round 3"))
    assert not is_valid(identity.public_key, b"round 4", identity.sign(b"round 3"))
    assert not is_valid(NodeIdentity.generate().public_key, b"round 3", identity.sign(b"round 3"))


def test_malformed_inputs_raise_typed_errors():
    with pytest.raises(SignatureError):
        NodeIdentity(b"short")
    with pytest.raises(SignatureError):
        verify(b"\x00" * 31, b"", b"\x00" * 64)
    with pytest.raises(SignatureError):
        verify(RFC_PUBLIC, b"", RFC_SIGNATURE[:-1])


def test_binding_message_layout_and_separation():
    contract, account = bytes(range(20)), bytes(range(20, 40))
    message = binding_message(31337, contract, account)
    assert message == BINDING_DOMAIN + (31337).to_bytes(32, "big") + contract + account
    assert message != binding_message(1, contract, account)  # another chain
    assert message != binding_message(31337, account, contract)  # another contract
    with pytest.raises(SignatureError):
        binding_message(1, b"\x00" * 19, account)
