"""What a validator audits and keeps: claims from reveals, checkpoints kept for auditors, and
another validator's challenge rebuilt from its σ."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.core.crypto.signing import NodeIdentity
from protocol.core.errors import SignatureError
from protocol.core.proof.challenge import ChallengeError, make_challenge
from protocol.core.proof.witness import NO_WITNESS
from protocol.core.train.compute_config import ComputeConfig
from protocol.node.context import NodeContext
from tests.node_context import knows, node_context
from validator.audits import claims_of, zero_claims_of
from validator.challenges import verified_challenge
from validator.checks import kept_leaves

V1, V2 = "0x" + "11" * 20, "0x" + "22" * 20
M1, M2 = "0x" + "aa" * 20, "0x" + "bb" * 20
CFG = ComputeConfig()


def test_claims_are_the_scored_or_witnessed_miners_only():
    w = b"\x07" * 32
    reveals = {V1: {"miners": [M1, M2], "scores": [5, 0], "witnesses": [w, NO_WITNESS], "sigs": [b"a", b"b"], "served": True},
               V2: {"miners": [M1, M2], "scores": [0, 0], "witnesses": [NO_WITNESS, w], "sigs": [b"c", b"d"], "served": True}}
    claims = claims_of(3, reveals)
    assert [(c.miner, c.index, c.score) for c in claims[V1]] == [(M1, 0, 5)]
    # a witness without a score is still a claim that the check passed: audited too
    assert [(c.miner, c.index, c.witness) for c in claims[V2]] == [(M2, 1, w)]


def test_zero_claims_are_the_zeros_without_a_witness():
    """What a failed (or skipped) check reveals: audited when it counts and no report backs it."""
    w = b"\x07" * 32
    reveals = {V1: {"miners": [M1, M2], "scores": [5, 0], "witnesses": [w, NO_WITNESS], "sigs": [b"a", b"b"], "served": True},
               V2: {"miners": [M1, M2], "scores": [0, 0], "witnesses": [NO_WITNESS, w], "sigs": [b"c", b"d"], "served": True}}
    zeros = zero_claims_of(3, reveals)
    assert [(c.miner, c.index, c.score, c.sig) for c in zeros[V1]] == [(M2, 1, 0, b"b")]
    assert [(c.miner, c.index) for c in zeros[V2]] == [(M1, 0)]  # a zero with a witness passed: not one


def test_a_passed_check_keeps_the_replayed_ends_and_a_failed_one_everything():
    fetched = {0: "c0", 3: "c3", 4: "c4", 9: "c9"}
    assert kept_leaves(fetched, (3,), failed=False) == {3: "c3", 4: "c4"}  # type: ignore[arg-type]
    assert kept_leaves(fetched, (3,), failed=True) == fetched  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> NodeContext:
    """A validator's real context on a deployed devchain; each test sets the registry it reads."""
    node = node_context(Path(tmp_path_factory.mktemp("node")))
    assert node.setup.compute == CFG  # challenges below are drawn under the run's compute config
    return node


def test_a_validators_challenge_is_rebuilt_from_its_signature(ctx):
    me = NodeIdentity.generate()
    seed_block = b"\x33" * 32
    honest = make_challenge(me, 4, bytes.fromhex(M1[2:]), seed_block, CFG)
    got = verified_challenge(knows(ctx, {V1: me}), V1, 4, M1, seed_block, honest.signature)
    assert got == honest


@pytest.mark.parametrize("case", ["other-key", "other-round", "other-miner", "no-key"])
def test_a_signature_that_is_not_the_validators_challenge_is_refused(ctx, case):
    me, other = NodeIdentity.generate(), NodeIdentity.generate()
    seed_block = b"\x33" * 32
    sig = make_challenge(me, 4, bytes.fromhex(M1[2:]), seed_block, CFG).signature
    keys = {V1: other if case == "other-key" else me}
    if case == "no-key":
        keys = {}
    r = 5 if case == "other-round" else 4
    miner = M2 if case == "other-miner" else M1
    with pytest.raises(ChallengeError if case == "no-key" else SignatureError):
        verified_challenge(knows(ctx, keys), V1, r, miner, seed_block, sig)
