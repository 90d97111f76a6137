"""A staged run's state (PROTOCOL.md §16.2): one blob per stage, fetched and checked alone, the
model hash the hash of the stage index that names them; without stages the hash is today's."""

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
from protocol.core.crypto.hashing import content_hash
from protocol.core.model.config import preset
from protocol.core.pipeline.stage_split import split_model
from protocol.core.pipeline.staged_bundle import encoded_model
from protocol.core.pipeline.staged_state import (
    decode_stage,
    encoded_stages,
    join_stages,
    read_stage_index,
    stage_index,
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
    assert encoded_model(s, MODEL, None)[1] == global_state_hash(s, MODEL)


@pytest.mark.parametrize("momentum", [False, True])
def test_each_stage_decodes_alone_and_the_stages_rejoin_the_whole_state(momentum):
    s, split = _state(momentum), split_model(MODEL, 2)
    stages = encoded_stages(s, MODEL, split)
    index = stage_index([h for _, h in stages])
    assert encoded_model(s, MODEL, split)[1] == content_hash(index) != global_state_hash(s, MODEL)
    assert len(index) == 8 + 32 * 2  # what a stage miner fetches besides its own stage
    assert read_stage_index(index, split) == [h for _, h in stages]
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
    assert content_hash(stage_index([h1, h0])) != encoded_model(s, MODEL, split)[1]  # the order is part of the hash
    with pytest.raises(StateFormatError, match="not a stage index of 2 stages"):
        read_stage_index(stage_index([h0]), split)
    with pytest.raises(StateFormatError, match="not a stage index of 2 stages"):
        read_stage_index(b"X" + stage_index([h0, h1])[1:], split)
    with pytest.raises(StateFormatError, match="not a stage index of 2 stages"):
        read_stage_index(blob0, split)  # a stage's own bytes are no index
