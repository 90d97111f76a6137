"""The result phase of a round (docs/PROTOCOL.md §13.7): compute, sign, certify, finalize.

Once a round's audits closed and its reports resolved, every validator computes the round's
result from chain data alone (`SettlementHistory`), aggregates the next model from it and
signs the result root with its BLS key; the signature is gossiped. Whoever holds signatures
enough for a certificate (`certifies`: more than 2/3 of the revealed keyed stake once that is
2/3 of the permitted stake) posts the aggregate (validators take turns by rank so that usually
one transaction is sent). A posted root that differs from this validator's own
is challenged where chain data alone shows it wrong (`result_challenger`), else through demands
of its parts (`result_dispute`); a demanded part of a root it agrees with is answered
(`demand_answers`).
After the challenge window anyone makes the pending root final; without a final root by the
result deadline anyone ends the round with the fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from protocol.chain.bls_registration import aggregate_keys
from protocol.chain.challenge_args import attempt_of
from protocol.chain.events import EventLog
from protocol.core.crypto.bls import (
    bls_aggregate,
    bls_aggregate_verify_same_message,
    bls_sign,
    bls_verify,
    g1_from_eip2537,
    g2_to_eip2537,
)
from protocol.core.errors import BlsError, ContractRevert
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.certificate import certifies
from protocol.core.settlement.result_header import SettledRound
from protocol.core.wire.messages import ResultSigned, SignedGossip
from protocol.node.context import NodeContext
from protocol.node.global_state import StateMismatch
from protocol.node.logs import kv
from validator.demand_answers import DemandAnswers
from validator.demand_bonds import bonds_of
from validator.probe import probe_position
from validator.result_challenger import (
    challenge_header_words,
    challenge_minted_word,
    minted_wrong_in_own_tree,
    wrong_chain_data_words,
)
from validator.result_dispute import MAX_DEMANDS, ResultDispute

POST_STAGGER_S = 3.0  # seconds between validators' turns to post the certificate
RESIGN_EVERY_S = 5.0  # a share is gossiped again this often until the round ends (gossip may drop it)


@dataclass
class Shares:
    """Signature shares seen per (round, result root): validator -> 96-byte compressed signature."""

    by_root: dict[tuple[int, bytes], dict[str, bytes]] = field(default_factory=dict)

    def add(self, round_: int, root: bytes, validator: str, signature: bytes) -> None:
        self.by_root.setdefault((round_, root), {})[validator] = signature

    def of(self, round_: int, root: bytes) -> dict[str, bytes]:
        return dict(self.by_root.get((round_, root), {}))

    def forget_before(self, round_: int) -> None:
        for key in [k for k in self.by_root if k[0] < round_]:
            del self.by_root[key]


class ResultFlow:
    def __init__(self, ctx: NodeContext, bls_secret: int, probe: bool = False,
                 aggregation_root: Callable[[int], bytes] = lambda r: bytes(32)) -> None:
        self.ctx, self.secret = ctx, bls_secret
        self.aggregation_root = aggregation_root  # the round's tree nodes for the header (0: flat)
        self.probe = probe  # devnet and tests only (validator/probe.py): demand a part of each agreed attempt
        self.shares = Shares()
        self.posts = EventLog(ctx.client, "results", "ResultPosted")
        self._verified: set[tuple[bytes, str, bytes]] = set()  # (root, validator, signature) that verified
        # (root, validator) whose share failed: later shares of theirs for that root are ignored,
        # so a validator gossiping bad shares costs at most one check per root
        self._bad: set[tuple[bytes, str]] = set()
        self._ready_since: dict[tuple[int, bytes], float] = {}  # when enough shares were first seen
        self._disputed: set[tuple[int, int]] = set()  # (round, attempt) this validator looked into
        self._probed: set[tuple[int, int]] = set()  # (round, attempt) whose part it demanded (probe)
        self._probe_allowance = 0  # probes its token allowance still covers
        self._keyed: dict[int, frozenset[str]] = {}  # per round: validators whose keys its aggregate holds
        self.demand_answers = DemandAnswers(ctx)
        self._part_disputes: dict[tuple[int, int], ResultDispute] = {}  # (round, attempt) differing inside

    def on_share(self, message: SignedGossip) -> None:
        body = message.payload.body
        if isinstance(body, ResultSigned):  # the signature is checked in the aggregate before posting
            self.shares.add(message.payload.round, bytes.fromhex(body.result_root[2:]), body.validator,
                            bytes.fromhex(body.signature[2:]))

    async def settle(self, r: int) -> None:
        """From the end of the audit phase until round `r` ended (final or fallback)."""
        ctx = self.ctx
        await self._wait_postable(r)
        settled = await self._own_result(r)
        next_share = 0.0
        while not await ctx.port(ctx.port.read.rounds.finalized, r):
            if settled is not None and trio.current_time() >= next_share:
                await self._share(r, settled)
                next_share = trio.current_time() + RESIGN_EVERY_S
            pending = await self._pending_post(r)
            if pending is not None:
                await self._watch_pending(r, pending, settled)
            elif await ctx.next_block_time() >= await ctx.port(ctx.port.read.results.result_deadline, r):
                if await ctx.port.try_send(ctx.client.fall_back, r):
                    ctx.log.warning("round fell back: no result was final by the deadline %s", kv(round=r))
            elif settled is not None:
                await self._maybe_post(r, settled)
            await trio.sleep(ctx.config.poll_s)
        if settled is not None:
            await self._collect_bonds(r, settled.inputs.n)
        self.shares.forget_before(r)
        self._ready_since = {k: t for k, t in self._ready_since.items() if k[0] > r}
        self._disputed = {k for k in self._disputed if k[0] > r}
        self._probed = {k for k in self._probed if k[0] > r}
        self.demand_answers.forget_before(r + 1)
        self._part_disputes = {k: d for k, d in self._part_disputes.items() if k[0] > r}

    async def _dispute(self, r: int, post: dict, own: SettledRound) -> None:
        """Challenge a differing posted root: once per attempt where chain data alone shows it
        wrong, else by demanding its parts until one shows a wrong value (`ResultDispute`)."""
        ctx, attempt = self.ctx, (r, int(post["attempt"]))
        if attempt not in self._disputed:
            self._disputed.add(attempt)
            if await self._challenge_header(r, post, own):
                return
            self._part_disputes[attempt] = ResultDispute(ctx.client, post, own, ctx.history.final, ctx.log)
        dispute = self._part_disputes.get(attempt)
        if dispute is not None:
            window = await ctx.port(ctx.port.read.results.challenge_window)
            await ctx.port(dispute.step, self.demand_answers.logs(), await ctx.next_block_time(),
                           int(post["posted_time"]) + window // 4)

    async def _challenge_header(self, r: int, post: dict, own: SettledRound) -> bool:
        """Send the header challenge if a word chain data settles is wrong, else the minted
        challenge if minted is wrong under its own tree root; whether one is."""
        ctx, attempt = self.ctx, int(post["attempt"])
        wrong, send = wrong_chain_data_words(own, post), challenge_header_words
        if not wrong and minted_wrong_in_own_tree(own, post):
            wrong, send = ["minted"], challenge_minted_word
        if not wrong:
            ctx.log.warning("posted result differs from this validator's inside %s",
                            kv(round=r, attempt=attempt, posted=bytes(post["result_root"]).hex()[:12],
                               own=own.header.result_root().hex()[:12]))
            return False
        try:
            await ctx.port(send, ctx.client, own, post)
            ctx.log.warning("posted result challenged %s", kv(round=r, attempt=attempt, wrong=",".join(wrong)))
        except ContractRevert as exc:
            ctx.log.info("result challenge not sent %s", kv(round=r, attempt=attempt, reason=exc.reason))
        return True

    async def _wait_postable(self, r: int) -> None:
        ctx = self.ctx
        read = ctx.port.read
        while not (await ctx.port(read.rounds.audit_closed, r) and not await ctx.port(read.disputes.open_in_round, r)):
            if await ctx.port(read.rounds.finalized, r):
                return
            await trio.sleep(ctx.config.poll_s)

    async def _own_result(self, r: int) -> SettledRound | None:
        ctx = self.ctx
        try:
            blob, model_hash = await ctx.compute_next(r)
        except StateMismatch as exc:
            # an aggregated update is unavailable right now: the others certify, and this node
            # fetches the certified state from them when the next round opens
            ctx.log.warning("cannot compute the next model, not signing %s", kv(round=r, reason=exc))
            return None
        await ctx._keep_state(r + 1, model_hash, blob)  # served to peers by its hash from now on
        settled = await ctx.port(ctx.history.settle, r, model_hash, self.aggregation_root(r))
        ctx.log.info("result computed %s", kv(round=r, root=settled.header.result_root().hex()[:12],
                                              minted=settled.result.minted, quorum=settled.result.quorum,
                                              model=model_hash.hex()[:12]))
        return settled

    async def _share(self, r: int, settled: SettledRound) -> None:
        """Gossip this validator's share (signed once: a py_ecc signature costs ~0.3 s of CPU)."""
        root = settled.header.result_root()
        signature = self.shares.of(r, root).get(self.ctx.address.lower())
        if signature is None:
            signature = await trio.to_thread.run_sync(bls_sign, self.secret, root)
            self.shares.add(r, root, self.ctx.address.lower(), signature)
            self._verified.add((root, self.ctx.address, signature))  # our own needs no check
        await self.ctx.p2p.publish(r, ResultSigned(
            validator=self.ctx.address.lower(), result_root="0x" + root.hex(),
            model_hash="0x" + settled.header.model_hash.hex(), signature="0x" + signature.hex()))

    async def _maybe_post(self, r: int, settled: SettledRound) -> None:
        ctx = self.ctx
        root = settled.header.result_root()
        validators = {v.lower(): v for v in settled.inputs.validators}
        shares = {validators[v]: g for v, g in self.shares.of(r, root).items()
                  if v in validators and (root, validators[v]) not in self._bad}
        keyed = await self._keyed_of(r, settled)
        if not certifies(settled.inputs, shares, keyed):
            return  # not enough shares yet: cheap to ask before any signature is checked
        rank = sorted(settled.inputs.validators, key=lambda a: int(a, 16)).index(ctx.address)
        ready = self._ready_since.setdefault((r, root), trio.current_time())
        if trio.current_time() < ready + rank * POST_STAGGER_S:
            return  # a higher-ranked validator posts first; later ranks step in if it does not
        shares = await self._holding(r, root, shares)
        if not certifies(settled.inputs, shares, keyed):
            return
        non_signers = sorted((v for v in settled.inputs.validators if v not in shares), key=lambda a: int(a, 16))
        keys = await ctx.port(aggregate_keys, ctx.client, r, non_signers)
        aggregate = await trio.to_thread.run_sync(bls_aggregate, list(shares.values()))
        if await ctx.port.try_send(ctx.client.post_result, list(settled.header.words()), g2_to_eip2537(aggregate),
                                   non_signers, keys):
            ctx.log.info("result posted %s", kv(round=r, root=root.hex()[:12], signers=len(shares),
                                                non_signers=len(non_signers)))

    async def _keyed_of(self, r: int, settled: SettledRound) -> frozenset[str]:
        """The round's validators whose keys its aggregate holds (fixed when the round opened)."""
        if r not in self._keyed:
            validators = list(settled.inputs.validators)
            keys = await self.ctx.port(aggregate_keys, self.ctx.client, r, validators)
            self._keyed = {r: frozenset(v for v, k in zip(validators, keys, strict=True) if k)}
        return self._keyed[r]

    async def _holding(self, r: int, root: bytes, shares: dict[str, bytes]) -> dict[str, bytes]:
        """The shares that verify: all of them at the cost of one pairing when none is bad
        (a same-message aggregate check), else each on its own."""
        fresh = {v: g for v, g in shares.items() if (root, v, g) not in self._verified}
        if fresh:
            keys = await self.ctx.port(aggregate_keys, self.ctx.client, r, list(fresh))
            if all(keys):
                try:
                    public = [g1_from_eip2537(k) for k in keys]
                    together = await trio.to_thread.run_sync(bls_aggregate_verify_same_message, public, root,
                                                             bls_aggregate(list(fresh.values())))
                except BlsError:
                    together = False
                if together:
                    self._verified.update((root, v, g) for v, g in fresh.items())
        return {v: g for v, g in shares.items() if await self._share_holds(r, root, v, g)}

    async def _share_holds(self, r: int, root: bytes, validator: str, signature: bytes) -> bool:
        """Whether `signature` is `validator`'s signature of `root` under the key round `r`'s
        aggregate holds for it (a bad share would make the whole certificate fail on chain)."""
        if (root, validator, signature) in self._verified:
            return True
        key = (await self.ctx.port(aggregate_keys, self.ctx.client, r, [validator]))[0]
        if not key:
            return False
        try:
            holds = await trio.to_thread.run_sync(bls_verify, g1_from_eip2537(key), root, signature)
        except BlsError:
            holds = False
        if holds:
            self._verified.add((root, validator, signature))
        else:
            self._bad.add((root, validator))
            self.ctx.log.warning("bad result signature share %s", kv(validator=validator, root=root.hex()[:12]))
        return holds

    async def _collect_bonds(self, r: int, n: int) -> None:
        """Settle every demand of ended round `r` whose bond is this validator's (`demand_bonds`)."""
        ctx = self.ctx
        rejected = await ctx.port(ctx.port.read.results.rejected_count, r)
        final = await ctx.port(ctx.port.read.results.final_root, r) != bytes(32)
        for attempt, position in await ctx.port(bonds_of, self.demand_answers.events, ctx.address, r, n, rejected,
                                                final):
            if await ctx.port.try_send(ctx.client.challenge, "tree_challenges", "settle_demand", r, attempt, position):
                ctx.log.info("demand bond collected %s", kv(round=r, attempt=attempt, position=position))

    async def _probe(self, post: dict, own: SettledRound) -> None:
        """Demand one part of the attempt `post` (whose root is `own`'s) and leave it to the others."""
        ctx, r, attempt = self.ctx, int(post["round"]), int(post["attempt"])
        self._probed.add((r, attempt))  # once an attempt
        position = probe_position(r, own.inputs.n)
        self.demand_answers.leave_to_others(r, attempt, position)
        try:
            if self._probe_allowance == 0:  # approved ahead, so a probe is one transaction
                bond = await ctx.port(ctx.port.read.tree_challenges.challenge_bond)
                await ctx.port(ctx.client.approve, ctx.client.tree_challenges.address, bond * MAX_DEMANDS)
                self._probe_allowance = MAX_DEMANDS
            await ctx.port(ctx.client.challenge, "tree_challenges", "demand", *attempt_of(post), [position])
            self._probe_allowance -= 1
            ctx.log.info("result part probed %s", kv(round=r, attempt=attempt, position=position))
        except ContractRevert as exc:  # past the demand period, or the attempt is settled
            ctx.log.info("result part not probed %s", kv(round=r, position=position, reason=exc.reason))

    async def _pending_post(self, r: int) -> dict | None:
        ctx = self.ctx
        if not await ctx.port(ctx.port.read.results.has_pending, r):
            return None
        rows = [row for row in await ctx.port(self.posts.rows) if row["round"] == r]
        return rows[-1] if rows else None

    async def _watch_pending(self, r: int, post: dict, own: SettledRound | None) -> None:
        ctx = self.ctx
        if own is not None and bytes(post["result_root"]) != own.header.result_root():
            await self._dispute(r, post, own)
            return  # never make a root this node disagrees with final
        if own is not None:
            if self.probe and (r, int(post["attempt"])) not in self._probed:
                await self._probe(post, own)
            await self.demand_answers.answer_open(post, own)  # it holds the tree: a withheld leaf rejects the root
        window = await ctx.port(ctx.port.read.results.challenge_window)
        if await ctx.next_block_time() < int(post["posted_time"]) + window:
            return
        non_signers = [str(a) for a in post["non_signers"]]
        if await ctx.port.try_send(ctx.client.finalize_result, [bytes(w) for w in post["header"]], list_hash(non_signers),
                                   int(post["posted_time"]), int(post["attempt"])):
            ctx.log.info("result final %s", kv(round=r, root=bytes(post["result_root"]).hex()[:12]))
