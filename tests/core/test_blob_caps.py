"""Per-kind blob caps: every honest blob of a preset fits its cap, and the cap is not much more.

Real blobs are encoded with the codecs nodes use, from zero tensors of each preset's shapes
(training would not change a byte count: every tensor has a fixed shape and dtype).
"""

from __future__ import annotations

import pytest
import torch

from protocol.core.aggregation.state import GlobalState, encode_state
from protocol.core.checkpoint.format import RNG_STATE_BYTES, Checkpoint, encode_checkpoint
from protocol.core.crypto.hashing import Digest
from protocol.core.model.gpt import ModelConfig, num_params, param_shapes, preset
from protocol.core.proof.envelope import encode_envelope
from protocol.core.proof.trace import Trace, encode_carry
from protocol.core.proof.witness_bundle import SIG_BYTES, WITNESS_BYTES, encode_bundle
from protocol.core.settlement.result_inputs import MAX_MINERS
from protocol.core.train.compress import compress, encode_update
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import Carry
from protocol.core.wire.blob_caps import SLACK_BYTES, BlobCaps, BlobKind, blob_caps

# A cap may exceed its largest honest blob by the 2% margin, the slack and our header estimate.
HEADER_ESTIMATE = 16 * 1024


def _zeros(model: ModelConfig) -> dict[str, torch.Tensor]:
    return {k: torch.zeros(s) for k, s in param_shapes(model).items()}


def _sizes(model: ModelConfig, compute: ComputeConfig) -> dict[BlobKind, int]:
    """The byte count of the largest honest blob of each kind."""
    n = num_params(model)
    leaf0 = Checkpoint(step=10**9, params=_zeros(model), exp_avg=_zeros(model), exp_avg_sq=_zeros(model),
                       rng=torch.zeros(RNG_STATE_BYTES, dtype=torch.uint8), ef=torch.zeros(n), warm=True)
    update = encode_update(compress(torch.randn(n), compute.chunk, compute.topk, compute.bits))
    # losses as long as JSON floats get, a hash per leaf of the longest trace
    trace = Trace(tuple(Digest(bytes([i % 256]) * 32) for i in range(compute.n_segments + 1)),
                  tuple(-1.2345678901234567e-100 for _ in range(compute.inner_steps)), Digest(b"\x07" * 32))
    envelope = encode_envelope(2**63 - 1, "0x" + "ab" * 20, 2**62, "0x" + "cd" * 20, trace, update)
    momentum = torch.zeros(n) if compute.outer_momentum > 0 else None
    bundle = encode_bundle({i: (b"w" * WITNESS_BYTES, b"s" * SIG_BYTES) for i in range(MAX_MINERS)})
    return {
        BlobKind.UPDATE: len(envelope),
        BlobKind.CHECKPOINT: len(encode_checkpoint(leaf0, model)),
        BlobKind.CARRY: len(encode_carry(Carry(torch.zeros(n), _zeros(model)))),
        BlobKind.STATE: len(encode_state(GlobalState(_zeros(model), momentum), model)),
        BlobKind.WITNESS_BUNDLE: len(bundle),
    }


def _assert_tight_but_safe(model: ModelConfig, compute: ComputeConfig) -> None:
    caps = blob_caps(model, compute)
    for kind, size in _sizes(model, compute).items():
        cap = caps.of(kind)
        assert size <= cap, f"{kind}: honest blob of {size} bytes over its cap {cap}"
        assert cap <= size + size // 10 + SLACK_BYTES + HEADER_ESTIMATE, f"{kind}: cap {cap} loose for {size}"


@pytest.mark.parametrize("name", ["micro", "tiny", "llama-micro", "llama-tiny"])
def test_caps_fit_the_blobs_of_small_presets(name):
    _assert_tight_but_safe(preset(name), ComputeConfig())


@pytest.mark.parametrize("name", ["small", "llama-small"])
def test_caps_fit_checkpoints_over_the_old_single_cap(name):
    """These presets' checkpoints are larger than the 64 MiB every kind used to share."""
    caps = blob_caps(preset(name), ComputeConfig())
    assert caps.checkpoint > 64 << 20
    _assert_tight_but_safe(preset(name), ComputeConfig())


def test_caps_follow_the_compute_config():
    """Outer momentum doubles the state; int8 codes and a longer trace grow the envelope."""
    model = preset("micro")
    plain = ComputeConfig()
    other = ComputeConfig(inner_steps=600, checkpoint_every=3, bits=8, outer_momentum=0.9)
    _assert_tight_but_safe(model, other)
    a, b = blob_caps(model, plain), blob_caps(model, other)
    assert b.state - SLACK_BYTES > 1.9 * (a.state - SLACK_BYTES)
    assert b.update > a.update
    assert a.checkpoint == b.checkpoint


def test_caps_round_trip_as_json_and_name_every_kind():
    caps = blob_caps(preset("micro"), ComputeConfig())
    assert BlobCaps.model_validate_json(caps.model_dump_json()) == caps
    assert set(caps.model_dump()) == {k.value for k in BlobKind}
    smaller = caps.model_copy(update={"checkpoint": caps.checkpoint - 1})
    assert smaller.below(caps) == [BlobKind.CHECKPOINT] and caps.below(smaller) == []
