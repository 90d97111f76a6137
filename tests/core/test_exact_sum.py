"""exact-sum-v1: the flat sum, any grouping of its partial sums and the numpy reference give one
state, bit for bit, under any threads and ISA; the clip is public and the integers never overflow."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
import torch
from aggregation_cases import Case, N, build, cases, fixed_inputs, hashes_under
from fixtures_training import MICRO, SMALL_CFG
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.aggregation.exact_sum_reference import reference_sum_next
from protocol.core.aggregation.exact_sum_v1 import (
    PartialSum,
    fixed_point,
    leaf,
    merge,
    next_from_root,
    step_norm_of,
)
from protocol.core.aggregation.reference import DecodedUpdate, reference_step_norm
from protocol.core.aggregation.state import (
    GlobalState,
    aggregate,
    decode_updates,
)
from protocol.core.errors import ConfigError
from protocol.core.hardware.replay_profile import ProfileMismatch, ReplayProfile
from protocol.core.model.gpt import flatten
from protocol.core.settlement.result_inputs import MAX_MINERS
from protocol.core.train.compress import unpack_codes
from protocol.core.train.compute_config import ComputeConfig
from protocol.node.worker_pool import ProfileWorker

RULE = "exact-sum-v1"


@dataclasses.dataclass(frozen=True)
class SumCase:
    case: Case
    steps: tuple[int, ...]  # per update
    step_norm: float | None  # the state's norm per step (None: genesis, the config's first_step_norm)
    first_step_norm: float
    grouping_seed: int

    def cfg(self) -> ComputeConfig:
        return dataclasses.replace(self.case.cfg(RULE), first_step_norm=self.first_step_norm,
                                   sum_clip_multiplier=self.case.clip_multiplier)


sum_cases = st.builds(
    SumCase, case=cases, steps=st.lists(st.sampled_from(range(3, 31, 3)), min_size=6, max_size=6).map(tuple),
    step_norm=st.sampled_from([None, 0.0, 1e-5, 1e-3, 0.1]), first_step_norm=st.sampled_from([0.0, 1e-4, 1e-2]),
    grouping_seed=st.integers(0, 2**31 - 1),
).map(lambda c: dataclasses.replace(c, steps=c.steps[: c.case.g]))


def inputs(c: SumCase) -> tuple[GlobalState, list[bytes]]:
    state, blobs = build(c.case)
    return dataclasses.replace(state, step_norm=c.step_norm), blobs


def grouped(parts: list[PartialSum], rng: random.Random) -> PartialSum:
    """The parts merged as a random tree: shuffled, cut into random groups, each merged, recursively."""
    parts = parts[:]
    rng.shuffle(parts)
    while len(parts) > 1:
        fan_in = rng.randint(2, max(2, len(parts)))
        parts = [merge(parts[i : i + fan_in]) for i in range(0, len(parts), fan_in)]
    return parts[0]


def reference_theta(c: SumCase) -> tuple[torch.Tensor, torch.Tensor | None]:
    cfg = c.cfg()
    state, blobs = inputs(c)
    ups = [DecodedUpdate(u.idx.numpy(), unpack_codes(u).numpy(), u.scale.numpy())
           for u in decode_updates(blobs, MICRO, cfg)]
    mom = state.momentum.numpy() if state.momentum is not None else None
    theta, new_mom = reference_sum_next(flatten(state.params).numpy(), mom, ups, c.steps, c.step_norm,
                                        N, cfg.chunk, cfg.bits, cfg)
    return torch.from_numpy(theta), torch.from_numpy(new_mom) if new_mom is not None else None


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(sum_cases)
def test_every_grouping_gives_the_flat_sum_and_the_numpy_reference_bit_for_bit(c: SumCase) -> None:
    cfg = c.cfg()
    state, blobs = inputs(c)
    leaves = [leaf(u, s, c.step_norm, cfg)[0] for u, s in zip(decode_updates(blobs, MICRO, cfg), c.steps, strict=True)]
    flat, tree = merge(leaves), grouped(leaves, random.Random(c.grouping_seed))
    assert torch.equal(flat.sums, tree.sums) and torch.equal(flat.weights, tree.weights)
    theta, mom = next_from_root(flatten(state.params), state.momentum, tree, cfg)
    ref_theta, ref_mom = reference_theta(c)
    assert torch.equal(theta, ref_theta) and (mom is None) == (ref_mom is None)
    assert mom is None or torch.equal(mom, ref_mom)
    dispatched = aggregate(state, blobs, MICRO, cfg, c.steps)  # what a node runs
    assert torch.equal(flatten(dispatched.params), theta)
    assert step_norm_of(tree) == dispatched.step_norm  # the clip reference survives the grouping


def test_an_update_over_the_public_cap_is_scaled_to_it_and_one_under_it_is_kept() -> None:
    cfg = dataclasses.replace(SMALL_CFG, aggregation=RULE)
    x = torch.tensor([3.0, -4.0], dtype=torch.float64)  # norm 5
    scale = math.ldexp(1.0, cfg.sum_fraction_bits)
    assert fixed_point(x, 2.0 * 0.5 * 10, cfg).tolist() == [3 * scale, -4 * scale]  # cap 10: kept
    clipped = fixed_point(x, 2.0 * 0.25 * 5, cfg)  # cap 2.5: halved
    assert clipped.tolist() == [round(1.5 * scale), round(-2.0 * scale)]
    assert fixed_point(x, 0.0, cfg).tolist() == [3 * scale, -4 * scale]  # no reference yet: no norm cap


def test_a_coordinate_beyond_the_bound_is_clamped_and_rounding_is_half_to_even() -> None:
    cfg = dataclasses.replace(SMALL_CFG, aggregation=RULE, sum_fraction_bits=2, sum_bound_bits=3)
    x = torch.tensor([100.0, -100.0, 0.125, 0.375, -0.125], dtype=torch.float64)  # 2^2 · x: 400, -400, 0.5, 1.5, -0.5
    assert fixed_point(x, 0.0, cfg).tolist() == [32, -32, 0, 2, 0]


def test_the_largest_sums_a_run_allows_do_not_overflow_at_the_contract_bounds() -> None:
    """At MAX_MINERS updates of H steps, every coordinate clamped to +2^b or -2^b, with b + f the
    largest the config admits for that H: the int64 sums equal Python's unbounded integers."""
    h = 600
    top = next(t for t in range(62, 0, -1) if MAX_MINERS * h << t < 1 << 63)
    cfg = dataclasses.replace(SMALL_CFG, aggregation=RULE, inner_steps=h, checkpoint_every=3,
                              sum_fraction_bits=top - 4, sum_bound_bits=4)
    assert top == 39  # f + log2 B <= 39 at 16,384 miners and 600 steps
    with pytest.raises(ConfigError, match="could overflow"):
        dataclasses.replace(cfg, sum_fraction_bits=top - 3)
    x = torch.tensor([1e30, -1e30, 1.0], dtype=torch.float64)
    one = PartialSum(fixed_point(x, 0.0, cfg) * h, torch.full((3,), h, dtype=torch.int64))
    total = merge([one] * MAX_MINERS)
    expected = MAX_MINERS * h << (cfg.sum_bound_bits + cfg.sum_fraction_bits)
    assert total.sums.tolist() == [expected, -expected, MAX_MINERS * h << cfg.sum_fraction_bits]
    assert expected < 1 << 63


def test_the_rule_is_refused_where_its_sums_could_overflow_and_other_rules_are_not_bound() -> None:
    with pytest.raises(ConfigError, match="could overflow"):
        ComputeConfig(aggregation=RULE, inner_steps=3 << 14, checkpoint_every=3)  # 2^14 · 49,152 · 2^34 >= 2^63
    ComputeConfig(aggregation="exact-v1", inner_steps=3 << 20, checkpoint_every=3)
    with pytest.raises(ConfigError, match="past 2"):  # weights travel as int32
        ComputeConfig(aggregation=RULE, inner_steps=3 << 17, checkpoint_every=3, sum_fraction_bits=10)
    with pytest.raises(ConfigError, match="first_step_norm"):
        ComputeConfig(aggregation=RULE, first_step_norm=-1.0)
    with pytest.raises(ConfigError, match="sum_clip_multiplier"):
        ComputeConfig(aggregation=RULE, sum_clip_multiplier=0.0)


def test_an_update_of_twice_the_steps_counts_as_two_and_the_state_carries_the_next_reference() -> None:
    """Through `aggregate`, uncapped (genesis): one update of 30 steps beside another gives the
    bits of that update twice at 15 steps; the new state's norm per step is the next round's cap."""
    c = SumCase(Case(seed=3, g=2, bits=2, chunk_topk=(64, 16), momentum=0.9, nesterov=True, trim_fraction=0.0,
                     clip_multiplier=1.0, magnitudes=(1e-2, 1e-3)), steps=(30, 15), step_norm=None,
                first_step_norm=0.0, grouping_seed=0)
    state, blobs = inputs(c)
    once = aggregate(state, blobs, MICRO, c.cfg(), (30, 15))
    twice = aggregate(state, [blobs[0], blobs[0], blobs[1]], MICRO, c.cfg(), (15, 15, 15))
    assert torch.equal(flatten(once.params), flatten(twice.params))
    assert torch.equal(flatten(once.params), reference_theta(c)[0])
    ups = [DecodedUpdate(u.idx.numpy(), unpack_codes(u).numpy(), u.scale.numpy())
           for u in decode_updates(blobs, MICRO, c.cfg())]
    assert once.step_norm == reference_step_norm(ups, N, 64, 2, (30, 15)) > 0


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_same_bits_under_one_and_two_threads_and_each_isa(isa: str) -> None:
    data = fixed_inputs()
    expected = hashes_under(data, 1, RULE)
    try:
        worker = ProfileWorker(ReplayProfile(threads=1, cpu_capability=isa)).__enter__()
    except ProfileMismatch as exc:  # the ISA is missing: say so, do not pass silently
        pytest.skip(f"host cannot run {isa} (torch reports {torch.backends.cpu.get_cpu_capability()}): {exc}")
    try:
        assert worker.call(hashes_under, data, 1, RULE) == expected
        assert worker.call(hashes_under, data, 2, RULE) == expected
    finally:
        worker.close()
