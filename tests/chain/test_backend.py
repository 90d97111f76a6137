"""The embedded chain's transaction lookup by index agrees with eth-tester's block walk."""

from __future__ import annotations

import pytest
from eth_tester.exceptions import TransactionNotFound

from protocol.chain.backend import connect, dev_account, indexed_transaction_lookup


def walk_back(chain, transaction_hash: bytes):
    """eth-tester's own lookup: every block from the head back."""
    head = chain.get_block()
    for number in [head.number, *range(head.number - 1, -1, -1)]:
        block = head if number == head.number else chain.get_canonical_block_by_number(number)
        for index, transaction in enumerate(block.transactions):
            if transaction.hash == transaction_hash:
                return block, transaction, index
    raise TransactionNotFound(transaction_hash.hex())


def test_lookup_by_index_finds_what_the_block_walk_finds():
    handle = connect(None)
    w3, me = handle.w3, dev_account(handle)
    sent = [w3.eth.send_transaction({"from": me.address, "to": me.address, "value": i}) for i in range(5)]
    chain = handle.tester.backend.chain  # type: ignore[attr-defined]
    for h in sent:
        ours, theirs = indexed_transaction_lookup(chain, bytes(h)), walk_back(chain, bytes(h))
        assert (ours[0].hash, ours[1].hash, ours[2]) == (theirs[0].hash, theirs[1].hash, theirs[2])
        assert w3.eth.get_transaction_receipt(h)["transactionHash"] == h
    with pytest.raises(TransactionNotFound):
        indexed_transaction_lookup(chain, b"\x01" * 32)
