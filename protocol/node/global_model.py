"""The next global state, as every node computes it (run in the profile worker).

Which updates count is decided from chain data only, so all nodes agree: the round's
miners with a positive consensus score in its result (a confirmed cheat has consensus 0),
top `top_g` by consensus (ties by address).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from protocol.config.run_setup import Setup, TrainingSpec, genesis, load_dataset
from protocol.core.aggregation.state import aggregate, decode_state, encoded_state
from protocol.core.crypto.hashing import blake3_hash
from protocol.core.model.gpt import build_model, load_params
from protocol.core.proof.envelope import decode_envelope
from protocol.core.train.data import heldout_batches

HELDOUT_BATCHES = 8  # batches in the attested held-out loss (same for every validator)


def select_updates(settled: Sequence[tuple[str, int, bool]], top_g: int) -> list[str]:
    """From (miner, consensus, held) rows: the miners whose updates are aggregated."""
    eligible = [(c, m) for m, c, held in settled if c > 0 and not held]
    eligible.sort(key=lambda cm: (-cm[0], int(cm[1], 16)))
    return sorted((m for _, m in eligible[:top_g]), key=lambda m: int(m, 16))


def heldout_loss(spec: TrainingSpec, run_seed: bytes, params: dict) -> float:
    """Mean loss on held-out batches fixed by the run seed (the attested figure)."""
    setup = Setup(spec, run_seed)
    model_cfg, cfg = setup.model, setup.compute
    ds = load_dataset(spec.dataset)
    batches = heldout_batches(ds, blake3_hash("attested-heldout", run_seed), HELDOUT_BATCHES, cfg.batch_size,
                              model_cfg.block_size)
    model = build_model(model_cfg)
    load_params(model, params)
    x = torch.cat([b[0] for b in batches])  # (n*B, T)
    y = torch.cat([b[1] for b in batches])  # (n*B, T)
    with torch.no_grad():
        return float(model(x, y))


def next_state(spec: TrainingSpec, run_seed: bytes, state_blob: bytes, state_hash: bytes,
               envelopes: Sequence[bytes], max_bytes: int, with_loss: bool = True) -> tuple[bytes, bytes, float | None]:
    """(encoded next state, its hash, its held-out loss) from the accepted envelopes. Only
    attesting validators need the loss; everyone else skips its forward passes."""
    setup = Setup(spec, run_seed)
    state = decode_state(state_blob, setup.model, state_hash)
    opened = [decode_envelope(e, max_bytes) for e in envelopes]
    # weighted by the steps each trained: its trace's losses, checked against its commit
    new = aggregate(state, [o.update for o in opened], setup.model, setup.compute,
                    [len(o.trace.losses) for o in opened])
    blob, new_hash = encoded_state(new, setup.model)
    return blob, bytes(new_hash), heldout_loss(spec, run_seed, new.params) if with_loss else None


def state_heldout_loss(spec: TrainingSpec, run_seed: bytes, state_blob: bytes, state_hash: bytes) -> float:
    """The held-out loss of a round's starting state: what a validator reveals with its scores."""
    setup = Setup(spec, run_seed)
    return heldout_loss(spec, run_seed, decode_state(state_blob, setup.model, state_hash).params)


def genesis_blob(spec: TrainingSpec) -> tuple[bytes, bytes]:
    """(encoded genesis state, its hash): `init_params`, or the run's genesis checkpoint."""
    blob, state_hash = encoded_state(genesis(spec), Setup(spec, b"").model)
    return blob, bytes(state_hash)
