"""Per-stage aggregation (PROTOCOL.md §16.8): each stage's next slice from its own miners'
updates alone, by the run's rule. With exact-sum-v1, no norm clip and stage boundaries on chunk
boundaries it gives the whole model's bits for the concatenated updates; a stage's slice and hash
do not move with another stage's updates; the order of the pipelines does not matter."""

from __future__ import annotations

import torch

from protocol.core.aggregation.state import aggregate, genesis_state
from protocol.core.crypto.hashing import content_hash
from protocol.core.model.config import preset
from protocol.core.model.gpt import param_shapes
from protocol.core.pipeline.stage_split import split_model
from protocol.core.pipeline.staged_aggregate import staged_next
from protocol.core.pipeline.staged_bundle import encode_parts, encoded_model
from protocol.core.pipeline.staged_state import (
    encode_stage,
    encoded_stages,
    join_stages,
    stage_part,
)
from protocol.core.train.compress import compress, encode_update
from protocol.core.train.compute_config import ComputeConfig

MODEL = preset("micro")
SPLIT = split_model(MODEL, 2)
CFG = ComputeConfig(chunk=160, topk=8, bits=2)  # 160 divides both stages' sizes (21,920 and 20,960)
STEPS = [30, 12, 21]  # three pipelines' verified steps


def _deltas() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(4)
    n = sum(SPLIT.sizes(MODEL))
    return [torch.randn(n, generator=gen) * 1e-3 for _ in STEPS]


def _blob(x: torch.Tensor) -> bytes:
    return encode_update(compress(x, CFG.chunk, CFG.topk, CFG.bits))


def _staged_blobs(deltas: list[torch.Tensor]) -> list[list[bytes]]:
    cut = SPLIT.sizes(MODEL)[0]
    return [[_blob(d[:cut]) for d in deltas], [_blob(d[cut:]) for d in deltas]]


def test_staged_aggregation_gives_the_whole_models_bits_when_nothing_couples_the_stages():
    assert list(param_shapes(MODEL)) == [*SPLIT.names[0], *SPLIT.names[1]]  # stage 0's values come first
    state, deltas = genesis_state(MODEL, CFG, seed=1), _deltas()
    whole = aggregate(state, [_blob(d) for d in deltas], MODEL, CFG, STEPS)
    parts = staged_next([stage_part(state, MODEL, SPLIT, s) for s in range(2)], _staged_blobs(deltas),
                        [STEPS, STEPS], MODEL, CFG)
    joined = join_stages(parts, MODEL, SPLIT)
    assert all(torch.equal(joined.params[k], whole.params[k]) for k in whole.params)
    assert any(not torch.equal(whole.params[k], state.params[k]) for k in state.params)  # it moved
    # each stage keeps its own norm per step; the model hash is the root over the new slices
    assert encode_parts(parts, MODEL, SPLIT)[1] != encoded_model(state, MODEL, SPLIT)[1]


def test_a_stage_moves_only_with_its_own_updates_and_the_pipeline_order_does_not_matter():
    state, deltas = genesis_state(MODEL, CFG, seed=1), _deltas()
    start = [stage_part(state, MODEL, SPLIT, s) for s in range(2)]
    blobs = _staged_blobs(deltas)
    only_first = staged_next(start, [blobs[0], []], [STEPS, []], MODEL, CFG)
    before = [h for _, h in encoded_stages(state, MODEL, SPLIT)]
    after = [content_hash(encode_stage(part, MODEL, SPLIT, s)) for s, part in enumerate(only_first)]
    assert after[1] == before[1] and after[0] != before[0]  # stage 1's blob and hash unchanged
    order = [2, 0, 1]
    shuffled = staged_next(start, [[b[i] for i in order] for b in blobs], [[STEPS[i] for i in order]] * 2, MODEL, CFG)
    straight = staged_next(start, blobs, [STEPS, STEPS], MODEL, CFG)
    assert encode_parts(shuffled, MODEL, SPLIT) == encode_parts(straight, MODEL, SPLIT)
