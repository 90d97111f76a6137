"""The aggregation tree: its shape, its root equal to the flat sum bit for bit at every fan-in,
draws nobody chooses, and partial sums served in exactly one encoding."""

from __future__ import annotations

import os
from collections import Counter

import pytest
import torch
from aggregation_cases import Case, build
from fixtures_training import MICRO
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.aggregation.exact_sum_v1 import PartialSum, leaf, merge
from protocol.core.aggregation.partial_blob import (
    DENSE_ENTRY_BYTES,
    PartialFormatError,
    decode_partial,
    encode_partial,
    is_sparse,
    partial_hash,
)
from protocol.core.aggregation.state import decode_updates
from protocol.core.aggregation.tree import depth, level_sizes, node_sums, tree_nodes
from protocol.core.aggregation.tree_servers import InputSize, node_loads, servers
from protocol.core.errors import ConfigError


def test_levels_shrink_by_the_fan_in_up_to_one_root() -> None:
    assert level_sizes(10, 4) == [10, 3, 1] and depth(10, 4) == 2
    assert level_sizes(16, 4) == [16, 4, 1]
    assert level_sizes(5, 16) == [5, 1] and depth(5, 16) == 1  # fan-in over the leaves: today's flat shape
    assert level_sizes(1, 2) == [1, 1]
    nodes = tree_nodes(10, 4)
    assert [(n.level, n.index, list(n.children)) for n in nodes] == [
        (1, 0, [0, 1, 2, 3]), (1, 1, [4, 5, 6, 7]), (1, 2, [8, 9]), (2, 0, [0, 1, 2])]
    with pytest.raises(ConfigError, match="fan-in"):
        level_sizes(10, 1)
    with pytest.raises(ConfigError, match="leaf"):
        level_sizes(0, 4)


def random_leaves(n: int, numel: int, gen: torch.Generator) -> list[PartialSum]:
    """n leaves, each selecting a random quarter of the coordinates with large signed sums."""
    out = []
    for _ in range(n):
        mask = torch.rand(numel, generator=gen) < 0.25
        steps = int(torch.randint(1, 31, (1,), generator=gen))
        sums = torch.randint(-(1 << 34), 1 << 34, (numel,), generator=gen) * mask * steps
        norm = torch.rand(1, generator=gen, dtype=torch.float64)
        out.append(PartialSum(sums, mask.to(torch.int64) * steps, norm))
    return out


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(st.integers(1, 80), st.integers(2, 9), st.integers(0, 2**31 - 1))
def test_the_root_is_the_flat_sum_at_every_fan_in(n: int, fan_in: int, seed: int) -> None:
    leaves = random_leaves(n, 64, torch.Generator().manual_seed(seed))
    sums = node_sums(leaves, fan_in)
    root = sums[(depth(n, fan_in), 0)]
    flat = merge(leaves)
    assert torch.equal(root.sums, flat.sums) and torch.equal(root.weights, flat.weights)
    assert torch.equal(root.step_norms, flat.step_norms)  # leaf order, whatever the fan-in
    assert len(sums) == len(tree_nodes(n, fan_in))


def test_real_updates_through_a_tree_give_the_flat_bits() -> None:
    case = Case(seed=5, g=6, bits=2, chunk_topk=(64, 16), momentum=0.0, nesterov=False, trim_fraction=0.0,
                clip_multiplier=1.0, magnitudes=(1e-2, 1.0, 1e-4, 1e-2, 1e-2, 1.0))
    cfg = case.cfg("exact-sum-v1")
    _, blobs = build(case)
    leaves = [leaf(u, s, 1e-3, cfg)[0] for u, s in zip(decode_updates(blobs, MICRO, cfg), (3, 6, 9, 30, 30, 12),
                                                       strict=True)]
    for fan_in in (2, 3, 6):
        root = node_sums(leaves, fan_in)[(depth(6, fan_in), 0)]
        assert encode_partial(root) == encode_partial(merge(leaves))


SIZE = InputSize(topk=192, chunk=4096)


def test_a_node_loads_what_its_inputs_hold_until_they_are_dense() -> None:
    loads = node_loads(100, 4, SIZE)  # 100 -> 25 -> 7 -> 2 -> 1
    assert loads[(1, 0)] == 4 * 192 and loads[(2, 0)] == 4 * (4 * 192)
    assert loads[(3, 0)] == 4 * (16 * 192)  # 16 leaves below each child: not yet dense
    assert loads[(4, 0)] == 4096 + 4096  # 64 and 36 leaves below its children: both dense


def test_draws_follow_stake_within_budgets_and_a_checker_is_never_its_aggregator() -> None:
    weights = [1, 3, 0, 4, 2, 2, 3]  # the largest holds 4 / 15
    drawn = servers(bytes(range(32)), 4000, 4, weights, SIZE)
    loads = node_loads(4000, 4, SIZE)
    carried: Counter[int] = Counter()
    for key, (a, c) in drawn.items():
        assert a != c and 2 not in (a, c)
        carried[a] += loads[key]
        carried[c] += loads[key]
    total, biggest = sum(loads.values()), max(loads.values())
    for v, w in enumerate(weights):  # each within its budget, and the budgets are all but full
        assert carried[v] <= -(-2 * total * w // 15) + biggest, (v, carried)
        assert carried[v] >= 0.9 * 2 * total * w / 15, (v, carried)
    assert servers(bytes(range(32)), 4000, 4, weights, SIZE) == drawn  # a function of the seed
    assert servers(bytes(32), 4000, 4, weights, SIZE) != drawn
    with pytest.raises(ConfigError, match="two validators"):
        servers(bytes(32), 10, 4, [0, 5, 0], SIZE)


def test_no_validator_serves_much_more_than_its_share_at_any_size() -> None:
    """Equal stakes, validators at 1/16 of the leaves: the busiest validator's load stays within
    its share and one node (drawing by stake alone, one of 625 took several of the dense nodes)."""
    for leaves in (100, 1024, 10_000):
        validators = leaves // 16
        loads = node_loads(leaves, 4, SIZE)
        carried: Counter[int] = Counter()
        for key, pair in servers(leaves.to_bytes(32, "big"), leaves, 4, [1] * validators, SIZE).items():
            for v in pair:
                carried[v] += loads[key]
        share = 2 * sum(loads.values()) / validators
        assert max(carried.values()) <= share + max(loads.values()), leaves


def test_a_validator_with_most_of_the_stake_serves_each_node_once_and_the_others_take_the_rest() -> None:
    drawn = servers(bytes(32), 50, 4, [10**12, 1, 1], SIZE)
    assert all(a != c for a, c in drawn.values())
    assert all(0 in pair for pair in drawn.values())  # the others' budgets run out at once
    loads = node_loads(50, 4, SIZE)
    carried: Counter[int] = Counter(v for key, pair in drawn.items() for v in pair for _ in range(loads[key]))
    assert abs(carried[1] - carried[2]) <= max(loads.values())  # the rest, least overflowing first


def test_a_partial_sum_round_trips_sparse_while_sparse_and_dense_after() -> None:
    gen = torch.Generator().manual_seed(1)
    sparse, = random_leaves(1, 1000, gen)
    dense = merge(random_leaves(8, 1000, gen))  # 1 - 0.75^8: 90 % selected
    for part, form in ((sparse, "sparse"), (dense, "dense")):
        blob = encode_partial(part)
        back = decode_partial(blob, 1000)
        assert torch.equal(back.sums, part.sums) and torch.equal(back.weights, part.weights)
        assert torch.equal(back.step_norms, part.step_norms)
        assert is_sparse(int((part.weights > 0).sum()), 1000) == (form == "sparse")
        assert partial_hash(blob) == partial_hash(encode_partial(back))
    assert len(encode_partial(dense)) >= 1000 * DENSE_ENTRY_BYTES


def _forged(tensors: dict[str, torch.Tensor], numel: int = 1000, norms: torch.Tensor | None = None) -> bytes:
    import safetensors.torch
    norms = torch.ones(1, dtype=torch.float64) if norms is None else norms
    return safetensors.torch.save({**tensors, "norms": norms}, metadata={"veritrain-partial-sum": str(numel)})


def test_a_partial_sum_in_any_other_form_is_refused() -> None:
    gen = torch.Generator().manual_seed(2)
    part, = random_leaves(1, 1000, gen)
    idx = torch.nonzero(part.weights, as_tuple=True)[0]
    with pytest.raises(PartialFormatError, match="served sparse"):  # a sparse sum sent dense: a second hash
        decode_partial(_forged({"sums": part.sums, "weights": part.weights.to(torch.int32)}), 1000)
    with pytest.raises(PartialFormatError, match="ascending"):
        decode_partial(_forged({"idx": idx.flip(0).to(torch.int32), "sums": part.sums[idx], "weights": part.weights[idx].to(torch.int32)}), 1000)
    with pytest.raises(PartialFormatError, match="selected"):
        decode_partial(_forged({"idx": idx.to(torch.int32), "sums": part.sums[idx], "weights": part.weights[idx].to(torch.int32) * 0}), 1000)
    with pytest.raises(PartialFormatError, match="coordinates"):
        decode_partial(encode_partial(part), 999)
    dense = merge(random_leaves(8, 1000, gen))
    smuggled = dense.sums.clone()
    smuggled[dense.weights == 0] = 7
    with pytest.raises(PartialFormatError, match="unselected"):
        decode_partial(_forged({"sums": smuggled, "weights": dense.weights.to(torch.int32)}), 1000)
    with pytest.raises(PartialFormatError, match="bad partial-sum blob"):
        decode_partial(os.urandom(64), 1000)
    with pytest.raises(PartialFormatError, match="sums"):
        decode_partial(_forged({"sums": dense.sums.to(torch.int32), "weights": dense.weights.to(torch.int32)}), 1000)
    with pytest.raises(PartialFormatError, match="weights"):  # int64 weights: another encoding, refused
        decode_partial(_forged({"sums": dense.sums, "weights": dense.weights}), 1000)
    right = {"sums": dense.sums, "weights": dense.weights.to(torch.int32)}
    for norms in (torch.tensor([float("nan")], dtype=torch.float64), torch.tensor([-1.0], dtype=torch.float64),
                  torch.ones(1, dtype=torch.float32), torch.zeros(0, dtype=torch.float64)):
        with pytest.raises(PartialFormatError, match="norms"):  # the clip reference cannot be poisoned
            decode_partial(_forged(right, norms=norms), 1000)


def test_the_aggregation_root_binds_each_node_to_its_place_and_proves_one_with_log_n_siblings() -> None:
    from protocol.core.aggregation.tree import NO_TREE, aggregation_root, node_leaf
    from protocol.core.settlement.claims_tree import claim_proof, hash_pair

    hashes = {(n.level, n.index): bytes([i + 1]) * 32 for i, n in enumerate(tree_nodes(10, 4))}
    root = aggregation_root(hashes)
    assert aggregation_root({}) == NO_TREE and root != NO_TREE
    swapped = dict(hashes)
    swapped[(1, 0)], swapped[(1, 1)] = hashes[(1, 1)], hashes[(1, 0)]
    assert aggregation_root(swapped) != root  # a hash moved to another node is another root
    leaves = [node_leaf(level, index, h) for (level, index), h in hashes.items()]
    acc = leaves[2]
    for sibling in claim_proof(leaves, 2):  # OpenZeppelin MerkleProof: sorted pairs
        acc = hash_pair(acc, sibling)
    assert acc == root
