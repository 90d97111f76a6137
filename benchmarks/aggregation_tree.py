"""The aggregation tree's figures for `network-scale` (issue 31): per miner count, the bytes each
role downloads per round to form θ_{r+1} with every verified update counted, the tree's depth,
and whether its root equals the flat sum and the numpy reference bit for bit.

Bytes: the leaves are the round's updates at their blob cap (an envelope: trace and compressed
update); a node of level L >= 2 downloads its children's partial sums, each selecting
1 - (1 - topk/chunk)^leaves of the coordinates (independent top-k sets: an upper bound, real text
overlaps more) and served sparse while that is smaller (`partial_blob.partial_bytes`). Who
aggregates and who rechecks each node is the real draw (`tree_servers.servers`,
equal stakes, validators at 1/16 of the miners); a validator's tree bytes are the inputs of the
nodes it computes or rechecks, the expected inputs of its ⌈A · N / V⌉ audited nodes (A =
`tree_audits`, N nodes: the mean node's inputs each), plus θ_{r+1}. Flat: every validator
downloads every update.
"""

from __future__ import annotations

import statistics

import numpy as np
import torch

from protocol.config.run_config import ChainParams
from protocol.core.aggregation.exact_sum_reference import reference_leaf
from protocol.core.aggregation.exact_sum_v1 import leaf, merge
from protocol.core.aggregation.partial_blob import partial_bytes
from protocol.core.aggregation.reference import DecodedUpdate, densify
from protocol.core.aggregation.tree import depth, level_sizes, node_sums, tree_nodes
from protocol.core.aggregation.tree_servers import InputSize, servers
from protocol.core.model.config import layout_size, preset
from protocol.core.train.compress import compress, unpack_codes
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.wire.blob_caps import blob_caps

PARTIAL_HEADER_BYTES = 200  # safetensors header of a partial sum, about
EQUALITY_NUMEL = 4096  # coordinates of the updates the equality check sums (one chunk)


def leaves_under(leaves: int, fan_in: int) -> list[list[int]]:
    """Per level (leaves first), the leaf count under each node."""
    out = [[1] * leaves]
    for size in level_sizes(leaves, fan_in)[1:]:
        below = out[-1]
        out.append([sum(below[i * fan_in : (i + 1) * fan_in]) for i in range(size)])
    return out


def partial_size(leaves: int, numel: int, cfg: ComputeConfig) -> int:
    selected = round(numel * (1 - (1 - cfg.topk / cfg.chunk) ** leaves))
    return partial_bytes(selected, numel) + 8 * leaves + PARTIAL_HEADER_BYTES  # and a norm per leaf


def node_inputs(miners: int, fan_in: int, name: str, cfg: ComputeConfig) -> dict[tuple[int, int], int]:
    """The bytes each inner node's aggregator (and checker) downloads: its children."""
    numel, update = layout_size(preset(name)), blob_caps(preset(name), cfg).update
    under = leaves_under(miners, fan_in)
    out = {}
    for node in tree_nodes(miners, fan_in):
        out[(node.level, node.index)] = sum(update if node.level == 1 else partial_size(under[node.level - 1][c], numel, cfg)
                                            for c in node.children)
    return out


def role_bytes(miners: int, validators: int, fan_in: int, name: str, cfg: ComputeConfig) -> dict[str, int]:
    """Per role, bytes downloaded per round to form θ_{r+1}: a miner (θ_{r+1}), the median and the
    busiest validator (its tree nodes' inputs and θ_{r+1}), the largest node's aggregator, and a
    validator of the flat shape (every update)."""
    caps = blob_caps(preset(name), cfg)
    inputs = node_inputs(miners, fan_in, name, cfg)
    weights, seed = [1] * validators, miners.to_bytes(32, "big")
    audited = -(-ChainParams().tree_audits * len(inputs) // validators) * statistics.fmean(inputs.values())
    per_validator = [caps.state + round(audited)] * validators
    for key, pair in servers(seed, miners, fan_in, weights, InputSize(cfg.topk, cfg.chunk)).items():
        for v in pair:
            per_validator[v] += inputs[key]
    return {"miner": caps.state, "validator_tree_median": round(statistics.median(per_validator)),
            "validator_tree_most": max(per_validator), "aggregator_most": max(inputs.values()),
            "validator_flat": miners * caps.update + caps.state}


def tree_equals_flat(miners: int, fan_in: int, seed: int = 0) -> bool:
    """Whether the tree's root over `miners` real compressed updates equals their flat sum and the
    numpy reference's, bit for bit (updates of EQUALITY_NUMEL coordinates, steps 3 to 30)."""
    cfg = ComputeConfig(aggregation="exact-sum-v1", chunk=EQUALITY_NUMEL, topk=192)
    gen = torch.Generator().manual_seed(seed)
    leaves, ref_sums, ref_weights = [], np.zeros(EQUALITY_NUMEL, np.int64), np.zeros(EQUALITY_NUMEL, np.int64)
    for _ in range(miners):
        update = compress(torch.randn(EQUALITY_NUMEL, generator=gen) * 1e-2, cfg.chunk, cfg.topk, cfg.bits)
        steps = 3 * int(torch.randint(1, 11, (1,), generator=gen))
        leaves.append(leaf(update, steps, 1e-4, cfg)[0])
        decoded = DecodedUpdate(update.idx.numpy(), unpack_codes(update).numpy(), update.scale.numpy())
        part = reference_leaf(*densify(decoded, EQUALITY_NUMEL, cfg.chunk, cfg.bits), steps, 1e-4, cfg)
        ref_sums += part[0]
        ref_weights += part[1]
    root = node_sums(leaves, fan_in)[(depth(miners, fan_in), 0)]
    flat = merge(leaves)
    return (torch.equal(root.sums, flat.sums) and torch.equal(root.weights, flat.weights)
            and np.array_equal(root.sums.numpy(), ref_sums) and np.array_equal(root.weights.numpy(), ref_weights))

