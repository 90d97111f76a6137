"""A staged run's state (PROTOCOL.md §16.2): one blob per stage, fetched and checked alone, the
model hash the Merkle root over the stage hashes; without stages the hash is today's."""

from __future__ import annotations

import pytest
import torch

from protocol.core.aggregation.state import (
    GlobalState,
    StateFormatError,
    encode_state,
    genesis_state,
    global_state_hash,
)
from protocol.core.crypto.hashing import merkle_root
from protocol.core.model.config import preset
from protocol.core.pipeline.stage_split import split_model
from protocol.core.pipeline.staged_state import (
    check_stage_hashes,
    decode_stage,
    encoded_stages,
    join_stages,
    model_hash,
    stage_part,
)
from protocol.core.train.compute_config import ComputeConfig

MODEL = preset("micro")


def _state(momentum: bool) -> GlobalState:
    cfg = ComputeConfig(outer_momentum=0.9 if momentum else 0.0, nesterov=momentum)
    s = genesis_state(MODEL, cfg, seed=3)
    if momentum:  # distinct values, so a momentum slice put back in the wrong place shows
        s = GlobalState(s.params, torch.arange(s.momentum.numel(), dtype=torch.float32), 0.25)
    return s


def test_without_stages_the_model_hash_is_the_whole_states():
    s = _state(False)
    assert model_hash(s, MODEL, None) == global_state_hash(s, MODEL)


@pytest.mark.parametrize("momentum", [False, True])
def test_each_stage_decodes_alone_and_the_stages_rejoin_the_whole_state(momentum):
    s, split = _state(momentum), split_model(MODEL, 2)
    stages = encoded_stages(s, MODEL, split)
    root = model_hash(s, MODEL, split)
    assert root == merkle_root([h for _, h in stages]) != global_state_hash(s, MODEL)
    check_stage_hashes(root, [h for _, h in stages], split)
    parts = [decode_stage(blob, MODEL, split, i, h) for i, (blob, h) in enumerate(stages)]
    for i, part in enumerate(parts):
        assert set(part.params) == set(split.names[i])
        assert len(stages[i][0]) < len(encode_state(s, MODEL))  # a stage miner fetches only its slice
    whole = join_stages(parts, MODEL, split)
    assert list(whole.params) == list(s.params)
    assert all(torch.equal(whole.params[k], s.params[k]) for k in s.params)
    assert (whole.momentum is None) == (s.momentum is None)
    if momentum:
        assert torch.equal(whole.momentum, s.momentum) and whole.step_norm == 0.25
        assert torch.equal(stage_part(s, MODEL, split, 1).momentum, parts[1].momentum)


def test_a_stage_blob_is_refused_for_another_stage_tampered_or_under_another_root():
    s, split = _state(False), split_model(MODEL, 2)
    (blob0, h0), (blob1, h1) = encoded_stages(s, MODEL, split)
    with pytest.raises(StateFormatError, match="another model configuration or stage"):
        decode_stage(blob1, MODEL, split, 0, h1)  # stage 1's bytes offered as stage 0
    tampered = bytearray(blob0)
    tampered[-1] ^= 1
    with pytest.raises(StateFormatError, match="does not hash"):
        decode_stage(bytes(tampered), MODEL, split, 0, h0)
    with pytest.raises(StateFormatError, match="not the 2 stages"):
        check_stage_hashes(model_hash(s, MODEL, split), [h1, h0], split)  # the order is part of the root
    with pytest.raises(StateFormatError, match="not the 2 stages"):
        check_stage_hashes(model_hash(s, MODEL, split), [h0], split)
