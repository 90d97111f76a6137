"""Random and fixed inputs for the aggregation rules' tests: a case is a state and its update blobs."""

from __future__ import annotations

import dataclasses
import random

import torch
from fixtures_training import MICRO, SMALL_CFG
from hypothesis import strategies as st

from protocol.core.aggregation.state import (
    GlobalState,
    aggregate,
    decode_state,
    encode_state,
    genesis_state,
    global_state_hash,
)
from protocol.core.crypto.hashing import content_hash
from protocol.core.model.gpt import num_params
from protocol.core.train.compress import compress, encode_update
from protocol.core.train.compute_config import ComputeConfig

N = num_params(MICRO)


@dataclasses.dataclass(frozen=True)
class Case:
    seed: int
    g: int  # updates
    bits: int
    chunk_topk: tuple[int, int]
    momentum: float
    nesterov: bool
    trim_fraction: float
    clip_multiplier: float
    magnitudes: tuple[float, ...]  # per update; 0.0 gives an all-zero update
    steps: tuple[int, ...] | None = None  # per update: the inner steps it trained (None: equal weights)

    def cfg(self, rule: str = "exact-v1") -> ComputeConfig:
        chunk, topk = self.chunk_topk
        return dataclasses.replace(SMALL_CFG, bits=self.bits, chunk=chunk, topk=topk, aggregation=rule,
                                   outer_momentum=self.momentum, nesterov=self.nesterov,
                                   outer_lr=0.7 if self.momentum else 1.0, trim_fraction=self.trim_fraction,
                                   clip_multiplier=self.clip_multiplier)


def build(case: Case) -> tuple[GlobalState, list[bytes]]:
    """A state with non-zero momentum (when used) and the case's update blobs."""
    cfg = case.cfg()
    gen = torch.Generator().manual_seed(case.seed)
    state = genesis_state(MICRO, cfg, seed=case.seed % 7)
    if state.momentum is not None:
        state = GlobalState(state.params, torch.randn(N, generator=gen) * 1e-3)
    blobs = [encode_update(compress(torch.randn(N, generator=gen) * m, cfg.chunk, cfg.topk, cfg.bits))
             for m in case.magnitudes]
    return state, blobs


cases = st.builds(
    Case,
    seed=st.integers(0, 2**31 - 1),
    g=st.just(0),  # replaced by len(magnitudes)
    bits=st.sampled_from([2, 8]),
    chunk_topk=st.sampled_from([(64, 16), (256, 32), (4096, 192)]),
    momentum=st.sampled_from([0.0, 0.9]),
    nesterov=st.booleans(),
    trim_fraction=st.floats(0.0, 0.45),
    clip_multiplier=st.floats(0.25, 4.0),
    magnitudes=st.lists(st.sampled_from([0.0, 1e-4, 1e-2, 1.0]), min_size=1, max_size=6).map(tuple),
).map(lambda c: dataclasses.replace(c, g=len(c.magnitudes)))
# capacity-scaled work: each update weighted by its steps, a multiple of k = 3 up to H = 30
weighted_cases = st.tuples(cases, st.lists(st.sampled_from(range(3, 31, 3)), min_size=6, max_size=6)).map(
    lambda cw: dataclasses.replace(cw[0], steps=tuple(cw[1][: cw[0].g])))


def fixed_cases() -> list[Case]:
    rng = random.Random(2024)
    out = []
    for i in range(6):
        mags = tuple(rng.choice([1e-4, 1e-2, 1.0]) for _ in range(rng.randint(1, 6)))
        out.append(Case(seed=i, g=len(mags), bits=(2, 8)[i % 2], chunk_topk=((64, 16), (4096, 192))[i % 2],
                        momentum=(0.0, 0.9, 0.9)[i % 3], nesterov=i % 3 == 2,
                        trim_fraction=rng.uniform(0, 0.45), clip_multiplier=rng.uniform(0.25, 4.0),
                        magnitudes=mags))
    return out


def fixed_inputs() -> list[tuple[Case, bytes, list[bytes]]]:
    """(case, encoded state, update blobs), built in this process: compress and init are not
    exact-v1 (they run under the replay profile), so the workers get the same inputs as bytes."""
    return [(c, encode_state(s, MICRO), blobs) for c in fixed_cases() for s, blobs in [build(c)]]


def hashes_under(inputs: list[tuple[Case, bytes, list[bytes]]], threads: int, rule: str = "exact-v1") -> list[str]:
    """Run in profile workers (module level, so a spawned process can import it)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        states = [(c, decode_state(blob, MICRO, content_hash(blob)), blobs) for c, blob, blobs in inputs]
        return [global_state_hash(aggregate(s, blobs, MICRO, c.cfg(rule), c.steps), MICRO).hex() for c, s, blobs in states]
    finally:
        torch.set_num_threads(saved)
