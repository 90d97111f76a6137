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
from protocol.core.aggregation.exact_sum_v1 import leaf, merge, next_from_root, step_norm_of
from protocol.core.aggregation.heldout import attested_batches, attested_loss
from protocol.core.aggregation.partial_blob import decode_partial, encode_partial
from protocol.core.aggregation.state import (
    GlobalState,
    aggregate,
    decode_state,
    decode_updates,
    encoded_state,
)
from protocol.core.model.gpt import Params, flatten, num_params, unflatten
from protocol.core.pipeline.staged_bundle import decode_model, encoded_model
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


def leaf_sum(spec: TrainingSpec, run_seed: bytes, state_blob: bytes, state_hash: bytes,
             envelopes: Sequence[bytes], max_bytes: int) -> bytes:
    """A first-level node of the aggregation tree: the encoded partial sum of these accepted
    envelopes (its leaves, in address order), each clipped by θ_r's public norm per step."""
    setup = Setup(spec, run_seed)
    state = decode_state(state_blob, setup.model, state_hash)
    opened = [decode_envelope(e, max_bytes) for e in envelopes]
    updates = decode_updates([o.update for o in opened], setup.model, setup.compute)
    return encode_partial(merge([leaf(u, len(o.trace.losses), state.step_norm, setup.compute)[0]
                                 for u, o in zip(updates, opened, strict=True)]))


def merge_sums(spec: TrainingSpec, run_seed: bytes, blobs: Sequence[bytes]) -> bytes:
    """An upper node of the aggregation tree: the encoded sum of its children's partial sums."""
    numel = num_params(Setup(spec, run_seed).model)
    return encode_partial(merge([decode_partial(b, numel) for b in blobs]))


def state_from_root(spec: TrainingSpec, run_seed: bytes, state_blob: bytes, state_hash: bytes,
                    root_blob: bytes) -> tuple[bytes, bytes]:
    """(encoded θ_{r+1}, its hash) from the tree's root: the bits `next_state` gives."""
    setup = Setup(spec, run_seed)
    state = decode_state(state_blob, setup.model, state_hash)
    root = decode_partial(root_blob, num_params(setup.model))
    theta, momentum = next_from_root(flatten(state.params), state.momentum, root, setup.compute)
    shapes = {k: tuple(v.shape) for k, v in state.params.items()}
    blob, new_hash = encoded_state(GlobalState(unflatten(theta, shapes), momentum, step_norm_of(root)), setup.model)
    return blob, bytes(new_hash)


def state_heldout_loss(spec: TrainingSpec, run_seed: bytes, state_blob: bytes, state_hash: bytes) -> float:
    """The held-out loss of a round's starting state (whole, or a staged run's stages joined):
    what a validator reveals with its scores."""
    setup = Setup(spec, run_seed)
    return heldout_loss(spec, run_seed, decode_model(state_blob, setup.model, setup.stage_split, state_hash).params)


def genesis_blob(spec: TrainingSpec) -> tuple[bytes, bytes]:
    """(encoded genesis state, its model hash): `init_params`, or the run's genesis checkpoint;
    a staged run's as its stages' bundle (`pipeline/staged_bundle.py`)."""
    setup = Setup(spec, b"")
    return encoded_model(genesis(spec), setup.model, setup.stage_split)
