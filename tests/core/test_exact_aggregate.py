"""exact-v1 aggregation: bit-identical to its numpy reference, under any threads, ISA or device,
and within float32 rounding of float32-v1."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch
from aggregation_cases import (
    Case,
    N,
    build,
    cases,
    fixed_cases,
    fixed_inputs,
    hashes_under,
    weighted_cases,
)
from fixtures_training import MICRO, SMALL_CFG
from hypothesis import given, settings

from protocol.config.run_config import RunConfig
from protocol.config.run_setup import Setup, training_spec
from protocol.core.aggregation.exact_v1 import (
    decode_exact,
    exact_next,
    lower_median,
    pairwise_sum,
    step_norm_exact,
)
from protocol.core.aggregation.reference import DecodedUpdate, reference_next, reference_step_norm
from protocol.core.aggregation.state import (
    GlobalState,
    aggregate,
    decode_updates,
    genesis_state,
    global_state_hash,
)
from protocol.core.errors import ConfigError
from protocol.core.hardware.replay_profile import ProfileMismatch, ReplayProfile
from protocol.core.model.gpt import flatten, unflatten
from protocol.core.train.compress import compress, decompress, encode_update, unpack_codes
from protocol.core.train.compute_config import ComputeConfig
from protocol.node.worker_pool import ProfileWorker

EPS32 = float(torch.finfo(torch.float32).eps)  # 2^-23
# exact-v1 vs float32-v1, per coordinate: at most this many float32 epsilons of the magnitudes
# involved, |θ| + |θ'| + max_g |u_g| (float32-v1 rounds each decoded value, partial sum and step)
F32_BOUND_EPS = 4  # measured worst on these fixtures: 2.3


def reference_hash(case: Case) -> bytes:
    """The numpy reference's next state, hashed like any global state."""
    cfg = case.cfg()
    state, blobs = build(case)
    ups = [DecodedUpdate(u.idx.numpy(), unpack_codes(u).numpy(), u.scale.numpy())
           for u in decode_updates(blobs, MICRO, cfg)]
    mom = state.momentum.numpy() if state.momentum is not None else None
    theta, new_mom = reference_next(flatten(state.params).numpy(), mom, ups, N, cfg.chunk, cfg.bits, cfg, case.steps)
    shapes = {k: tuple(v.shape) for k, v in state.params.items()}
    step_norm = reference_step_norm(ups, N, cfg.chunk, cfg.bits, case.steps or [cfg.inner_steps] * case.g)
    nxt = GlobalState(unflatten(torch.from_numpy(theta), shapes),
                      torch.from_numpy(new_mom) if new_mom is not None else None, step_norm)
    return global_state_hash(nxt, MICRO)


def exact_hash(case: Case, device: str = "cpu") -> bytes:
    cfg = case.cfg()
    state, blobs = build(case)
    updates = decode_updates(blobs, MICRO, cfg)
    theta, mom = exact_next(flatten(state.params), state.momentum, updates, cfg, device, case.steps)
    shapes = {k: tuple(v.shape) for k, v in state.params.items()}
    step_norm = step_norm_exact(decode_exact(updates, device)[0], case.steps or [cfg.inner_steps] * case.g)
    return global_state_hash(GlobalState(unflatten(theta, shapes), mom, step_norm), MICRO)


def assert_three_agree(case: Case) -> None:
    """The dispatching `aggregate`, `exact_next` and the numpy reference give one state hash."""
    state, blobs = build(case)
    via_dispatch = global_state_hash(aggregate(state, blobs, MICRO, case.cfg(), case.steps), MICRO)
    assert via_dispatch == exact_hash(case) == reference_hash(case)


@settings(max_examples=80, deadline=None, database=None, derandomize=True)
@given(cases)
def test_exact_matches_numpy_reference_bit_for_bit(case: Case) -> None:
    assert_three_agree(case)


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(weighted_cases)
def test_token_weighted_exact_matches_numpy_reference_bit_for_bit(case: Case) -> None:
    assert_three_agree(case)


@pytest.mark.parametrize("rule", ["exact-v1", "float32-v1"])
def test_equal_steps_give_the_unweighted_bits_and_double_steps_count_as_two_updates(rule: str) -> None:
    case = Case(7, 2, 2, (256, 32), 0.0, False, 0.0, 4.0, (1e-2, 1e-2))
    cfg = case.cfg(rule)
    state, (a, b) = build(case)
    plain = aggregate(state, [a, b], MICRO, cfg)
    for steps in ([30, 30], [9, 9]):  # the same θ and momentum bits; the norm per step differs
        nxt = aggregate(state, [a, b], MICRO, cfg, steps)
        assert torch.equal(flatten(nxt.params), flatten(plain.params)) and nxt.momentum == plain.momentum
        assert nxt.step_norm == pytest.approx(plain.step_norm * cfg.inner_steps / steps[0], rel=1e-12)
    # no trimming, no clipping at 4x the median: 2 x a's steps weigh as a counted twice
    twice = flatten(aggregate(state, [a, a, b], MICRO, cfg).params)
    weighted = flatten(aggregate(state, [a, b], MICRO, cfg, [20, 10]).params)
    if rule == "exact-v1":
        assert torch.equal(weighted, twice)
    else:
        assert torch.allclose(weighted, twice, rtol=0, atol=1e-7)
    assert not torch.equal(weighted, flatten(aggregate(state, [a, b], MICRO, cfg).params))


def test_a_step_count_per_update_is_required() -> None:
    case = Case(7, 2, 2, (256, 32), 0.0, False, 0.0, 4.0, (1e-2, 1e-2))
    state, blobs = build(case)
    with pytest.raises(ValueError, match="step counts"):
        aggregate(state, blobs, MICRO, case.cfg(), [30])


@pytest.mark.parametrize("isa", ["avx2", "default", "avx512"])
def test_same_bits_under_every_thread_count_and_isa(isa: str) -> None:
    host = torch.backends.cpu.get_cpu_capability()
    if isa == "avx512" and "ATEN_CPU_CAPABILITY" not in os.environ and host != "AVX512":
        pytest.skip(f"host lacks AVX-512 (torch reports {host}): avx512 not compared here")
    inputs = fixed_inputs()
    expected = hashes_under(inputs, 1)
    # the worker sets ATEN_CPU_CAPABILITY before torch loads, as nodes do (ProfileWorker)
    try:
        worker = ProfileWorker(ReplayProfile(threads=1, cpu_capability=isa)).__enter__()
    except ProfileMismatch as exc:  # the ISA is missing: say so, do not pass silently
        pytest.skip(f"host cannot run {isa} (torch reports {host}): {exc}")
    try:
        assert worker.call(hashes_under, inputs, 1) == expected
        assert worker.call(hashes_under, inputs, 2) == expected
    finally:
        worker.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: torch.cuda.is_available() is False")
def test_cuda_gives_the_cpu_bits() -> None:
    for case in fixed_cases():
        assert exact_hash(case, "cuda") == exact_hash(case) == reference_hash(case)


def _fixture_pairs(honest_blob: bytes) -> list[tuple[ComputeConfig, GlobalState, list[bytes]]]:
    gen = torch.Generator().manual_seed(4)  # tests/core/test_aggregate.py's update fixtures
    rand = [encode_update(compress(torch.randn(N, generator=gen) * 0.01, SMALL_CFG.chunk, SMALL_CFG.topk,
                                   SMALL_CFG.bits)) for _ in range(3)]
    nesterov = dataclasses.replace(SMALL_CFG, outer_lr=0.7, outer_momentum=0.9, nesterov=True)
    return [(cfg, genesis_state(MICRO, cfg), blobs)
            for cfg in (SMALL_CFG, nesterov) for blobs in (rand, [honest_blob], rand + [honest_blob])]


def test_exact_is_float32_within_rounding(honest_sub) -> None:
    worst = 0.0
    for cfg, state, blobs in _fixture_pairs(honest_sub.blob):
        new = aggregate(state, blobs, MICRO, dataclasses.replace(cfg, aggregation="exact-v1"))
        old = aggregate(state, blobs, MICRO, dataclasses.replace(cfg, aggregation="float32-v1"))
        dense = torch.stack([decompress(u) for u in decode_updates(blobs, MICRO, cfg)])  # (G, N)
        scale = dense.abs().amax(dim=0)  # (N,)
        pairs = [(flatten(new.params), flatten(old.params), flatten(state.params).abs())]
        if new.momentum is not None and old.momentum is not None:
            pairs.append((new.momentum, old.momentum, torch.zeros(N)))
        for a, b, before in pairs:
            size = before + a.abs() + b.abs() + scale  # (N,)
            ratio = float(((a - b).abs() / (EPS32 * size).clamp_min(1e-38)).max())
            worst = max(worst, ratio)
    assert worst <= F32_BOUND_EPS, worst


def test_pairwise_sum_and_lower_median() -> None:
    x = torch.arange(1.0, 6.0, dtype=torch.float64)  # 5 -> padded to 8
    assert float(pairwise_sum(x)) == 15.0
    # the tree (1e16 + 1) + (-1e16 + 1) gives 0; left to right would give 1
    y = torch.tensor([1e16, 1.0, -1e16, 1.0], dtype=torch.float64)
    assert float(pairwise_sum(y)) == 0.0
    assert float(lower_median(torch.tensor([4.0, 1.0, 3.0, 2.0], dtype=torch.float64))) == 2.0


def test_default_rule_is_exact_sum_and_unknown_rule_is_refused() -> None:
    assert ComputeConfig().aggregation == "exact-sum-v1"
    with pytest.raises(ConfigError, match="float32-v1, exact-v1, exact-sum-v1"):
        ComputeConfig(aggregation="exact-v2")
    config = RunConfig.model_validate({"training": {"compute": {"aggregation": "fast"}}})
    with pytest.raises(ConfigError, match="'fast' is not one of float32-v1, exact-v1"):
        _ = Setup(training_spec(config), b"").compute
    wrong_type = RunConfig.model_validate({"training": {"compute": {"topk": "64"}}})
    with pytest.raises(ConfigError, match="wrong type"):
        _ = Setup(training_spec(wrong_type), b"").compute
    chosen = RunConfig.model_validate({"training": {"compute": {"aggregation": "float32-v1"}}})
    assert Setup(training_spec(chosen), b"").compute.aggregation == "float32-v1"
    assert chosen.config_hash() != RunConfig.model_validate({"training": {"compute": {}}}).config_hash()
