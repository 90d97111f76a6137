"""The miner's side of a proof: derive the compressed update and build the trace."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from protocol.core.checkpoint.format import (
    Checkpoint,
    checkpoint_hash,
)
from protocol.core.model.gpt import (
    Params,
    flat_difference,
)
from protocol.core.proof.trace import Trace, carry_hash
from protocol.core.train.compress import (
    compress_with_feedback,
    encode_update,
)
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import Carry, RoundTask, TrainedRound


@dataclass(frozen=True)
class MinerWork:
    trace: Trace
    blob: bytes  # the update, safetensors bytes
    carry: Carry  # into the next round: error feedback and the final second moment
    checkpoints: list[Checkpoint]  # served on request, by leaf index


def derive_update(theta_r: Params, final_params: Params, ef_in: Tensor,
                  cfg: ComputeConfig) -> tuple[bytes, Tensor]:
    """Δ = θ_r − θ_H, compressed with error feedback: (update blob, residual)."""
    delta = flat_difference(theta_r, final_params)  # (N,)
    c, residual = compress_with_feedback(delta, ef_in, cfg.chunk, cfg.topk, cfg.bits, cfg.ef_decay, consume=True)
    return encode_update(c), residual


def build_work(task: RoundTask, trained: TrainedRound, theta_r: Params) -> MinerWork:
    leaf0, final = trained.checkpoints[0], trained.checkpoints[-1]
    assert leaf0.ef is not None
    blob, residual = derive_update(theta_r, final.params, leaf0.ef, task.cfg)
    carry = Carry(residual, final.exp_avg_sq)
    hashes = tuple(checkpoint_hash(c, task.model) for c in trained.checkpoints)
    trace = Trace(hashes, tuple(trained.losses), carry_hash(carry))
    return MinerWork(trace, blob, carry, trained.checkpoints)


# ---------------------------------------------------------------------------------------
