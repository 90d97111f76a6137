"""result_math (the challenge contracts' arithmetic) against the Python reference of the result.

One harness contract exposes the module's internal functions as views; Hypothesis draws small
rounds (<= 12 columns, <= 8 validators, ties, zero weights, unrevealed and forfeiting accounts,
committees of 0 to 5 seats)
and every value the contract recomputes must equal `protocol.core.settlement.result` / `result_tree` /
`claims_tree` byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import boa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.claims_tree import (
    CLAIMS_CHUNK,
    chunk_summaries,
    claim_leaf,
    claims_list_hash,
    claims_root,
)
from protocol.core.settlement.class_checks import class_checkers
from protocol.core.settlement.entries_tree import (
    entry_hash,
    entry_path,
    validator_entries,
    validators_hash,
)
from protocol.core.settlement.result import (
    compute_result,
    has_quorum,
    lower_median,
    weighted_median,
)
from protocol.core.settlement.result_header import round_claim_leaves
from protocol.core.settlement.result_inputs import MAX_VALIDATORS, PrevEntry, Reveal, RoundInputs
from protocol.core.settlement.result_tree import (
    ColumnTree,
    fields_hash,
    node_hash,
    tree_depth,
)
from protocol.core.settlement.score_vector import (
    SEGMENT_COLUMNS,
    named_scores,
    pack_segments,
    unpack_segments,
)

HARNESS = Path(__file__).resolve().parent / "harness" / "ResultMathHarness.vy"
ACCOUNTS = [checksum_address(keccak256(b"account %d" % k)[:20]) for k in range(40)]

# few distinct values make ties, equal supports and zero columns common
scores_st = st.one_of(st.sampled_from([0, 1, 2, 500, 65534, 65535]), st.integers(0, 65535))
weights_st = st.one_of(st.integers(0, 3), st.integers(0, 10**24))
losses_st = st.one_of(st.integers(0, 3), st.integers(0, 10**7))


@pytest.fixture(scope="module")
def harness():
    return boa.load(str(HARNESS))


@st.composite
def round_inputs(draw: st.DrawFn) -> RoundInputs:
    n = draw(st.integers(1, 12))
    v = draw(st.integers(0, 8))
    accounts = draw(st.permutations(ACCOUNTS))
    miners, validators = tuple(accounts[:n]), tuple(accounts[n:n + v])
    weights = tuple(draw(st.lists(weights_st, min_size=v, max_size=v)))
    revealed = [x for x in validators if draw(st.integers(0, 3)) > 0]  # most reveal: quorum is common
    reveals = {x: Reveal(tuple(draw(st.lists(scores_st, min_size=n, max_size=n))), draw(losses_st),
                         draw(st.binary(min_size=32, max_size=32))) for x in revealed}
    forfeited = frozenset(x for x in miners + validators if draw(st.integers(0, 5)) == 0)
    rnd = draw(st.integers(0, 20))
    prev = {x: PrevEntry(draw(st.integers(0, rnd - 1)), draw(st.integers(0, 1023)), draw(st.integers(0, 65535)),
                         draw(weights_st))
            for x in miners + validators if rnd > 0 and draw(st.booleans())}
    emission = draw(st.integers(0, 1000) if draw(st.integers(0, 3)) == 0 else st.integers(10**18, 10**24))
    share = draw(st.one_of(st.sampled_from([0, 5000, 10000]), st.integers(0, 10000)))
    classes: tuple[tuple[int, ...], tuple[int, ...], int] = ((), (), 0)
    if draw(st.booleans()):  # hardware classes over 3 classes (0 = never set: class 0)
        classes = (tuple(draw(st.lists(st.sampled_from([0, 1, 2, 4]), min_size=n, max_size=n))),
                   tuple(draw(st.lists(st.integers(0, 7), min_size=v, max_size=v))),
                   draw(st.one_of(st.just(0), weights_st)))
    committee = {"committee_size": draw(st.sampled_from([0, 0, 1, 2, 3, 5])), "seed": draw(st.binary(min_size=32, max_size=32))}
    return RoundInputs(rnd, miners, validators, weights, reveals, forfeited, prev, emission, share, *classes, **committee)


def checker_bits(inputs: RoundInputs, column: int) -> list[bool]:
    """Staking.class_checkers of the column's miner over the round's validators."""
    miner = inputs.miner_classes[column] if inputs.miner_classes else 0
    masks = inputs.validator_classes or (0,) * len(inputs.validators)
    return list(class_checkers(miner, masks))


def word(address: str) -> int:
    return int(address, 16)


@settings(max_examples=500, deadline=None)
@given(inputs=round_inputs(), data=st.data())
def test_columns_tree_and_claims_match_the_reference(harness, inputs, data):
    result = compute_result(inputs)
    tree = ColumnTree.build(inputs, result)
    revealed = [v in inputs.reveals for v in inputs.validators]
    matrix = [[inputs.reveals[v].scores[i] if v in inputs.reveals else 0 for v in inputs.validators]
              for i in range(inputs.n)]
    quorum = has_quorum(sum(w for w, r in zip(inputs.weights, revealed, strict=True) if r), sum(inputs.weights))
    assert quorum == result.quorum
    sums = harness.columns(
        matrix, list(inputs.weights), revealed, [v in inputs.forfeited for v in inputs.validators],
        [checker_bits(inputs, i) for i in range(inputs.n)], inputs.min_class_weight, quorum,
        [m in inputs.forfeited for m in inputs.miners], sum(result.consensus), inputs.miner_pool,
        inputs.validator_pool, inputs.committee_size, inputs.seed, list(inputs.miners))
    assert [list(s) for s in sums] == [list(leaf.sums) for leaf in tree.levels[0][:inputs.n]]

    # one column's median, leaf hash and inclusion path
    i = data.draw(st.integers(0, inputs.n - 1))
    column = [s for s, r in zip(matrix[i], revealed, strict=True) if r]
    column_weights = [w for w, r in zip(inputs.weights, revealed, strict=True) if r]
    assert harness.weighted_median(column, column_weights, sum(column_weights)) == weighted_median(column, column_weights)
    prev, prev_index = inputs.prev_pointer(inputs.miners[i])
    fields = (i, word(inputs.miners[i]), result.reputation[i], result.cumulative[i], prev, prev_index)
    body = harness.column_fields_hash(*fields)
    assert body == fields_hash(i, inputs.miners[i], *fields[2:])
    leaf = tree.levels[0][i]
    assert harness.node_hash(body, list(leaf.sums)) == leaf.hash == node_hash(body, leaf.sums)
    path = tree.inclusion_path(0, i)
    assert harness.depth(inputs.n) == tree_depth(inputs.n) == tree.depth
    assert harness.verify_path(leaf.hash, 0, i, [s for s, _ in path], [h for _, h in path], tree.depth, tree.tree_root())
    assert harness.list_hash(list(leaf.sums)) == list_hash(leaf.sums)

    # held-out loss, validator entries, claims
    losses = [inputs.reveals[v].heldout_loss for v in inputs.validators if v in inputs.reveals]
    assert lower_median(losses) == result.heldout_loss
    assert harness.is_lower_median(result.heldout_loss, losses)
    if inputs.validators:
        j = data.draw(st.integers(0, len(inputs.validators) - 1))
        v = inputs.validators[j]
        prev, prev_index = inputs.prev_pointer(v)
        entry = (j, word(v), result.validator_credit[j], result.validator_cumulative[j], prev, prev_index)
        assert harness.entry_hash(*entry) == entry_hash(j, v, *entry[2:])
        entries = validator_entries(inputs, result)
        root = validators_hash(entries)
        assert harness.entries_root(list(entries)) == root
        path = entry_path(entries, j)
        assert harness.verify_entry(entries[j], j, path, len(entries), root)
        assert not harness.verify_entry(entries[j], j, path, j, root)  # past the count
        if j ^ 1 < len(entries):  # the sibling's position: the path pairs the other way
            assert not harness.verify_entry(entries[j], j ^ 1, path, len(entries), root)
    leaves = list(round_claim_leaves(inputs, result))
    assert harness.claims_root(leaves) == claims_root(leaves)
    assert harness.list_hash32(chunk_summaries(leaves)) == claims_list_hash(leaves)
    assert harness.claim_leaf(word(inputs.miners[i]), result.cumulative[i]) == claim_leaf(inputs.miners[i], result.cumulative[i])


def test_a_full_round_of_validators_decides_an_uncovered_class_by_everyone(harness):
    """At MAX_VALIDATORS validators a column whose class too little stake holds is decided by
    every validator (one flag each; a one-word bit set overflowed at 256 and reverted, so no
    such column could be challenged)."""
    v = MAX_VALIDATORS
    holders = [j == v - 1 for j in range(v)]  # one validator of 256 holds the class: not covered
    assert harness.column_checkers([1] * v, holders, 0) == [True] * v
    covering = [j >= v // 4 for j in range(v)]  # three quarters hold it: covered
    assert harness.column_checkers([1] * v, covering, 0) == covering


@settings(max_examples=200, deadline=None)
@given(st.lists(losses_st, max_size=40), losses_st)
def test_only_the_lower_median_passes_the_median_check(harness, losses, m):
    right = lower_median(losses)
    assert harness.is_lower_median(right, losses)
    assert harness.is_lower_median(m, losses) == (m == right)
    assert harness.is_lower_median(right, sorted(losses, reverse=True))  # order is irrelevant


@settings(max_examples=100, deadline=None)
@given(leaves=st.lists(st.binary(min_size=32, max_size=32), min_size=0, max_size=40))
def test_claims_root_of_any_leaf_count(harness, leaves):
    assert harness.claims_root(leaves) == claims_root(leaves)


def test_claims_root_of_a_full_chunk(harness):
    leaves = [keccak256(b"%d" % k) for k in range(CLAIMS_CHUNK)]
    assert harness.claims_root(leaves) == claims_root(leaves)


def test_a_path_rejects_a_wrong_position_length_or_root(harness):
    inputs = RoundInputs(1, tuple(ACCOUNTS[:5]), tuple(ACCOUNTS[5:7]), (1, 2), {}, frozenset(), {}, 1000, 5000)
    result = compute_result(inputs)
    tree = ColumnTree.build(inputs, result)
    leaf = tree.levels[0][3]
    path = tree.inclusion_path(0, 3)
    siblings, sums_hashes = [s for s, _ in path], [h for _, h in path]
    assert harness.verify_path(leaf.hash, 0, 3, siblings, sums_hashes, 3, tree.tree_root())
    assert not harness.verify_path(leaf.hash, 0, 2, siblings, sums_hashes, 3, tree.tree_root())
    assert not harness.verify_path(leaf.hash, 0, 3 + 8, siblings, sums_hashes, 3, tree.tree_root())
    assert not harness.verify_path(leaf.hash, 0, 3, siblings[:-1], sums_hashes[:-1], 3, tree.tree_root())
    assert not harness.verify_path(leaf.hash, 0, 3, siblings, sums_hashes, 3, keccak256(b"other"))
    # an empty leaf (position 6) with an empty sibling (7): its empty parent hashes on up
    parent_path = tree.inclusion_path(1, 3)
    assert harness.verify_path(b"\x00" * 32, 0, 6, [b"\x00" * 32] + [s for s, _ in parent_path],
                               [b"\x00" * 32] + [h for _, h in parent_path], 3, tree.tree_root())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1100), st.integers(0, 65535)), max_size=40), st.binary(max_size=3))
def test_a_segment_scores_a_column_as_the_reference_whatever_its_bytes(harness, entries, tail):
    """Any revealed bytes: unsorted, repeated, zero or foreign columns, a partial last entry."""
    segment = b"".join(c.to_bytes(2, "big") + s.to_bytes(2, "big") for c, s in entries) + tail
    for column in {c for c, _ in entries} | {0, 1023}:
        assert harness.segment_score(segment, column) == named_scores(segment).get(column, 0)
    first = {}
    for c, s in entries:
        first.setdefault(c, s)
    assert unpack_segments([segment], 1024) == tuple(first.get(c, 0) for c in range(1024))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3000).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(0, 65535), min_size=n, max_size=n))))
def test_a_packed_vector_unpacks_to_itself(harness, case):
    columns, dense = case
    dense = [s if s % 3 else 0 for s in dense]  # a third of the columns unscored
    segments = pack_segments(dense)
    assert len(segments) == -(-columns // SEGMENT_COLUMNS) and unpack_segments(segments, columns) == tuple(dense)
    assert sum(len(seg) for seg in segments) == 4 * sum(1 for s in dense if s)  # sparse: nonzero scores only
    for column in {0, columns // 2, columns - 1} if columns else set():
        assert harness.segment_score(segments[column // SEGMENT_COLUMNS], column) == dense[column]
