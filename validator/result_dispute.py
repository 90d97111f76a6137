"""Disputing a pending result whose error lies inside it, through demands (docs/PROTOCOL.md §11.9).

A validator whose own root differs from the pending one, with every header word that chain data
settles right, runs one `ResultDispute` per attempt. It knows which committed part differs from
its own by the header words: the tree root, the validator entries' hash, the claims list's hash
or the claims root. In the demand period (the window's first quarter) it demands what it needs
of those: the root preimage and a spread of column leaves when the tree differs (following each
answer with `tree_search.next_step` to the next differing subtree), the entries list, the
claims chunk summaries and each chunk whose summary differs. Each look it asks `fault_proofs` for a challenge the contract must uphold among
what the answers showed, cheapest kind first, and sends the first it finds. A demand of its
that nobody answered by its deadline is expired instead, which rejects the attempt and makes
its signers slashable either way; so is another account's demand of a part it wants (a colluder
that demanded it first and leaves it unanswered blocks nothing). Synchronous: the node calls `step` from a worker thread each
time it polls.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol.chain.challenge_args import (
    attempt_of,
    claims_arg,
    entries_arg,
    leaf_answer_args,
    root_arg,
)
from protocol.chain.client import ChainClient
from protocol.chain.events import EventLog
from protocol.core.errors import ContractRevert
from protocol.core.settlement.claims_tree import claim_chunks
from protocol.core.settlement.result_header import HEADER_WORD_NAMES, SettledRound
from protocol.node.logs import kv
from validator.fault_proofs import (
    Finals,
    Proof,
    claims_proof,
    entries_proof,
    leaf_proof,
    node_proof,
    shape_proof,
)
from validator.posted_parts import PostedParts
from validator.tree_search import Step, next_step

MAX_DEMANDS = 24  # TreeChallenges' cap per account and round (result_demands.MAX_DEMANDS)
FIRST_SPREAD = 4  # leaves demanded at once at the start, evenly spread


@dataclass
class ResultDispute:
    client: ChainClient
    post: dict  # the pending attempt's `ResultPosted` row
    own: SettledRound
    finals: Finals  # final rounds' settled results, for history evidence
    log: logging.Logger
    demanded: set[int] = field(default_factory=set)  # positions: columns, n root, n+1 entries, n+2 claims, n+3+c chunks
    wanted: set[int] = field(default_factory=set)  # positions to demand
    done: bool = False

    def __post_init__(self) -> None:
        n = self.n
        if self.differs("tree_root"):
            self.wanted |= {n} | {k * n // FIRST_SPREAD for k in range(FIRST_SPREAD) if n}
        if self.differs("validators_hash"):
            self.wanted.add(n + 1)
        if self.differs("claims_list_hash"):
            self.wanted.add(n + 2)

    @property
    def n(self) -> int:
        return self.own.inputs.n

    def posted_word(self, name: str) -> bytes:
        return bytes(self.post["header"][HEADER_WORD_NAMES.index(name)])

    def differs(self, name: str) -> bool:
        """Whether the posted header's word `name` differs from this validator's."""
        return self.posted_word(name) != self.own.header.words()[HEADER_WORD_NAMES.index(name)]

    def step(self, logs: Mapping[str, EventLog], now: int, demand_until: int) -> None:
        """One look at the chain: expire an overdue demand of its, else challenge a wrong part the
        answers showed, else demand what they point to (before `demand_until`)."""
        if self.done:
            return
        r, attempt = int(self.post["round"]), int(self.post["attempt"])
        parts = PostedParts.of_logs(logs, r, attempt)
        demands = {int(d["position"]): int(d["deadline"]) for d in logs["Demanded"].rows()
                   if (int(d["round"]), int(d["attempt"])) == (r, attempt)}
        answered = parts.answered(self.n)
        # its own overdue demand, or another's of a part it wants (it cannot demand that one)
        for position, deadline in sorted(demands.items()):
            if position in self.wanted and position not in answered and now >= deadline:
                self._send(Proof("tree_challenges", "expire_demand", (position,), f"unanswered {position}"))
                return
        proof = self.proof(parts)
        if proof is not None:
            self._send(proof)
        elif now < demand_until:
            self._demand_next(set(demands))

    def proof(self, parts: PostedParts) -> Proof | None:
        """The cheapest challenge the parts shown so far prove; adds what to demand next."""
        own = self.own
        root = root_arg(own) if not self.differs("tree_root") else parts.root
        entries = entries_arg(own) if not self.differs("validators_hash") else parts.entries
        summaries = claims_arg(own) if not self.differs("claims_list_hash") else parts.summaries
        chunks = dict(enumerate(claim_chunks(own.claim_leaves))) if not self.differs("claims_list_hash") else parts.chunks
        def leaf_of(k: int) -> tuple | None:  # the posted tree's leaf k: its own when the roots agree
            if not self.differs("tree_root"):
                return leaf_answer_args(own, k)
            return parts.leaves[k].args() if k in parts.leaves else None

        if summaries is not None and (self.differs("claims_list_hash") or self.differs("claims_root")):
            found, wanted = claims_proof(own, summaries, chunks, self.posted_word("claims_root"), leaf_of, entries)
            self.wanted |= wanted
            if found is not None:
                return found
        structure: list[Proof] = []  # shape and node challenges: no reveals, no history
        columns: list[Proof] = []
        for leaf in parts.leaves.values():
            finding = next_step(own, leaf)
            if finding.step is Step.DEMAND:
                self.wanted.add(finding.column)
            elif finding.step is Step.WRONG_SHAPE:
                structure.append(shape_proof(own, leaf, finding.level))
            elif finding.step is Step.WRONG_NODE:
                structure.append(node_proof(own, leaf, finding.level))
            elif finding.step is Step.WRONG_LEAF:
                columns += [p for p in [leaf_proof(own, leaf, root, self.finals)] if p is not None]
        if entries is not None and self.differs("validators_hash"):
            structure += [p for p in [entries_proof(own, entries, root, self.finals)] if p is not None]
        proofs = structure + columns
        return proofs[0] if proofs else None

    def _demand_next(self, taken: set[int]) -> None:
        """Demand what it wants and nobody demanded yet (`taken`: this attempt's demanded
        positions), the root and the lists first, in one transaction within its budget."""
        todo = sorted(self.wanted - self.demanded - taken, key=lambda p: (p < self.n, p))
        todo = todo[:MAX_DEMANDS - len(self.demanded)]
        if not todo:
            return
        if not self.demanded:  # one approval covers its whole budget: a step costs one block
            bond = self.client.read.tree_challenges.challenge_bond()
            self.client.approve(self.client.tree_challenges.address, bond * MAX_DEMANDS)
        try:
            self.client.challenge("tree_challenges", "demand", *attempt_of(self.post), todo)
            self.demanded |= set(todo)
            self.log.info("result parts demanded %s", kv(round=self.post["round"], positions=todo))
        except ContractRevert as exc:  # another account demanded one first: retried without it next look
            self.log.info("result parts not demanded %s", kv(round=self.post["round"], positions=todo,
                                                             reason=exc.reason))

    def _send(self, proof: Proof) -> None:
        self.done = True
        contract = getattr(self.client, proof.contract)
        try:
            if proof.function != "expire_demand":
                self.client.approve(contract.address, self.client.call(proof.contract, "challenge_bond"))
            self.client.challenge(proof.contract, proof.function, *attempt_of(self.post), *proof.args)
            self.log.warning("posted result challenged %s", kv(round=self.post["round"], wrong=proof.what,
                                                               challenge=proof.function))
        except ContractRevert as exc:  # rejected already by another challenger, or the window closed
            self.log.info("challenge not sent %s", kv(round=self.post["round"], wrong=proof.what, reason=exc.reason))
