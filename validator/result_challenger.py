"""Disputing a posted result whose header words are wrong, with what a validator holds itself.

A validator whose own result differs from the posted one can always recompute the words that
need no tree (identity, n, held-out loss, quorum, and the model without quorum): when one of
them is wrong it sends the header challenge with every reveal from chain data, and the root is
rejected whether or not its signers publish their tree. When the posted tree root is its own
but minted is not, its own root preimage disputes minted (`challenge_minted`): signers who
under-state minted would leave the rewards pool short of the claims their tree pays, and
over-stating it mints tokens nobody earned. A difference inside the tree is disputed part by
part (`result_dispute`; docs/PROTOCOL.md §11.9).
"""

from __future__ import annotations

from typing import Any

from protocol.chain.challenge_args import attempt_of, light_reveals_arg, root_arg
from protocol.chain.client import ChainClient
from protocol.core.settlement.result_header import (
    HEADER_WORD_NAMES,
    SettledRound,
    chain_data_differences,
)

MINTED, TREE_ROOT = HEADER_WORD_NAMES.index("minted"), HEADER_WORD_NAMES.index("tree_root")


def wrong_chain_data_words(own: SettledRound, post: dict[str, Any]) -> list[str]:
    """The posted header's words that differ from `own` and need no tree to dispute."""
    return chain_data_differences(own.header, [bytes(w) for w in post["header"]])


def challenge_header_words(client: ChainClient, own: SettledRound, post: dict[str, Any]) -> dict:
    """Approve the bond and send the header challenge of the pending attempt `post` (a
    `ResultPosted` row); raises ContractRevert when it is not pending any more or the bond
    cannot be paid."""
    client.approve(client.account_challenges.address, client.read.account_challenges.challenge_bond())
    return client.challenge("account_challenges", "challenge_header", *attempt_of(post), light_reveals_arg(own.inputs))


def minted_wrong_in_own_tree(own: SettledRound, post: dict[str, Any]) -> bool:
    """Whether the posted minted differs from `own`'s while the posted tree root is `own`'s, so
    that `own`'s root preimage disputes it."""
    posted, right = [bytes(w) for w in post["header"]], own.header.words()
    return posted[MINTED] != right[MINTED] and posted[TREE_ROOT] == right[TREE_ROOT]


def challenge_minted_word(client: ChainClient, own: SettledRound, post: dict[str, Any]) -> dict:
    """Approve the bond and send the minted challenge of the pending attempt `post` with `own`'s
    root preimage; raises ContractRevert as `challenge_header_words` does."""
    client.approve(client.account_challenges.address, client.read.account_challenges.challenge_bond())
    return client.challenge("account_challenges", "challenge_minted", *attempt_of(post), root_arg(own))
