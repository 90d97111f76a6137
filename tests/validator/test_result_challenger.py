"""A validator disputes a posted result whose header is wrong in words chain data settles,
with no tree from the signers; a right header gives it nothing to dispute."""

from __future__ import annotations

import pytest

from protocol.chain.client import ChainClient
from protocol.chain.events import read_events
from protocol.chain.scripted import post_signed
from protocol.core.errors import ContractRevert
from protocol.core.settlement.abi_words import word
from tests.validator.scripted_result import back_to, played_to_result
from validator.result_challenger import (
    challenge_header_words,
    challenge_minted_word,
    minted_wrong_in_own_tree,
    wrong_chain_data_words,
)

H_N, H_MINTED, H_LOSS = 10, 11, 12


@pytest.fixture(scope="module")
def at_result():
    """One embedded chain played up to a result (no result posted yet), and a snapshot there."""
    deployer, net, r, own = played_to_result()
    return deployer, net, r, own, deployer.handle.tester.take_snapshot()


@pytest.fixture
def to_result(at_result):
    """Each test starts from the module's snapshot."""
    deployer, net, r, own, snapshot = at_result
    return *back_to(deployer, net, snapshot), r, own


def posted_row(client: ChainClient, r: int) -> dict:
    return [row for row in read_events(client, "results", "ResultPosted") if row["round"] == r][-1]


def rejected_with_the_bond_back(deployer: ChainClient, challenger: ChainClient, r: int, send) -> None:  # type: ignore[no-untyped-def]
    """`send(challenger)` challenges the pending attempt of round `r`: it is rejected and the
    challenger's bond comes back."""
    before = challenger.token_balance(challenger.account.address)
    send(challenger)
    assert deployer.call("results", "pending", r) == b"\x00" * 32
    assert deployer.call("results", "rejected_count", r) == 1
    assert challenger.token_balance(challenger.account.address) == before


@pytest.mark.parametrize("k,value", [(H_N, 7), (H_LOSS, 1)])
def test_a_header_wrong_in_chain_data_is_challenged_and_rejected(to_result, k, value):
    deployer, net, r, own = to_result
    header = list(own.header.words())
    header[k] = word(value)
    post_signed(deployer, net, r, header)  # every validator signed the wrong header
    post = posted_row(deployer, r)
    assert wrong_chain_data_words(own, post) == [{H_N: "n", H_LOSS: "heldout_loss"}[k]]
    rejected_with_the_bond_back(deployer, net.miners[0].client, r, lambda c: challenge_header_words(c, own, post))
    with pytest.raises(ContractRevert, match="not the pending attempt"):
        challenge_header_words(net.miners[1].client, own, post)  # a second challenger is too late


def test_a_right_header_gives_nothing_to_dispute(to_result):
    deployer, net, r, own = to_result
    post_signed(deployer, net, r, list(own.header.words()))
    assert wrong_chain_data_words(own, posted_row(deployer, r)) == []
    assert not minted_wrong_in_own_tree(own, posted_row(deployer, r))
    assert deployer.call("results", "pending", r) != b"\x00" * 32


@pytest.mark.parametrize("change", [-1, 1])
def test_a_wrong_minted_under_the_right_tree_is_challenged_with_its_own_root(to_result, change):
    """Signers who under-state minted leave the rewards pool short of the claims their tree pays
    (the last claimers go unpaid); over-stating it mints what nobody earned. Every other word is
    right, so only the minted challenge, with the challenger's own root preimage, shows it."""
    deployer, net, r, own = to_result
    assert own.header.minted > 0
    header = list(own.header.words())
    header[H_MINTED] = word(own.header.minted + change)
    post_signed(deployer, net, r, header)
    post = posted_row(deployer, r)
    assert wrong_chain_data_words(own, post) == [] and minted_wrong_in_own_tree(own, post)
    rejected_with_the_bond_back(deployer, net.miners[0].client, r, lambda c: challenge_minted_word(c, own, post))

