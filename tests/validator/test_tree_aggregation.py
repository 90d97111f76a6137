"""The aggregation tree's run-time rules (validator/tree_aggregation.py, PROTOCOL.md §13.9) among
four in-process validators: real micro updates, real partial sums, real signed gossip and claims;
only the network between them is a dictionary (the devnet test runs the same over libp2p).

Every honest validator's θ_{r+1} must equal the flat `next_state` over the same envelopes, bit for
bit: when everyone is honest, when one server signs a wrong sum (its co-server's claim differs, so
waiters recompute and name it), when one withholds (waiters recompute after their patience), and
when a node's two servers collude (audits catch it); without audits the colluding pair's sum
enters every honest θ, which is what the audits are for. A voter confirms an `aggregate` report
only for a signed wrong claim of a node the accused serves that is its own fault: the colluding
pair cannot frame the honest servers above its node, who summed what its servers agreed on."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio
from trio.testing import MockClock

from protocol.chain.client import Vote
from protocol.config.run_setup import Setup, TrainingSpec
from protocol.config.run_state import load_dataset
from protocol.core.aggregation.state import decode_state
from protocol.core.aggregation.tree_servers import InputSize
from protocol.core.crypto.hashing import content_hash
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.proof.envelope import encode_envelope
from protocol.core.proof.submission import honest
from protocol.core.train.training import RoundTask
from protocol.core.wire.blob_caps import BlobKind, blob_caps
from protocol.core.wire.messages import Body, PartialAnnounced, decode_gossip, make_gossip
from protocol.core.wire.partial_claim import sign_partial
from protocol.devnet.lazy_aggregator import perturb_partial
from protocol.node.global_model import genesis_blob, next_state
from validator.tree_aggregation import AUDIT_WAIT_S, KEEP_ROUNDS, TreeAggregation
from validator.tree_reports import judge_aggregate
from validator.tree_round import RoundTree

CHAIN, CONTRACT = 31337, bytes(range(1, 21))
MINERS, VALIDATORS, FAN_IN = 6, 4, 2  # 6 leaves -> 3 -> 2 -> 1: six nodes, depth 3
SPEC = TrainingSpec(preset="micro", fan_in=FAN_IN)
SEED = b"tree-seed"
SIZE = InputSize(Setup(SPEC, SEED).compute.topk, Setup(SPEC, SEED).compute.chunk)


@pytest.fixture(scope="module")
def world():
    """The round's leaves (address order), their envelopes, θ_0 and the flat θ_1."""
    setup = Setup(SPEC, SEED)
    state_blob, state_hash = genesis_blob(SPEC)
    theta = decode_state(state_blob, setup.model, state_hash).params
    ds = load_dataset(SPEC.dataset)
    miners = sorted((f"0x{i:040x}" for i in range(1, MINERS + 1)), key=lambda a: int(a, 16))
    envelopes = {}
    for i, m in enumerate(miners):
        cfg = setup.compute.with_steps(setup.compute.inner_steps - 3 * (i % 3))  # different weights
        sub = honest(RoundTask(SEED, 0, bytes.fromhex(m[2:]), setup.model, cfg), ds, theta, None)
        envelopes[m] = encode_envelope(CHAIN, "0x" + CONTRACT.hex(), 0, m, sub.trace, sub.blob)
    cap = blob_caps(setup.model, setup.compute).update
    flat = next_state(SPEC, SEED, state_blob, state_hash, [envelopes[m] for m in miners], cap, with_loss=False)
    return SimpleNamespace(setup=setup, state=(state_blob, state_hash), miners=miners, envelopes=envelopes,
                           flat_hash=flat[1], cap=cap)


class Network:
    """Gossip to everyone's tree, blobs by hash from everyone's store and the miners' envelopes."""

    def __init__(self, envelopes: dict[str, bytes]) -> None:
        self.trees: list[TreeAggregation] = []
        self.stores: list[dict[bytes, bytes]] = [{bytes(content_hash(e)): e for e in envelopes.values()}]
        self.keys: dict[str, bytes] = {}

    async def publish(self, identity: NodeIdentity, round_: int, body: Body) -> None:
        message = decode_gossip(make_gossip(identity, CHAIN, CONTRACT, round_, body))
        for tree in self.trees:
            tree.on_announce(message)

    def find(self, blob_hash: bytes) -> bytes | None:
        return next((s[blob_hash] for s in self.stores if blob_hash in s), None)


class Validator:
    """What TreeAggregation reads of its node: keys, store, peers, worker (run inline)."""

    def __init__(self, net: Network, world: SimpleNamespace, index: int, withholds: bool = False,
                 slow_s: float = 0.0) -> None:
        self.address = f"0x{0xA0 + index:040x}"
        self.keys = SimpleNamespace(identity=NodeIdentity.generate())
        self.client = SimpleNamespace(handle=SimpleNamespace(chain_id=CHAIN), staking=SimpleNamespace(
            address="0x" + CONTRACT.hex()))
        self.log = logging.getLogger(f"tree-test.v{index}")
        self.setup, self.caps = world.setup, SimpleNamespace(update=world.cap)
        self.world, self.net, self.slow_s = world, net, slow_s  # slow_s: a slow machine's every computation
        self.store: dict[bytes, bytes] = {}
        self.folder = Path(tempfile.mkdtemp(prefix="tree-test-"))
        self.data = SimpleNamespace(blobs=SimpleNamespace(read=lambda h: self.store[h], get=self._path))
        silent = withholds

        async def publish(round_: int, body: Body) -> None:
            if not silent:
                await net.publish(self.keys.identity, round_, body)

        self.p2p = SimpleNamespace(publish=publish)
        if not withholds:
            net.stores.append(self.store)
        net.keys[self.address] = self.keys.identity.public_key

    async def put_blob(self, blob: bytes) -> bytes:
        h = bytes(content_hash(blob))
        self.store[h] = blob
        (self.folder / h.hex()).write_bytes(blob)  # as the node's store keeps it: a file a blob
        return h

    def _path(self, blob_hash: bytes) -> Path | None:
        path = self.folder / blob_hash.hex()
        return path if path.exists() else None

    async def fetch_blob(self, blob_hash: bytes, kind: BlobKind, first: str | None = None) -> bytes | None:
        return self.store.get(blob_hash) or self.net.find(blob_hash)

    async def commits(self, round_: int) -> dict[str, SimpleNamespace]:
        return {m: SimpleNamespace(update_hash=bytes(content_hash(e))) for m, e in self.world.envelopes.items()}

    async def _work(self, fn: Callable[..., object], *args: object) -> object:
        await trio.sleep(self.slow_s)
        return fn(*args)

    def node_key_of(self, account: str) -> bytes | None:
        return self.net.keys.get(account.lower())


def tampering(node: Validator) -> Callable[[bytes], Awaitable[bytes]]:
    async def tamper(blob: bytes) -> bytes:
        return perturb_partial(blob)  # the same lie from every liar: two of them agree
    return tamper


def network(world, liars=(), withholders=(), audits: int | dict[int, int] = 3, seed: bytes = b"s" * 32,
            slow: dict[int, float] | None = None, audit_wait_s: float = AUDIT_WAIT_S):
    net = Network(world.envelopes)
    nodes = [Validator(net, world, i, withholds=i in withholders, slow_s=(slow or {}).get(i, 0.0))
             for i in range(VALIDATORS)]
    each = audits if isinstance(audits, dict) else dict.fromkeys(range(VALIDATORS), audits)
    trees = [TreeAggregation(v, patience_s=5.0, audits=each[i], tamper=tampering(v) if i in liars else None,
                             audit_wait_s=audit_wait_s)
             for i, v in enumerate(nodes)]
    net.trees = trees
    return nodes, trees, seed


def run_round(world, nodes, trees, seed, before=None) -> tuple[dict[int, bytes], list[RoundTree]]:
    """Every validator's θ_1 hash, and its tree (`before`: a coroutine run first, in the same run)."""
    hashes: dict[int, bytes] = {}
    drawn: list[RoundTree] = []

    async def main() -> None:
        validators = [v.address for v in nodes]
        if before is not None:
            await before()
        async with trio.open_nursery() as nursery:
            for i, tree in enumerate(trees):
                t = RoundTree.draw(0, FAN_IN, world.miners, seed, validators, [1] * VALIDATORS, world.state, SIZE)
                tree.trees[0] = t
                drawn.append(t)

                async def one(i: int = i, tree: TreeAggregation = tree, t: RoundTree = t) -> None:
                    hashes[i] = (await tree.next_state(t))[1]
                nursery.start_soon(one)

    trio.run(main, clock=MockClock(autojump_threshold=0))  # patience passes at once when all wait
    return hashes, drawn


def pair_seed(a: str, b: str) -> bytes:
    """A seed whose draw gives some node the servers {a, b} (found by trying seeds in order)."""
    async def find() -> bytes:
        for k in range(10_000):
            seed = k.to_bytes(32, "big")
            t = RoundTree.draw(0, FAN_IN, [f"0x{i:040x}" for i in range(MINERS)], seed,
                               [f"0x{0xA0 + i:040x}" for i in range(VALIDATORS)], [1] * VALIDATORS, (b"", b""), SIZE)
            if any(set(pair) == {a, b} for pair in t.servers.values()):
                return seed
        raise AssertionError("no seed pairs them")
    return trio.run(find)


def test_honest_validators_sum_the_flat_bits_through_the_tree(world) -> None:
    nodes, trees, seed = network(world)
    hashes, drawn = run_round(world, nodes, trees, seed)
    assert set(hashes.values()) == {world.flat_hash}
    assert all(not tree.wrong for tree in trees)
    assert drawn[0].depth == 3 and len(drawn[0].servers) == 6
    roots = {tree.aggregation_root(t) for tree, t in zip(trees, drawn, strict=True)}
    assert len(roots) == 1 and roots != {bytes(32)}  # every validator commits to the same node hashes
    assert all(any(v.folder.iterdir()) for v in nodes)
    for tree in trees:  # two rounds later the round's partial sums leave every store
        tree.forget_before(0 + KEEP_ROUNDS)
    assert not any(any(v.folder.iterdir()) for v in nodes) and not trees[0].trees


def test_a_lone_liar_is_outvoted_by_its_co_server_and_named(world) -> None:
    nodes, trees, seed = network(world, liars=(0,))
    hashes, drawn = run_round(world, nodes, trees, seed)
    liar = nodes[0].address
    assert drawn[0].served_by(liar), "the liar serves no node under this seed"
    assert all(hashes[i] == world.flat_hash for i in (1, 2, 3))
    named = {w.validator for tree in trees[1:] for w in tree.wrong.values()}
    assert named == {liar}
    honest_roots = {trees[i].aggregation_root(drawn[i]) for i in (1, 2, 3)}
    assert len(honest_roots) == 1  # the liar's node enters the header as recomputed, by everyone alike


def test_a_withheld_sum_costs_a_recomputation_not_the_round(world) -> None:
    nodes, trees, seed = network(world, withholders=(1,))
    hashes, drawn = run_round(world, nodes, trees, seed)
    assert drawn[0].served_by(nodes[1].address)
    assert all(hashes[i] == world.flat_hash for i in (0, 2, 3))
    assert all(not tree.wrong for tree in trees)  # silence is no evidence
    assert any(t.recomputed for t in drawn)


@pytest.mark.parametrize("audits", [3, 0])
def test_a_colluding_pair_is_caught_by_audits_and_only_by_them(world, audits: int) -> None:
    nodes, trees, _ = network(world, liars=(0, 1), audits=audits)
    pair = {nodes[0].address, nodes[1].address}
    hashes, drawn = run_round(world, nodes, trees, pair_seed(*pair))
    assert any(set(servers) == pair for servers in drawn[2].servers.values())
    named = {w.validator for tree in trees[2:] for w in tree.wrong.values()}
    if audits:
        assert hashes[2] == hashes[3] == world.flat_hash and named == pair
    else:  # no honest validator recomputes the node both colluders serve: its lie enters θ
        assert hashes[2] != world.flat_hash and hashes[3] != world.flat_hash
    framed = [w for tree in trees[:2] for w in tree.wrong.values() if w.validator not in pair]
    assert bool(framed) == (not audits)  # audited, the honest servers above it sum the right node
    for w in framed:  # the pair reports the honest servers above its node: every voter rejects
        vote, _ = trio.run(judge_aggregate, trees[3 if w.validator != nodes[3].address else 2],
                           {"round": 0, "miner": w.validator, "segment": w.position, "evidence_hash": w.announced},
                           w.claim_sig)
        assert vote is Vote.REJECT, w


def test_a_voter_confirms_only_a_signed_wrong_claim_of_a_node_the_accused_serves(world) -> None:
    nodes, trees, seed = network(world, liars=(0,))
    run_round(world, nodes, trees, seed)
    wrong = next(w for w in trees[1].wrong.values())
    voter = trees[2]

    def rep(accused: str, claimed: bytes, node: int) -> dict:
        return {"round": 0, "miner": accused, "segment": node, "evidence_hash": claimed}

    async def judge(report: dict, sig: bytes) -> tuple[Vote, str]:
        return await judge_aggregate(voter, report, sig)

    t = voter.trees[0]
    assert trio.run(judge, rep(wrong.validator, wrong.announced, wrong.position), wrong.claim_sig)[0] is Vote.CONFIRM
    assert trio.run(judge, rep(wrong.validator, wrong.announced, wrong.position), bytes(64))[0] is Vote.REJECT
    honest_key = next(k for k, pair in t.servers.items() if nodes[0].address not in pair)
    server = next(i for i, v in enumerate(nodes) if v.address == t.servers[honest_key][0])
    right = t.values.get(honest_key) or trio.run(voter.right_hash, t, honest_key)
    sig = sign_partial(nodes[server].keys.identity, CHAIN, CONTRACT, 0, *honest_key, right)
    vote, why = trio.run(judge, rep(nodes[server].address, right, t.position(honest_key)), sig)
    assert vote is Vote.REJECT and "right" in why  # an honest claim: the reporter's bond burns
    outsider = next(v for v in nodes if v.address not in t.servers[wrong.node])
    assert trio.run(judge, rep(outsider.address, wrong.announced, wrong.position), wrong.claim_sig)[0] is Vote.REJECT


def test_one_auditors_dissent_corrects_every_honest_validator(world) -> None:
    """Validator 2 audits, validator 3 does not: 2 finds the pair's node, gossips its own claim, and
    3 recomputes what it fetched before computing θ, so both end on the flat bits."""
    nodes, trees, _ = network(world, liars=(0, 1), audits={0: 0, 1: 0, 2: 3, 3: 0})
    hashes, drawn = run_round(world, nodes, trees, pair_seed(nodes[0].address, nodes[1].address))
    assert hashes[2] == hashes[3] == world.flat_hash
    assert drawn[3].recomputed  # it heeded the dissent


def test_a_false_dissent_costs_a_recomputation_and_is_confirmed_against_its_signer(world) -> None:
    nodes, trees, seed = network(world)
    root = None

    async def dissent() -> None:  # validator 3 claims a root it never summed
        nonlocal root
        t = RoundTree.draw(0, FAN_IN, world.miners, seed, [v.address for v in nodes], [1] * VALIDATORS, world.state, SIZE)
        root = (t.depth, 0)
        assert nodes[3].address not in t.servers[root], "pick a seed whose root validator 3 does not serve"
        fake = b"\x07" * 32
        sig = sign_partial(nodes[3].keys.identity, CHAIN, CONTRACT, 0, *root, fake)
        await nodes[3].net.publish(nodes[3].keys.identity, 0, PartialAnnounced(
            validator=nodes[3].address, level=root[0], index=root[1], partial_hash="0x" + fake.hex(),
            claim_sig="0x" + sig.hex()))

    hashes, drawn = run_round(world, nodes, trees, seed, before=dissent)
    assert set(hashes.values()) == {world.flat_hash}
    t = drawn[0]
    report = {"round": 0, "miner": nodes[3].address, "segment": t.position(root), "evidence_hash": b"\x07" * 32}
    sig = sign_partial(nodes[3].keys.identity, CHAIN, CONTRACT, 0, *root, b"\x07" * 32)
    assert trio.run(judge_aggregate, trees[0], report, sig)[0] is Vote.CONFIRM


@pytest.mark.parametrize("audit_wait_s", [AUDIT_WAIT_S, 5.0])
def test_a_slow_auditors_dissent_counts_while_the_others_wait_for_its_audits(world, audit_wait_s: float) -> None:
    """Validator 2, the only auditor, runs on a slow machine (6 s a computation): its dissent comes
    long after validator 3 resolved the root. Validator 3 waits for 2's `tree_audited` and its
    dissent, so both end on the flat bits; a wait capped at 5 s after the root (once a fixed grace)
    would have let the pair's sum into 3's θ."""
    nodes, trees, _ = network(world, liars=(0, 1), audits={0: 0, 1: 0, 2: 3, 3: 0}, slow={2: 6.0},
                              audit_wait_s=audit_wait_s)
    hashes, drawn = run_round(world, nodes, trees, pair_seed(nodes[0].address, nodes[1].address))
    assert hashes[2] == world.flat_hash
    assert (hashes[3] == world.flat_hash) == (audit_wait_s == AUDIT_WAIT_S)
