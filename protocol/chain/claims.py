"""Claiming an account's cumulative earnings with a Merkle proof rebuilt from chain data."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.chain.client import ChainClient
from protocol.chain.settlement_history import SettlementHistory
from protocol.core.errors import ConfigError
from protocol.core.settlement.claims_tree import verify_claim


@dataclass(frozen=True)
class Owed:
    round: int  # the latest final round holding the account's entry
    cumulative: int  # everything it earned up to that round
    proof: tuple[bytes, ...]
    owed: int  # cumulative minus what it claimed already


def owed_to(client: ChainClient, account: str, history: SettlementHistory | None = None) -> Owed | None:
    """What `account` may claim now, with its proof checked against the on-chain claims root;
    None if it earned nothing in any final round."""
    found = (history or SettlementHistory(client)).latest_entry(account)
    if found is None:
        return None
    round_, settled = found
    claim = settled.claim_of(client.w3.to_checksum_address(account))
    if not verify_claim(list(claim.proof), client.read.rewards.claims_root(round_), claim.leaf):
        raise ConfigError(f"the proof rebuilt from chain data does not match round {round_}'s claims root")
    owed = claim.amount - client.read.rewards.claimed(account)
    return Owed(round_, claim.amount, claim.proof, owed)


def claim_owed(client: ChainClient, history: SettlementHistory | None = None) -> tuple[Owed, dict] | None:
    """Claim everything the client's account is owed: (what was owed, the receipt); None when nothing is."""
    owed = owed_to(client, client.address, history)
    if owed is None or owed.owed <= 0:
        return None
    return owed, client.claim(owed.round, owed.cumulative, list(owed.proof))
