"""The next global state, as every node computes it (run in the profile worker): the I/O-free
wiring from the run's `TrainingSpec` to the core's rules.

Which updates count is decided from chain data only, by the run config's `selection` rule and
`top_g` (`protocol.core.aggregation.selection`); the attested held-out loss uses the run
config's `heldout_batches` (`protocol.core.aggregation.heldout`). No node-local setting enters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from protocol.config.run_setup import Setup, TrainingSpec
from protocol.config.run_state import genesis, load_dataset
from protocol.core.aggregation import selection
from protocol.core.aggregation.heldout import attested_batches, attested_loss
from protocol.core.aggregation.state import aggregate, decode_state, encoded_state
from protocol.core.model.gpt import Params
from protocol.core.proof.envelope import decode_envelope


def select_updates(spec: TrainingSpec, consensus: Mapping[str, int]) -> list[str]:
    """From each miner's consensus score: the miners whose updates are aggregated, by the run's rule."""
    return selection.select_updates(consensus, spec.selection, spec.top_g)


def heldout_loss(spec: TrainingSpec, run_seed: bytes, params: Params) -> float:
    """Mean loss on the run's `heldout_batches` held-out batches (the attested figure)."""
    setup = Setup(spec, run_seed)
    batches = attested_batches(load_dataset(spec.dataset), run_seed, spec.heldout_batches,
                               setup.compute.batch_size, setup.model.block_size)
    return attested_loss(setup.model, params, batches)


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
