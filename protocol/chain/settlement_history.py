"""Rebuilding every round's result from chain data alone: no p2p, no trusted server.

A validator computes the result it signs with this, a claimer the proof it sends and the
explorer the figures it shows. Final rounds are replayed oldest first, because each account's
reputation and cumulative earnings carry over from its latest final entry; every replayed root
is checked against the one the chain made final.
"""

from __future__ import annotations

import threading
from typing import Any

from web3 import Web3

from protocol.chain.client import ChainClient, miners_from, reveals_from
from protocol.chain.events import EventLog
from protocol.core.errors import ChainError
from protocol.core.settlement.result_header import SettledRound, build_result
from protocol.core.settlement.result_inputs import PrevEntry, Reveal, RoundInputs


class SettlementHistory:
    """Every round's inputs and every final round's settled result, read incrementally."""

    def __init__(self, client: ChainClient) -> None:
        self.client = client
        self._commits = EventLog(client, "rounds", "UpdateCommitted")
        self._reveals = EventLog(client, "scores", "ScoresRevealed")
        self._forfeits = EventLog(client, "rewards", "RewardForfeited")
        self._finals = EventLog(client, "results", "ResultFinal")
        self._settled: dict[int, SettledRound] = {}
        self._latest: dict[str, PrevEntry] = {}  # every account's latest final entry so far
        self._replayed_to = -1  # rounds <= this are folded into `_latest`
        self._lock = threading.Lock()
        self._pools: tuple[int, int] | None = None
        self._classes: dict[str, int] = {}  # Staking.hardware_classes: fixed once staked, so cached
        self._min_class_weight: int | None = None

    def inputs(self, round_: int) -> RoundInputs:
        """Round `round_`'s chain facts, with each participant's latest entry from final rounds before it."""
        with self._lock:
            self._replay(round_ - 1)
            return self._inputs(round_, self._latest)

    def settle(self, round_: int, model_hash: bytes, aggregation_root: bytes = bytes(32)) -> SettledRound:
        """The result of `round_` with `model_hash` as the next model, summed through the tree whose
        nodes `aggregation_root` commits to (0: flat): what a validator signs."""
        return self.settle_from(self.inputs(round_), model_hash, aggregation_root)

    def final(self, round_: int) -> SettledRound | None:
        """The settled result of final round `round_` (None if it is not final)."""
        with self._lock:
            self._replay(round_)
            return self._settled.get(round_)

    def latest_entry(self, account: str) -> tuple[int, SettledRound] | None:
        """The latest final round holding `account`'s entry, and that round (for claims)."""
        with self._lock:
            self._replay(int(self.client.current_round()) - 1)
            entry = self._latest.get(Web3.to_checksum_address(account))
            return None if entry is None else (entry.round, self._settled[entry.round])

    def known_reputation(self, account: str) -> int:
        """The account's reputation in the latest final round replayed so far (0 if none);
        never reads the chain, so it is cheap enough for rate limits."""
        entry = self._latest.get(Web3.to_checksum_address(account))
        return entry.reputation if entry else 0

    def _replay(self, up_to: int) -> None:
        finals = {int(row["round"]): row for row in self._finals.rows()}
        for q in range(self._replayed_to + 1, up_to + 1):
            row = finals.get(q)
            if row is None:
                if q in self._settled or not self._ended(q):
                    return  # not ended yet: later rounds cannot be final either
                self._replayed_to = q  # fell back: no entries
                continue
            settled = self.settle_from(self._inputs(q, self._latest), bytes(row["model_hash"]),
                                       bytes(row["aggregation_root"]))
            if settled.header.result_root() != bytes(row["result_root"]):
                raise ChainError(f"round {q}: the final result root {bytes(row['result_root']).hex()} differs "
                                 f"from the one rebuilt from chain data {settled.header.result_root().hex()}")
            self._settled[q] = settled
            for account in (*settled.inputs.miners, *settled.inputs.validators):
                entry = settled.entry_of(account)
                assert entry is not None
                self._latest[account] = entry
            self._replayed_to = q

    def settle_from(self, inputs: RoundInputs, model_hash: bytes, aggregation_root: bytes = bytes(32)) -> SettledRound:
        d = self.client.deployment
        return build_result(inputs, d.chain_id, Web3.to_checksum_address(d.contracts.results),
                            bytes.fromhex(d.run_config_hash.removeprefix("0x")), model_hash, aggregation_root)

    def _ended(self, round_: int) -> bool:
        return self.client.read.rounds.finalized(round_)

    def _inputs(self, round_: int, latest: dict[str, PrevEntry]) -> RoundInputs:
        miners = tuple(miners_from(self._commits.rows(), round_))
        validators = tuple(Web3.to_checksum_address(v) for v in self.client.validators_of(round_))
        weights = tuple(self.client.read.rounds.weights_of(round_, list(validators)))
        reveals = {v: Reveal(tuple(r["scores"]), r["heldout_loss"], r["witness_root"], tuple(r["segments"]))
                   for v, r in reveals_from(self._reveals.rows(), round_).items() if v in validators}
        forfeited = frozenset(Web3.to_checksum_address(row["account"]) for row in self._forfeits.rows()
                              if int(row["round"]) == round_) & frozenset(miners + validators)
        emission, share = self._emission()
        prev = {a: latest[a] for a in (*miners, *validators) if a in latest}
        return RoundInputs(round=round_, miners=miners, validators=validators, weights=weights, reveals=reveals,
                           forfeited=forfeited, prev=prev, emission=emission, miner_share_bps=share,
                           miner_classes=self._classes_of(miners), validator_classes=self._classes_of(validators),
                           min_class_weight=self._class_minimum(), **self._committees(round_))

    def _committees(self, round_: int) -> dict[str, Any]:
        """The committee size (the run config's, as ColumnChallenges was deployed with it) and the
        round's seed that draws them; no seed is read for a run without committees."""
        size = self.client.deployment.run_config.chain.committee
        if size == 0:
            return {}
        return {"committee_size": size, "seed": bytes(self.client.round_info(round_)["seed"])}

    def _classes_of(self, accounts: tuple[str, ...]) -> tuple[int, ...]:
        """Each account's class set. Every participant of a round had staked by then, and a
        staked account's set never changes, so one read per account serves every round."""
        for a in accounts:
            if a not in self._classes:
                self._classes[a] = self.client.read.staking.hardware_classes(a)
        return tuple(self._classes[a] for a in accounts)

    def _class_minimum(self) -> int:
        if self._min_class_weight is None:
            self._min_class_weight = self.client.read.staking.min_class_stake()
        return self._min_class_weight

    def _emission(self) -> tuple[int, int]:
        if self._pools is None:
            rewards = self.client.read.rewards
            self._pools = (rewards.emission_per_round(), rewards.miner_share_bps())
        return self._pools
