"""Disputing a pending result whose error lies inside its tree, through demands (docs/PROTOCOL.md §11.9).

A validator whose own root differs from the pending one, with every header word that chain data
settles right, runs one `TreeDispute` per attempt. In the demand period (the window's first
quarter) it demands the posted root preimage and a spread of column leaves, and follows every
answer with `tree_search.next_step`: a differing subtree is demanded next, a wrong leaf is
challenged with `challenge_column` once the root preimage is answered (the cheapest challenge
that proves it: one column, from the reveals on chain). A demand of its that nobody answered
by its deadline is expired, which rejects the attempt and makes its signers slashable. A wrong
internal node, or a wrong value a column challenge does not cover (a leaf's history), is logged.
Synchronous: the node calls `step` from a worker thread each time it polls.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from protocol.chain.challenge_args import attempt_of, reveals_arg
from protocol.chain.client import ChainClient
from protocol.chain.events import EventLog
from protocol.core.errors import ContractRevert
from protocol.core.settlement.result_header import SettledRound
from protocol.node.logs import kv
from validator.tree_search import PostedLeaf, Step, next_step

MAX_DEMANDS = 8  # TreeChallenges' cap per account and round
FIRST_SPREAD = 4  # leaves demanded at once at the start, evenly spread


@dataclass
class TreeDispute:
    client: ChainClient
    post: dict  # the pending attempt's `ResultPosted` row
    own: SettledRound
    log: logging.Logger
    demanded: set[int] = field(default_factory=set)  # positions this validator demanded (n: the root)
    examined: set[int] = field(default_factory=set)
    wanted: set[int] = field(default_factory=set)  # positions to demand: the root and leaves answers point to
    wrong: int | None = None  # a column found wrong, challenged once the root preimage is answered
    done: bool = False

    def __post_init__(self) -> None:
        # the root preimage (position n) and a spread of leaves, demanded at once
        self.wanted |= {self.n} | {k * self.n // FIRST_SPREAD for k in range(FIRST_SPREAD) if self.n}

    @property
    def n(self) -> int:
        return self.own.inputs.n

    def attempt_args(self) -> tuple:
        return attempt_of(self.post)

    def step(self, logs: dict[str, EventLog], now: int, demand_until: int) -> None:
        """One look at the chain: expire an overdue demand of its, examine new answers, demand
        what they point to (before `demand_until`), challenge a wrong leaf."""
        if self.done:
            return
        r, attempt = int(self.post["round"]), int(self.post["attempt"])
        mine = [d for d in logs["LeafDemanded"].rows() if (int(d["round"]), int(d["attempt"])) == (r, attempt)
                and str(d["demander"]).lower() == self.client.address.lower()]
        leaves = {int(a["position"]): PostedLeaf.of_event(a) for a in logs["LeafAnswered"].rows()
                  if (int(a["round"]), int(a["attempt"])) == (r, attempt)}
        roots = [a for a in logs["RootAnswered"].rows() if (int(a["round"]), int(a["attempt"])) == (r, attempt)]
        answered = set(leaves) | ({self.n} if roots else set())
        for d in mine:
            if int(d["position"]) not in answered and now >= int(d["deadline"]):
                self._expire(int(d["position"]))
                return
        for position in sorted(set(leaves) - self.examined):
            self.examined.add(position)
            self._follow(next_step(self.own, leaves[position]))
        if self.wrong is not None and roots:
            self._challenge(leaves[self.wrong], roots[0])
            return
        if now < demand_until:
            self._demand_next()

    def _follow(self, found: tuple[Step, int]) -> None:
        step, position = found
        if step is Step.WRONG_LEAF and self.wrong is None:
            self.wrong = position
        elif step is Step.DEMAND:
            self.wanted.add(position)
        elif step is Step.WRONG_NODE:
            self.log.warning("posted result has a wrong internal node %s", kv(round=self.post["round"], column=position))

    def _demand_next(self) -> None:
        if not self.wanted - self.demanded or len(self.demanded) >= MAX_DEMANDS:
            return
        bond = self.client.read.tree_challenges.challenge_bond()
        self.client.approve(self.client.tree_challenges.address, bond * (MAX_DEMANDS - len(self.demanded)))
        for position in sorted(self.wanted - self.demanded, key=lambda p: (p != self.n, p)):  # the root first
            if len(self.demanded) >= MAX_DEMANDS:
                return
            self.demanded.add(position)
            try:
                self.client.challenge("tree_challenges", "demand_leaf", *self.attempt_args(), position)
                self.log.info("leaf demanded %s", kv(round=self.post["round"], column=position))
            except ContractRevert as exc:  # demanded by another validator already: its answer serves us
                self.log.info("leaf not demanded %s", kv(round=self.post["round"], column=position, reason=exc.reason))

    def _expire(self, position: int) -> None:
        self.done = True
        try:
            self.client.challenge("tree_challenges", "expire_demand", *self.attempt_args(), position)
            self.log.warning("posted result rejected: a demanded leaf went unanswered %s",
                             kv(round=self.post["round"], column=position))
        except ContractRevert as exc:
            self.log.info("demand not expired %s", kv(round=self.post["round"], column=position, reason=exc.reason))

    def _challenge(self, leaf: PostedLeaf, root: dict) -> None:
        self.done = True
        root_arg = (bytes(root["body"]), [int(x) for x in root["sums"]])
        try:
            self.client.approve(self.client.column_challenges.address, self.client.read.column_challenges.challenge_bond())
            self.client.challenge("column_challenges", "challenge_column", *self.attempt_args(), *leaf.args(),
                                  root_arg, reveals_arg(self.own.inputs, leaf.position))
            self.log.warning("posted result challenged %s", kv(round=self.post["round"], column=leaf.position))
        except ContractRevert as exc:
            self.log.info("column challenge not sent %s", kv(round=self.post["round"], column=leaf.position,
                                                             reason=exc.reason))
