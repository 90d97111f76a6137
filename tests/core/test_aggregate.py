from __future__ import annotations

import dataclasses
import itertools
import os
import subprocess
import sys

import pytest
import torch
from fixtures_training import MICRO, SMALL_CFG

from protocol.core.aggregation.state import (
    GlobalState,
    StateFormatError,
    aggregate,
    clip_updates,
    decode_state,
    encoded_state,
    genesis_state,
    global_state_hash,
    outer_step,
    sparse_trimmed_mean,
)
from protocol.core.crypto.hashing import content_hash
from protocol.core.model.gpt import flatten, num_params
from protocol.core.train.compress import compress, decompress, encode_update, scatter_chunks


def test_trimmed_mean_only_over_selecting_updates() -> None:
    dense = torch.tensor([[1.0, 0.0, 5.0, 0.0],
                          [3.0, 2.0, 100.0, 0.0],
                          [2.0, 0.0, 6.0, 0.0],
                          [4.0, 0.0, 7.0, 0.0],
                          [0.0, 0.0, -50.0, 0.0]])  # (G=5, N=4)
    mask = dense != 0
    out = sparse_trimmed_mean(dense, mask, 0.2)
    # col 0: 4 values, trim floor(0.8)=0 -> mean 2.5; col 1: only one update selected it -> 2.0
    # col 2: 5 values, trim 1 each end -> mean(5, 6, 7) = 6; col 3: nobody -> 0
    assert out.tolist() == [2.5, 2.0, 6.0, 0.0]


def test_clip_caps_to_median_norm() -> None:
    dense = torch.tensor([[3.0, 4.0], [0.0, 1.0], [0.0, 100.0]])  # norms 5, 1, 100
    out = clip_updates(dense, 1.0)
    norms = torch.linalg.vector_norm(out, dim=1)
    assert torch.allclose(norms, torch.tensor([5.0, 1.0, 5.0]))


def _blobs(g: int) -> list[bytes]:
    n = num_params(MICRO)
    gen = torch.Generator().manual_seed(4)
    return [encode_update(compress(torch.randn(n, generator=gen) * 0.01, SMALL_CFG.chunk, SMALL_CFG.topk, SMALL_CFG.bits))
            for _ in range(g)]


def test_aggregate_is_deterministic_and_order_free() -> None:
    state = genesis_state(MICRO, SMALL_CFG)
    blobs = _blobs(3)
    hashes = {global_state_hash(aggregate(state, list(p), MICRO, SMALL_CFG), MICRO)
              for p in itertools.permutations(blobs)}
    assert len(hashes) == 1
    assert global_state_hash(state, MICRO) not in hashes
    assert aggregate(state, [], MICRO, SMALL_CFG) is state


@pytest.mark.parametrize("rule", ["float32-v1", "exact-v1"])
def test_single_update_plain_sgd_applies_it(rule: str) -> None:
    cfg = dataclasses.replace(SMALL_CFG, aggregation=rule)
    state = genesis_state(MICRO, cfg)
    blob = _blobs(1)[0]
    from protocol.core.aggregation.exact_v1 import exact_values
    from protocol.core.train.compress import decode_update, expected_header

    c = decode_update(blob, expected_header(num_params(MICRO), cfg.chunk, cfg.topk, cfg.bits))
    nxt = aggregate(state, [blob], MICRO, cfg)
    if rule == "float32-v1":  # float32 throughout
        assert torch.equal(flatten(nxt.params), flatten(state.params) - decompress(c))
    else:  # float64 throughout, one rounding at the end
        delta = scatter_chunks(c, exact_values(c))[0]  # (N,) float64
        assert torch.equal(flatten(nxt.params), (flatten(state.params).double() - delta).float())
    assert nxt.momentum is None


def test_nesterov_and_momentum_in_state_hash() -> None:
    cfg = dataclasses.replace(SMALL_CFG, outer_lr=0.7, outer_momentum=0.9, nesterov=True)
    state = genesis_state(MICRO, cfg)
    assert state.momentum is not None and not state.momentum.any()
    d = torch.full((num_params(MICRO),), 0.01)
    s1 = outer_step(state, d, cfg)
    assert s1.momentum is not None and torch.allclose(s1.momentum, d)
    expected = flatten(state.params) - 0.7 * (d + 0.9 * d)
    assert torch.allclose(flatten(s1.params), expected)
    other = GlobalState(s1.params, s1.momentum * 2)
    assert global_state_hash(other, MICRO) != global_state_hash(s1, MICRO)


def test_state_codec_checks_hash() -> None:
    cfg = dataclasses.replace(SMALL_CFG, outer_momentum=0.9)
    s = genesis_state(MICRO, cfg)
    blob, h = encoded_state(s, MICRO)
    assert h == content_hash(blob)  # content-addressed: peers serve the state by its model hash
    back = decode_state(blob, MICRO, h)
    assert global_state_hash(back, MICRO) == h
    with pytest.raises(StateFormatError):
        decode_state(blob, MICRO, b"\x00" * 32)
    tampered = bytearray(blob)
    tampered[-1] ^= 1
    with pytest.raises(StateFormatError):
        decode_state(bytes(tampered), MICRO, h)


def test_state_of_another_model_is_refused() -> None:
    other_model = dataclasses.replace(MICRO, n_layer=MICRO.n_layer + 1)
    blob, h = encoded_state(genesis_state(other_model, SMALL_CFG), other_model)
    with pytest.raises(StateFormatError):
        decode_state(blob, MICRO, h)


def test_state_encoding_is_identical_across_processes() -> None:
    # every node must produce the same bytes for the same state, or hashes would disagree;
    # the Rust side of safetensors uses per-process random hash seeds, so compare processes
    code = ("import dataclasses,sys; from protocol.core.aggregation.state import encoded_state, genesis_state;"
            "from protocol.core.model.gpt import PRESETS; from protocol.core.train.compute_config import ComputeConfig;"
            "cfg = dataclasses.replace(ComputeConfig(), outer_momentum=0.9);"
            "print(encoded_state(genesis_state(PRESETS['micro'], cfg, 7), PRESETS['micro'])[1].hex())")
    hashes = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": str(i)}).stdout.strip() for i in range(3)}
    assert len(hashes) == 1 and len(hashes.pop()) == 64
