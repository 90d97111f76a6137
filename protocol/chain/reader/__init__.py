"""Typed reads of the settlement contracts: one method per getter the nodes use, named after
what it means, one reader per contract (`client.read.staking.stake_of(account)`). Writes
(transactions) stay on ChainClient."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.chain.reader.disputes import DisputesReader
from protocol.chain.reader.keys import KeysReader
from protocol.chain.reader.results import ChallengesReader, ColumnChallengesReader, ResultsReader
from protocol.chain.reader.rewards import RewardsReader, TokenReader
from protocol.chain.reader.rounds import RoundsReader, ScoresReader
from protocol.chain.reader.staking import StakingReader

if TYPE_CHECKING:
    from protocol.chain.client import ChainClient


class ChainReader:
    """Every contract's getters that nodes read, typed, at the latest block."""

    def __init__(self, client: ChainClient) -> None:
        self.staking = StakingReader(client.staking)
        self.keys = KeysReader(client.keys)
        self.rounds = RoundsReader(client.rounds)
        self.scores = ScoresReader(client.scores)
        self.results = ResultsReader(client.results)
        self.column_challenges = ColumnChallengesReader(client.column_challenges)
        self.tree_challenges = ChallengesReader(client.tree_challenges)
        self.account_challenges = ChallengesReader(client.account_challenges)
        self.claims_challenges = ChallengesReader(client.claims_challenges)
        self.rewards = RewardsReader(client.rewards)
        self.token = TokenReader(client.token)
        self.disputes = DisputesReader(client.disputes)


__all__ = ["ChainReader"]
