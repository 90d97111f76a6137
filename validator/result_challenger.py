"""Disputing a posted result whose header words are wrong from chain data alone.

A validator whose own result differs from the posted one can always recompute the words that
need no tree (identity, n, held-out loss, quorum, and the model without quorum): when one of
them is wrong it sends the header challenge, with an empty root preimage and every reveal
from chain data, and the root is rejected whether or not its signers publish their tree. A
difference inside the tree is only logged: disputing it needs the posted tree's preimages
(docs/PROTOCOL.md §11.9).
"""

from __future__ import annotations

from typing import Any

from protocol.chain.challenge_args import light_reveals_arg
from protocol.chain.client import ChainClient
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.result_header import SettledRound, chain_data_differences

NO_PREIMAGE: tuple[bytes, list[int]] = (b"\x00" * 32, [])  # the root preimage is not read for these words


def wrong_chain_data_words(own: SettledRound, post: dict[str, Any]) -> list[str]:
    """The posted header's words that differ from `own` and need no tree to dispute."""
    return chain_data_differences(own.header, [bytes(w) for w in post["header"]])


def challenge_header_words(client: ChainClient, own: SettledRound, post: dict[str, Any]) -> dict:
    """Approve the bond and send the header challenge of the pending attempt `post` (a
    `ResultPosted` row); raises ContractRevert when it is not pending any more or the bond
    cannot be paid."""
    bond = client.read.account_challenges.challenge_bond()
    client.approve(client.account_challenges.address, bond)
    non_signers = [str(a) for a in post["non_signers"]]
    return client.challenge("account_challenges", "challenge_header", int(post["round"]),
                            [bytes(w) for w in post["header"]], list_hash(non_signers), int(post["posted_time"]),
                            int(post["attempt"]), NO_PREIMAGE, light_reveals_arg(own.inputs))
