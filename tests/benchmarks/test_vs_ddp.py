"""Smoke test of `python -m benchmarks vs-ddp` on the micro preset (one shared run, < 60 s).

It runs the benchmark's own `measure` (real gloo DDP with W=2, the single worker, the
veritrain default setting on the protocol path, the timing calibration) with a tiny budget,
then checks the byte accounting against the recorded counters, that DDP really averaged
gradients, and that every figure is finite and consistent with the curves.
"""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks import vs_ddp
from benchmarks.ddp_baseline import Curve, Spec, Stream, heldout, heldout_loss, make_adamw
from benchmarks.diloco_sim import Arm, VtRun, _count_bytes
from benchmarks.vs_ddp_sweep import (
    EXT_SHAPE,
    EXT_TOPKS,
    MIN_BYTES_RATIO,
    grid,
    interp,
    loss_at,
    pareto_front,
    proof_ok,
)
from protocol.core.model.gpt import GPT, init_params, load_params, num_params, preset
from protocol.core.train.compress import compress, encode_update
from protocol.core.train.compute_config import ComputeConfig

W, B = 2, 30  # two workers; 30 DDP steps = one default round of H = 30
SPEC = Spec(preset="micro", corpus="slice:600000", workers=W, ddp_steps=B, eval_points=3)


@pytest.fixture(scope="module")
def result() -> dict:
    return vs_ddp.measure(quick=True, jobs=1, log=lambda s: None, spec=SPEC)


def test_ddp_ranks_synchronize_and_hook_counts_every_gradient(result: dict) -> None:
    ddp = result["ddp"]
    assert len(ddp["params_hashes"]) == W and len(set(ddp["params_hashes"])) == 1
    grad_bytes = 4 * num_params(preset("micro"))  # float32 gradients of every parameter
    assert ddp["grad_bytes_per_step"] == grad_bytes
    ring = 2 * (W - 1) / W * grad_bytes * B  # ring all-reduce, each way
    assert ddp["sent_per_worker"] == [ring] * W and ddp["recv_per_worker"] == [ring] * W
    assert ddp["curve"]["bytes"][-1] == 2 * ring


def _emulated_ddp_loss(lr: float) -> float:
    """W workers in one process: average the W gradients, step AdamW; held-out loss at B."""
    m = preset("micro")
    model = GPT(m)
    load_params(model, init_params(m, 0))
    params, opt = list(model.parameters()), make_adamw(model, lr, SPEC.base)
    streams = [Stream(SPEC, w) for w in range(W)]
    for step in range(B):
        grads = []
        for stream in streams:
            model.zero_grad(set_to_none=True)
            model(*stream(step)).backward()
            grads.append([p.grad.clone() for p in params])  # type: ignore[union-attr]
        for i, p in enumerate(params):
            p.grad = sum((g[i] / W for g in grads), torch.zeros_like(p))
        torch.nn.utils.clip_grad_norm_(params, SPEC.base.grad_clip, foreach=False)
        opt.step()
    return heldout_loss(model, heldout(SPEC))


def test_ddp_equals_gradient_averaging_and_differs_from_one_worker(result: dict) -> None:
    ddp_loss = result["ddp"]["curve"]["loss"][-1]
    assert ddp_loss == pytest.approx(_emulated_ddp_loss(result["ddp"]["lr"]), rel=1e-4)
    assert ddp_loss != pytest.approx(loss_at(Curve(**result["single"]["curve"]), B), rel=1e-4)


def test_veritrain_bytes_are_the_all_gather_of_its_blobs(result: dict) -> None:
    vt = result["veritrain"]["default"]
    rounds, blobs = vt["rounds"], vt["blob_bytes"]
    assert rounds * 30 == SPEC.max_factor * B and len(blobs) == W
    for i in range(W):
        assert vt["sent_per_worker"][i] == rounds * (W - 1) * blobs[i]
        assert vt["recv_per_worker"][i] == rounds * (sum(blobs) - blobs[i])
    # per chunk: k int16 indices, k b-bit codes and a float32 scale
    cfg = ComputeConfig()
    chunks = math.ceil(num_params(preset("micro")) / cfg.chunk)
    per_chunk = cfg.topk * 2 + cfg.topk * cfg.bits // 8 + 4
    assert chunks * per_chunk < blobs[0] < chunks * per_chunk + 1024


def test_bytes_ratio_is_the_ratio_of_the_counters(result: dict) -> None:
    ddp, vt = result["ddp"], result["veritrain"]["default"]
    ddp_bytes = ddp["sent_per_worker"][0] + ddp["recv_per_worker"][0]  # after B steps
    steps = vt["curve"]["steps"][-1]
    vt_bytes = sum(vt["sent_per_worker"] + vt["recv_per_worker"]) / W * B / steps  # at B
    assert result["figures"]["bytes_ratio"] == pytest.approx(ddp_bytes / vt_bytes, rel=1e-12)
    ring_step = 2 * 2 * (W - 1) / W * ddp["grad_bytes_per_step"]
    all_gather_step = 2 * (W - 1) * sum(vt["blob_bytes"]) / W / 30
    assert result["figures"]["bytes_ratio"] == pytest.approx(ring_step / all_gather_step)


def test_figures_are_finite_and_consistent(result: dict) -> None:
    fig, extra = result["figures"], result["veritrain"]["default"]["extra"]
    for name in ("bytes_ratio", "loss_gap", "speedup_at_100mbps", "speedup_at_1gbps",
                 "single_worker_gap"):
        assert math.isfinite(fig[name]), name
    ddp_loss = extra["ddp_final_loss"]
    assert fig["loss_gap"] == pytest.approx((extra["veritrain_loss_at_B"] - ddp_loss) / ddp_loss)
    alone = extra["single_loss_at_B"]
    assert fig["single_worker_gap"] == pytest.approx((extra["veritrain_loss_at_B"] - alone) / alone)
    curve = Curve(**result["veritrain"]["default"]["curve"])
    if fig["tokens_to_match"] is None:
        assert min(curve.loss) > ddp_loss
        assert fig["speedup_at_100mbps"] == fig["speedup_at_1gbps"] == 0
    else:
        assert 0 < fig["tokens_to_match"] <= SPEC.max_factor
        at = curve.steps.index(round(fig["tokens_to_match"] * B))
        assert curve.loss[at] <= ddp_loss and all(v > ddp_loss for v in curve.loss[:at])
        assert fig["speedup_at_100mbps"] > 0 and fig["speedup_at_1gbps"] > 0
    assert result["veritrain"]["default"]["timing"]["ddp_step_s"] > 0


def test_count_bytes_and_helpers() -> None:
    run = VtRun(Arm(30, 3, 64, 1.0), sent=[0, 0, 0], recv=[0, 0, 0])
    _count_bytes(run, [b"a" * 10, b"b" * 20, b"c" * 30])
    assert run.sent == [20, 40, 60] and run.recv == [50, 40, 30]
    assert interp([0, 30, 60], [3.0, 2.0, 1.0], 45) == pytest.approx(1.5)
    with pytest.raises(ValueError):
        interp([0, 30], [3.0, 2.0], 31)
    rows = [{"arm": "a", "bytes_ratio": 100, "loss": 2.0}, {"arm": "b", "bytes_ratio": 1000, "loss": 2.5},
            {"arm": "c", "bytes_ratio": 500, "loss": 2.6}, {"arm": "d", "bytes_ratio": 1000, "loss": 2.4}]
    assert [r["arm"] for r in pareto_front(rows)] == ["a", "d"]


def test_arm_settings_reach_the_config() -> None:
    base = ComputeConfig()
    arm = Arm(30, 3, 192, 1.5, inner_lr=1e-3, bits=8)
    cfg = arm.config(base)
    assert (cfg.inner_steps, cfg.checkpoint_every, cfg.topk, cfg.outer_lr, cfg.inner_lr,
            cfg.bits) == (30, 3, 192, 1.5, 1e-3, 8)
    assert Arm.of(cfg) == arm and Arm.of(base).config(base) == base
    assert "inner0.001" in arm.name and "8bit" in arm.name


def test_grid_extension_is_eligible_by_construction() -> None:
    """Every extension arm meets the proof targets, and even its densest top-k keeps the
    bytes ratio >= 500 on the tiny model (DDP: ring all-reduce of float32 gradients)."""
    default = Arm.of(ComputeConfig())
    base = grid(default)  # the 12 arms, plus the default (not one of them)
    assert default in base and len(base) == 13 and set(base) < set(grid(default, extend=True))
    arms = grid(default, extend=True)
    assert len(arms) == len(set(arms)) and default in arms
    ext = [a for a in arms if (a.inner_steps, a.checkpoint_every) == EXT_SHAPE]
    assert ext and all(proof_ok(a) for a in ext)
    assert not proof_ok(Arm(20, 2, 64, 1.0)) and not proof_ok(Arm(10, 1, 64, 1.0))
    w, n, h = 4, num_params(preset("tiny")), EXT_SHAPE[0]
    blob = encode_update(compress(torch.randn(n), 4096, max(EXT_TOPKS), 2))
    ddp_per_step = 2 * 2 * (w - 1) / w * 4 * n  # sent + received
    vt_per_step = 2 * (w - 1) * len(blob) / h  # all-gather, sent + received
    assert ddp_per_step / vt_per_step >= MIN_BYTES_RATIO
