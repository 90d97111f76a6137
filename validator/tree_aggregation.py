"""The aggregation tree at run time (docs/PROTOCOL.md §13.9): θ_{r+1} from the partial sums that
drawn validators compute, serve and announce, so that no validator fetches every update.

With `[training] fan_in` f >= 2 the selected updates, in address order, are the leaves of a tree
of fan-in f. Each inner node has two **servers** drawn from the validators that revealed in the
round (`tree_servers.servers`): both compute its partial sum from its children, store
it as a content-addressed blob and gossip a signed `PartialAnnounced`. A validator needing a node
it does not serve (the root, for everyone) waits for both announcements:
- the two agree: it fetches the blob by that hash (exact sums: one right value has one hash);
- they differ, or one stays silent past its patience: it recomputes the node itself from its
  children (each resolved the same way) and keeps a differing signed claim as evidence, which
  `tree_reports.py` files as an `aggregate` report.
So a wrong or withheld partial sum never enters θ_{r+1} while one server of its node is honest,
and a silent server costs the round a recomputation, not the round. Two colluding servers of one
node agree on a wrong sum that no waiter recomputes; against them each validator first **audits**
⌈`tree_audits` · nodes / validators⌉ nodes it does not serve (each node is audited `tree_audits`
times on average), drawn with its own private randomness (the pair cannot know which): it sums them itself, and where one differs from what its servers agreed on it reports both, sums
every node above it itself and gossips its own claim of the node (a **dissent**), then
`tree_audited` with its dissent count. Before computing θ_{r+1} every validator waits until each
other validator of the tree is heard done with all its dissents (at most `audit_wait_s` after the
root) and recomputes any node it fetched that a dissent disputes, with the path above it, so one
auditor's finding corrects every honest validator's θ however slow its machine.
Trees and announcements are kept for the last two rounds (votes on reports need them).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from protocol.core.aggregation.tree import aggregation_root
from protocol.core.aggregation.tree_servers import InputSize
from protocol.core.crypto.hashing import content_hash
from protocol.core.errors import SignatureError, VeritrainError
from protocol.core.wire.blob_caps import BlobKind
from protocol.core.wire.messages import PartialAnnounced, SignedGossip, TreeAudited
from protocol.core.wire.partial_claim import sign_partial, verify_partial
from protocol.node.global_model import leaf_sum, merge_sums, select_updates, state_from_root
from protocol.node.logs import kv
from validator.tree_round import Key, RoundTree, WrongPartial, name

PATIENCE_S = 30.0  # per level: how long a node's announcements are awaited before recomputing it
# after the root: the longest wait for the other validators' audits (each gossips `tree_audited`
# with its dissent count once done) before θ_{r+1} is computed; a silent validator costs this much
AUDIT_WAIT_S = 30.0
KEEP_ROUNDS = 2  # rounds whose trees stay in memory for votes


class TreeUnavailable(VeritrainError):
    """Raised when a node's children cannot be had: a leaf's update is served by nobody."""


class TreeAggregation:
    """One validator's part in each round's tree: serve its nodes, resolve the root, keep evidence."""

    def __init__(self, ctx: Any, patience_s: float = PATIENCE_S, audits: int = 0,
                 tamper: Callable[[bytes], Awaitable[bytes]] | None = None, audit_wait_s: float = AUDIT_WAIT_S) -> None:
        self.ctx = ctx
        self.patience_s, self.audit_wait_s = patience_s, audit_wait_s
        self.audits = audits  # audits of each node on average, across the validators (`tree_audits`)
        self.tamper = tamper  # devnet and tests only: a lying aggregator's perturbation of what it serves
        self.trees: dict[int, RoundTree] = {}
        self._heard: dict[tuple[int, Key], dict[str, tuple[bytes, bytes]]] = {}  # -> validator -> (hash, claim sig)
        self._claims: dict[int, list[tuple[Key, str]]] = {}  # round -> each first claim kept, in arrival order
        self._audited: dict[int, dict[str, int]] = {}  # round -> validator done auditing -> its dissents
        self._news = trio.Event()  # set on every new announcement, then replaced
        self.wrong: dict[tuple[int, Key, str], WrongPartial] = {}

    def on_announce(self, message: SignedGossip) -> None:
        """Keep a validator's first claim of a node (gossip admitted it only from the node key bound
        to `validator`; one whose claim signature fails would be no evidence, so it is dropped), and
        its notice that it is done auditing."""
        body, r = message.payload.body, message.payload.round
        if isinstance(body, TreeAudited):  # gossip admitted it only from the validator's own node key
            self._audited.setdefault(r, {}).setdefault(body.validator, body.dissents)
            self._tell()
            return
        if not isinstance(body, PartialAnnounced):
            return
        got, sig = bytes.fromhex(body.partial_hash[2:]), bytes.fromhex(body.claim_sig[2:])
        try:
            verify_partial(bytes.fromhex(message.payload.sender[2:]), sig, *self.deployment(), r, body.level, body.index,
                           got)
        except SignatureError:
            self.ctx.log.info("partial claim dropped: bad signature %s", kv(round=r, validator=body.validator))
            return
        claims = self._heard.setdefault((r, (body.level, body.index)), {})
        if body.validator not in claims:
            claims[body.validator] = (got, sig)
            self._claims.setdefault(r, []).append(((body.level, body.index), body.validator))
        self._tell()

    def _tell(self) -> None:
        self._news.set()
        self._news = trio.Event()

    def forget_before(self, round_: int) -> None:
        """Drop the trees, claims and evidence of rounds before the last KEEP_ROUNDS, and delete
        their partial sums from the store (dense ones weigh three times the model each)."""
        keep = round_ - KEEP_ROUNDS + 1
        for t in (t for r, t in self.trees.items() if r < keep):
            for blob_hash in {*t.values.values(), *t.served}:
                path = self.ctx.data.blobs.get(blob_hash)
                if path is not None:
                    path.unlink(missing_ok=True)
        self.trees = {r: t for r, t in self.trees.items() if r >= keep}
        self._heard = {k: v for k, v in self._heard.items() if k[0] >= keep}
        self._audited = {r: v for r, v in self._audited.items() if r >= keep}
        self._claims = {r: v for r, v in self._claims.items() if r >= keep}
        self.wrong = {k: w for k, w in self.wrong.items() if w.round >= keep}

    def deployment(self) -> tuple[int, bytes]:
        """(chain id, staking contract): what a partial claim is bound to, as gossip is."""
        client = self.ctx.client
        return client.handle.chain_id, bytes.fromhex(client.staking.address[2:])

    async def tree_for(self, r: int) -> RoundTree | None:
        """Round `r`'s tree from chain data, or None where the round is summed flat: no quorum or
        no update selected, or fewer than two revealed validators to serve a node."""
        if r in self.trees:
            return self.trees[r]
        ctx = self.ctx
        consensus = await ctx.consensus(r)
        chosen = [] if consensus is None else select_updates(ctx.setup.spec, consensus)
        inputs = await ctx.port(ctx.history.inputs, r)
        drawn = [(v.lower(), w) for v, w in zip(inputs.validators, inputs.weights, strict=True)
                 if v in inputs.reveals and w > 0]
        if not chosen or len(drawn) < 2:
            return None
        leaves = sorted(chosen, key=lambda a: int(a, 16))
        compute = ctx.setup.compute
        self.trees[r] = RoundTree.draw(r, ctx.setup.spec.fan_in, leaves, inputs.seed, [v for v, _ in drawn],
                                       [w for _, w in drawn], await ctx.state_for(r),
                                       InputSize(compute.topk, compute.chunk))
        return self.trees[r]

    async def next_state(self, t: RoundTree) -> tuple[bytes, bytes]:
        """(θ_{r+1}, its hash) from the tree's root, serving this validator's nodes meanwhile."""
        me = self.ctx.address.lower()
        async with trio.open_nursery() as nursery:
            for key in t.served_by(me):  # bottom-up order: children are started first
                nursery.start_soon(self.value, t, key)
            await self._audit(t)  # before the root: a wrong node found makes the path above it distrusted
            root = await self.value(t, (t.depth, 0))
            await self._take_claims(t)
            root = await self._heed_dissent(t, root)
        for key, right in t.values.items():  # a co-server may have announced after this one computed
            self._note_liars(t, key, right)
        ctx = self.ctx
        ctx.log.info("tree summed %s", kv(round=t.round, leaves=len(t.leaves), depth=t.depth,
                                          served=len(t.served_by(me)), resolved=len(t.values), fetched=len(t.fetched),
                                          recomputed=len(t.recomputed)))
        return await ctx._work(state_from_root, ctx.setup.spec, ctx.setup.run_seed, t.state_blob,  # type: ignore[no-any-return]
                               t.state_hash, root)

    async def value(self, t: RoundTree, key: Key) -> bytes:
        """Node `key`'s partial-sum blob: computed and announced where this validator serves it,
        else fetched by the hash both servers announced, else recomputed (and its liar noted)."""
        async with t.locks.setdefault(key, trio.Lock()):
            if key in t.values:
                return self.ctx.data.blobs.read(t.values[key])  # type: ignore[no-any-return]
            served = self.ctx.address.lower() in t.servers[key]
            if served and key not in t.announced:
                blob = await self._compute(t, key)
                await self._announce(t, key, blob)
                t.announced.add(key)
            elif served or key in t.distrusted:  # a served node again: its first claim binds it
                t.recomputed.add(key)
                blob = await self._compute(t, key)
            elif (agreed := await self._agreed(t, key)) is not None:
                t.fetched.add(key)
                blob = agreed
            else:
                t.recomputed.add(key)
                blob = await self._compute(t, key)
            t.values[key] = await self.ctx.put_blob(blob)  # kept in the store, served to peers
            self._note_liars(t, key, t.values[key])
            return blob

    async def _audit(self, t: RoundTree) -> None:
        """Sum ⌈audits · nodes / validators⌉ random nodes this validator does not serve; where one's
        servers agreed on another hash, distrust every node above it (summed from the wrong one)."""
        me = self.ctx.address.lower()
        others = [k for k, pair in t.servers.items() if me not in pair]
        count = min(-(-self.audits * len(t.servers) // t.validators), len(others))
        drawn = random.SystemRandom().sample(others, count)  # private randomness: unpredictable to a pair
        t.distrusted.update(drawn)
        async with trio.open_nursery() as nursery:
            for key in drawn:
                nursery.start_soon(self.value, t, key)
        dissents = 0
        for key in drawn:  # their servers' claims, once heard (or their patience passed)
            claims = {h for v, (h, _) in (await self._await_servers(t, key)).items() if v in t.servers[key]}
            if claims - {t.values[key]}:
                t.distrusted.update(t.ancestors(key))
                self.ctx.log.warning("audited tree node differs %s", kv(round=t.round, tree_node=name(key)))
                await self._claim(t, key, t.values[key])  # the dissent: others recompute what they fetched
                dissents += 1
        await self.ctx.p2p.publish(t.round, TreeAudited(validator=me, dissents=dissents))

    async def _take_claims(self, t: RoundTree) -> None:
        """Every node's hash for the header's aggregation root: what both servers claimed for a node
        this validator did not resolve, or, where they differ or one is silent, its recomputation."""
        async def take(key: Key) -> None:
            agreed = agreement(t, key, await self._await_servers(t, key))
            if agreed is not None:
                t.claimed[key] = agreed
                t.fetched.add(key)  # taken on agreement: a dissent makes it recomputed
            else:
                await self.value(t, key)

        async with trio.open_nursery() as nursery:
            for key in t.servers:
                if key not in t.values:
                    nursery.start_soon(take, key)

    def aggregation_root(self, t: RoundTree) -> bytes:
        """The result header's commitment to every node of `t` (`tree.aggregation_root`)."""
        return aggregation_root({k: t.values.get(k) or t.claimed[k] for k in t.servers})

    async def _heed_dissent(self, t: RoundTree, root: bytes) -> bytes:
        """The root once every other validator of the tree is done auditing (its `tree_audited`
        and as many of its dissents heard), or `audit_wait_s` passed; each dissent of a node this
        validator fetched makes it recompute that node and every node above it (a false dissent
        costs a recomputation and is itself a wrong signed claim)."""
        deadline, checked = trio.current_time() + self.audit_wait_s, set[Key]()
        while True:
            disputed = [k for k in t.fetched - checked
                        if any(h != (t.values.get(k) or t.claimed[k]) for v, (h, _) in
                               self._heard.get((t.round, k), {}).items() if v not in t.servers[k])]
            for key in disputed:
                checked.add(key)
                for above in (key, *t.ancestors(key)):
                    t.values.pop(above, None)
                    t.claimed.pop(above, None)
                    t.fetched.discard(above)
                    t.distrusted.add(above)
                self.ctx.log.warning("dissent heeded: recomputing %s", kv(round=t.round, tree_node=name(key)))
            if disputed:
                root = await self.value(t, (t.depth, 0))
                for key in disputed:
                    await self.value(t, key)  # a disputed node off the root's path too
                    self._note_liars(t, key, t.values[key], dissenters=True)
                continue
            waiting = self._auditing(t)
            if not waiting:
                return root
            if trio.current_time() >= deadline:
                self.ctx.log.warning("tree audits not heard %s", kv(round=t.round, validators=",".join(waiting)))
                return root
            with trio.move_on_at(deadline):
                await self._news.wait()

    def _auditing(self, t: RoundTree) -> list[str]:
        """The tree's other validators not yet heard done auditing, with all their dissents."""
        done, me = self._audited.get(t.round, {}), self.ctx.address.lower()
        claims = self._claims.get(t.round, [])
        for key, v in claims[t.claims_counted:]:  # each claim counted once: no rescan per message
            if v not in t.servers.get(key, ()):
                t.dissents_heard[v] = t.dissents_heard.get(v, 0) + 1
        t.claims_counted = len(claims)
        return [v for v in t.members if v != me and (v not in done or t.dissents_heard.get(v, 0) < done[v])]

    async def _agreed(self, t: RoundTree, key: Key) -> bytes | None:
        """The blob both servers announced, if they did within the patience and it is served."""
        heard = await self._await_servers(t, key)
        agreed = agreement(t, key, heard)
        if agreed is None:
            self.ctx.log.info("recomputing a tree node %s", kv(round=t.round, tree_node=name(key), announced=len(heard)))
            return None
        return await self.ctx.fetch_blob(agreed, BlobKind.PARTIAL, first=t.servers[key][0])  # type: ignore[no-any-return]

    async def _await_servers(self, t: RoundTree, key: Key) -> dict[str, tuple[bytes, bytes]]:
        # a node's servers first resolve its children, each level within one patience
        deadline = t.started + self.patience_s * key[0]
        while True:
            heard = dict(self._heard.get((t.round, key), {}))
            if all(v in heard for v in t.servers[key]) or trio.current_time() >= deadline:
                return heard
            with trio.move_on_at(deadline):
                await self._news.wait()

    async def _compute(self, t: RoundTree, key: Key) -> bytes:
        ctx, node = self.ctx, t.node(key)
        spec, seed = ctx.setup.spec, ctx.setup.run_seed
        if node.level == 1:
            commits = await ctx.commits(t.round)
            envelopes = []
            for miner in (t.leaves[i] for i in node.children):
                blob = await ctx.fetch_blob(commits[miner].update_hash, BlobKind.UPDATE, first=miner)
                if blob is None:
                    raise TreeUnavailable(f"round {t.round}: the update of {miner} is unavailable from every peer")
                envelopes.append(blob)
            return await ctx._work(leaf_sum, spec, seed, t.state_blob, t.state_hash, envelopes,  # type: ignore[no-any-return]
                                   ctx.caps.update)
        children: dict[int, bytes] = {}

        async def resolve(i: int) -> None:
            children[i] = await self.value(t, (node.level - 1, i))

        async with trio.open_nursery() as nursery:  # silent servers below cost one patience, not f
            for i in node.children:
                nursery.start_soon(resolve, i)
        return await ctx._work(merge_sums, spec, seed, [children[i] for i in node.children])  # type: ignore[no-any-return]

    async def _announce(self, t: RoundTree, key: Key, blob: bytes) -> None:
        served = blob if self.tamper is None else await self.tamper(blob)
        served_hash = await self.ctx.put_blob(served)
        t.served.add(served_hash)
        await self._claim(t, key, served_hash)
        if self.tamper is not None:
            self.ctx.log.info("served a tampered partial sum %s", kv(round=t.round, tree_node=name(key)))

    async def _claim(self, t: RoundTree, key: Key, partial_hash: bytes) -> None:
        """Gossip this validator's signed claim that `key` sums to `partial_hash` (served from its store)."""
        ctx = self.ctx
        claim = sign_partial(ctx.keys.identity, *self.deployment(), t.round, key[0], key[1], partial_hash)
        await ctx.p2p.publish(t.round, PartialAnnounced(
            validator=ctx.address.lower(), level=key[0], index=key[1], partial_hash="0x" + partial_hash.hex(),
            claim_sig="0x" + claim.hex()))

    def _note_liars(self, t: RoundTree, key: Key, right: bytes, dissenters: bool = False) -> None:
        """Keep as evidence each server's (and, once checked, each dissenter's) claim of `key` that
        differs from its right hash."""
        for validator, (announced, sig) in self._heard.get((t.round, key), {}).items():
            seen = (t.round, key, validator)
            if (validator in t.servers[key] or dissenters) and announced != right \
                    and validator != self.ctx.address.lower() and seen not in self.wrong:
                self.wrong[seen] = WrongPartial(t.round, key, t.position(key), validator, announced, right, sig)
                self.ctx.log.warning("wrong partial sum announced %s", kv(round=t.round, tree_node=name(key),
                                                                        validator=validator))

    async def right_hash(self, t: RoundTree, key: Key) -> bytes:
        """The node's right hash, resolving it if this validator has not yet."""
        if key not in t.values:
            await self.value(t, key)
        return t.values[key]

    async def faulty(self, t: RoundTree, key: Key, claimed: bytes, server: bool = True) -> bool:
        """Whether a server's claim of `key` is its own fault: neither the right sum nor the sum of
        its children as both of each child's servers claimed them (an honest server that fetched an
        agreed wrong child sums a wrong node too, and the fault is the child's servers', so a pair
        below cannot frame it)."""
        if claimed == await self.right_hash(t, key):
            return False
        node = t.node(key)
        if node.level == 1 or not server:  # leaves are committed updates; a dissenter claims to have recomputed
            return True
        children = []
        for i in node.children:
            child = (node.level - 1, i)
            agreed = agreement(t, child, self._heard.get((t.round, child), {}))
            blob = None if agreed is None else await self.ctx.fetch_blob(agreed, BlobKind.PARTIAL)
            children.append(blob if blob is not None else await self.value(t, child))
        ctx = self.ctx
        derived = await ctx._work(merge_sums, ctx.setup.spec, ctx.setup.run_seed, children)
        return claimed != content_hash(derived)


def agreement(t: RoundTree, key: Key, heard: dict[str, tuple[bytes, bytes]]) -> bytes | None:
    """The hash both of `key`'s servers claimed, if both did and they agree (`heard`: validator ->
    (claimed hash, claim signature))."""
    claims = {heard[v][0] for v in t.servers[key] if v in heard}
    return claims.pop() if len(claims) == 1 and all(v in heard for v in t.servers[key]) else None
