"""The challenge contracts: every kind of challenge rejects a root with its value wrong, lets the
right root stand (the bond is burned), and reverts on evidence that does not verify.

Chain facts and results are stand-ins (tests/contracts/harness); results are built by the core
reference (`protocol.core.settlement.result*`), tampered one value at a time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import boa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.claims_tree import (
    CLAIMS_CHUNK,
    chunk_summaries,
    claim_chunks,
    claims_root,
)
from protocol.core.settlement.result import compute_result
from protocol.core.settlement.result_inputs import PrevEntry, Reveal, RoundInputs
from protocol.core.settlement.result_tree import ColumnTree, Node, fields_hash, node_hash, parent
from protocol.core.settlement.score_vector import pack_segments
from tests.contracts.result_evidence import (
    BOND,
    WINDOW,
    ZERO,
    deploy,
    entry_at,
    finalize,
    leaf_args,
    leaf_fields,
    light_reveals_arg,
    node_arg,
    path_arg,
    post,
    publish,
    reveals_arg,
    root_arg,
    settle,
    tampered,
    with_node,
    with_sums,
)

A = [checksum_address(keccak256(b"challenge account %d" % k)[:20]) for k in range(20)]
T = 10**18
H_N, H_MINTED, H_LOSS, H_QUORUM, H_CLAIMS_ROOT, H_CLAIMS_LIST, H_ROUND = 10, 11, 12, 13, 8, 9, 4


def reveal(seed: int, n: int, loss: int) -> Reveal:
    return Reveal(tuple((seed * 7919 + i * 104729) % 60000 for i in range(n)), loss, keccak256(b"w%d" % seed))


ROUND1 = RoundInputs(
    round=1, miners=tuple(A[0:6]), validators=(A[10], A[11], A[12]), weights=(3 * T, 2 * T, T),
    reveals={A[10]: reveal(1, 6, 500_000), A[11]: reveal(2, 6, 700_000), A[12]: reveal(3, 6, 600_000)},
    forfeited=frozenset(), prev={}, emission=1000 * T, miner_share_bps=7000)


@pytest.fixture(scope="module")
def chal():
    stack = deploy()
    publish(stack, ROUND1)
    first = settle(stack, ROUND1)
    finalize(stack, first)
    stack.first = first
    return stack


def round2(chal, prev_skip: tuple[str, ...] = (), revealed=(A[10], A[11], A[13])) -> RoundInputs:
    """Round 2: miners A0-A3 (earned in round 1), A6, A7; validators A10-A13 (A12 does not reveal,
    A13 is new); miner A2 and validator A11 forfeit."""
    miners = (A[0], A[1], A[2], A[3], A[6], A[7])
    validators = (A[10], A[11], A[12], A[13])
    prev = {}
    for a in miners + validators:
        if a in prev_skip:
            continue
        i = ROUND1.miners.index(a) if a in ROUND1.miners else None
        j = ROUND1.validators.index(a) if a in ROUND1.validators else None
        if i is not None:
            prev[a] = PrevEntry(1, i, chal.first.result.reputation[i], chal.first.result.cumulative[i])
        elif j is not None:
            prev[a] = PrevEntry(1, j, 0, chal.first.result.validator_cumulative[j])
    reveals = {v: reveal(10 + k, 6, 400_000 + 50_000 * k) for k, v in enumerate(validators) if v in revealed}
    return RoundInputs(2, miners, validators, (3 * T, 2 * T, T, 2 * T), reveals, frozenset({A[2], A[11]}), prev,
                       1000 * T, 7000)


@pytest.fixture
def inputs(chal):
    inp = round2(chal)
    publish(chal, inp, model=keccak256(b"model 2"))
    return inp


def balance(chal) -> int:
    return chal.token.balanceOf(chal.challenger)


def call(chal, contract, fn: str, *args):
    with boa.env.prank(chal.challenger):
        return getattr(contract, fn)(*args)


def expect(chal, upheld: bool, contract, fn: str, *args) -> None:
    before, supply = balance(chal), chal.token.totalSupply()
    call(chal, contract, fn, *args)
    if upheld:
        assert chal.results.rejected(args[0]) == 1
        assert chal.results.reporter(args[0]) == chal.challenger
        assert balance(chal) == before
    else:
        assert chal.results.rejected(args[0]) == 0
        assert balance(chal) == before - BOND
        assert chal.token.totalSupply() == supply - BOND


# column ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("i", [0, 2, 4, 5])
def test_a_right_column_stands_and_burns_the_bond(chal, inputs, i):
    p = settle(chal, inputs)
    expect(chal, False, chal.columns, "challenge_column", *post(chal, p), *leaf_args(p, i), root_arg(p), reveals_arg(inputs, i))


@pytest.mark.parametrize("what", ["consensus", "pay", "credit", "reputation", "cumulative"])
def test_a_wrong_column_value_is_rejected(chal, inputs, what):
    p = settle(chal, inputs)
    r = p.result
    i = 4  # A6: no earlier entry, so its reputation and cumulative are checked here
    if what == "consensus":
        bad = tampered(r, consensus=r.consensus[:i] + (r.consensus[i] + 1,) + r.consensus[i + 1:])
    elif what == "pay":
        bad = tampered(r, pay=r.pay[:i] + (r.pay[i] + 1,) + r.pay[i + 1:])
    elif what == "credit":
        credits = list(r.credits)
        credits[i] = (credits[i][0] + 1,) + credits[i][1:]
        bad = tampered(r, credits=tuple(credits))
    elif what == "reputation":
        bad = tampered(r, reputation=r.reputation[:i] + (r.reputation[i] + 1,) + r.reputation[i + 1:])
    else:
        bad = tampered(r, cumulative=r.cumulative[:i] + (r.cumulative[i] + 1,) + r.cumulative[i + 1:])
    p = settle(chal, inputs, bad)
    expect(chal, True, chal.columns, "challenge_column", *post(chal, p), *leaf_args(p, i), root_arg(p), reveals_arg(inputs, i))


def test_a_column_naming_another_miner_is_rejected(chal, inputs):
    swapped = RoundInputs(2, (inputs.miners[1], inputs.miners[0]) + inputs.miners[2:], inputs.validators,
                          inputs.weights, inputs.reveals, inputs.forfeited, inputs.prev, inputs.emission,
                          inputs.miner_share_bps)
    p = settle(chal, swapped)
    expect(chal, True, chal.columns, "challenge_column", *post(chal, p), *leaf_args(p, 0), root_arg(p), reveals_arg(inputs, 0))


def test_a_first_column_with_a_prev_index_is_rejected(chal, inputs):
    p = settle(chal, inputs)
    leaf, sums, path = leaf_args(p, 4)  # A6: no earlier entry
    tree = p.tree
    body = fields_hash(4, inputs.miners[4], leaf[2], leaf[3], 0, 3)
    bad = with_node(tree, 0, 4, Node(node_hash(body, tuple(sums)), body, tuple(sums)))
    p = settle(chal, inputs, tree=bad)
    expect(chal, True, chal.columns, "challenge_column", *post(chal, p), leaf[:5] + (3,), sums, path_arg(bad, 0, 4),
           root_arg(p), reveals_arg(inputs, 4))


def test_a_column_with_a_prev_to_an_unfinal_round_is_rejected(chal, inputs):
    p = settle(chal, inputs)
    # a tree whose leaf 0 points at round 0 (never final)
    prev = dict(inputs.prev)
    prev[A[0]] = PrevEntry(0, 0, 0, 0)
    moved = RoundInputs(2, inputs.miners, inputs.validators, inputs.weights, inputs.reveals, inputs.forfeited,
                        prev, inputs.emission, inputs.miner_share_bps)
    p = settle(chal, moved)
    expect(chal, True, chal.columns, "challenge_column", *post(chal, p), *leaf_args(p, 0), root_arg(p), reveals_arg(inputs, 0))


@st.composite
def small_rounds(draw: st.DrawFn) -> RoundInputs:
    n, v = draw(st.integers(1, 8)), draw(st.integers(0, 5))
    accounts = draw(st.permutations(A))
    miners, validators = tuple(accounts[:n]), tuple(accounts[n:n + v])
    weights = tuple(draw(st.one_of(st.integers(0, 3), st.integers(0, 10**24))) for _ in validators)
    scores = st.one_of(st.sampled_from([0, 1, 65535]), st.integers(0, 65535))
    reveals = {x: Reveal(tuple(draw(st.lists(scores, min_size=n, max_size=n))), draw(st.integers(0, 10**6)),
                         keccak256(x.encode())) for x in validators if draw(st.integers(0, 3)) > 0}
    forfeited = frozenset(x for x in miners + validators if draw(st.integers(0, 4)) == 0)
    classes: tuple = ((), (), 0)
    if draw(st.booleans()):  # hardware classes: masks over 3 classes, and a class stake minimum
        classes = (tuple(draw(st.sampled_from([0, 1, 2, 4])) for _ in miners),
                   tuple(draw(st.integers(0, 7)) for _ in validators), draw(st.sampled_from([0, 1, 2, 10**20])))
    return RoundInputs(5, miners, validators, weights, reveals, forfeited, {}, draw(st.integers(0, 10**22)),
                       draw(st.integers(0, 10_000)), *classes)


def mixed_classes() -> RoundInputs:
    """Miner A1 runs class 2, which A10 and A12 hold (4T of 6T, so the class is covered); A11 and
    the other miners run class 1."""
    validators = (A[10], A[11], A[12])
    a1_scores = (40000, 10000, 20000)
    reveals = {v: Reveal((40000, a1_scores[k], 30000), 500_000, keccak256(v.encode()))
               for k, v in enumerate(validators)}
    return RoundInputs(5, (A[0], A[1], A[2]), validators, (3 * T, 2 * T, T), reveals, frozenset(), {}, 1000 * T, 7000,
                       miner_classes=(1, 2, 1), validator_classes=(1 | 2, 1, 2), min_class_weight=T)


def test_a_class_column_is_decided_by_its_holders_and_a_root_ignoring_classes_is_rejected(chal):
    inputs = mixed_classes()
    right = settle(chal, inputs)
    assert right.result.consensus[1] == 40000  # A10's 3T of the holders' 4T: A11's 10000 does not count
    blind = settle(chal, dataclasses.replace(inputs, miner_classes=(), validator_classes=(), min_class_weight=0))
    assert blind.result.consensus[1] == 20000  # everyone: 40000 has 3T of 6T, not a majority
    for posted, upheld in ((right, False), (blind, True)):
        with boa.env.anchor():
            publish(chal, inputs)
            expect(chal, upheld, chal.columns, "challenge_column", *post(chal, posted), *leaf_args(posted, 1),
                   root_arg(posted), reveals_arg(inputs, 1))


@pytest.mark.parametrize("uncovered", [
    {"min_class_weight": 5 * T},  # the holders' 4T are below the class minimum
    {"validator_classes": (1, 1, 2)},  # A12 alone holds class 2: T of 6T, below 2/3 (the fief)
])
def test_a_class_held_by_too_little_stake_is_decided_by_everyone(chal, uncovered):
    inputs = dataclasses.replace(mixed_classes(), **uncovered)
    right = settle(chal, inputs)
    assert right.result.consensus[1] == 20000
    with boa.env.anchor():
        publish(chal, inputs)
        expect(chal, False, chal.columns, "challenge_column", *post(chal, right), *leaf_args(right, 1),
               root_arg(right), reveals_arg(inputs, 1))


@pytest.fixture(scope="module")
def committee_chal():
    return deploy(committee=3)


def test_a_committee_column_is_decided_by_its_seats_and_a_root_counting_every_holder_is_rejected(committee_chal):
    """Six equal validators, committees of three seats: column 0 is decided by its committee's
    scores alone, so a result computed by stake over every holder is rejected, and the right one stands."""
    validators = tuple(A[10:16])
    scores = {v: (65_535 if k < 3 else 20_000) for k, v in enumerate(validators)}  # half say 65,535
    reveals = {v: Reveal((scores[v], 30_000), 500_000, keccak256(v.encode())) for v in validators}
    inputs = RoundInputs(5, (A[0], A[1]), validators, (T,) * 6, reveals, frozenset(), {}, 1000 * T, 7000,
                         committee_size=3, seed=keccak256(b"round 5 seed"))
    right = settle(committee_chal, inputs)
    blind = settle(committee_chal, dataclasses.replace(inputs, committee_size=0))
    assert blind.result.consensus[0] == 20_000  # by stake: 65,535 has exactly half, not a majority
    assert right.result.consensus[0] != blind.result.consensus[0] or right.result.credits[0] != blind.result.credits[0]
    seated = reveals_arg(inputs, 0)
    assert 1 <= len(seated) <= 3  # the evidence is the seat holders' reveals, not all six
    for posted, upheld in ((right, False), (blind, True)):
        with boa.env.anchor():
            publish(committee_chal, inputs)
            expect(committee_chal, upheld, committee_chal.columns, "challenge_column", *post(committee_chal, posted),
                   *leaf_args(posted, 0), root_arg(posted), seated)
    # an off-committee validator's reveal, however real, is no evidence for the column
    off = max(j for j in range(6) if j not in {r[0] for r in seated})
    message = ("challenges: a reveal whose number does not count" if off > seated[-1][0]
               else "challenges: one reveal per counted decider, in order")
    segments = pack_segments(reveals[validators[off]].scores)
    extra = sorted([*seated, (off, segments[0], [keccak256(seg) for seg in segments], reveals[validators[off]].witness_root,
                              reveals[validators[off]].heldout_loss)])
    with boa.env.anchor():
        publish(committee_chal, inputs)
        with boa.reverts(message):
            call(committee_chal, committee_chal.columns, "challenge_column", *post(committee_chal, right),
                 *leaf_args(right, 0), root_arg(right), extra)


def test_a_column_reads_a_reveal_as_revealed_whatever_its_bytes(chal):
    """A decider revealed its entries backwards, a column twice (the first counts), a column the
    round lacks and a stray byte: the column is read from those bytes as the reference reads them,
    so a right column stands; evidence re-packed from the scores does not match its vector root."""
    base = round2(chal)
    r = base.reveals[A[10]]
    (packed,) = pack_segments(r.scores)
    entries = [packed[k:k + 4] for k in range(0, len(packed), 4)]
    odd = b"".join(reversed(entries)) + entries[-1][:2] + b"\x00\x05" + bytes.fromhex("00070009") + b"\x01"
    reveals = dict(base.reveals) | {A[10]: Reveal(r.scores, r.heldout_loss, r.witness_root, (odd,))}
    inputs = replace(base, reveals=reveals)
    publish(chal, inputs, model=keccak256(b"model 2"))
    p = settle(chal, inputs)
    with boa.env.anchor():
        expect(chal, False, chal.columns, "challenge_column", *post(chal, p), *leaf_args(p, 5), root_arg(p),
               reveals_arg(inputs, 5))
    repacked = replace(inputs, reveals=base.reveals)
    with boa.reverts("challenges: reveal does not match vector root"):
        call(chal, chal.columns, "challenge_column", *post(chal, p), *leaf_args(p, 5), root_arg(p),
             reveals_arg(repacked, 5))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs=small_rounds(), data=st.data())
def test_the_column_challenge_agrees_with_the_reference(chal, inputs, data):
    i = data.draw(st.integers(0, inputs.n - 1))
    right = settle(chal, inputs)
    r = right.result
    c = r.consensus[i]
    wrong = settle(chal, inputs, tampered(r, consensus=r.consensus[:i] + (c + 1 if c < 65535 else c - 1,) + r.consensus[i + 1:]))
    for posted, upheld in ((right, False), (wrong, True)):
        with boa.env.anchor():
            publish(chal, inputs)
            expect(chal, upheld, chal.columns, "challenge_column", *post(chal, posted), *leaf_args(posted, i),
                   root_arg(posted), reveals_arg(inputs, i))


def test_column_evidence_that_does_not_verify_reverts(chal, inputs):
    p = settle(chal, inputs)
    args = post(chal, p)
    leaf, sums, path = leaf_args(p, 1)
    reveals = reveals_arg(inputs, 1)
    with boa.reverts("challenges: leaf not in tree"):
        call(chal, chal.columns, "challenge_column", *args, leaf, sums, path_arg(p.tree, 0, 2), root_arg(p), reveals)
    with boa.reverts("challenges: root preimage"):
        call(chal, chal.columns, "challenge_column", *args, leaf, sums, path, (ZERO, sums), reveals)
    first = reveals[0]
    assert len(reveals) >= 2

    def refused(message: str, evidence: list) -> None:
        with boa.reverts(message):
            call(chal, chal.columns, "challenge_column", *args, leaf, sums, path, root_arg(p), evidence)

    refused("challenges: reveal does not match vector root", [(*first[:4], first[4] + 1), *reveals[1:]])
    refused("challenges: segment does not match the reveal", [(first[0], first[1][:-2] + b"\x00\x01", *first[2:]),
                                                             *reveals[1:]])
    refused("challenges: scores length", [(*first[:2], first[2] + [ZERO], *first[3:]), *reveals[1:]])
    refused("challenges: one reveal per counted decider, in order", reveals[1:])  # a counted score left out
    refused("challenges: one reveal per counted decider, in order", reveals[::-1])
    refused("challenges: a reveal whose number does not count", [*reveals, (len(inputs.validators), *first[1:])])
    with boa.reverts("challenges: column out of range"):
        call(chal, chal.columns, "challenge_column", *args, (6,) + leaf[1:], sums, path, root_arg(p), reveals)


def test_a_challenge_outside_the_window_or_of_no_pending_attempt_reverts(chal, inputs):
    p = settle(chal, inputs)
    args = post(chal, p)
    evidence = (*leaf_args(p, 0), root_arg(p), reveals_arg(inputs, 0))
    with boa.reverts("challenges: not the pending attempt"):
        call(chal, chal.columns, "challenge_column", args[0], args[1], args[2], args[3], 2, *evidence)
    boa.env.time_travel(seconds=WINDOW)
    with boa.reverts("challenges: window closed"):
        call(chal, chal.columns, "challenge_column", *args, *evidence)
    with boa.reverts("challenges: window closed"):
        call(chal, chal.claims, "challenge_claims_root", *args, chunk_summaries(p.claims))


def test_a_challenge_without_the_bond_reverts(chal, inputs):
    p = settle(chal, inputs)
    args = post(chal, p)
    poor = boa.env.generate_address("poor")
    with boa.env.prank(poor), boa.reverts():
        chal.columns.challenge_column(*args, *leaf_args(p, 0), root_arg(p), reveals_arg(inputs, 0))


# shape and nodes ------------------------------------------------------------------------------

def test_shape_right_empty_position_stands(chal, inputs):
    p = settle(chal, inputs)  # n = 6: positions 6 and 7 are empty
    expect(chal, False, chal.trees, "challenge_shape", *post(chal, p), 0, 6, ZERO, (
        [ZERO] + path_arg(p.tree, 1, 3)[0], [ZERO] + path_arg(p.tree, 1, 3)[1]))


def test_a_missing_column_is_rejected(chal, inputs):
    short = RoundInputs(2, inputs.miners[:5], inputs.validators, inputs.weights,
                        {v: Reveal(r.scores[:5], r.heldout_loss, r.witness_root) for v, r in inputs.reveals.items()},
                        inputs.forfeited, {a: e for a, e in inputs.prev.items() if a != inputs.miners[5]},
                        inputs.emission, inputs.miner_share_bps)
    p = settle(chal, short)
    expect(chal, True, chal.trees, "challenge_shape", *post(chal, p), 0, 5, ZERO, path_arg(p.tree, 0, 5))


def test_an_extra_leaf_is_rejected(chal, inputs):
    extra = RoundInputs(2, inputs.miners + (A[8],), inputs.validators, inputs.weights,
                        {v: Reveal(r.scores + (1,), r.heldout_loss, r.witness_root) for v, r in inputs.reveals.items()},
                        inputs.forfeited, inputs.prev, inputs.emission, inputs.miner_share_bps)
    p = settle(chal, extra)
    expect(chal, True, chal.trees, "challenge_shape", *post(chal, p), 0, 6, p.tree.levels[0][6].hash, path_arg(p.tree, 0, 6))


def node_evidence(tree: ColumnTree, level: int, index: int) -> tuple:
    left, right = tree.levels[level - 1][2 * index], tree.levels[level - 1][2 * index + 1]
    body, sums = node_arg(tree, level, index)  # a challenger may know the node's sums by their hash only
    return (level, index, body, list_hash(sums), path_arg(tree, level, index),
            left.hash, (left.body, list(left.sums)), right.hash, (right.body, list(right.sums)))


@pytest.mark.parametrize("level,index", [(1, 0), (1, 2), (2, 1), (3, 0)])
def test_a_right_node_stands(chal, inputs, level, index):
    p = settle(chal, inputs)
    expect(chal, False, chal.trees, "challenge_node", *post(chal, p), *node_evidence(p.tree, level, index))


@pytest.mark.parametrize("level,index,k", [(1, 0, 1), (1, 2, 3), (2, 1, 0)])
def test_a_node_whose_sums_do_not_add_is_rejected(chal, inputs, level, index, k):
    p = settle(chal, inputs)
    sums = list(p.tree.levels[level][index].sums)
    sums[k] += 1
    bad = with_sums(p.tree, level, index, tuple(sums))
    p = settle(chal, inputs, tree=bad)
    expect(chal, True, chal.trees, "challenge_node", *post(chal, p), *node_evidence(bad, level, index))


def test_node_evidence_with_wrong_children_reverts(chal, inputs):
    p = settle(chal, inputs)
    args = post(chal, p)
    ev = list(node_evidence(p.tree, 1, 0))
    ev[5], ev[7] = ev[7], ev[5]
    with boa.reverts("challenges: children do not match node"):
        call(chal, chal.trees, "challenge_node", *args, *ev)


def test_a_misplaced_leaf_is_rejected(chal, inputs):
    # a tree whose node (1, 2) is column 4's leaf itself: columns 4 and 5 have no path
    p = settle(chal, inputs)
    levels = [list(lv) for lv in p.tree.levels]
    levels[1][2] = levels[0][4]
    levels[2][1] = parent(levels[1][2], levels[1][3])
    levels[3][0] = parent(levels[2][0], levels[2][1])
    bad = ColumnTree(tuple(tuple(lv) for lv in levels))
    p = settle(chal, inputs, tree=bad)
    leaf, sums, _ = leaf_args(settle(chal, inputs), 4)
    expect(chal, True, chal.trees, "challenge_misplaced_leaf", *post(chal, p), 1, 2, leaf, sums, path_arg(bad, 1, 2))


def test_a_leaf_at_another_position_is_rejected(chal, inputs):
    # leaf 5 holds column 4's fields: column 5 has no leaf of its own
    p = settle(chal, inputs)
    bad = with_node(p.tree, 0, 5, p.tree.levels[0][4])
    leaf, sums, _ = leaf_args(p, 4)
    p = settle(chal, inputs, tree=bad)
    expect(chal, True, chal.trees, "challenge_misplaced_leaf", *post(chal, p), 0, 5, leaf, sums, path_arg(bad, 0, 5))


def test_a_leaf_at_its_position_is_not_misplaced(chal, inputs):
    p = settle(chal, inputs)
    leaf, sums, path = leaf_args(p, 4)
    expect(chal, False, chal.trees, "challenge_misplaced_leaf", *post(chal, p), 0, 4, leaf, sums, path)


# header ---------------------------------------------------------------------------------------

def test_a_right_header_stands(chal, inputs):
    p = settle(chal, inputs)
    with boa.env.anchor():
        expect(chal, False, chal.accounts, "challenge_header", *post(chal, p), light_reveals_arg(inputs))
    expect(chal, False, chal.accounts, "challenge_minted", *post(chal, p), root_arg(p))


@pytest.mark.parametrize("k,value", [(H_N, 5), (H_LOSS, 1), (H_QUORUM, 0), (H_ROUND, 3)])
def test_a_wrong_chain_data_word_is_rejected_without_the_posted_tree(chal, inputs, k, value):
    """Signers who keep their tree to themselves still lose a root whose n, loss, quorum or
    identity is wrong: those words are recomputed from chain data alone."""
    p = settle(chal, inputs, words={k: value})
    expect(chal, True, chal.accounts, "challenge_header", *post(chal, p), light_reveals_arg(inputs))


NO_PREIMAGE = (b"\x00" * 32, [])


@pytest.mark.parametrize("minted", ["under", "over"])
def test_a_wrong_minted_is_rejected_with_the_root_preimage(chal, inputs, minted):
    """Under-stating minted would leave the rewards pool short of the claims the tree pays;
    over-stating it mints what nobody earned."""
    right = compute_result(inputs).minted
    value = right - 1 if minted == "under" else right + 1
    p = settle(chal, inputs, words={H_MINTED: value})
    with boa.env.anchor():  # the chain-data words are right: the header challenge does not see it
        expect(chal, False, chal.accounts, "challenge_header", *post(chal, p), light_reveals_arg(inputs))
    expect(chal, True, chal.accounts, "challenge_minted", *post(chal, p), root_arg(p))


def test_minted_is_disputed_only_with_the_root_preimage(chal, inputs):
    p = settle(chal, inputs)
    with boa.reverts("challenges: root preimage"):
        call(chal, chal.accounts, "challenge_minted", *post(chal, p), NO_PREIMAGE)
    assert chal.results.rejected(p.round) == 0


def test_without_quorum_the_model_must_stay(chal):
    inp = round2(chal, revealed=(A[12],))
    publish(chal, inp, model=keccak256(b"model 2"))
    p = settle(chal, inp, model=keccak256(b"model 2"))
    assert not p.result.quorum
    expect(chal, False, chal.accounts, "challenge_header", *post(chal, p), light_reveals_arg(inp))
    p = settle(chal, inp, model=keccak256(b"another model"))
    expect(chal, True, chal.accounts, "challenge_header", *post(chal, p), light_reveals_arg(inp))


# miner history --------------------------------------------------------------------------------

def prev_leaf_args(chal, i: int) -> tuple:
    first = chal.first
    return (first.header, *leaf_args(first, i))


def test_a_right_miner_history_stands(chal, inputs):
    p = settle(chal, inputs)
    expect(chal, False, chal.accounts, "challenge_miner_history", *post(chal, p), *leaf_args(p, 1), *prev_leaf_args(chal, 1))


@pytest.mark.parametrize("what", ["reputation", "cumulative"])
def test_a_wrong_miner_history_is_rejected(chal, inputs, what):
    p = settle(chal, inputs)
    r, i = p.result, 1
    if what == "reputation":
        bad = tampered(r, reputation=r.reputation[:i] + (r.reputation[i] + 1,) + r.reputation[i + 1:])
    else:
        bad = tampered(r, cumulative=r.cumulative[:i] + (r.cumulative[i] - 1,) + r.cumulative[i + 1:])
    p = settle(chal, inputs, bad)
    expect(chal, True, chal.accounts, "challenge_miner_history", *post(chal, p), *leaf_args(p, i), *prev_leaf_args(chal, i))


def test_a_prev_index_at_another_miner_is_rejected(chal, inputs):
    prev = dict(inputs.prev)
    prev[A[1]] = PrevEntry(1, 0, chal.first.result.reputation[1], chal.first.result.cumulative[1])
    moved = RoundInputs(2, inputs.miners, inputs.validators, inputs.weights, inputs.reveals, inputs.forfeited,
                        prev, inputs.emission, inputs.miner_share_bps)
    p = settle(chal, moved)
    expect(chal, True, chal.accounts, "challenge_miner_history", *post(chal, p), *leaf_args(p, 1), *prev_leaf_args(chal, 0))


def test_a_stale_miner_pointer_is_rejected(chal):
    inp = round2(chal, prev_skip=(A[3],))
    publish(chal, inp)
    p = settle(chal, inp)
    args = post(chal, p)
    expect(chal, True, chal.accounts, "challenge_miner_stale", *args, *leaf_args(p, 3), 1, chal.first.header, 3,
           *leaf_args(chal.first, 3))


def test_a_current_miner_pointer_stands(chal, inputs):
    p = settle(chal, inputs)
    expect(chal, False, chal.accounts, "challenge_miner_stale", *post(chal, p), *leaf_args(p, 3), 1, chal.first.header,
           3, *leaf_args(chal.first, 3))


def test_stale_evidence_of_another_miner_reverts(chal, inputs):
    p = settle(chal, inputs)
    with boa.reverts("challenges: another account"):
        call(chal, chal.accounts, "challenge_miner_stale", *post(chal, p), *leaf_args(p, 3), 1, chal.first.header, 2,
             *leaf_args(chal.first, 2))


# validators -----------------------------------------------------------------------------------

def test_right_validator_entries_stand(chal, inputs):
    p = settle(chal, inputs)
    for j in range(len(p.entries)):
        expect(chal, False, chal.accounts, "challenge_validators", *post(chal, p), entry_at(p, j), root_arg(p))


@pytest.mark.parametrize("what", ["credit", "account", "index", "first cumulative", "first prev_index"])
def test_a_wrong_validator_entry_is_rejected_by_itself_and_its_path(chal, inputs, what):
    p = settle(chal, inputs)
    entries = [list(e) for e in p.entries]
    j = {"credit": 0, "account": 1, "index": 2}.get(what, 3)  # A13 (entry 3) has no earlier entry
    if what == "credit":
        entries[0][2] += 1
    elif what == "account":
        entries[1][1] = A[19]
    elif what == "index":
        entries[2][0] = 1
    elif what == "first cumulative":
        entries[3][3] += 1
    else:
        entries[3][5] = 2
    p = settle(chal, inputs, entries=[tuple(e) for e in entries])
    with boa.env.anchor():  # a right entry of the same list stands
        expect(chal, False, chal.accounts, "challenge_validators", *post(chal, p), entry_at(p, j ^ 1), root_arg(p))
    expect(chal, True, chal.accounts, "challenge_validators", *post(chal, p), entry_at(p, j), root_arg(p))


def test_an_entry_must_be_proven_at_its_position_below_the_count(chal, inputs):
    p = settle(chal, inputs)
    position, fields, siblings = entry_at(p, 1)
    with boa.reverts("challenges: entry not in validators_hash"):  # entry 1's fields at position 0
        call(chal, chal.accounts, "challenge_validators", *post(chal, p), (0, fields, siblings), root_arg(p))
    with boa.reverts("challenges: entry out of range"):
        call(chal, chal.accounts, "challenge_validators", *post(chal, p), (len(p.entries), fields, siblings),
             root_arg(p))


def test_validator_history(chal, inputs):
    p = settle(chal, inputs)
    expect(chal, False, chal.accounts, "challenge_validator_history", *post(chal, p), entry_at(p, 0),
           chal.first.header, entry_at(chal.first, p.entries[0][5]))


def test_a_wrong_validator_cumulative_is_rejected(chal, inputs):
    p = settle(chal, inputs)
    entries = [list(e) for e in p.entries]
    entries[1][3] += 5
    p = settle(chal, inputs, entries=[tuple(e) for e in entries])
    expect(chal, True, chal.accounts, "challenge_validator_history", *post(chal, p), entry_at(p, 1),
           chal.first.header, entry_at(chal.first, p.entries[1][5]))


def test_a_stale_validator_pointer_is_rejected(chal):
    inp = round2(chal, prev_skip=(A[10],))
    publish(chal, inp)
    p = settle(chal, inp)
    expect(chal, True, chal.accounts, "challenge_validator_stale", *post(chal, p), entry_at(p, 0), 1,
           chal.first.header, entry_at(chal.first, 0))


def test_validator_history_evidence_must_be_the_final_entry_it_names(chal, inputs):
    p = settle(chal, inputs)
    named = p.entries[0][5]
    position, fields, siblings = entry_at(chal.first, named)
    with boa.reverts("challenges: entry not in validators_hash"):  # another's fields on its path
        call(chal, chal.accounts, "challenge_validator_history", *post(chal, p), entry_at(p, 0), chal.first.header,
             (named, entry_at(chal.first, named ^ 1)[1], siblings))
    with boa.reverts("challenges: not the entry the pointer names"):
        call(chal, chal.accounts, "challenge_validator_history", *post(chal, p), entry_at(p, 0), chal.first.header,
             entry_at(chal.first, named ^ 1))


# claims ---------------------------------------------------------------------------------------

def summaries(p) -> list[bytes]:
    return chunk_summaries(p.claims)


def chunk_of(p, c: int) -> list[bytes]:
    return claim_chunks(p.claims)[c]


def test_right_claims_stand(chal, inputs):
    p = settle(chal, inputs)
    expect(chal, False, chal.claims, "challenge_claims_root", *post(chal, p), summaries(p))
    expect(chal, False, chal.claims, "challenge_claims_chunk", *post(chal, p), summaries(p), 0, chunk_of(p, 0))


def test_a_wrong_claims_root_is_rejected(chal, inputs):
    p = settle(chal, inputs, words={H_CLAIMS_ROOT: keccak256(b"wrong")})
    expect(chal, True, chal.claims, "challenge_claims_root", *post(chal, p), summaries(p))


def test_a_claims_list_missing_a_claim_is_rejected_by_its_chunk(chal, inputs):
    p = settle(chal, inputs)
    p = settle(chal, inputs, claims=p.claims[:-1])
    expect(chal, False, chal.claims, "challenge_claims_root", *post(chal, p), summaries(p))  # its root is its chunks'
    expect(chal, True, chal.claims, "challenge_claims_chunk", *post(chal, p), summaries(p), 0, chunk_of(p, 0))


def test_claims_evidence_must_be_the_posted_chunks(chal, inputs):
    p = settle(chal, inputs)
    with boa.reverts("challenges: claims do not match claims_list_hash"):
        call(chal, chal.claims, "challenge_claims_root", *post(chal, p), summaries(p)[::-1])
    with boa.reverts("challenges: claims do not match their chunk"):
        call(chal, chal.claims, "challenge_claims_chunk", *post(chal, p), summaries(p), 0, chunk_of(p, 0)[::-1])
    with boa.reverts("challenges: no such chunk"):
        call(chal, chal.claims, "challenge_claims_chunk", *post(chal, p), summaries(p), 1, [])


def test_a_miner_claim(chal, inputs):
    p = settle(chal, inputs)
    expect(chal, False, chal.claims, "challenge_miner_claim", *post(chal, p), summaries(p), chunk_of(p, 0),
           *leaf_args(p, 2))
    claims = list(p.claims)
    claims[2] = keccak256(b"more")
    p = settle(chal, inputs, claims=claims)
    expect(chal, True, chal.claims, "challenge_miner_claim", *post(chal, p), summaries(p), chunk_of(p, 0),
           *leaf_args(p, 2))


def test_a_validator_claim(chal, inputs):
    p = settle(chal, inputs)
    expect(chal, False, chal.claims, "challenge_validator_claim", *post(chal, p), summaries(p), chunk_of(p, 0),
           entry_at(p, 3))
    claims = list(p.claims)
    claims[6 + 3] = keccak256(b"more")
    p = settle(chal, inputs, claims=claims)
    with boa.env.anchor():
        expect(chal, True, chal.claims, "challenge_validator_claim", *post(chal, p), summaries(p), chunk_of(p, 0),
               entry_at(p, 3))
    p = settle(chal, inputs, claims=claims[:6])  # no validator claims at all: claim 6 + 3 is missing
    expect(chal, True, chal.claims, "challenge_validator_claim", *post(chal, p), summaries(p), chunk_of(p, 0),
           entry_at(p, 3))


@pytest.fixture
def long_round(chal):
    """Round 3: 600 miners and 2 validators, 602 claims in two chunks (512 and 90)."""
    miners = tuple(checksum_address(keccak256(b"long miner %d" % k)[:20]) for k in range(600))
    validators = (A[10], A[11])
    reveals = {v: reveal(20 + k, 600, 500_000) for k, v in enumerate(validators)}
    inp = RoundInputs(3, miners, validators, (2 * T, T), reveals, frozenset(), {}, 1000 * T, 7000)
    publish(chal, inp, model=keccak256(b"model 3"))
    return inp


def test_a_claim_past_the_first_chunk_is_disputed_with_its_chunk_alone(chal, long_round):
    p = settle(chal, long_round)
    assert [len(c) for c in claim_chunks(p.claims)] == [CLAIMS_CHUNK, 600 + 2 - CLAIMS_CHUNK]
    expect(chal, False, chal.claims, "challenge_claims_root", *post(chal, p), summaries(p))
    expect(chal, False, chal.claims, "challenge_claims_chunk", *post(chal, p), summaries(p), 1, chunk_of(p, 1))
    expect(chal, False, chal.claims, "challenge_miner_claim", *post(chal, p), summaries(p), chunk_of(p, 1),
           *leaf_args(p, 550))
    claims = list(p.claims)
    claims[550] = keccak256(b"more")
    bad = settle(chal, long_round, claims=claims)
    with boa.env.anchor():
        expect(chal, True, chal.claims, "challenge_miner_claim", *post(chal, bad), summaries(bad), chunk_of(bad, 1),
               *leaf_args(bad, 550))
    # a list cut into other chunks (the last claim moved to a third chunk of its own) has the
    # wrong number of chunks, however its root is built
    cut = [*chunk_summaries(p.claims[:-1]), list_hash(p.claims[-1:]), p.claims[-1]]
    wrong = settle(chal, long_round, words={H_CLAIMS_LIST: list_hash(cut), H_CLAIMS_ROOT: claims_root(cut[1::2])})
    expect(chal, True, chal.claims, "challenge_claims_root", *post(chal, wrong), cut)



def test_only_the_challenge_contracts_reject(chal, inputs):
    p = settle(chal, inputs)
    post(chal, p)
    with boa.reverts("results: only challenges"):
        chal.results.reject(2, chal.challenger)
    assert leaf_fields(p, 0)[0] == 0


@pytest.mark.parametrize("name", ["ColumnChallenges", "TreeChallenges", "AccountChallenges", "ClaimsChallenges"])
def test_each_challenge_contract_fits_eip170(name):
    deployer = boa.load_partial(str(Path(__file__).resolve().parents[2] / "contracts" / f"{name}.vy"))
    # runtime code plus the six immutable words appended at deploy
    assert len(deployer.compiler_data.bytecode_runtime) + 6 * 32 < 24_576
