"""The signed claim of a tree node's partial-sum hash (protocol/core/wire/partial_claim.py): the
evidence of an `aggregate` report, rebuilt by every voter from the report's fields alone."""

import pytest

from protocol.core.crypto.signing import NodeIdentity
from protocol.core.errors import SignatureError
from protocol.core.wire.partial_claim import (
    PARTIAL_DOMAIN,
    partial_message,
    sign_partial,
    verify_partial,
)

CONTRACT, HASH = bytes(range(20)), bytes(range(32))


def test_a_claim_verifies_only_for_its_signer_and_every_field_it_names() -> None:
    me, other = NodeIdentity.generate(), NodeIdentity.generate()
    fields = (31337, CONTRACT, 5, 2, 7, HASH)
    sig = sign_partial(me, *fields)
    verify_partial(me.public_key, sig, *fields)
    with pytest.raises(SignatureError):  # another validator's key: no evidence against it
        verify_partial(other.public_key, sig, *fields)
    for i, changed in enumerate((1, bytes(20), 6, 3, 8, bytes(32))):  # chain, contract, round, level, index, hash
        moved = list(fields)
        moved[i] = changed
        with pytest.raises(SignatureError):
            verify_partial(me.public_key, sig, *moved)


def test_the_message_is_fixed_width_under_its_own_domain() -> None:
    message = partial_message(1, CONTRACT, 2, 3, 4, HASH)
    assert message.startswith(PARTIAL_DOMAIN) and len(message) == len(PARTIAL_DOMAIN) + 32 + 20 + 4 * 32
    with pytest.raises(ValueError):
        partial_message(1, CONTRACT[:19], 2, 3, 4, HASH)
