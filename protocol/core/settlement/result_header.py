"""The signed header of a round's result and everything built with it (docs/PROTOCOL.md §11.7).

`build_result` is what a validator signs and a claimer proves against: the result, its column
sum tree, validator entries, claim leaves and the header whose `result_root` is the BLS message.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.abi_words import tag, word
from protocol.core.settlement.claims_tree import (
    claim_leaf,
    claim_proof,
    claims_list_hash,
    claims_root,
)
from protocol.core.settlement.entries_tree import validator_entries, validators_hash
from protocol.core.settlement.result import RoundResult, compute_result
from protocol.core.settlement.result_inputs import PrevEntry, RoundInputs
from protocol.core.settlement.result_tree import ColumnTree

RESULT_DOMAIN = tag("veritrain/result/v1")


@dataclass(frozen=True)
class ResultHeader:
    chain_id: int
    results_contract: str
    run_config_hash: bytes
    round: int
    model_hash: bytes  # the next round's model; without quorum, the round's own
    tree_root: bytes
    validators_hash: bytes
    claims_root: bytes
    claims_list_hash: bytes
    n: int
    minted: int
    heldout_loss: int
    quorum: bool
    # every aggregation-tree node's partial-sum hash (`tree.aggregation_root`); 0 when summed flat
    aggregation_root: bytes = bytes(32)

    def words(self) -> tuple[bytes, ...]:
        """The header as the 15 words Challenges take as calldata, in spec order."""
        return tuple(word(v) for v in (
            RESULT_DOMAIN, self.chain_id, self.results_contract, self.run_config_hash, self.round,
            self.model_hash, self.tree_root, self.validators_hash, self.claims_root, self.claims_list_hash,
            self.n, self.minted, self.heldout_loss, int(self.quorum), self.aggregation_root))

    def result_root(self) -> bytes:
        """H(enc(header words)): what validators sign and Results stores per attempt."""
        return keccak256(b"".join(self.words()))


# header words a challenge disputes from chain data alone, without the posted tree (the model
# only without quorum: it is then the round's own)
HEADER_WORD_NAMES = ("domain", "chain_id", "results_contract", "run_config_hash", "round", "model_hash",
                     "tree_root", "validators_hash", "claims_root", "claims_list_hash", "n", "minted",
                     "heldout_loss", "quorum", "aggregation_root")
CHAIN_DATA_WORDS = ("domain", "chain_id", "results_contract", "run_config_hash", "round", "n", "heldout_loss",
                    "quorum")


def chain_data_differences(own: ResultHeader, posted: tuple[bytes, ...] | list[bytes]) -> list[str]:
    """The words of a posted header that differ from the right one and that a header challenge
    disputes without the posted tree (see `CHAIN_DATA_WORDS`)."""
    checkable = CHAIN_DATA_WORDS + (() if own.quorum else ("model_hash",))
    right = own.words()
    return [name for k, name in enumerate(HEADER_WORD_NAMES) if name in checkable and bytes(posted[k]) != right[k]]


@dataclass(frozen=True)
class Claim:
    account: str
    amount: int  # cumulative earnings up to this round
    leaf: bytes
    proof: tuple[bytes, ...]


@dataclass(frozen=True)
class SettledRound:
    inputs: RoundInputs
    result: RoundResult
    tree: ColumnTree
    entries: tuple[bytes, ...]  # validator entry hashes, in validator order
    claim_leaves: tuple[bytes, ...]  # miners in column order, then validators
    header: ResultHeader

    def entry_of(self, account: str) -> PrevEntry | None:
        """The account's entry here, as the next round's `prev` (None if it took no part)."""
        if account in self.inputs.miners:
            i = self.inputs.miners.index(account)
            return PrevEntry(self.inputs.round, i, self.result.reputation[i], self.result.cumulative[i])
        if account in self.inputs.validators:
            j = self.inputs.validators.index(account)
            return PrevEntry(self.inputs.round, j, 0, self.result.validator_cumulative[j])
        return None

    def claim_of(self, account: str) -> Claim:
        """The account's cumulative claim against this round's claims root, with its proof."""
        entry = self.entry_of(account)
        if entry is None:
            raise ResultError(f"{account} has no claim in round {self.inputs.round}")
        k = entry.index if account in self.inputs.miners else self.inputs.n + entry.index
        return Claim(account, entry.cumulative, self.claim_leaves[k], tuple(claim_proof(self.claim_leaves, k)))


def round_claim_leaves(inputs: RoundInputs, result: RoundResult) -> tuple[bytes, ...]:
    miners = [claim_leaf(m, cum) for m, cum in zip(inputs.miners, result.cumulative, strict=True)]
    validators = [claim_leaf(v, cum) for v, cum in zip(inputs.validators, result.validator_cumulative, strict=True)]
    return tuple(miners + validators)


def build_result(inputs: RoundInputs, chain_id: int, results_contract: str, run_config_hash: bytes,
                 model_hash: bytes, aggregation_root: bytes = bytes(32)) -> SettledRound:
    """The whole settled round: computed, laid out as trees and summed up in its header."""
    result = compute_result(inputs)
    tree = ColumnTree.build(inputs, result)
    entries = validator_entries(inputs, result)
    leaves = round_claim_leaves(inputs, result)
    header = ResultHeader(
        chain_id=chain_id, results_contract=results_contract, run_config_hash=run_config_hash,
        round=inputs.round, model_hash=model_hash, tree_root=tree.tree_root(),
        validators_hash=validators_hash(entries), claims_root=claims_root(leaves),
        claims_list_hash=claims_list_hash(leaves), n=result.n, minted=result.minted,
        heldout_loss=result.heldout_loss, quorum=result.quorum, aggregation_root=aggregation_root)
    return SettledRound(inputs, result, tree, entries, leaves, header)
